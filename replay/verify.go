package replay

import (
	"encoding/binary"
	"fmt"

	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/replay/internal/compare"
	"github.com/mneme-gpu/mneme/spec"
)

// comparison is one launch of the comparison kernel and what it is about.
type comparison struct {
	params compare.Params
	// what names the memory for a mismatch message; base is the address
	// (or, for globals, 0) that offsets are reported from.
	what   string
	base   uint64
	expect []byte // the recorded bytes, to quote in a mismatch
	// safety marks a bitwise check of memory the recording shows unchanged:
	// failing it does not fail verification, it forbids the partial reset.
	safety bool
}

// compareThreads is the block size of the comparison kernel; its grid is
// capped at a few blocks per SM and strides over the data.
const compareThreads = 256

// verify compares all recorded memory (every allocation and every global the
// loaded kernel can reach) with the epilogue on the GPU. verified says the
// output matches under the options' mode; safe says the kernel demonstrably
// wrote nothing outside the ranges the recording shows it changes, so a
// partial reset restores the prologue exactly.
func (s *Session) verify(lk *loadedKernel) (verified, safe bool, mismatch string, err error) {
	v := s.opts.Verify
	if v.Mode == VerifyNone {
		return true, false, "", nil
	}
	mode, dtype, atol, rtol := v.compareMode()
	var cmps []comparison
	add := func(got, want, n uint64, m uint32, c comparison) {
		if n == 0 {
			return
		}
		elem, eff := compare.ElemSize(m, dtype, got, want)
		c.params = compare.Params{Got: got, Want: want, N: n, Elem: elem, Mode: eff, ATol: atol, RTol: rtol}
		cmps = append(cmps, c)
	}
	epi := s.rec.Epilogue
	for i, b := range s.lay.blobs {
		add(b.Addr, s.epiCopy+b.Off, b.Size, mode, comparison{
			what: fmt.Sprintf("allocation 0x%x (%d bytes)", b.Addr, b.Size), base: b.Addr, expect: epi.Blobs[i].Data})
		if mode != compare.ModeBitwise {
			for _, u := range s.unchanged[i] {
				add(u.Addr, s.epiCopy+b.Off+(u.Addr-b.Addr), u.Size, compare.ModeBitwise, comparison{safety: true})
			}
		}
	}
	for _, g := range lk.globals {
		add(g.addr, s.epiCopy+g.slot.Off, g.slot.Size, mode, comparison{
			what: fmt.Sprintf("device global %s (%d bytes)", g.slot.Name, g.slot.Size), expect: epi.Globals[g.index].Data})
	}
	if len(cmps) > s.nResults {
		return false, false, "", fmt.Errorf("verification: %d comparisons, room for %d results", len(cmps), s.nResults)
	}
	if len(cmps) == 0 {
		return true, true, "", nil
	}
	if err := cuda.MemsetD8(s.results, 0xff, uint64(8*len(cmps))); err != nil {
		return false, false, "", err
	}
	for i := range cmps {
		p := cmps[i].params
		p.Result = s.results + uint64(8*i)
		if err := p.Validate(); err != nil {
			return false, false, "", err
		}
		blocks := min((p.N/uint64(p.Elem)+compareThreads-1)/compareThreads, uint64(max(s.props.SMCount, 1)*8))
		blocks = max(blocks, 1)
		if err := s.cmpFn.Launch(spec.Dim3{X: uint32(blocks), Y: 1, Z: 1}, spec.Dim3{X: compareThreads, Y: 1, Z: 1}, 0, s.stream, p.Args()); err != nil {
			return false, false, "", fmt.Errorf("verification kernel: %w", err)
		}
	}
	if err := s.stream.Synchronize(); err != nil {
		return false, false, "", err
	}
	words := make([]byte, 8*len(cmps))
	if err := cuda.MemcpyDtoH(words, s.results); err != nil {
		return false, false, "", err
	}
	verified, safe = true, true
	for i, c := range cmps {
		at := binary.LittleEndian.Uint64(words[8*i:])
		if at == compare.NoDifference {
			continue
		}
		if c.safety {
			safe = false
			continue
		}
		if verified {
			mismatch = s.describeMismatch(c, at)
		}
		verified = false
	}
	return verified, verified && safe, mismatch, nil
}

// describeMismatch names the memory and offset and quotes a few bytes of
// what the replay produced and what was recorded.
func (s *Session) describeMismatch(c comparison, off uint64) string {
	msg := fmt.Sprintf("%s differs from the recording at offset %d", c.what, off)
	if c.base != 0 {
		msg += fmt.Sprintf(" (address 0x%x)", c.base+off)
	}
	n := min(uint64(8), c.params.N-off)
	got := make([]byte, n)
	if err := cuda.MemcpyDtoH(got, c.params.Got+off); err == nil && off+n <= uint64(len(c.expect)) {
		msg += fmt.Sprintf(": got % x, recorded % x", got, c.expect[off:off+n])
	}
	return msg
}
