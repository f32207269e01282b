/* Loads a CUDA injection library the way the driver does (dlopen, then
 * InitializeInjection) and prints what happened. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    printf("dlopen failed: %s\n", dlerror());
    return 1;
  }
  int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
  if (init == NULL) {
    printf("no InitializeInjection\n");
    return 1;
  }
  printf("InitializeInjection returned %d\n", init());
  return 0;
}
