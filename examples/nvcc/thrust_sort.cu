// thrust::sort and thrust::reduce on 1 Mi integers; prints the sum and the
// first and last elements, exits non-zero when the result is wrong.
#include <thrust/device_vector.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>

#include <cstdio>

int main() {
  const int n = 1 << 20;
  thrust::device_vector<int> v(n);
  thrust::sequence(v.begin(), v.end(), n, -1); // n, n-1, ..., 1
  thrust::sort(v.begin(), v.end());
  long long sum = thrust::reduce(v.begin(), v.end(), 0LL);
  int first = v[0], last = v[n - 1];
  bool ok = sum == (long long)n * (n + 1) / 2 && first == 1 && last == n;
  printf("thrust_sort: sum %lld first %d last %d %s\n", sum, first, last,
         ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}
