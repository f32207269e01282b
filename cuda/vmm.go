package cuda

/*
#include "driver.h"
*/
import "C"

import "fmt"

// AllocationGranularity is the minimum granularity of physical allocations
// (pinned device memory on d); reservation and mapping sizes are multiples.
func AllocationGranularity(d Device) (uint64, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var g C.size_t
	if err := check("cuMemGetAllocationGranularity", C.mn_cuMemGetAllocationGranularity(&g, C.CUdevice(d))); err != nil {
		return 0, fmt.Errorf("device %d: %w", int(d), err)
	}
	return uint64(g), nil
}

// AddressReserve reserves size bytes of device virtual address space. With
// fixedAddr != 0 it must be exactly there: if the driver places it elsewhere
// (the range is taken) the reservation is freed and an error names both.
//
// Measured (H200, driver 580, CUDA 13.0): the driver honours a fixed address
// for reservations of 256 MiB and more (at 0x7f0000000000 and at Mneme's
// 0x153940000000 alike) but serves small ones (8 MiB) from its own pool,
// ignoring the address. Fixed-address arenas should be reserved whole.
func AddressReserve(size, fixedAddr uint64) (uint64, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var p C.CUdeviceptr
	if err := check("cuMemAddressReserve", C.mn_cuMemAddressReserve(&p, C.size_t(size), C.CUdeviceptr(fixedAddr))); err != nil {
		if fixedAddr != 0 {
			return 0, fmt.Errorf("reserving %d bytes at 0x%x: %w", size, fixedAddr, err)
		}
		return 0, fmt.Errorf("reserving %d bytes: %w", size, err)
	}
	if fixedAddr != 0 && uint64(p) != fixedAddr {
		C.mn_cuMemAddressFree(p, C.size_t(size))
		return 0, fmt.Errorf("cuMemAddressReserve: asked for %d bytes at 0x%x, the driver could only give 0x%x (the range is in use)", size, fixedAddr, uint64(p))
	}
	return uint64(p), nil
}

// AddressFree releases a reservation made by AddressReserve.
func AddressFree(addr, size uint64) error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuMemAddressFree", C.mn_cuMemAddressFree(C.CUdeviceptr(addr), C.size_t(size)))
}

// PhysMem is a physical device allocation (CUmemGenericAllocationHandle).
type PhysMem uint64

// MemCreate allocates size bytes of physical memory on d (a multiple of the granularity).
func MemCreate(d Device, size uint64) (PhysMem, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var h C.CUmemGenericAllocationHandle
	if err := check("cuMemCreate", C.mn_cuMemCreate(&h, C.size_t(size), C.CUdevice(d))); err != nil {
		return 0, fmt.Errorf("creating %d bytes of device memory on device %d: %w", size, int(d), err)
	}
	return PhysMem(h), nil
}

// Release frees the physical memory once it is no longer mapped.
func (h PhysMem) Release() error {
	if err := Init(); err != nil {
		return err
	}
	return check("cuMemRelease", C.mn_cuMemRelease(C.CUmemGenericAllocationHandle(h)))
}

// MemMap maps physical memory h at addr, inside a reservation.
func MemMap(addr, size uint64, h PhysMem) error {
	if err := Init(); err != nil {
		return err
	}
	if err := check("cuMemMap", C.mn_cuMemMap(C.CUdeviceptr(addr), C.size_t(size), C.CUmemGenericAllocationHandle(h))); err != nil {
		return fmt.Errorf("mapping %d bytes at 0x%x: %w", size, addr, err)
	}
	return nil
}

// MemUnmap unmaps a range mapped by MemMap.
func MemUnmap(addr, size uint64) error {
	if err := Init(); err != nil {
		return err
	}
	if err := check("cuMemUnmap", C.mn_cuMemUnmap(C.CUdeviceptr(addr), C.size_t(size))); err != nil {
		return fmt.Errorf("unmapping %d bytes at 0x%x: %w", size, addr, err)
	}
	return nil
}

// MemSetAccess makes a mapped range readable and writable from device d.
func MemSetAccess(addr, size uint64, d Device) error {
	if err := Init(); err != nil {
		return err
	}
	if err := check("cuMemSetAccess", C.mn_cuMemSetAccess(C.CUdeviceptr(addr), C.size_t(size), C.CUdevice(d))); err != nil {
		return fmt.Errorf("granting device %d access to %d bytes at 0x%x: %w", int(d), size, addr, err)
	}
	return nil
}
