// blockprobe: a kernel that writes the block size it ran with into every
// element it covers, so that the output shows the launch geometry the GPU
// actually ran: under a deployed tuned block it prints that block, with
// every element still covered once.
#include <vector>

#include "../common/check.h"

__global__ void probe(unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = blockDim.x;
}

int main() {
  const int n = 1 << 20, block = 256;
  unsigned *d;
  CHECK(cudaMalloc(&d, n * sizeof(unsigned)));
  CHECK(cudaMemset(d, 0, n * sizeof(unsigned)));
  probe<<<(n + block - 1) / block, block>>>(d, n);
  CHECK(cudaGetLastError());
  std::vector<unsigned> out(n);
  CHECK(
      cudaMemcpy(out.data(), d, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d));
  unsigned lo = out[0], hi = out[0];
  int covered = 0;
  for (unsigned v : out) {
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    covered += v != 0;
  }
  std::printf("blockprobe n=%d block=%u..%u covered=%d\n", n, lo, hi, covered);
  return covered == n ? 0 : 1;
}
