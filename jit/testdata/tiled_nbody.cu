// A double-precision n-body kernel with the traits of CUDA code compiled
// without CUDA headers (-nocudainc): the thread indices come through inline
// member functions, as CUDA's threadIdx and blockIdx do (linkonce_odr
// definitions), and a static shared tile is loaded by a block-strided loop.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))

struct Index {
  __device__ static unsigned tid() { return __nvvm_read_ptx_sreg_tid_x(); }
  __device__ static unsigned ntid() { return __nvvm_read_ptx_sreg_ntid_x(); }
  __device__ static unsigned ctaid() { return __nvvm_read_ptx_sreg_ctaid_x(); }
};

struct Body {
  double x, y, z, m;
};

constexpr int kTile = 256;

__global__ void kick(const Body *__restrict__ bodies, double *acc, int n,
                     double eps2) {
  __shared__ Body tile[kTile];
  int i = Index::ctaid() * Index::ntid() + Index::tid();
  Body me = i < n ? bodies[i] : Body{0, 0, 0, 0};
  double ax = 0, ay = 0, az = 0;
  for (int base = 0; base < n; base += kTile) {
    for (int k = Index::tid(); k < kTile; k += Index::ntid())
      tile[k] = base + k < n ? bodies[base + k] : Body{0, 0, 0, 0};
    __syncthreads();
    int m = n - base < kTile ? n - base : kTile;
    for (int j = 0; j < m; ++j) {
      double dx = tile[j].x - me.x, dy = tile[j].y - me.y,
             dz = tile[j].z - me.z;
      double inv_r = 1.0 / __builtin_sqrt(dx * dx + dy * dy + dz * dz + eps2);
      double w3 = tile[j].m * inv_r * inv_r * inv_r;
      ax += w3 * dx;
      ay += w3 * dy;
      az += w3 * dz;
    }
    __syncthreads();
  }
  if (i < n) {
    acc[3 * i] = ax;
    acc[3 * i + 1] = ay;
    acc[3 * i + 2] = az;
  }
}
