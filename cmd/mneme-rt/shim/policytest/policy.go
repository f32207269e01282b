// Package policytest runs the deployment rules of the shim's
// deploy_policy.h (the geometry rule, the variant launch key, the limits)
// and package deploy's Go versions of them over one table of cases
// (testdata/cases.txt): both must give the row's answer. This file is the
// test's only cgo: test files cannot use cgo themselves.
package policytest

/*
#cgo CFLAGS: -O2 -Wall -I${SRCDIR}/..
#include <stdlib.h>
#include "deploy_policy.h"
*/
import "C"

import "unsafe"

// cLimits are the header's limits.
type cLimits struct {
	MaxThreads, MaxGridX, MaxGridYZ                uint64
	MaxFolded, MaxKeyedArg, MaxKeys, DefaultShared int
}

func headerLimits() cLimits {
	return cLimits{
		MaxThreads: C.MNEME_DEPLOY_MAX_THREADS, MaxGridX: C.MNEME_DEPLOY_MAX_GRID_X, MaxGridYZ: C.MNEME_DEPLOY_MAX_GRID_YZ,
		MaxFolded: C.MNEME_DEPLOY_MAX_FOLDED, MaxKeyedArg: C.MNEME_DEPLOY_MAX_KEYED_ARG, MaxKeys: C.MNEME_DEPLOY_MAX_KEYS,
		DefaultShared: C.MNEME_DEPLOY_DEFAULT_SHARED,
	}
}

// cGeometry is mneme_deploy_geometry: the grid and block to launch with,
// and whether they changed.
func cGeometry(tuned, recorded, grid, block [3]uint32) (out [6]uint32, changed bool) {
	var t, r, g, b [3]C.unsigned
	for i := range 3 {
		t[i], r[i], g[i], b[i] = C.unsigned(tuned[i]), C.unsigned(recorded[i]), C.unsigned(grid[i]), C.unsigned(block[i])
	}
	var o [6]C.unsigned
	c := C.mneme_deploy_geometry(&t[0], &r[0], &g[0], &b[0], &o[0])
	for i := range 6 {
		out[i] = uint32(o[i])
	}
	return out, c != 0
}

// cVariantKey is mneme_deploy_variant_key over folded arguments 0..n-1 of
// the given bytes, with the shared memory when sharedKeyed; ok is false
// when C refused.
func cVariantKey(dims, sharedKeyed bool, grid, block [3]uint32, shared uint32, folded [][]byte) (key []byte, ok bool) {
	n := len(folded)
	idx := make([]C.int, n+1)
	sizes := make([]C.unsigned, n+1)
	// The argument array and the arguments live in C memory: cgo forbids
	// passing Go memory that holds Go pointers.
	args := (*[1 << 20]unsafe.Pointer)(C.malloc(C.size_t((n + 1) * int(unsafe.Sizeof(unsafe.Pointer(nil))))))[: n+1 : n+1]
	defer C.free(unsafe.Pointer(&args[0]))
	for i, a := range folded {
		idx[i], sizes[i] = C.int(i), C.unsigned(len(a))
		p := C.malloc(C.size_t(len(a) + 1))
		defer C.free(p)
		copy(unsafe.Slice((*byte)(p), len(a)), a)
		args[i] = p
	}
	var d, sk C.int
	if dims {
		d = 1
	}
	if sharedKeyed {
		sk = 1
	}
	var g, b [3]C.unsigned
	for i := range 3 {
		g[i], b[i] = C.unsigned(grid[i]), C.unsigned(block[i])
	}
	klen := C.mneme_deploy_key_len(d, sk, C.int(n), &sizes[0])
	buf := C.malloc(klen + 1)
	defer C.free(buf)
	if C.mneme_deploy_variant_key(d, sk, C.int(n), &idx[0], &sizes[0], &g[0], &b[0], C.uint32_t(shared), &args[0], (*C.uchar)(buf)) == 0 {
		return nil, false
	}
	return C.GoBytes(buf, C.int(klen)), true
}
