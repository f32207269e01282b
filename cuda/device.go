package cuda

/*
#include "driver.h"
*/
import "C"

import (
	"fmt"
	"strings"
)

// Device is a CUDA device ordinal.
type Device int

// GetDevice returns the device with the given ordinal, checking it exists.
func GetDevice(ordinal int) (Device, error) {
	n, err := DeviceCount()
	if err != nil {
		return 0, err
	}
	if ordinal < 0 || ordinal >= n {
		return 0, fmt.Errorf("CUDA device %d: this machine has %d device(s) (ordinals 0..%d)", ordinal, n, n-1)
	}
	var d C.CUdevice
	if err := check("cuDeviceGet", C.mn_cuDeviceGet(&d, C.int(ordinal))); err != nil {
		return 0, err
	}
	return Device(d), nil
}

// DeviceProps are the properties and limits of a device that compiling,
// launching and tuning depend on. Sizes are in bytes, clocks in kHz.
type DeviceProps struct {
	Ordinal                int
	Name                   string
	Major, Minor           int
	SMCount                int
	TotalMem               uint64
	MaxThreadsPerBlock     int
	MaxBlockDim            [3]int
	MaxGridDim             [3]int
	MaxSharedPerBlock      int
	MaxSharedPerBlockOptin int
	SharedPerSM            int
	RegsPerBlock           int
	RegsPerSM              int
	WarpSize               int
	MaxThreadsPerSM        int
	ClockKHz               int
	MemClockKHz            int
	L2Bytes                int
	UUID                   string
}

// Arch is the device's target name for code generation, e.g. "sm_90".
func (p DeviceProps) Arch() string { return fmt.Sprintf("sm_%d%d", p.Major, p.Minor) }

// CUdevice_attribute values.
const (
	attrMaxThreadsPerBlock     = 1
	attrMaxBlockDimX           = 2
	attrMaxGridDimX            = 5
	attrMaxSharedPerBlock      = 8
	attrWarpSize               = 10
	attrMaxRegsPerBlock        = 12
	attrClockRate              = 13
	attrSMCount                = 16
	attrMemoryClockRate        = 36
	attrL2CacheSize            = 38
	attrMaxThreadsPerSM        = 39
	attrComputeCapMajor        = 75
	attrComputeCapMinor        = 76
	attrMaxSharedPerSM         = 81
	attrMaxRegsPerSM           = 82
	attrMaxSharedPerBlockOptin = 97
)

func (d Device) attr(a int) (int, error) {
	var v C.int
	err := check("cuDeviceGetAttribute", C.mn_cuDeviceGetAttribute(&v, C.int(a), C.CUdevice(d)))
	if err != nil {
		return 0, fmt.Errorf("device %d attribute %d: %w", int(d), a, err)
	}
	return int(v), nil
}

// Props reads the device's name, compute capability, memory and limits.
func (d Device) Props() (DeviceProps, error) {
	if err := Init(); err != nil {
		return DeviceProps{}, err
	}
	p := DeviceProps{Ordinal: int(d)}
	var name [256]C.char
	if err := check("cuDeviceGetName", C.mn_cuDeviceGetName(&name[0], C.int(len(name)), C.CUdevice(d))); err != nil {
		return p, err
	}
	p.Name = C.GoString(&name[0])
	var total C.size_t
	if err := check("cuDeviceTotalMem_v2", C.mn_cuDeviceTotalMem(&total, C.CUdevice(d))); err != nil {
		return p, err
	}
	p.TotalMem = uint64(total)
	fields := []struct {
		attr int
		dst  *int
	}{
		{attrComputeCapMajor, &p.Major}, {attrComputeCapMinor, &p.Minor},
		{attrSMCount, &p.SMCount}, {attrMaxThreadsPerBlock, &p.MaxThreadsPerBlock},
		{attrMaxBlockDimX, &p.MaxBlockDim[0]}, {attrMaxBlockDimX + 1, &p.MaxBlockDim[1]},
		{attrMaxBlockDimX + 2, &p.MaxBlockDim[2]}, {attrMaxGridDimX, &p.MaxGridDim[0]},
		{attrMaxGridDimX + 1, &p.MaxGridDim[1]}, {attrMaxGridDimX + 2, &p.MaxGridDim[2]},
		{attrMaxSharedPerBlock, &p.MaxSharedPerBlock}, {attrMaxSharedPerBlockOptin, &p.MaxSharedPerBlockOptin},
		{attrMaxSharedPerSM, &p.SharedPerSM}, {attrMaxRegsPerBlock, &p.RegsPerBlock},
		{attrMaxRegsPerSM, &p.RegsPerSM}, {attrWarpSize, &p.WarpSize},
		{attrMaxThreadsPerSM, &p.MaxThreadsPerSM}, {attrL2CacheSize, &p.L2Bytes},
	}
	for _, f := range fields {
		v, err := d.attr(f.attr)
		if err != nil {
			return p, err
		}
		*f.dst = v
	}
	// Clock rates are deprecated in CUDA 13; a driver that stops reporting
	// them leaves the fields zero rather than failing the whole query.
	p.ClockKHz, _ = d.attr(attrClockRate)
	p.MemClockKHz, _ = d.attr(attrMemoryClockRate)
	var uuid [16]C.uchar
	if check("cuDeviceGetUuid_v2", C.mn_cuDeviceGetUuid(&uuid[0], C.CUdevice(d))) == nil {
		p.UUID = formatUUID(uuid)
	}
	return p, nil
}

// formatUUID writes a device UUID the way nvidia-smi shows it.
func formatUUID(u [16]C.uchar) string {
	var b strings.Builder
	b.WriteString("GPU-")
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b.WriteByte('-')
		}
		fmt.Fprintf(&b, "%02x", byte(c))
	}
	return b.String()
}
