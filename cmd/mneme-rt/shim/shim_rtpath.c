/* Where the runtime library is when an application deploys tuned kernels
 * without `mneme record` to name it (MNEME_RT_LIB): the library of the prefix
 * the shim was built in, or, when that prefix has moved (an installation
 * unpacked elsewhere), the library of the prefix of the first `mneme` on
 * PATH, laid out as the Makefile installs it (PREFIX/bin/mneme,
 * PREFIX/lib/libmneme_rt.so). */
#include "shim_internal.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* parent_dir cuts path at its last '/', in place; 0 when it has none. */
static int parent_dir(char *path) {
  char *slash = strrchr(path, '/');
  if (slash == NULL)
    return 0;
  if (slash == path)
    slash[1] = '\0';
  else
    *slash = '\0';
  return 1;
}

const char *mneme_find_runtime_lib(const char *built, const char *path_env,
                                   char *buf, size_t n) {
  if (built != NULL && built[0] != '\0' && access(built, R_OK) == 0) {
    if ((size_t)snprintf(buf, n, "%s", built) < n)
      return buf;
  }
  if (path_env == NULL)
    return NULL;
  for (const char *dir = path_env; *dir != '\0';) {
    const char *end = strchr(dir, ':');
    size_t len = end != NULL ? (size_t)(end - dir) : strlen(dir);
    char candidate[PATH_MAX], resolved[PATH_MAX];
    /* An empty PATH entry is the current directory. */
    if (snprintf(candidate, sizeof candidate, "%.*s/mneme", (int)len,
                 len > 0 ? dir : ".") < (int)sizeof candidate &&
        access(candidate, X_OK) == 0 && realpath(candidate, resolved) != NULL &&
        parent_dir(resolved) && parent_dir(resolved) &&
        (size_t)snprintf(buf, n, "%s/lib/libmneme_rt.so", resolved) < n &&
        access(buf, R_OK) == 0)
      return buf;
    if (end == NULL)
      break;
    dir = end + 1;
  }
  return NULL;
}
