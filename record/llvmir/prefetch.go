package llvmir

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/mneme-gpu/mneme/appabi"
	"github.com/mneme-gpu/mneme/llvm"
	"github.com/mneme-gpu/mneme/record"
)

// Prefetched is a record.IRTools that analyzes the translation units
// embedded in an executable in a background goroutine, while the
// application runs, and answers ExtractKernel from that work when it is asked
// about one of those units: the runtime writes a kernel's unit byte for byte
// as it is embedded, so the recorded file's bytes find their unit by content.
// Other bytes, and kernels whose analysis failed in the background, are
// analyzed on the spot exactly as Tools does, so every answer is the one
// Tools would give; prefetching only moves the work earlier.
//
// A unit the background has not reached yet is analyzed by the first caller
// that needs it (and skipped by the background), and a unit it is analyzing
// is waited for, so no unit is parsed twice. Prefetched is safe for
// concurrent use.
type Prefetched struct {
	loaded chan struct{} // closed once entries, loadErr and units are set
	done   chan struct{} // closed when the background goroutine has ended
	stop   atomic.Bool

	entries []appabi.IREntry
	loadErr error
	units   map[xxh3.Uint128]*prefetchUnit
	order   []*prefetchUnit // embedding order, duplicates removed

	analyzed atomic.Int64 // units analyzed, by whichever goroutine
	busy     atomic.Int64 // nanoseconds spent analyzing units
	hits     atomic.Int64
	computed atomic.Int64
}

// prefetchUnit is one embedded translation unit and, once analyzed, its
// kernels. Its fields other than once are written only inside once.
type prefetchUnit struct {
	name    string
	bitcode []byte
	once    sync.Once
	kernels map[string]*record.KernelIR
	// complete says kernels holds every kernel the unit defines, so a
	// kernel missing from it is not defined there. It is false when the
	// unit did not parse or some kernel failed; those are then analyzed
	// directly, to give Tools's own answer and error.
	complete bool
}

// PrefetchStats says how much of the analysis the prefetch did.
type PrefetchStats struct {
	Units    int           // distinct translation units embedded in the executable
	Analyzed int           // of those, how many are analyzed by now
	Busy     time.Duration // time spent analyzing them
	Hits     int           // ExtractKernel calls answered from analyzed units
	Computed int           // ExtractKernel calls analyzed on the spot
}

// Prefetch starts analyzing, in the background, every kernel of every
// translation unit that load returns (typically appabi.ExecutableIR of the
// application). The background goroutine runs at a lower scheduling
// priority, so it yields the CPU to the application. A load error or an
// analysis failure never surfaces as such: it only leaves more to analyze
// on the spot. Call Close when done.
func Prefetch(load func() ([]appabi.IREntry, error)) *Prefetched {
	p := &Prefetched{loaded: make(chan struct{}), done: make(chan struct{})}
	go p.run(load)
	return p
}

func (p *Prefetched) run(load func() ([]appabi.IREntry, error)) {
	defer close(p.done)
	lowerThreadPriority()
	p.load(load)
	for _, u := range p.order {
		if p.stop.Load() {
			return
		}
		p.analyzeOnce(u)
	}
}

// load reads the entries and indexes them by content; it always closes
// p.loaded, so callers never wait forever on a failed load.
func (p *Prefetched) load(load func() ([]appabi.IREntry, error)) {
	defer close(p.loaded)
	defer func() {
		if r := recover(); r != nil {
			p.entries, p.units, p.order = nil, nil, nil
			p.loadErr = fmt.Errorf("reading the embedded IR: %v", r)
		}
	}()
	p.entries, p.loadErr = load()
	p.units = make(map[xxh3.Uint128]*prefetchUnit, len(p.entries))
	for _, e := range p.entries {
		sum := xxh3.Hash128(e.Bitcode)
		if _, dup := p.units[sum]; dup {
			continue
		}
		u := &prefetchUnit{name: e.Name, bitcode: e.Bitcode}
		p.units[sum] = u
		p.order = append(p.order, u)
	}
}

func (p *Prefetched) analyzeOnce(u *prefetchUnit) {
	u.once.Do(func() {
		start := time.Now()
		p.analyze(u)
		p.busy.Add(int64(time.Since(start)))
		p.analyzed.Add(1)
	})
}

// analyze parses the unit once and extracts each of its kernels. Only
// successes are kept; a failure (or a bug: a panic here must not end a
// recording whose data is already on disk) leaves the unit incomplete.
func (p *Prefetched) analyze(u *prefetchUnit) {
	u.kernels = map[string]*record.KernelIR{}
	defer func() {
		if r := recover(); r != nil {
			u.complete = false
		}
	}()
	m, err := llvm.ParseBitcode(u.bitcode, u.name)
	if err != nil {
		return
	}
	defer m.Dispose()
	complete := true
	for _, kernel := range m.Kernels() {
		ir, err := analyzeKernel(m, u.name, kernel)
		if err != nil {
			complete = false
			continue
		}
		u.kernels[kernel] = ir
	}
	u.complete = complete
}

// ExtractKernel implements record.IRTools: from the prefetched analysis when
// bitcode is an embedded unit, else as Tools.ExtractKernel.
func (p *Prefetched) ExtractKernel(bitcode []byte, moduleName, kernel string) (*record.KernelIR, bool, error) {
	<-p.loaded
	if u := p.units[xxh3.Hash128(bitcode)]; u != nil && bytes.Equal(u.bitcode, bitcode) {
		p.analyzeOnce(u)
		if ir, ok := u.kernels[kernel]; ok {
			p.hits.Add(1)
			return cloneKernelIR(ir), true, nil
		}
		if u.complete {
			p.hits.Add(1)
			return nil, false, nil
		}
	}
	p.computed.Add(1)
	return Tools{}.ExtractKernel(bitcode, moduleName, kernel)
}

// cloneKernelIR copies a cached result, so a caller that changes what it
// got cannot change later answers.
func cloneKernelIR(ir *record.KernelIR) *record.KernelIR {
	return &record.KernelIR{
		Bitcode:  slices.Clone(ir.Bitcode),
		ArgNames: slices.Clone(ir.ArgNames),
		ArgKinds: slices.Clone(ir.ArgKinds),
	}
}

// Version implements record.IRTools.
func (p *Prefetched) Version() string { return Tools{}.Version() }

// Entries returns what load returned (waiting for it), so the executable is
// read once for both the prefetch and Finalize's fallback search.
func (p *Prefetched) Entries() ([]appabi.IREntry, error) {
	<-p.loaded
	return p.entries, p.loadErr
}

// Stats reports the prefetch's progress and use so far.
func (p *Prefetched) Stats() PrefetchStats {
	s := PrefetchStats{
		Analyzed: int(p.analyzed.Load()),
		Busy:     time.Duration(p.busy.Load()),
		Hits:     int(p.hits.Load()),
		Computed: int(p.computed.Load()),
	}
	select {
	case <-p.loaded:
		s.Units = len(p.order)
	default:
	}
	return s
}

// Close stops the background analysis from starting more units and waits
// for it to end (at most the unit in progress). ExtractKernel keeps working
// afterwards, analyzing what the background did not reach. Close may be
// called more than once.
func (p *Prefetched) Close() {
	p.stop.Store(true)
	<-p.done
}
