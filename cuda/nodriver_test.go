package cuda

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/mneme-gpu/mneme"
)

// TestNoDriverEveryCallFailsCleanly runs where libcuda.so.1 is absent (CI,
// build machines): every entry point must return an ErrNoDriver error.
func TestNoDriverEveryCallFailsCleanly(t *testing.T) {
	if err := Init(); err == nil {
		t.Skip("a CUDA driver is present; this test covers machines without one")
	} else if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Init: %v does not match ErrNoDriver", err)
	} else if !strings.HasPrefix(err.Error(), "no ") {
		t.Fatalf("Init error %q does not say the driver is missing", err)
	}
	f := FunctionFromHandle(0x1234)
	m := &Module{h: 1}
	e := &Event{h: 1}
	calls := map[string]func() error{
		"Init":                Init,
		"DriverVersion":       func() error { _, err := DriverVersion(); return err },
		"DeviceCount":         func() error { _, err := DeviceCount(); return err },
		"GetDevice":           func() error { _, err := GetDevice(0); return err },
		"Props":               func() error { _, err := Device(0).Props(); return err },
		"RetainPrimary":       func() error { _, err := Device(0).RetainPrimaryContext(); return err },
		"CurrentContext":      func() error { _, err := CurrentContext(); return err },
		"SetCurrent":          func() error { return (&Context{h: 1}).SetCurrent() },
		"Synchronize":         Synchronize,
		"LinkPTX":             func() error { _, err := LinkPTX([]byte(".version 8.0"), "k", JITOptions{OptLevel: -1}); return err },
		"LoadModule":          func() error { _, err := LoadModule([]byte("x")); return err },
		"Function":            func() error { _, err := m.Function("k"); return err },
		"Global":              func() error { _, _, err := m.Global("g"); return err },
		"Unload":              m.Unload,
		"Attributes":          func() error { _, err := f.Attributes(); return err },
		"ParamInfo":           func() error { _, err := f.ParamInfo(); return err },
		"SetMaxDynamicShared": func() error { return f.SetMaxDynamicShared(1 << 16) },
		"Launch": func() error {
			return f.Launch(mneme.Dim3{X: 1, Y: 1, Z: 1}, mneme.Dim3{X: 1, Y: 1, Z: 1}, 0, 0, [][]byte{{1, 2, 3, 4}})
		},
		"NewStream":            func() error { _, err := NewStream(); return err },
		"Stream.Sync":          Stream(0).Synchronize,
		"Stream.Destroy":       Stream(1).Destroy,
		"NewEvent":             func() error { _, err := NewEvent(); return err },
		"NewMarkerEvent":       func() error { _, err := NewMarkerEvent(); return err },
		"EventEntries":         func() error { _, err := EventEntries(); return err },
		"Event.Record":         func() error { return e.Record(0) },
		"Event.Sync":           e.Synchronize,
		"Elapsed":              func() error { _, err := Elapsed(e, e); return err },
		"Event.Destroy":        (&Event{h: 1}).Destroy,
		"MemAlloc":             func() error { _, err := MemAlloc(16); return err },
		"MemFree":              func() error { return MemFree(16) },
		"MemcpyHtoD":           func() error { return MemcpyHtoD(16, []byte{1}) },
		"MemcpyDtoH":           func() error { return MemcpyDtoH(make([]byte, 1), 16) },
		"MemcpyDtoD":           func() error { return MemcpyDtoD(16, 32, 1) },
		"MemcpyDtoDAsync":      func() error { return MemcpyDtoDAsync(16, 32, 1, 0) },
		"MemsetD8":             func() error { return MemsetD8(16, 0, 1) },
		"MemGetInfo":           func() error { _, _, err := MemGetInfo(); return err },
		"IsManaged":            func() error { _, err := IsManaged(16); return err },
		"Granularity":          func() error { _, err := AllocationGranularity(0); return err },
		"AddressReserve":       func() error { _, err := AddressReserve(1<<21, 0x7f0000000000); return err },
		"AddressFree":          func() error { return AddressFree(0x7f0000000000, 1<<21) },
		"MemCreate":            func() error { _, err := MemCreate(0, 1<<21); return err },
		"PhysMem.Release":      PhysMem(1).Release,
		"MemMap":               func() error { return MemMap(0x7f0000000000, 1<<21, 1) },
		"MemUnmap":             func() error { return MemUnmap(0x7f0000000000, 1<<21) },
		"MemSetAccess":         func() error { return MemSetAccess(0x7f0000000000, 1<<21, 0) },
		"NewKernelTimer":       func() error { _, err := NewKernelTimer(); return err },
		"NewStreamNonBlocking": func() error { _, err := NewStreamNonBlocking(); return err },
		"MemAllocHost":         func() error { _, err := MemAllocHost(4096); return err },
		"HostRegister":         func() error { _, err := HostRegister(make([]byte, 4096)); return err },
		"HostBuffer.Free":      func() error { b := byte(0); return (&HostBuffer{p: unsafe.Pointer(&b), n: 1}).Free() },
		"MemcpyDtoHAsync":      func() error { return MemcpyDtoHAsync(make([]byte, 1), 16, 0) },
		"MemcpyHtoDAsync":      func() error { return MemcpyHtoDAsync(16, []byte{1}, 0) },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrNoDriver) {
			t.Errorf("%s: got %v, want an ErrNoDriver error", name, err)
		}
	}
}
