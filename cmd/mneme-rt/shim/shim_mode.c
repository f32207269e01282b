/* The mode: whether this process is being recorded or runs tuned kernels,
 * and tracing. */
#include "shim_internal.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int mneme_recording;
int mneme_deploying;
int mneme_counting;
int mneme_launch_hook;

/* MNEME_TRACE: the file where a recording's steps are timed (see
 * record.EnvTrace); NULL when not tracing. */
static const char *trace_path;

void mneme_trace(const char *event) {
  if (trace_path == NULL)
    return;
  mneme_tracef("%s", event);
}

void mneme_tracef(const char *format, ...) {
  if (trace_path == NULL)
    return;
  struct timespec t; /* the event's time, before the file is opened */
  clock_gettime(CLOCK_REALTIME, &t);
  char event[384];
  va_list ap;
  va_start(ap, format);
  vsnprintf(event, sizeof event, format, ap);
  va_end(ap);
  char line[448];
  int n = snprintf(line, sizeof line, "%lld %d shim %s\n",
                   (long long)t.tv_sec * 1000000000LL + t.tv_nsec,
                   (int)getpid(), event);
  if (n <= 0)
    return;
  if ((size_t)n >= sizeof line) {
    n = (int)sizeof line - 1;
    line[n - 1] = '\n';
  }
  /* Non-blocking, and a regular file only: a FIFO or a device named as the
   * trace must not hold up or reach into the application. */
  int fd = open(trace_path,
                O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0)
    return;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    trace_path = NULL;
    return;
  }
  if (write(fd, line, (size_t)n) < 0)
    n = 0; /* tracing must not disturb the application */
  close(fd);
}

static int set(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0';
}

static int is_off(const char *name) {
  const char *v = getenv(name);
  return v != NULL && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0 ||
                       strcmp(v, "false") == 0);
}

/* deployment_asked: a tuned file is named or kernels are annotated for
 * run-time specialization, and run-time JIT is not turned off
 * (MNEME_JIT=off, or Proteus's PROTEUS_DISABLE=1). A recording deploys only
 * when asked (MNEME_RECORD_TUNED=1, `mneme record --with-tuned-kernels`),
 * and then only for the launches it does not record: what it records is
 * always the application's own code. */
/* names_tuned_kernels: the variable names a tuned file that may list a
 * kernel. A regular file holding only an empty JSON object or array (what
 * `mneme optimize` writes when nothing helped) lists none: deploying it
 * would load the library for nothing. Anything else, unreadable files
 * included, is left to the library, which says what is wrong. */
static int names_tuned_kernels(const char *name) {
  if (!set(name))
    return 0;
  int fd = open(getenv(name), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return 1;
  struct stat st;
  char buf[64];
  ssize_t n = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < 64)
    n = read(fd, buf, sizeof buf);
  close(fd);
  if (n < 0)
    return 1;
  char seen[3] = {0};
  int k = 0;
  for (ssize_t i = 0; i < n; i++) {
    char c = buf[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
      continue;
    if (k == 2)
      return 1;
    seen[k++] = c;
  }
  return !(k == 2 && ((seen[0] == '{' && seen[1] == '}') ||
                      (seen[0] == '[' && seen[1] == ']')));
}

static int deployment_asked(void) {
  if (is_off("MNEME_JIT"))
    return 0;
  {
    const char *d = getenv("PROTEUS_DISABLE");
    if (d != NULL && d[0] != '\0' && strcmp(d, "0") != 0)
      return 0;
  }
  return names_tuned_kernels("MNEME_TUNED_KERNELS") ||
         names_tuned_kernels("PROTEUS_TUNED_KERNELS") ||
         mneme_jit_section_size() > 0;
}

__attribute__((constructor(101))) static void mneme_read_environment(void) {
  const char *r = getenv("MNEME_RECORD");
  mneme_recording = r != NULL && r[0] != '\0' && strcmp(r, "0") != 0;
  const char *rt = getenv("MNEME_RECORD_TUNED");
  int record_tuned = rt != NULL && strcmp(rt, "1") == 0;
  mneme_deploying = (!mneme_recording || record_tuned) && deployment_asked();
  /* Launch statistics outside a recording (`mneme deploy measure`): every
   * launch counted and a sample timed, written to MNEME_LAUNCH_STATS at
   * exit by the library. A recording keeps its own. */
  mneme_counting = !mneme_recording && set("MNEME_LAUNCH_STATS");
  mneme_launch_hook = mneme_recording || mneme_deploying || mneme_counting;
  const char *t = getenv("MNEME_TRACE");
  trace_path = t != NULL && t[0] != '\0' ? t : NULL;
  mneme_trace("start");
}
