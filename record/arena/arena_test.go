package arena

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

const mib = 1 << 20

// hostVM is a host-side virtual-memory backend: it enforces the rules the
// CUDA driver enforces (exact reservation, granularity-aligned mappings
// inside the reservation, no double mapping) and counts what it did.
type hostVM struct {
	gran       uint64
	base, size uint64
	reserved   bool
	mapped     map[uint64]bool // chunk addresses
	mapCalls   int
	failMapAt  int // the n-th Map call fails when > 0
	reserveErr error
}

func (v *hostVM) Granularity() (uint64, error) { return v.gran, nil }

func (v *hostVM) Reserve(base, size uint64) error {
	if v.reserveErr != nil {
		return v.reserveErr
	}
	v.base, v.size, v.reserved = base, size, true
	v.mapped = map[uint64]bool{}
	return nil
}

func (v *hostVM) Map(addr, size uint64) error {
	v.mapCalls++
	if v.failMapAt > 0 && v.mapCalls == v.failMapAt {
		return errors.New("CUDA_ERROR_OUT_OF_MEMORY")
	}
	if !v.reserved || addr%v.gran != 0 || size%v.gran != 0 || addr < v.base || addr+size > v.base+v.size {
		return fmt.Errorf("bad mapping %#x+%d", addr, size)
	}
	for c := addr; c < addr+size; c += v.gran {
		if v.mapped[c] {
			return fmt.Errorf("chunk %#x mapped twice", c)
		}
		v.mapped[c] = true
	}
	return nil
}

func newArena(t *testing.T, size uint64) (*Arena, *hostVM) {
	t.Helper()
	vm := &hostVM{gran: 2 * mib}
	a, err := New(vm, DefaultBase, size)
	if err != nil {
		t.Fatal(err)
	}
	return a, vm
}

func TestFirstFitRoundsToGranularity(t *testing.T) {
	a, vm := newArena(t, 64*mib)
	p1, err := a.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := a.Alloc(3 * mib)
	if err != nil {
		t.Fatal(err)
	}
	p3, _ := a.Alloc(1)
	if p1 != DefaultBase || p2 != DefaultBase+2*mib || p3 != DefaultBase+6*mib {
		t.Fatalf("addresses %#x %#x %#x, want base, base+2MiB, base+6MiB", p1, p2, p3)
	}
	if got := a.MappedBytes(); got != 8*mib || len(vm.mapped) != 4 {
		t.Fatalf("mapped %d bytes (%d chunks), want 8 MiB in 4 chunks", got, len(vm.mapped))
	}
	live := a.Live()
	if len(live) != 3 || live[0].Size != 100 || live[0].Span != 2*mib || live[1].Span != 4*mib {
		t.Fatalf("live blocks %+v", live)
	}
}

func TestFreeCoalescesAndReusesWithoutRemapping(t *testing.T) {
	a, vm := newArena(t, 16*mib)
	x, _ := a.Alloc(2 * mib)
	y, _ := a.Alloc(2 * mib)
	z, _ := a.Alloc(2 * mib)
	calls := vm.mapCalls
	if err := a.Free(y); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(x); err != nil {
		t.Fatal(err)
	}
	// x and y merged into one 4 MiB hole at the base: first fit puts a 4 MiB block there.
	w, err := a.Alloc(4 * mib)
	if err != nil || w != DefaultBase {
		t.Fatalf("alloc after coalescing: %#x, %v; want %#x", w, err, DefaultBase)
	}
	if vm.mapCalls != calls {
		t.Fatalf("reusing freed memory mapped again (%d calls, had %d)", vm.mapCalls, calls)
	}
	if err := a.Free(z); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(w); err != nil {
		t.Fatal(err)
	}
	if a.FreeBytes() != a.Size() || len(a.holes) != 1 {
		t.Fatalf("after freeing everything: %d free in %d holes, want %d in 1", a.FreeBytes(), len(a.holes), a.Size())
	}
	if err := a.Free(z); !errors.Is(err, ErrNotInArena) {
		t.Fatalf("double free: %v, want ErrNotInArena", err)
	}
}

func TestExhaustionNamesVass(t *testing.T) {
	a, _ := newArena(t, 8*mib)
	if _, err := a.Alloc(6 * mib); err != nil {
		t.Fatal(err)
	}
	_, err := a.Alloc(3 * mib)
	var ex *ExhaustedError
	if !errors.As(err, &ex) {
		t.Fatalf("got %v, want ExhaustedError", err)
	}
	if ex.Asked != 3*mib || ex.Rounded != 4*mib || ex.Largest != 2*mib || ex.Free != 2*mib || ex.Size != 8*mib {
		t.Fatalf("error fields %+v", ex)
	}
	for _, want := range []string{"-vass", "3.0 MiB", "2.0 MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestMapFailureLeavesArenaConsistent(t *testing.T) {
	vm := &hostVM{gran: 2 * mib, failMapAt: 2}
	a, err := New(vm, DefaultBase, 16*mib)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(mib); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(mib); err == nil || !strings.Contains(err.Error(), "OUT_OF_MEMORY") {
		t.Fatalf("map failure not reported: %v", err)
	}
	if len(a.Live()) != 1 || a.FreeBytes() != 14*mib {
		t.Fatalf("failed alloc changed state: live %d, free %d", len(a.Live()), a.FreeBytes())
	}
	if p, err := a.Alloc(mib); err != nil || p != DefaultBase+2*mib {
		t.Fatalf("alloc after a map failure: %#x %v", p, err)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	if _, err := New(&hostVM{gran: 2 * mib}, DefaultBase, 0); err == nil || !strings.Contains(err.Error(), "-vass") {
		t.Errorf("zero size: %v", err)
	}
	if _, err := New(&hostVM{gran: 2 * mib}, DefaultBase+4096, 4*mib); err == nil || !strings.Contains(err.Error(), "MNEME_VA_BASE") {
		t.Errorf("unaligned base: %v", err)
	}
	if _, err := New(&hostVM{gran: 3 * mib}, DefaultBase, 4*mib); err == nil {
		t.Error("granularity that is not a power of two accepted")
	}
	_, err := New(&hostVM{gran: 2 * mib, reserveErr: errors.New("address in use")}, DefaultBase, 4*mib)
	if err == nil || !strings.Contains(err.Error(), "address in use") || !strings.Contains(err.Error(), "0x153940000000") {
		t.Errorf("reserve failure: %v", err)
	}
	a, _ := New(&hostVM{gran: 2 * mib}, DefaultBase, 3*mib)
	if a.Size() != 4*mib {
		t.Errorf("size %d not rounded up to the granularity", a.Size())
	}
}

func TestSmallArenaInsideLargerReservation(t *testing.T) {
	vm := &hostVM{gran: 2 * mib}
	a, err := NewReserving(vm, DefaultBase, 3*mib, 4<<30)
	if err != nil {
		t.Fatal(err)
	}
	if vm.size != 4<<30 || a.Size() != 4*mib || a.Reserved() != 4<<30 {
		t.Fatalf("reserved %d, usable %d", vm.size, a.Size())
	}
	if _, err := a.Alloc(4 * mib); err != nil {
		t.Fatal(err)
	}
	var ex *ExhaustedError
	if _, err := a.Alloc(1); !errors.As(err, &ex) || ex.Size != 4*mib {
		t.Fatalf("allocation beyond the usable size: %v", err)
	}
}

// TestRandomAgainstInvariants drives random allocations and frees and checks
// after each step that blocks never overlap, stay in range, and that live
// spans plus holes account for the whole range with no adjacent holes.
func TestRandomAgainstInvariants(t *testing.T) {
	a, _ := newArena(t, 256*mib)
	rng := rand.New(rand.NewSource(1))
	var live []uint64
	for step := 0; step < 5000; step++ {
		if len(live) > 0 && rng.Intn(3) == 0 {
			i := rng.Intn(len(live))
			if err := a.Free(live[i]); err != nil {
				t.Fatal(err)
			}
			live = append(live[:i], live[i+1:]...)
		} else {
			p, err := a.Alloc(uint64(rng.Intn(9*mib) + 1))
			var ex *ExhaustedError
			if errors.As(err, &ex) {
				continue
			} else if err != nil {
				t.Fatal(err)
			}
			live = append(live, p)
		}
		var used uint64
		prevEnd := uint64(0)
		for _, b := range a.Live() {
			if b.Addr < DefaultBase || b.Addr+b.Span > DefaultBase+a.Size() || b.Addr < prevEnd || b.Span%a.Granularity() != 0 || b.Span < b.Size {
				t.Fatalf("step %d: bad block %+v (previous end %#x)", step, b, prevEnd)
			}
			prevEnd = b.Addr + b.Span
			used += b.Span
		}
		for i, h := range a.holes {
			if i > 0 && a.holes[i-1].addr+a.holes[i-1].size >= h.addr {
				t.Fatalf("step %d: holes %d and %d adjacent or overlapping", step, i-1, i)
			}
		}
		if used+a.FreeBytes() != a.Size() {
			t.Fatalf("step %d: %d used + %d free != %d", step, used, a.FreeBytes(), a.Size())
		}
	}
}

func BenchmarkAllocFree(b *testing.B) {
	a, err := New(&hostVM{gran: 2 * mib}, DefaultBase, 64<<30)
	if err != nil {
		b.Fatal(err)
	}
	ptrs := make([]uint64, 0, 64)
	for i := 0; i < b.N; i++ {
		if len(ptrs) == cap(ptrs) {
			for _, p := range ptrs {
				_ = a.Free(p)
			}
			ptrs = ptrs[:0]
		}
		p, err := a.Alloc(uint64(i%7+1) * mib)
		if err != nil {
			b.Fatal(err)
		}
		ptrs = append(ptrs, p)
	}
}
