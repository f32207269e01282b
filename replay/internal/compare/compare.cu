// Device-side comparison of replayed memory with the recorded epilogue.
// Compiled to PTX ahead of time (see gen.go) so replay needs no compiler at
// run time to verify; the driver JIT-compiles the PTX for the actual GPU.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))

typedef unsigned long long u64;
typedef unsigned int u32;

// Modes, mirrored in compare.go.
#define MODE_BITWISE 0
#define MODE_TOLERANCE 1

// within is numpy's isclose: |got - want| <= atol + rtol * |want|.
__device__ static bool within(double got, double want, double atol,
                              double rtol) {
  if (got == want)
    return true; // also +0 == -0, inf == inf
  if (got != got && want != want)
    return true; // NaN where NaN was recorded
  return __builtin_fabs(got - want) <= atol + rtol * __builtin_fabs(want);
}

// mneme_compare compares n bytes at got with want, elem bytes at a time
// (1, 4 or 8; both pointers aligned to elem), and lowers *first to the byte
// offset of the first difference it finds. The tolerance mode reads elements
// as f32 (elem 4) or f64 (elem 8); bytes past the last whole element compare
// bitwise.
extern "C" __global__ void mneme_compare(const unsigned char *got,
                                         const unsigned char *want, u64 n,
                                         u32 elem, u32 mode, double atol,
                                         double rtol, u64 *first) {
  u64 tid = (u64)(u32)__nvvm_read_ptx_sreg_ctaid_x() *
                (u32)__nvvm_read_ptx_sreg_ntid_x() +
            (u32)__nvvm_read_ptx_sreg_tid_x();
  u64 stride = (u64)(u32)__nvvm_read_ptx_sreg_nctaid_x() *
               (u32)__nvvm_read_ptx_sreg_ntid_x();
  u64 count = n / elem;
  for (u64 i = tid; i < count; i += stride) {
    u64 off = i * elem;
    bool same;
    u64 diffbits = 0;
    if (elem == 8) {
      u64 g = *(const u64 *)(got + off), w = *(const u64 *)(want + off);
      diffbits = g ^ w;
      same = diffbits == 0;
      if (!same && mode != MODE_BITWISE)
        same = within(__builtin_bit_cast(double, g),
                      __builtin_bit_cast(double, w), atol, rtol);
    } else if (elem == 4) {
      u32 g = *(const u32 *)(got + off), w = *(const u32 *)(want + off);
      diffbits = g ^ w;
      same = diffbits == 0;
      if (!same && mode != MODE_BITWISE)
        same = within(__builtin_bit_cast(float, g),
                      __builtin_bit_cast(float, w), atol, rtol);
    } else {
      diffbits = got[off] ^ want[off];
      same = diffbits == 0;
    }
    if (!same) {
      // Bitwise: name the first differing byte (little-endian); tolerance: the
      // element.
      u64 at = off;
      if (mode == MODE_BITWISE)
        at += (u64)__builtin_ctzll(diffbits) / 8;
      __atomic_fetch_min(first, at, __ATOMIC_RELAXED);
    }
  }
  if (tid == 0) {
    for (u64 off = count * elem; off < n; off++) {
      if (got[off] != want[off]) {
        __atomic_fetch_min(first, off, __ATOMIC_RELAXED);
        break;
      }
    }
  }
}
