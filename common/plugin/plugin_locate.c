/* plugin_locate: where the sluice-plugin-host program is
 * (common/plugin/plugin.h, sl_plugin_host_find). A client embedded in
 * Python has python3 as its program, so "beside the program" alone sends a
 * source tree's or a wheel's user to PATH; the library's own file is the
 * better anchor there. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/plugin/plugin.h"

#define HOST_NAME "sluice-plugin-host"

static int executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* The directory of path (a file's), into dir; 0 when path has none. */
static int dir_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL || (size_t)(slash - path) >= len) {
        return 0;
    }
    snprintf(dir, len, "%.*s", (int)(slash - path), path);
    return 1;
}

/* name through PATH as execvp would (an empty entry: the working
 * directory); 0 with the path in out, or -ENOENT. */
static int on_path(const char *name, char *out, size_t len)
{
    const char *path = getenv("PATH");
    if (path == NULL) {
        path = "/usr/local/bin:/usr/bin:/bin";
    }
    while (path != NULL) {
        const char *colon = strchr(path, ':');
        size_t n = colon != NULL ? (size_t)(colon - path) : strlen(path);
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof(cand), "%.*s%s%s", (int)(n < PATH_MAX ? n : PATH_MAX), path,
                 n > 0 ? "/" : "", name);
        if (executable(cand) && strlen(cand) < len) {
            snprintf(out, len, "%s", cand);
            return 0;
        }
        path = colon != NULL ? colon + 1 : NULL;
    }
    return -ENOENT;
}

/* Tries dir/rel; on failure appends it to the list of places looked at. */
static int try_at(const char *dir, const char *rel, char *out, size_t len, char *looked,
                  size_t looklen)
{
    char cand[PATH_MAX + 64];
    snprintf(cand, sizeof(cand), "%s/%s", dir, rel);
    if (executable(cand) && strlen(cand) < len) {
        snprintf(out, len, "%s", cand);
        return 0;
    }
    size_t n = strlen(looked);
    snprintf(looked + n, looklen - n, "%s%.300s", n > 0 ? ", " : "", cand);
    return -ENOENT;
}

static int from_env(const char *env, char *out, size_t len, char *err, size_t errlen)
{
    int has_slash = strchr(env, '/') != NULL;
    if (has_slash ? executable(env) && strlen(env) < len : on_path(env, out, len) == 0) {
        if (has_slash) {
            snprintf(out, len, "%s", env);
        }
        return 0;
    }
    return sl_err(err, errlen, -ENOENT,
                  "the plugin host program was not found: SLUICE_PLUGIN_HOST=%.300s is not an "
                  "executable file%s; point SLUICE_PLUGIN_HOST at " HOST_NAME
                  " (a build has it in build/bin/, make install puts it beside sluice-worker)",
                  env, has_slash ? "" : " on PATH");
}

int sl_plugin_host_find(char *out, size_t len, char *err, size_t errlen)
{
    const char *env = getenv("SLUICE_PLUGIN_HOST");
    if (env != NULL && env[0] != '\0') {
        return from_env(env, out, len, err, errlen);
    }
    char looked[1400] = "", self[PATH_MAX], dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    if (n > 0 && dir_of(self, dir, sizeof(dir)) &&
        try_at(dir, HOST_NAME, out, len, looked, sizeof(looked)) == 0) {
        return 0;
    }
    /* The file this code is in: libsluice.so under Python or another
     * program (the program itself for the daemons and the CLI). Its
     * directory (a wheel), then its ../bin (a build's lib/ and bin/, an
     * installed PREFIX/lib and PREFIX/bin). */
    Dl_info info;
    char lib[PATH_MAX];
    if (dladdr((void *)sl_plugin_host_find, &info) != 0 && info.dli_fname != NULL &&
        realpath(info.dli_fname, lib) != NULL && strcmp(lib, self) != 0 &&
        dir_of(lib, dir, sizeof(dir))) {
        if (try_at(dir, HOST_NAME, out, len, looked, sizeof(looked)) == 0 ||
            try_at(dir, "../bin/" HOST_NAME, out, len, looked, sizeof(looked)) == 0) {
            return 0;
        }
    }
    if (on_path(HOST_NAME, out, len) == 0) {
        return 0;
    }
    return sl_err(err, errlen, -ENOENT,
                  "the plugin host program " HOST_NAME " was not found (looked at %s and on "
                  "PATH): set SLUICE_PLUGIN_HOST to its path (a build has it in build/bin/, "
                  "make install puts it beside sluice-worker), or add its directory to PATH",
                  looked);
}
