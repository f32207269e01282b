// dynshared: per-block sum reduction in dynamic shared memory
// (extern __shared__, size given at launch), then the host adds the block
// sums. Integer data keeps the result exact.
#include <vector>

#include "../common/check.h"

__global__ void block_sum(const unsigned int *in, unsigned int *block_sums,
                          int n) {
  extern __shared__ unsigned int partial[];
  unsigned int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  partial[t] = i < n ? in[i] : 0u;
  __syncthreads();
  for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride)
      partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0)
    block_sums[blockIdx.x] = partial[0];
}

int main() {
  const int n = 1 << 22, block = 512, blocks = (n + block - 1) / block;
  std::vector<unsigned int> in(n), sums(blocks);
  unsigned long long want = 0;
  for (int i = 0; i < n; ++i) {
    in[i] = unsigned(i % 17) + 1u;
    want += in[i];
  }
  unsigned int *d_in, *d_sums;
  CHECK(cudaMalloc(&d_in, n * sizeof(unsigned int)));
  CHECK(cudaMalloc(&d_sums, blocks * sizeof(unsigned int)));
  CHECK(cudaMemcpy(d_in, in.data(), n * sizeof(unsigned int),
                   cudaMemcpyHostToDevice));
  block_sum<<<blocks, block, block * sizeof(unsigned int)>>>(d_in, d_sums, n);
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(sums.data(), d_sums, blocks * sizeof(unsigned int),
                   cudaMemcpyDeviceToHost));
  unsigned long long got = 0;
  for (unsigned int s : sums)
    got += s;
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_sums));
  bool ok = got == want;
  std::printf("dynshared n=%d blocks=%d shared=%zu sum=%llu %s\n", n, blocks,
              block * sizeof(unsigned int), got, ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
