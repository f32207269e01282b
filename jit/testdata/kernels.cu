// Test kernels for the jit package, compiled without CUDA headers
// (-nocudainc), hence the attribute spellings and NVVM builtins.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))

__device__ float scale(float v, float a) { return a * v; }

// y[i] = sum over `rounds` of a*x[i]: the loop bound is an argument, so
// specializing it turns the trip count into a literal.
__global__ void repeat_axpy(int n, int rounds, float a, const float *x,
                            float *y) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i >= n)
    return;
  float acc = y[i];
  for (int r = 0; r < rounds; r++)
    acc += scale(x[i], a);
  y[i] = acc;
}

extern "C" __global__ void vecadd(const float *a, const float *b, float *c,
                                  int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i < n)
    c[i] = a[i] + b[i];
}

// A device global the host reads and writes by name.
__device__ float g_total;
extern "C" __global__ void accumulate(const float *x, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i < n)
    __nvvm_atom_add_gen_f(&g_total, x[i]);
}

// The standard normal distribution's cumulative function, by the usual
// polynomial approximation.
__device__ float normal_cdf(float d) {
  float k = 1.0f / (1.0f + 0.2316419f * (d < 0 ? -d : d));
  float poly =
      k * (0.31938153f +
           k * (-0.356563782f +
                k * (1.781477937f + k * (-1.821255978f + k * 1.330274429f))));
  float cnd = 0.3989422804f * __nvvm_ex2_approx_f(-0.72134752f * d * d) * poly;
  return d > 0 ? 1.0f - cnd : cnd;
}

// European options priced from two float arguments: rate + 0.5 vol^2 is a
// product of arguments added to an argument, which the code generator
// fuses into one fma, and the put price is a difference of near-equal
// terms, so one unit in the last place there shows up large in small puts.
extern "C" __global__ void price_options(float *call, float *put,
                                         const float *spot, const float *strike,
                                         const float *years, float rate,
                                         float vol, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i >= n)
    return;
  float s = spot[i], k = strike[i], t = years[i];
  float root_t = __nvvm_sqrt_rn_f(t);
  float d1 = (0.69314718f * __nvvm_lg2_approx_f(s / k) +
              (rate + 0.5f * vol * vol) * t) /
             (vol * root_t);
  float d2 = d1 - vol * root_t;
  float discount = __nvvm_ex2_approx_f(-1.44269504f * rate * t);
  float n1 = normal_cdf(d1), n2 = normal_cdf(d2);
  call[i] = s * n1 - k * discount * n2;
  put[i] = k * discount * (1.0f - n2) - s * (1.0f - n1);
}

// Half precision: a*a + b of two folded arguments is fused as in float.
extern "C" __global__ void scale_half(_Float16 *y, const _Float16 *x,
                                      _Float16 a, _Float16 b, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i < n)
    y[i] = x[i] * (a * a + b) + x[i];
}

// Brain float: the same on bfloat16.
extern "C" __global__ void scale_bf16(__bf16 *y, const __bf16 *x, __bf16 a,
                                      __bf16 b, int n) {
  int i = __nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
          __nvvm_read_ptx_sreg_tid_x();
  if (i < n)
    y[i] = x[i] * (a * a + b) + x[i];
}
