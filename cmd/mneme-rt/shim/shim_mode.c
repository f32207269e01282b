/* The mode: whether this process is being recorded, and tracing. */
#include "shim_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int mneme_recording;

/* MNEME_TRACE: the file where a recording's steps are timed (see
 * record.EnvTrace); NULL when not tracing. */
static const char *trace_path;

void mneme_trace(const char *event) {
  if (trace_path == NULL)
    return;
  int fd = open(trace_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  char line[160];
  int n = snprintf(line, sizeof line, "%lld %d shim %s\n",
                   (long long)t.tv_sec * 1000000000LL + t.tv_nsec,
                   (int)getpid(), event);
  if (n > 0 && write(fd, line, (size_t)n) < 0)
    n = 0; /* tracing must not disturb the application */
  close(fd);
}

__attribute__((constructor(101))) static void mneme_read_environment(void) {
  const char *r = getenv("MNEME_RECORD");
  mneme_recording = r != NULL && r[0] != '\0' && strcmp(r, "0") != 0;
  const char *t = getenv("MNEME_TRACE");
  trace_path = t != NULL && t[0] != '\0' ? t : NULL;
  mneme_trace("start");
}
