package replay

import (
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

// EmbeddedPTX finds the PTX of kernel in a recorded image (nvbin.EmbeddedPTX).
func EmbeddedPTX(image []byte, kernel string, arch int) ([]byte, error) {
	return nvbin.EmbeddedPTX(image, kernel, arch)
}

// ptxArch is the architecture whose embedded PTX is assembled: the
// device's (without the sm_90a flag), else the recording's GPU's in a
// compile-only session.
func (s *Session) ptxArch() int {
	arch := s.props.Arch()
	if s.ctx == nil {
		arch = s.rec.Kernel.Device.Arch
	}
	a, err := cuda.ParseArch(arch)
	if err != nil {
		return 0
	}
	return a & 0xffff
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
