// Kernels for the launch-geometry analysis: two that work with any block
// shape and two whose code is tied to the block shape they were written for.
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))

#define tid_x __nvvm_read_ptx_sreg_tid_x
#define tid_y __nvvm_read_ptx_sreg_tid_y
#define ctaid_x __nvvm_read_ptx_sreg_ctaid_x
#define ctaid_y __nvvm_read_ptx_sreg_ctaid_y
#define ntid_x __nvvm_read_ptx_sreg_ntid_x
#define nctaid_x __nvvm_read_ptx_sreg_nctaid_x

extern "C" __global__ void vecadd(float *c, const float *a, const float *b,
                                  int n) {
  int i = ctaid_x() * ntid_x() + tid_x();
  if (i < n)
    c[i] = a[i] + b[i];
}

extern "C" __global__ void gridstride(float *y, const float *x, float a,
                                      int n) {
  for (int i = ctaid_x() * ntid_x() + tid_x(); i < n;
       i += ntid_x() * nctaid_x())
    y[i] = a * x[i] + y[i];
}

extern "C" __global__ void matmul(float *c, const float *a, const float *b,
                                  int n) {
  __shared__ float As[16][16];
  __shared__ float Bs[16][16];
  int tx = tid_x(), ty = tid_y();
  int row = ctaid_y() * 16 + ty, col = ctaid_x() * 16 + tx;
  float sum = 0;
  for (int t = 0; t < n / 16; t++) {
    As[ty][tx] = a[row * n + t * 16 + tx];
    Bs[ty][tx] = b[(t * 16 + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < 16; k++)
      sum += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  c[row * n + col] = sum;
}

extern "C" __global__ void reduce(float *out, const float *in, int n) {
  __shared__ float partial[256];
  int t = tid_x();
  int i = ctaid_x() * ntid_x() + t;
  partial[t] = i < n ? in[i] : 0;
  __syncthreads();
  for (int s = ntid_x() / 2; s > 0; s >>= 1) {
    if (t < s)
      partial[t] += partial[t + s];
    __syncthreads();
  }
  if (t == 0)
    out[ctaid_x()] = partial[0];
}

extern "C" __global__ void scale64(double *y, const double *x, double a,
                                   unsigned long n) {
  unsigned long stride = (unsigned long)nctaid_x() * ntid_x();
  for (unsigned long i = tid_x() + (unsigned long)ntid_x() * ctaid_x(); i < n;
       i += stride)
    y[i] = a * x[i];
}

extern "C" __global__ void boundcheck(float *y, int n) {
  int i = ctaid_x() * ntid_x() + tid_x();
  if (tid_x() < ntid_x() / 2 && i < n)
    y[i] = 0;
}

extern "C" __global__ void dynreduce(float *out, const float *in) {
  extern __shared__ float buf[];
  int t = tid_x();
  buf[t] = in[ctaid_x() * ntid_x() + t];
  __syncthreads();
  if (t == 0)
    out[ctaid_x()] = buf[0] + buf[1];
}

// A libdevice-style math function: the declaration __nvvm_reflect (left in
// the IR until NVVMReflect runs) asks about the FTZ mode, not the geometry.
extern "C" __attribute__((device)) int
__nvvm_reflect_query(const char *) __asm__("__nvvm_reflect");
__attribute__((device)) static float flush_aware(float x) {
  return __nvvm_reflect_query("__CUDA_FTZ") ? x * 2.0f : x + x;
}

extern "C" __global__ void reflecting(float *y, const float *x, int n) {
  int i = ctaid_x() * ntid_x() + tid_x();
  if (i < n)
    y[i] = flush_aware(x[i]);
}

// A grid-stride kernel with its own launch bound (__launch_bounds__(128)):
// a block of more threads cannot launch.
extern "C" __global__ void __attribute__((launch_bounds(128)))
boundedstride(float *y, const float *x, float a, int n) {
  for (int i = ctaid_x() * ntid_x() + tid_x(); i < n;
       i += ntid_x() * nctaid_x())
    y[i] = a * x[i] + y[i];
}
