// A program of two translation units: this one fills four device rows and
// a device table of pointers to them; the other launches a kernel that
// reads through the table. Prints a checksum, exits non-zero if wrong.
#include <cstdio>
#include <vector>

#include "multifile.h"

__global__ void fill(float *row, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    row[i] = v + i % 7;
}

int main() {
  const int n = 1 << 18;
  float *rows[4], **table, *out;
  for (int r = 0; r < 4; r++) {
    cudaMalloc(&rows[r], n * sizeof(float));
    fill<<<(n + 255) / 256, 256>>>(rows[r], n, (float)r);
  }
  cudaMalloc(&table, sizeof rows);
  cudaMemcpy(table, rows, sizeof rows, cudaMemcpyHostToDevice);
  cudaMalloc(&out, n * sizeof(float));
  launch_gather(table, out, n);
  std::vector<float> h(n);
  cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost);
  double sum = 0;
  bool ok = true;
  for (int i = 0; i < n; i++) {
    sum += h[i];
    ok = ok && h[i] == 2.0f * ((float)(i % 4) + i % 7);
  }
  printf("multifile: checksum %.1f %s\n", sum, ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}
