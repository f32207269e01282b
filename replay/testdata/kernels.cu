// Test kernels for replay, compiled to device IR without CUDA headers.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))

#define TID_X ((int)__nvvm_read_ptx_sreg_tid_x())
#define NTID_X ((int)__nvvm_read_ptx_sreg_ntid_x())
#define CTAID_X ((int)__nvvm_read_ptx_sreg_ctaid_x())
#define GLOBAL_ID (CTAID_X * NTID_X + TID_X)

// c = a + b over n elements, one thread each.
extern "C" __global__ void vecadd(const float *a, const float *b, float *c,
                                  int n) {
  int i = GLOBAL_ID;
  if (i < n)
    c[i] = a[i] + b[i];
}

// y = a*x + y in place: replaying it twice from a stale state doubles the
// update.
extern "C" __global__ void axpy(float a, const float *x, float *y, int n) {
  int i = GLOBAL_ID;
  if (i < n)
    y[i] = a * x[i] + y[i];
}

// Scales by a device global and counts the threads that ran in another.
__device__ float g_scale;
__device__ unsigned g_count;
extern "C" __global__ void scale_global(float *y, int n) {
  int i = GLOBAL_ID;
  if (i < n) {
    y[i] *= g_scale;
    __atomic_fetch_add(&g_count, 1u, __ATOMIC_RELAXED);
  }
}

// Its input holds device pointers: each row is a pointer and a length.
struct Row {
  const float *data;
  int len;
  int pad;
};
extern "C" __global__ void row_sums(const Row *rows, float *out, int nrows) {
  int i = GLOBAL_ID;
  if (i < nrows) {
    float s = 0;
    for (int j = 0; j < rows[i].len; j++)
      s += rows[i].data[j];
    out[i] = s;
  }
}

// Traps when launched with blocks larger than the limit: a configuration
// that makes the kernel fault.
extern "C" __global__ void trap_big_blocks(float *y, int n, int limit) {
  if (NTID_X > limit)
    __builtin_trap();
  int i = GLOBAL_ID;
  if (i < n)
    y[i] += 1.0f;
}
