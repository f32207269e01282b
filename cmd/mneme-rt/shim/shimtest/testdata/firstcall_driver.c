/* firstcall_driver: dlopens a c-shared Go library (argv[1]) and times calls
 * into its mneme_bench_noop: the first from the loading thread, the first
 * from a thread the Go runtime has not seen, that thread's later calls, and
 * the first from a second new thread. With argv[2], it first times dlopen of
 * that library too (the runtime library's load). Prints name=ns pairs. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int (*noop)(void);
enum { NEXT = 1000 };

struct timing {
  long long first, next;
};

static void *on_thread(void *arg) {
  struct timing *t = arg;
  long long a = now_ns();
  noop();
  long long b = now_ns();
  for (int i = 0; i < NEXT; i++)
    noop();
  t->first = b - a;
  t->next = (now_ns() - b) / NEXT;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: firstcall_driver LIB [OTHER_LIB]\n");
    return 2;
  }
  if (argc > 2) {
    long long a = now_ns();
    void *other = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    printf("other_dlopen_ns=%lld ", now_ns() - a);
    if (other == NULL) {
      fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
  }
  long long a = now_ns();
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  long long opened = now_ns();
  if (lib == NULL ||
      (noop = (int (*)(void))dlsym(lib, "mneme_bench_noop")) == NULL) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  noop();
  long long first = now_ns();
  struct timing t1, t2;
  pthread_t th;
  pthread_create(&th, NULL, on_thread, &t1);
  pthread_join(th, NULL);
  pthread_create(&th, NULL, on_thread, &t2);
  pthread_join(th, NULL);
  printf("dlopen_ns=%lld main_first_ns=%lld thread_first_ns=%lld "
         "thread_next_ns=%lld thread2_first_ns=%lld\n",
         opened - a, first - opened, t1.first, t1.next, t2.first);
  return 0;
}
