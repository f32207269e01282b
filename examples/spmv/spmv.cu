// spmv: y = A x for a CSR sparse matrix (256 Ki rows, 1 to 32 nonzeros per
// row at pseudo-random columns), one thread per row. Checks y against the
// host and prints a checksum.
#include <cmath>
#include <cstdint>
#include <vector>

#include "../common/check.h"

__global__ void spmv_csr(int rows, const int *row_ptr, const int *cols,
                         const float *vals, const float *x, float *y) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows)
    return;
  float acc = 0.0f;
  for (int k = row_ptr[r]; k < row_ptr[r + 1]; ++k)
    acc += vals[k] * x[cols[k]];
  y[r] = acc;
}

int main() {
  const int rows = 1 << 18;
  uint32_t seed = 12345;
  auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
  };
  std::vector<int> row_ptr(rows + 1), cols;
  std::vector<float> vals, x(rows), y(rows);
  for (int r = 0; r < rows; ++r) {
    row_ptr[r] = int(cols.size());
    int nnz = 1 + next() % 32;
    for (int k = 0; k < nnz; ++k) {
      cols.push_back(int(next() % rows));
      vals.push_back(float(next() % 1000) / 500.0f - 1.0f);
    }
  }
  row_ptr[rows] = int(cols.size());
  for (int i = 0; i < rows; ++i)
    x[i] = float(i % 97) / 97.0f;
  const int nnz = int(cols.size());

  int *d_row_ptr, *d_cols;
  float *d_vals, *d_x, *d_y;
  CHECK(cudaMalloc(&d_row_ptr, (rows + 1) * sizeof(int)));
  CHECK(cudaMalloc(&d_cols, nnz * sizeof(int)));
  CHECK(cudaMalloc(&d_vals, nnz * sizeof(float)));
  CHECK(cudaMalloc(&d_x, rows * sizeof(float)));
  CHECK(cudaMalloc(&d_y, rows * sizeof(float)));
  CHECK(cudaMemcpy(d_row_ptr, row_ptr.data(), (rows + 1) * sizeof(int),
                   cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_cols, cols.data(), nnz * sizeof(int),
                   cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_vals, vals.data(), nnz * sizeof(float),
                   cudaMemcpyHostToDevice));
  CHECK(
      cudaMemcpy(d_x, x.data(), rows * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d_y, 0, rows * sizeof(float)));
  const int block = 128;
  spmv_csr<<<(rows + block - 1) / block, block>>>(rows, d_row_ptr, d_cols,
                                                  d_vals, d_x, d_y);
  CHECK(cudaGetLastError());
  CHECK(
      cudaMemcpy(y.data(), d_y, rows * sizeof(float), cudaMemcpyDeviceToHost));

  double sum = 0, worst = 0;
  for (int r = 0; r < rows; ++r) {
    double ref = 0;
    for (int k = row_ptr[r]; k < row_ptr[r + 1]; ++k)
      ref += double(vals[k]) * x[cols[k]];
    worst = std::fmax(worst, rel_diff(y[r], ref));
    sum += y[r];
  }
  CHECK(cudaFree(d_row_ptr));
  CHECK(cudaFree(d_cols));
  CHECK(cudaFree(d_vals));
  CHECK(cudaFree(d_x));
  CHECK(cudaFree(d_y));
  bool ok = worst < 1e-4;
  std::printf("spmv rows=%d nnz=%d checksum=%.4f %s\n", rows, nnz, sum,
              ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
