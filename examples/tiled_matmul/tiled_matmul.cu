// tiled_matmul: C = alpha * A * B + beta * C in single precision (row-major,
// M x K times K x N, sizes that are not multiples of the tile) with the
// classic shared-memory tiling: each block stages a TILE x TILE tile of A and
// of B per step in static shared memory, indexed by threadIdx.y/x, and each
// thread finds its element from blockDim. The kernel is written for blocks of
// exactly TILE x TILE threads and is wrong for any other shape: a narrower or
// shorter block leaves tile entries unloaded, a wider or taller one writes
// past a tile's rows (or past the shared array). A tuner that changes this
// kernel's block shape must see its verification fail.
// The host checks a lattice of about 4,800 entries of C, edges included.
#include <cmath>
#include <vector>

#include "../common/check.h"
#include "../common/timer.h"

constexpr int TILE = 16;

__global__ void sgemm_tiled(const float *__restrict__ A,
                            const float *__restrict__ B, float *C, int M, int N,
                            int K, float alpha, float beta) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * blockDim.y + ty;
  int col = blockIdx.x * blockDim.x + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += blockDim.x) {
    // Out-of-range entries load as zero so that edge tiles add nothing.
    As[ty][tx] = row < M && k0 + tx < K ? A[size_t(row) * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = k0 + ty < K && col < N ? B[size_t(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k)
      acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) {
    size_t i = size_t(row) * N + col;
    C[i] = alpha * acc + beta * C[i];
  }
}

int main() {
  const int M = 2048, N = 2000, K = 1000;
  const float alpha = 1.25f, beta = 0.5f;
  std::vector<float> A(size_t(M) * K), B(size_t(K) * N), C0(size_t(M) * N);
  unsigned s = 2024u;
  auto uniform = [&s] { // in [-1, 1)
    s = s * 1664525u + 1013904223u;
    return float(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
  };
  for (float &x : A)
    x = uniform();
  for (float &x : B)
    x = uniform();
  for (float &x : C0)
    x = uniform();
  float *dA, *dB, *dC;
  CHECK(cudaMalloc(&dA, A.size() * sizeof(float)));
  CHECK(cudaMalloc(&dB, B.size() * sizeof(float)));
  CHECK(cudaMalloc(&dC, C0.size() * sizeof(float)));
  CHECK(cudaMemcpy(dA, A.data(), A.size() * sizeof(float),
                   cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, B.data(), B.size() * sizeof(float),
                   cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dC, C0.data(), C0.size() * sizeof(float),
                   cudaMemcpyHostToDevice));
  dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  auto launch = [&] {
    sgemm_tiled<<<grid, block>>>(dA, dB, dC, M, N, K, alpha, beta);
  };
  launch();
  CHECK(cudaGetLastError());
  std::vector<float> C(C0.size());
  CHECK(cudaMemcpy(C.data(), dC, C.size() * sizeof(float),
                   cudaMemcpyDeviceToHost));
  // The timed launches update C again in place; only the first result is
  // checked.
  time_kernel("sgemm_tiled", 2, 10, launch);

  // Rows 0, 31, 62, ... and columns 0, 29, 58, ... plus the last row and
  // column. The error of a float dot product of K terms is bounded by about
  // K * 2^-24 times the sum of the terms' magnitudes; 1e-5 of that sum is the
  // typical error with room to spare, and a mistiled result is off by O(1).
  std::vector<int> rows, cols;
  for (int r = 0; r < M; r += 31)
    rows.push_back(r);
  for (int c = 0; c < N; c += 29)
    cols.push_back(c);
  rows.push_back(M - 1);
  cols.push_back(N - 1);
  int bad = 0, checked = 0;
  double worst = 0;
  for (int r : rows)
    for (int c : cols) {
      double dot = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        double t = double(A[size_t(r) * K + k]) * B[size_t(k) * N + c];
        dot += t;
        mag += std::fabs(t);
      }
      size_t i = size_t(r) * N + c;
      double want = alpha * dot + beta * double(C0[i]);
      double err =
          std::fabs(C[i] - want) / (alpha * mag + beta * std::fabs(C0[i]));
      worst = std::fmax(worst, err);
      ++checked;
      if (!(err < 1e-5) && bad++ < 5)
        std::fprintf(stderr, "C[%d][%d]: gpu %.9g host %.9g\n", r, c, C[i],
                     want);
    }
  double sum = 0;
  for (float x : C)
    sum += x;
  CHECK(cudaFree(dA));
  CHECK(cudaFree(dB));
  CHECK(cudaFree(dC));
  std::printf(
      "tiled_matmul M=%d N=%d K=%d tile=%d checksum=%.4f checked=%d %s\n", M, N,
      K, TILE, sum, checked, bad == 0 ? "OK" : "MISMATCH");
  return bad == 0 ? 0 : 1;
}
