// Proteus's run-time specialization annotations: one kernel asks for its
// first and third arguments, another carries an unrelated annotation.
#define __global__ __attribute__((global))

extern "C" __global__ __attribute__((annotate("jit", 1, 3))) void
scaled(int n, float *y, float a) {
  if (n > 0)
    y[0] = a * n;
}

extern "C" __global__ __attribute__((annotate("hot"))) void plain(float *y) {
  y[0] = 1;
}

extern "C" __global__ __attribute__((annotate("jit"))) void noargs(float *y,
                                                                   int n) {
  y[n] = 0;
}
