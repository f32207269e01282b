// The chunk fingerprint kernel of package fingerprint: fingerprint.go
// defines the fingerprint and holds the Go reference the GPU result is
// tested against. Regenerate fingerprint.ptx with `go generate` after a
// change (clang-22, no CUDA toolkit needed).
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))

typedef unsigned long long u64;

// One chunk to fingerprint: 8-byte aligned device address and length.
struct mneme_chunk {
  u64 addr;
  u64 len;
};

#define KA 0x9e3779b97f4a7c15ULL
#define KB 0xc2b2ae3d27d4eb4fULL
#define SB 0x165667b19e3779f9ULL

// splitmix64's finalizer and murmur3's fmix64: both bijections of 64 bits.
__device__ static inline u64 mixA(u64 x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
__device__ static inline u64 mixB(u64 x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}
__device__ static inline u64 termA(u64 w, u64 j) { return mixA(w ^ (j * KA)); }
__device__ static inline u64 termB(u64 w, u64 j) {
  return mixB(((w << 29) | (w >> 35)) ^ ((j + 1) * KB) ^ SB);
}

#define THREADS 256

// mneme_fingerprint writes out[3c], out[3c+1] (the two 64-bit lanes) and
// out[3c+2] (the OR of every word: zero exactly when the chunk is) for each
// of the n chunks. Launch with 256 threads per block and any grid.
extern "C" __global__ void mneme_fingerprint(const struct mneme_chunk *chunks,
                                             u64 *out, unsigned n) {
  __shared__ u64 sa[THREADS], sb[THREADS], so[THREADS];
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  for (unsigned c = __nvvm_read_ptx_sreg_ctaid_x(); c < n;
       c += __nvvm_read_ptx_sreg_nctaid_x()) {
    const u64 *p = (const u64 *)chunks[c].addr;
    u64 len = chunks[c].len, words = len / 8;
    u64 a = 0, b = 0, o = 0;
    for (u64 j = t; j < words; j += THREADS) {
      u64 w = p[j];
      a += termA(w, j);
      b += termB(w, j);
      o |= w;
    }
    if (t == 0 && (len & 7)) {
      // The tail: its bytes as a little-endian word, zero-padded.
      const unsigned char *q = (const unsigned char *)(p + words);
      u64 w = 0;
      for (unsigned k = 0; k < (len & 7); k++)
        w |= (u64)q[k] << (8 * k);
      a += termA(w, words);
      b += termB(w, words);
      o |= w;
    }
    sa[t] = a;
    sb[t] = b;
    so[t] = o;
    __syncthreads();
    for (unsigned s = THREADS / 2; s > 0; s >>= 1) {
      if (t < s) {
        sa[t] += sa[t + s];
        sb[t] += sb[t + s];
        so[t] |= so[t + s];
      }
      __syncthreads();
    }
    if (t == 0) {
      out[3 * c] = mixA(sa[0] ^ len);
      out[3 * c + 1] = mixB(sb[0] + len * KA);
      out[3 * c + 2] = so[0];
    }
    __syncthreads();
  }
}
