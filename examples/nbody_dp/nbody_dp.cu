// nbody_dp: one kick of an all-pairs gravitational n-body step in double
// precision over 32 Ki bodies of a Plummer-like cluster: softened forces with
// rsqrt, the potential per body, the new velocities and an acceleration-based
// time-step estimate with sqrt. Tiled through shared memory: each block stages
// 256 bodies at a time in a static tile; the tile's size does not depend on
// the block size (the block's threads load it cooperatively), so any 1D block
// shape gives the same result. The host recomputes 512 bodies exactly.
#include <cmath>
#include <vector>

#include "../common/check.h"
#include "../common/timer.h"

constexpr int kTile = 256; // bodies staged in shared memory per round

// Position and mass, and acceleration and potential, as one 32-byte-aligned
// record each so that a body is read in wide loads (CUDA 13 deprecates double4
// for its ambiguous alignment).
struct alignas(32) Vec4 {
  double x, y, z, w;
};

__global__ void nbody_kick(const Vec4 *__restrict__ pos_mass,
                           const double3 *__restrict__ vel, double3 *vel_out,
                           Vec4 *acc_pot, double *dt_body, int n, double G,
                           double eps2, double dt, double eta) {
  __shared__ Vec4 tile[kTile];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  // Threads past n still help load tiles and reach every barrier.
  Vec4 me = i < n ? pos_mass[i] : Vec4{0, 0, 0, 0};
  double ax = 0, ay = 0, az = 0, pot = 0;
  for (int base = 0; base < n; base += kTile) {
    for (int k = threadIdx.x; k < kTile; k += blockDim.x)
      tile[k] = base + k < n ? pos_mass[base + k] : Vec4{0, 0, 0, 0};
    __syncthreads();
    int m = min(kTile, n - base);
    for (int j = 0; j < m; ++j) {
      Vec4 o = tile[j];
      double dx = o.x - me.x, dy = o.y - me.y, dz = o.z - me.z;
      double inv_r = rsqrt(dx * dx + dy * dy + dz * dz + eps2);
      double w = o.w * inv_r; // m_j / r
      double w3 = w * inv_r * inv_r;
      ax += w3 * dx;
      ay += w3 * dy;
      az += w3 * dz;
      pot -= w;
    }
    __syncthreads();
  }
  if (i >= n)
    return;
  ax *= G;
  ay *= G;
  az *= G;
  double3 v = vel[i];
  vel_out[i] = make_double3(v.x + dt * ax, v.y + dt * ay, v.z + dt * az);
  acc_pot[i] = Vec4{ax, ay, az, G * pot};
  // Aarseth-style criterion: dt_i = eta * sqrt(eps / |a|).
  dt_body[i] = eta * sqrt(sqrt(eps2) / sqrt(ax * ax + ay * ay + az * az));
}

int main() {
  const int n = 32768, block = 128;
  const double G = 1.0, eps = 0.01, eps2 = eps * eps, dt = 1.0e-3, eta = 0.02;
  std::vector<Vec4> pm(n);
  std::vector<double3> v(n);
  // Deterministic Plummer-like sphere: radii from the Plummer mass profile,
  // directions and velocities from a 64-bit LCG; equal masses adding to 1.
  unsigned long long s = 0x9E3779B97F4A7C15ull;
  auto uniform = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return double(s >> 11) * (1.0 / 9007199254740992.0);
  };
  for (int i = 0; i < n; ++i) {
    double x = 0.02 + 0.96 * uniform();
    double r = 1.0 / std::sqrt(std::pow(x, -2.0 / 3.0) - 1.0);
    double ct = 2.0 * uniform() - 1.0, st = std::sqrt(1.0 - ct * ct),
           ph = 6.283185307179586 * uniform();
    pm[i] = Vec4{r * st * std::cos(ph), r * st * std::sin(ph), r * ct, 1.0 / n};
    double vs = 0.5 * std::pow(1.0 + r * r, -0.25);
    v[i] = make_double3(vs * (uniform() - 0.5), vs * (uniform() - 0.5),
                        vs * (uniform() - 0.5));
  }
  Vec4 *d_pm, *d_ap;
  double3 *d_v, *d_vo;
  double *d_dt;
  CHECK(cudaMalloc(&d_pm, n * sizeof(Vec4)));
  CHECK(cudaMalloc(&d_ap, n * sizeof(Vec4)));
  CHECK(cudaMalloc(&d_v, n * sizeof(double3)));
  CHECK(cudaMalloc(&d_vo, n * sizeof(double3)));
  CHECK(cudaMalloc(&d_dt, n * sizeof(double)));
  CHECK(cudaMemcpy(d_pm, pm.data(), n * sizeof(Vec4), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_v, v.data(), n * sizeof(double3), cudaMemcpyHostToDevice));
  auto launch = [&] {
    nbody_kick<<<(n + block - 1) / block, block>>>(d_pm, d_v, d_vo, d_ap, d_dt,
                                                   n, G, eps2, dt, eta);
  };
  launch();
  CHECK(cudaGetLastError());
  std::vector<Vec4> ap(n);
  std::vector<double3> vo(n);
  std::vector<double> dtb(n);
  CHECK(cudaMemcpy(ap.data(), d_ap, n * sizeof(Vec4), cudaMemcpyDeviceToHost));
  CHECK(
      cudaMemcpy(vo.data(), d_vo, n * sizeof(double3), cudaMemcpyDeviceToHost));
  CHECK(
      cudaMemcpy(dtb.data(), d_dt, n * sizeof(double), cudaMemcpyDeviceToHost));
  time_kernel("nbody_kick", 2, 10, launch);

  // The host sums in the same order as the kernel, so only rounding (fused
  // multiply-adds, the device's rsqrt) separates them: 1e-10 relative.
  int bad = 0, checked = 0;
  for (int i = 0; i < n; i += 64, ++checked) {
    double ax = 0, ay = 0, az = 0, pot = 0;
    for (int j = 0; j < n; ++j) {
      double dx = pm[j].x - pm[i].x, dy = pm[j].y - pm[i].y,
             dz = pm[j].z - pm[i].z;
      double inv_r = 1.0 / std::sqrt(dx * dx + dy * dy + dz * dz + eps2);
      double w = pm[j].w * inv_r, w3 = w * inv_r * inv_r;
      ax += w3 * dx;
      ay += w3 * dy;
      az += w3 * dz;
      pot -= w;
    }
    ax *= G, ay *= G, az *= G;
    double amag = std::sqrt(ax * ax + ay * ay + az * az);
    double want_dt = eta * std::sqrt(eps / amag);
    // Components are compared against |a| so that a component near zero does
    // not demand a relative accuracy that cancellation cannot give.
    double e =
        std::fmax(std::fabs(ap[i].x - ax),
                  std::fmax(std::fabs(ap[i].y - ay), std::fabs(ap[i].z - az))) /
        amag;
    e = std::fmax(e, std::fabs(ap[i].w - G * pot) / std::fabs(G * pot));
    e = std::fmax(e, std::fabs(vo[i].x - (v[i].x + dt * ax)) /
                         (std::fabs(v[i].x) + dt * amag));
    e = std::fmax(e, std::fabs(dtb[i] - want_dt) / want_dt);
    if (!(e < 1e-10) && bad++ < 5)
      std::fprintf(stderr,
                   "body %d: gpu a=(%.17g %.17g %.17g) pot=%.17g, host "
                   "a=(%.17g %.17g %.17g) pot=%.17g\n",
                   i, ap[i].x, ap[i].y, ap[i].z, ap[i].w, ax, ay, az, G * pot);
  }
  // Momentum conservation: the forces of equal masses sum to nearly zero.
  double px = 0, py = 0, pz = 0, epot = 0, dtmin = 1e300;
  for (int i = 0; i < n; ++i) {
    px += pm[i].w * ap[i].x;
    py += pm[i].w * ap[i].y;
    pz += pm[i].w * ap[i].z;
    epot += 0.5 * pm[i].w * ap[i].w;
    dtmin = std::fmin(dtmin, dtb[i]);
  }
  CHECK(cudaFree(d_pm));
  CHECK(cudaFree(d_ap));
  CHECK(cudaFree(d_v));
  CHECK(cudaFree(d_vo));
  CHECK(cudaFree(d_dt));
  bool ok = bad == 0 && std::fabs(px) + std::fabs(py) + std::fabs(pz) < 1e-9;
  std::printf("nbody_dp n=%d epot=%.12f dt_min=%.9e checked=%d %s\n", n, epot,
              dtmin, checked, ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
