/* remote_opts: the client's URL-source settings (remote_opts.h). */
#include "client/lib/remote_opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"

/* cache_bytes 0: $SLUICE_CACHE_BYTES when set (0 when not). */
static int env_bytes(uint64_t *cache_bytes, char *err, size_t errlen)
{
    if (*cache_bytes == 0) {
        const char *v = getenv("SLUICE_CACHE_BYTES");
        if (v != NULL && v[0] != '\0') {
            char *end = NULL;
            errno = 0;
            unsigned long long n = strtoull(v, &end, 10);
            if (errno != 0 || end == v || *end != '\0' || n < (1u << 20)) {
                return sl_err(err, errlen, -EINVAL,
                              "SLUICE_CACHE_BYTES: '%s' is not a byte count >= 1048576", v);
            }
            *cache_bytes = n;
        }
    }
    return 0;
}

int cl_remote_new(const char *roots, const char *cache_dir, uint64_t cache_bytes, sl_remote_t **ret,
                  char *err, size_t errlen)
{
    if (roots == NULL) {
        roots = getenv("SLUICE_REMOTE_ROOTS");
    }
    if (cache_dir == NULL) {
        cache_dir = getenv("SLUICE_CACHE_DIR");
    }
    int rc = env_bytes(&cache_bytes, err, errlen);
    if (rc < 0) {
        return rc;
    }
    sl_remote_conf_t c = {.roots = roots, .cache_dir = cache_dir, .cache_bytes = cache_bytes};
    return sl_remote_new(&c, ret, err, errlen);
}

int cl_remote_refused(int rc, const char *err)
{
    /* The spec's own URL refused (a '..' segment, outside the prefixes), or
     * any URL outside remote_roots: what this host allows, a usage error. */
    return rc == -EPERM && err != NULL &&
           (strstr(err, "outside remote_roots") != NULL ||
            strstr(err, "source path: URL '") != NULL);
}

int cl_pcache_store_new(const char *cache_dir, uint64_t cache_bytes, sl_cache_t **ret, char *err,
                        size_t errlen)
{
    *ret = NULL;
    if (cache_dir == NULL) {
        cache_dir = getenv("SLUICE_CACHE_DIR");
    }
    if (cache_dir == NULL || cache_dir[0] == '\0') {
        return 0; /* no directory given: no prefix cache */
    }
    int rc = env_bytes(&cache_bytes, err, errlen);
    if (rc < 0) {
        return rc;
    }
    return sl_cache_open(cache_dir, SL_CACHE_NS_SAMPLES,
                         cache_bytes != 0 ? cache_bytes : SL_REMOTE_DEFAULT_CACHE_BYTES, ret, err,
                         errlen);
}
