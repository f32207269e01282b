package replay

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/jit"
	"github.com/mneme-gpu/mneme/nvbin"
)

// Assembler knobs on machine code: a kernel recorded without IR keeps the
// PTX its fat binary embeds (nvcc puts the PTX of the highest virtual
// architecture there by default), which ptxas assembles again under the
// configuration's optimization level and register cap. Trial 0 is still
// the recorded cubin; only a configuration that sets a knob reassembles.

// reassembles reports whether cfg asks for the recorded PTX to be
// assembled again rather than the recorded code to run.
func reassembles(rec *Recording, cfg mneme.Config) bool {
	return rec.Kernel.MachineCodeOnly() && (cfg.PtxasOpt != 0 || cfg.MaxRegisters != 0)
}

// EmbeddedPTX finds the PTX of kernel in a recorded image for a GPU of
// architecture arch (90 for sm_90): the image itself when it is PTX text,
// else the fat binary's PTX of the highest virtual architecture not above
// arch that defines the kernel.
func EmbeddedPTX(image []byte, kernel string, arch int) ([]byte, error) {
	cs, err := nvbin.ParseFatbin(image)
	if errors.Is(err, nvbin.ErrNotFatbin) {
		if !bytes.HasPrefix(image, []byte("\x7fELF")) && bytes.Contains(image[:min(len(image), 4096)], []byte(".version")) {
			return bytes.TrimRight(image, "\x00"), nil // PTX text, loaded as such
		}
		return nil, errors.New("the recorded image is a cubin, which embeds no PTX")
	}
	if err != nil {
		return nil, err
	}
	_, entries := nvbin.Select(cs, arch)
	for _, e := range entries {
		ptx, err := e.Data()
		if err != nil {
			return nil, err
		}
		es, err := nvbin.PTXEntries(ptx)
		if err != nil {
			return nil, err
		}
		for _, pe := range es {
			if pe.Name == kernel {
				return bytes.TrimRight(ptx, "\x00"), nil // padding; LinkPTX adds the terminator
			}
		}
	}
	return nil, fmt.Errorf("the recorded fat binary embeds no PTX of kernel %s for sm_%d or below (build with -gencode ...,code=compute_XX to keep it)", kernel, arch)
}

// loadReassembled assembles the recorded PTX under cfg's knobs and loads it.
func (s *Session) loadReassembled(cfg mneme.Config) (*loadedKernel, *jit.Output, error) {
	opt := cfg.PtxasOpt
	if opt == 0 {
		opt = -1 // the driver's default
	}
	key := fmt.Sprintf("recorded PTX, ptxas -O%d, max registers %d", cfg.PtxasOpt, cfg.MaxRegisters)
	if lk, ok := s.loaded[key]; ok {
		s.touch(key)
		return lk, lk.out, nil
	}
	arch, err := cuda.ParseArch(s.props.Arch())
	if err != nil {
		return nil, nil, &jit.CompileError{Stage: "ptxas", Err: err}
	}
	ptx, err := EmbeddedPTX(s.rec.DeviceCode, s.rec.Kernel.KernelName, arch&0xffff) // without the sm_90a flag
	if err != nil {
		return nil, nil, &jit.CompileError{Stage: "ptxas", Err: err}
	}
	res, err := cuda.LinkPTX(ptx, s.rec.Kernel.KernelName, cuda.JITOptions{OptLevel: opt, MaxRegisters: cfg.MaxRegisters, Arch: s.props.Arch()})
	if err != nil {
		return nil, nil, &jit.CompileError{Stage: "ptxas", Err: err}
	}
	out := &jit.Output{Key: key, Kernel: s.rec.Kernel.KernelName, Arch: s.props.Arch(), Cubin: res.Cubin, ObjSize: len(res.Cubin),
		PtxasOptions: res.Options, PtxasLog: res.InfoLog, Times: jit.Times{Ptxas: res.WallTime}}
	if st, ok := res.Stats(out.Kernel); ok {
		out.Registers, out.StackBytes = st.Registers, st.StackFrame
		out.SpillStores, out.SpillLoads = st.SpillStores, st.SpillLoads
		out.SharedBytes, out.ConstBytes, out.LocalBytes = st.SharedBytes, st.ConstBytes, st.LocalBytes
	}
	return s.keep(out, res.Cubin)
}
