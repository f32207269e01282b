// pointers: kernels whose inputs hold device pointers. scale_buffers gets an
// array of pointers to separately allocated buffers; sum_list walks a linked
// list whose nodes live in device memory and point to each other. Replaying
// them needs every buffer back at its recorded address.
#include <vector>

#include "../common/check.h"

struct Node {
  float value;
  const Node *next;
};

__global__ void scale_buffers(float *const *buffers, const int *lengths,
                              int count) {
  int b = blockIdx.y;
  if (b >= count)
    return;
  float *buf = buffers[b];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < lengths[b];
       i += gridDim.x * blockDim.x)
    buf[i] *= float(b + 1);
}

__global__ void sum_list(const Node *head, float *out) {
  float s = 0.0f;
  for (const Node *p = head; p != nullptr; p = p->next)
    s += p->value;
  *out = s;
}

int main() {
  const int count = 8, nodes = 1000;
  std::vector<float *> d_buffers(count);
  std::vector<int> lengths(count);
  std::vector<std::vector<float>> host(count);
  for (int b = 0; b < count; ++b) {
    lengths[b] = 1000 + 5000 * b;
    host[b].resize(lengths[b]);
    for (int i = 0; i < lengths[b]; ++i)
      host[b][i] = float(i % 50) * 0.25f;
    CHECK(cudaMalloc(&d_buffers[b], lengths[b] * sizeof(float)));
    CHECK(cudaMemcpy(d_buffers[b], host[b].data(), lengths[b] * sizeof(float),
                     cudaMemcpyHostToDevice));
  }
  float **d_table;
  int *d_lengths;
  CHECK(cudaMalloc(&d_table, count * sizeof(float *)));
  CHECK(cudaMalloc(&d_lengths, count * sizeof(int)));
  CHECK(cudaMemcpy(d_table, d_buffers.data(), count * sizeof(float *),
                   cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_lengths, lengths.data(), count * sizeof(int),
                   cudaMemcpyHostToDevice));
  scale_buffers<<<dim3(16, count), 256>>>(d_table, d_lengths, count);
  CHECK(cudaGetLastError());

  // The list's nodes sit in one allocation in reverse order, so following
  // `next` jumps backwards through device memory.
  Node *d_nodes;
  float *d_sum;
  CHECK(cudaMalloc(&d_nodes, nodes * sizeof(Node)));
  CHECK(cudaMalloc(&d_sum, sizeof(float)));
  std::vector<Node> list(nodes);
  float want_sum = 0.0f;
  for (int k = 0; k < nodes; ++k) {
    int slot = nodes - 1 - k;
    list[slot].value = float(k % 10);
    list[slot].next = k + 1 < nodes ? d_nodes + (nodes - 2 - k) : nullptr;
    want_sum += list[slot].value;
  }
  CHECK(cudaMemcpy(d_nodes, list.data(), nodes * sizeof(Node),
                   cudaMemcpyHostToDevice));
  sum_list<<<1, 1>>>(d_nodes + (nodes - 1), d_sum);
  CHECK(cudaGetLastError());

  int bad = 0;
  double checksum = 0;
  for (int b = 0; b < count; ++b) {
    std::vector<float> got(lengths[b]);
    CHECK(cudaMemcpy(got.data(), d_buffers[b], lengths[b] * sizeof(float),
                     cudaMemcpyDeviceToHost));
    for (int i = 0; i < lengths[b]; ++i) {
      if (got[i] != host[b][i] * float(b + 1))
        ++bad;
      checksum += got[i];
    }
    CHECK(cudaFree(d_buffers[b]));
  }
  float sum = 0;
  CHECK(cudaMemcpy(&sum, d_sum, sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(d_table));
  CHECK(cudaFree(d_lengths));
  CHECK(cudaFree(d_nodes));
  CHECK(cudaFree(d_sum));
  bool ok = bad == 0 && sum == want_sum;
  std::printf(
      "pointers buffers=%d checksum=%.2f list_nodes=%d list_sum=%.1f %s\n",
      count, checksum, nodes, sum, ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
