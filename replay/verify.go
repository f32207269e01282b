package replay

import (
	"encoding/binary"
	"fmt"

	"github.com/mneme-gpu/mneme"
	"github.com/mneme-gpu/mneme/cuda"
	"github.com/mneme-gpu/mneme/replay/internal/compare"
)

// comparison is one launch of the comparison kernel and what it is about.
type comparison struct {
	params compare.Params
	// what names the memory for a mismatch message; base is the address
	// (or, for globals, 0) that offsets are reported from.
	what string
	base uint64
	// safety marks a bitwise check of memory the recording shows unchanged:
	// failing it does not fail verification, it forbids the partial reset.
	safety bool
	// typed is the buffer's typed-verification plan (modes auto and ulp);
	// nil otherwise.
	typed *typedBuffer
}

// typedPlan is how the typed modes compare each recorded buffer.
type typedPlan struct {
	blobs, globals []typedBuffer
}

// typedBuffer is one buffer's element type and bounds.
type typedBuffer struct {
	name   string
	elem   compare.ElemType
	bounds compare.Bounds
	// report lists the buffer's figures even when it matches: the kernel
	// writes it, or the recording shows it changed.
	report bool
}

// typedMode says whether the mode compares by element type.
func typedMode(mode string) bool { return mode == mneme.VerifyAuto || mode == mneme.VerifyULP }

// planTyped fixes every buffer's element type and bounds once per session,
// from the IR analysis the recording carries; runs only look them up. The
// bounds of a buffer float atomics sum into depend on its largest recorded
// value, read from the epilogue's stream.
func planTyped(rec *Recording, lay layout, v mneme.VerifyOptions) (typedPlan, error) {
	if !typedMode(v.Mode) {
		return typedPlan{}, nil
	}
	blobTypes, globalTypes := bufferTypes(rec.Writes, rec.Args, lay.blobs, lay.globals)
	threads := rec.Instance.GridDims.Count() * rec.Instance.BlockDims.Count()
	plan := func(bt bufferType, name string, size uint64, magnitude func() (float64, error), changed bool) (typedBuffer, error) {
		tb := typedBuffer{name: name, elem: bt.elem, report: bt.written || changed}
		if bt.elem == compare.Untyped {
			return tb, nil
		}
		if v.Mode == mneme.VerifyULP {
			tb.bounds = compare.Bounds{ULP: v.ULP}
			return tb, nil
		}
		tb.bounds = autoBounds[bt.elem]
		if bt.atomicSum {
			m, err := magnitude()
			if err != nil {
				return tb, err
			}
			tb.bounds = atomicSumBounds(tb.bounds, threads, size/uint64(bt.elem.Size()), m)
		}
		return tb, nil
	}
	var p typedPlan
	for i, b := range lay.blobs {
		magnitude := func() (float64, error) {
			if rec.epiStream == nil {
				return 0, fmt.Errorf("allocation 0x%x: the recording's snapshots are closed", b.Addr)
			}
			return blobMagnitude(rec.epiStream, i, blobTypes[i].elem)
		}
		tb, err := plan(blobTypes[i], bufferName(b.Addr, blobTypes[i].args), b.Size, magnitude, rec.blobChanged(i))
		if err != nil {
			return p, snapshotErr(err)
		}
		p.blobs = append(p.blobs, tb)
	}
	for i, g := range lay.globals {
		data := rec.Epilogue.Globals[i].Data
		magnitude := func() (float64, error) { return maxMagnitude(data, globalTypes[i].elem), nil }
		tb, _ := plan(globalTypes[i], "global "+g.Name, g.Size, magnitude, g.Changed)
		p.globals = append(p.globals, tb)
	}
	return p, nil
}

// compareThreads is the block size of the comparison kernel; its grid is
// capped at a few blocks per SM and strides over the data.
const compareThreads = 256

// verify compares all recorded memory (every allocation and every global the
// loaded kernel can reach) with the epilogue on the GPU. verified says the
// output matches under the options' mode; safe says the kernel demonstrably
// wrote nothing outside the ranges the recording shows it changes, so a
// partial reset restores the prologue exactly.
//
// The typed modes (auto, ulp) compare bitwise on the GPU first; a float
// buffer that differs is then copied back from its first difference on and
// compared by element on the host, which also gives the figures.
func (s *Session) verify(lk *loadedKernel) (verified, safe bool, mismatch string, figures []mneme.BufferVerification, err error) {
	v := s.opts.Verify
	if v.Mode == mneme.VerifyNone {
		return true, false, "", nil, nil
	}
	mode, dtype, atol, rtol := compareMode(v)
	typed := typedMode(v.Mode)
	var cmps []comparison
	add := func(got, want, n uint64, m uint32, c comparison) {
		if n == 0 {
			return
		}
		elem, eff := compare.ElemSize(m, dtype, got, want)
		c.params = compare.Params{Got: got, Want: want, N: n, Elem: elem, Mode: eff, ATol: atol, RTol: rtol}
		cmps = append(cmps, c)
	}
	for i, b := range s.lay.blobs {
		c := comparison{what: fmt.Sprintf("allocation 0x%x (%d bytes)", b.Addr, b.Size), base: b.Addr}
		if typed {
			c.typed = &s.typed.blobs[i]
		}
		add(b.Addr, s.epiCopy+b.Off, b.Size, mode, c)
		// A buffer that may pass while differing must still leave what the
		// recording shows unchanged intact before a partial reset is trusted.
		if mode != compare.ModeBitwise || (typed && c.typed.elem != compare.Untyped) {
			for _, u := range s.unchanged[i] {
				add(u.Addr, s.epiCopy+b.Off+(u.Addr-b.Addr), u.Size, compare.ModeBitwise, comparison{safety: true})
			}
		}
	}
	for _, g := range lk.globals {
		c := comparison{what: fmt.Sprintf("device global %s (%d bytes)", g.slot.Name, g.slot.Size)}
		if typed {
			c.typed = &s.typed.globals[g.index]
		}
		add(g.addr, s.epiCopy+g.slot.Off, g.slot.Size, mode, c)
	}
	if len(cmps) > s.nResults {
		return false, false, "", nil, fmt.Errorf("verification: %d comparisons, room for %d results", len(cmps), s.nResults)
	}
	if len(cmps) == 0 {
		return true, true, "", nil, nil
	}
	if err := cuda.MemsetD8(s.results, 0xff, uint64(8*len(cmps))); err != nil {
		return false, false, "", nil, err
	}
	for i := range cmps {
		p := cmps[i].params
		p.Result = s.results + uint64(8*i)
		if err := p.Validate(); err != nil {
			return false, false, "", nil, err
		}
		blocks := min((p.N/uint64(p.Elem)+compareThreads-1)/compareThreads, uint64(max(s.props.SMCount, 1)*8))
		blocks = max(blocks, 1)
		if err := s.cmpFn.Launch(mneme.Dim3{X: uint32(blocks), Y: 1, Z: 1}, mneme.Dim3{X: compareThreads, Y: 1, Z: 1}, 0, s.stream, p.Args()); err != nil {
			return false, false, "", nil, fmt.Errorf("verification kernel: %w", err)
		}
	}
	if err := s.stream.Synchronize(); err != nil {
		return false, false, "", nil, err
	}
	words := make([]byte, 8*len(cmps))
	if err := cuda.MemcpyDtoH(words, s.results); err != nil {
		return false, false, "", nil, err
	}
	verified, safe = true, true
	for i, c := range cmps {
		at := binary.LittleEndian.Uint64(words[8*i:])
		if c.safety {
			safe = safe && at == compare.NoDifference
			continue
		}
		if c.typed != nil {
			fig, passed, err := s.typedFigures(c, at)
			if err != nil {
				return false, false, "", nil, err
			}
			if fig != nil {
				figures = append(figures, *fig)
			}
			if !passed && verified {
				mismatch = typedMismatch(c, fig)
			}
			verified = verified && passed
			continue
		}
		if at == compare.NoDifference {
			continue
		}
		if verified {
			mismatch = s.describeMismatch(c, at)
		}
		verified = false
	}
	return verified, verified && safe, mismatch, figures, nil
}

// typedFigures compares one buffer of a typed mode whose bitwise comparison
// on the GPU reported first difference at (NoDifference: none). A differing
// buffer is copied back from the element holding that byte on and compared
// on the host. fig is nil for a matching buffer not worth reporting.
func (s *Session) typedFigures(c comparison, at uint64) (fig *mneme.BufferVerification, passed bool, err error) {
	var got, want []byte
	if at != compare.NoDifference {
		start := at / uint64(c.typed.elem.Size()) * uint64(c.typed.elem.Size())
		got, want = make([]byte, c.params.N-start), make([]byte, c.params.N-start)
		if err := cuda.MemcpyDtoH(got, c.params.Got+start); err != nil {
			return nil, false, err
		}
		// The recorded bytes come from the epilogue image on the device.
		if err := cuda.MemcpyDtoH(want, c.params.Want+start); err != nil {
			return nil, false, err
		}
	}
	return typedFiguresOf(c, at, got, want)
}

// typedFiguresOf is typedFigures' host part: got and want hold the replayed
// and the recorded bytes from the element holding byte at on to the end of
// the buffer.
func typedFiguresOf(c comparison, at uint64, got, want []byte) (fig *mneme.BufferVerification, passed bool, err error) {
	tb := c.typed
	bound := "bitwise"
	if tb.elem != compare.Untyped {
		bound = tb.bounds.String()
	}
	size := uint64(tb.elem.Size())
	n := c.params.N
	if at == compare.NoDifference {
		if !tb.report {
			return nil, true, nil
		}
		return &mneme.BufferVerification{Buffer: tb.name, Type: tb.elem.String(), Bound: bound, Passed: true, Elements: n / size}, true, nil
	}
	start := at / size * size
	if start > n || uint64(len(got)) != n-start || len(want) != len(got) {
		return nil, false, fmt.Errorf("verification: %s: %d bytes recorded and %d replayed from offset %d, of %d compared", c.what, len(want), len(got), start, n)
	}
	f := compare.Typed(got, want, tb.elem, tb.bounds)
	out := &mneme.BufferVerification{Buffer: tb.name, Type: tb.elem.String(), Bound: bound, Passed: f.Passed(),
		Elements: n / size, Differing: f.Differing, Failing: f.Failing, NonFinite: f.NonFinite,
		MaxAbs: f.MaxAbs, MaxRel: f.MaxRel, MaxULP: f.MaxULP, Got: f.FirstGot, Want: f.FirstWant}
	if f.First >= 0 {
		first := start/size + uint64(f.First)
		out.FirstIndex = &first
	}
	return out, f.Passed(), nil
}

// typedMismatch says why a buffer failed typed verification.
func typedMismatch(c comparison, f *mneme.BufferVerification) string {
	if f == nil {
		return c.what + " differs from the recording"
	}
	at := uint64(0)
	if f.FirstIndex != nil {
		at = *f.FirstIndex
	}
	if f.Type == compare.Untyped.String() {
		return fmt.Sprintf("%s differs from the recording at offset %d (%d bytes differ): got %s, recorded %s", c.what, at, f.Differing, f.Got, f.Want)
	}
	return fmt.Sprintf("%s (%s) differs from the recording beyond %s at element %d: got %s, recorded %s (%d of %d elements outside the bound, max ulp %d, max rel %.3g)",
		c.what, f.Type, f.Bound, at, f.Got, f.Want, f.Failing, f.Elements, f.MaxULP, f.MaxRel)
}

// describeMismatch names the memory and offset and quotes a few bytes of
// what the replay produced and what was recorded.
func (s *Session) describeMismatch(c comparison, off uint64) string {
	msg := fmt.Sprintf("%s differs from the recording at offset %d", c.what, off)
	if c.base != 0 {
		msg += fmt.Sprintf(" (address 0x%x)", c.base+off)
	}
	n := min(uint64(8), c.params.N-off)
	got, want := make([]byte, n), make([]byte, n)
	if cuda.MemcpyDtoH(got, c.params.Got+off) == nil && cuda.MemcpyDtoH(want, c.params.Want+off) == nil {
		msg += fmt.Sprintf(": got % x, recorded % x", got, want)
	}
	return msg
}
