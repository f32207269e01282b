// Helpers shared by the examples: abort with a clear message on a CUDA error.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess) {                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,       \
                   cudaGetErrorString(err_));                                  \
      std::exit(2);                                                            \
    }                                                                          \
  } while (0)

// Relative difference that treats tiny values as absolute.
inline double rel_diff(double a, double b) {
  double d = a > b ? a - b : b - a;
  double m = (a < 0 ? -a : a) > 1.0 ? (a < 0 ? -a : a) : 1.0;
  return d / m;
}
