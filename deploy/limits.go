package deploy

import (
	"encoding/binary"

	"github.com/mneme-gpu/mneme"
)

// Limits are the bounds the runtime and the shim both apply to the
// launches of tuned kernels. Their one definition is the shim's
// deploy_policy.h: the runtime library reads it through cgo and hands it
// to the Runtime; DefaultLimits, for code without the header, is tied to
// it by the test of cmd/mneme-rt/shim/policytest.
type Limits struct {
	// MaxFolded is the most folded arguments a launch key holds
	// (MNEME_DEPLOY_MAX_FOLDED).
	MaxFolded int
	// MaxKeyedArg is the largest folded argument, in bytes, a launch key
	// holds (MNEME_DEPLOY_MAX_KEYED_ARG).
	MaxKeyedArg int
	// MaxKeys bounds the launch keys remembered per kernel
	// (MNEME_DEPLOY_MAX_KEYS).
	MaxKeys int
	// DefaultShared is the dynamic shared memory a launch may use without
	// the function opting in (MNEME_DEPLOY_DEFAULT_SHARED).
	DefaultShared int
}

// DefaultLimits are deploy_policy.h's values.
var DefaultLimits = Limits{MaxFolded: 32, MaxKeyedArg: 4096, MaxKeys: 4096, DefaultShared: 48 << 10}

// CUDA's launch limits, as deploy_policy.h names them
// (MNEME_DEPLOY_MAX_THREADS, MNEME_DEPLOY_MAX_GRID_X, MNEME_DEPLOY_MAX_GRID_YZ).
const (
	MaxThreadsPerBlock = maxThreadsPerBlock
	MaxGridX           = maxGridX
	MaxGridYZ          = maxGridYZ
)

// VariantLaunchKey is what tells a specialized kernel's launches apart,
// byte for byte as the shim's mneme_deploy_variant_key writes it: block x,
// y, z, then grid x, y, z when dimensions are folded (or the kernel has
// launch-shape classes), as little-endian u32, then the dynamic shared
// memory as a little-endian u32 when sharedKeyed (classes), then each
// folded argument's bytes in order. It appends to buf.
func VariantLaunchKey(buf []byte, grid, block mneme.Dim3, dimsFolded, sharedKeyed bool, shared uint32, folded [][]byte) []byte {
	for _, v := range []uint32{block.X, block.Y, block.Z} {
		buf = binary.LittleEndian.AppendUint32(buf, v)
	}
	if dimsFolded {
		for _, v := range []uint32{grid.X, grid.Y, grid.Z} {
			buf = binary.LittleEndian.AppendUint32(buf, v)
		}
	}
	if sharedKeyed {
		buf = binary.LittleEndian.AppendUint32(buf, shared)
	}
	for _, a := range folded {
		buf = append(buf, a...)
	}
	return buf
}
