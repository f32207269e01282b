// bigmem: explicit heat diffusion with a variable conductivity, a 7-point
// stencil on a 1024 x 1024 x 768 grid, with three 3 GiB arrays (two
// temperature fields and the conductivity): 9 GiB of device memory in three
// cudaMalloc calls, so that element offsets reach past 2^31 bytes and a
// recording has gigabytes to capture. The fields are filled on the device and
// only 4096 sampled points come back; the host recomputes those points alone
// from their neighbourhoods. On a GPU with too little free memory it prints a
// SKIP line and exits 0.
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "../common/check.h"
#include "../common/timer.h"

// Initial temperature and conductivity: exact binary fractions, so that the
// device's fill and the host's reference agree bit for bit.
__host__ __device__ inline float temp0(unsigned x, unsigned y, unsigned z) {
  return float((x * 7u + y * 13u + z * 29u) & 1023u) * (1.0f / 1024.0f);
}
__host__ __device__ inline float conductivity(unsigned x, unsigned y,
                                              unsigned z) {
  return 0.5f + float((x * 3u + y * 5u + z * 11u) & 63u) * (1.0f / 128.0f);
}

__global__ void fill(float *u0, float *u1, float *kap, int nx, int ny, int nz) {
  int x = blockIdx.x * blockDim.x + threadIdx.x,
      y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x >= nx || y >= ny || z >= nz)
    return;
  size_t i = (size_t(z) * ny + y) * nx + x;
  u0[i] = u1[i] = temp0(x, y, z);
  kap[i] = conductivity(x, y, z);
}

// One explicit step; the boundary keeps its initial temperature. r = D dt / h^2
// with kappa <= 1 keeps 6 r kappa below 1 (stable).
__global__ void heat7(const float *__restrict__ u,
                      const float *__restrict__ kap, float *__restrict__ un,
                      int nx, int ny, int nz, float r) {
  int x = blockIdx.x * blockDim.x + threadIdx.x,
      y = blockIdx.y * blockDim.y + threadIdx.y;
  int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x < 1 || y < 1 || z < 1 || x >= nx - 1 || y >= ny - 1 || z >= nz - 1)
    return;
  const size_t sy = nx, sz = size_t(nx) * ny, i = z * sz + y * sy + x;
  float lap = u[i - 1] + u[i + 1] + u[i - sy] + u[i + sy] + u[i - sz] +
              u[i + sz] - 6.0f * u[i];
  un[i] = u[i] + r * kap[i] * lap;
}

__global__ void gather(const float *u, const size_t *idx, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = u[idx[i]];
}

struct Grid {
  int nx, ny, nz;
  float r;
  bool interior(int x, int y, int z) const {
    return x > 0 && y > 0 && z > 0 && x < nx - 1 && y < ny - 1 && z < nz - 1;
  }
  // The temperature at (x, y, z) after `steps` steps, from the neighbourhood
  // alone.
  float at(int x, int y, int z, int steps) const {
    if (steps == 0 || !interior(x, y, z))
      return temp0(x, y, z);
    float c = at(x, y, z, steps - 1);
    float lap = at(x - 1, y, z, steps - 1) + at(x + 1, y, z, steps - 1) +
                at(x, y - 1, z, steps - 1) + at(x, y + 1, z, steps - 1) +
                at(x, y, z - 1, steps - 1) + at(x, y, z + 1, steps - 1) -
                6.0f * c;
    return c + r * conductivity(x, y, z) * lap;
  }
};

int main() {
  const Grid g{1024, 1024, 768, 0.1f};
  const int steps = 2, samples = 4096;
  const size_t cells = size_t(g.nx) * g.ny * g.nz,
               bytes = cells * sizeof(float);
  const double gib = 1024.0 * 1024.0 * 1024.0;
  size_t free_b = 0, total_b = 0;
  CHECK(cudaMemGetInfo(&free_b, &total_b));
  // Three arrays plus room for the sample buffers and the allocator's
  // granularity.
  const size_t need = 3 * bytes + (size_t(256) << 20);
  if (free_b < need) {
    std::printf("bigmem SKIP: needs %.2f GiB of device memory, %.2f GiB free "
                "of %.2f GiB\n",
                need / gib, double(free_b) / gib, double(total_b) / gib);
    return 0;
  }
  float *u0, *u1, *kap;
  CHECK(cudaMalloc(&u0, bytes));
  CHECK(cudaMalloc(&u1, bytes));
  CHECK(cudaMalloc(&kap, bytes));
  dim3 block(32, 8, 1), grid((g.nx + 31) / 32, (g.ny + 7) / 8, g.nz);
  fill<<<grid, block>>>(u0, u1, kap, g.nx, g.ny, g.nz);
  CHECK(cudaGetLastError());
  for (int s = 0; s < steps; ++s) {
    heat7<<<grid, block>>>(u0, kap, u1, g.nx, g.ny, g.nz, g.r);
    CHECK(cudaGetLastError());
    std::swap(u0, u1);
  }

  // Samples: random points anywhere (a few on the boundary), the corners of
  // the interior, and points in the last gigabyte of each array.
  std::vector<int> sx, sy, sz;
  unsigned s = 777u;
  auto next = [&s](int n) {
    s = s * 1664525u + 1013904223u;
    return int((unsigned long long)(s >> 4) * unsigned(n) >> 28);
  };
  for (int k = 0; k < samples; ++k) {
    int x = next(g.nx), y = next(g.ny),
        z = k % 4 == 0 ? g.nz - 1 - next(g.nz / 3) : next(g.nz);
    if (k < 8)
      x = k & 1 ? g.nx - 2 : 1, y = k & 2 ? g.ny - 2 : 1,
      z = k & 4 ? g.nz - 2 : 1;
    sx.push_back(x), sy.push_back(y), sz.push_back(z);
  }
  std::vector<size_t> idx(samples);
  for (int k = 0; k < samples; ++k)
    idx[k] = (size_t(sz[k]) * g.ny + sy[k]) * g.nx + sx[k];
  size_t *d_idx;
  float *d_out;
  CHECK(cudaMalloc(&d_idx, samples * sizeof(size_t)));
  CHECK(cudaMalloc(&d_out, samples * sizeof(float)));
  CHECK(cudaMemcpy(d_idx, idx.data(), samples * sizeof(size_t),
                   cudaMemcpyHostToDevice));
  gather<<<(samples + 255) / 256, 256>>>(u0, d_idx, d_out, samples);
  CHECK(cudaGetLastError());
  std::vector<float> got(samples);
  CHECK(cudaMemcpy(got.data(), d_out, samples * sizeof(float),
                   cudaMemcpyDeviceToHost));

  // More steps to time, ping-ponging between the two fields.
  time_kernel("heat7", 1, 5, [&] {
    heat7<<<grid, block>>>(u0, kap, u1, g.nx, g.ny, g.nz, g.r);
    std::swap(u0, u1);
  });

  int bad = 0;
  double sum = 0, worst = 0;
  for (int k = 0; k < samples; ++k) {
    float want = g.at(sx[k], sy[k], sz[k], steps);
    double e = rel_diff(got[k], want);
    worst = std::fmax(worst, e);
    sum += got[k];
    if (!(e < 1e-5) && bad++ < 5)
      std::fprintf(stderr, "(%d,%d,%d): gpu %.9g host %.9g\n", sx[k], sy[k],
                   sz[k], got[k], want);
  }
  for (float *p : {u0, u1, kap, d_out})
    CHECK(cudaFree(p));
  CHECK(cudaFree(d_idx));
  std::printf(
      "bigmem %dx%dx%d arrays=3x%.2fGiB steps=%d samples=%d checksum=%.6f %s\n",
      g.nx, g.ny, g.nz, bytes / gib, steps, samples, sum,
      bad == 0 ? "OK" : "MISMATCH");
  return bad == 0 ? 0 : 1;
}
