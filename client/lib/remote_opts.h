/* remote_opts: the client's URL-source settings (remote_roots, cache_dir,
 * cache_bytes) from sluice_options_t or the CLI's flags, with the
 * environment as the fallback the Python binding and scripts use:
 * SLUICE_REMOTE_ROOTS, SLUICE_CACHE_DIR, SLUICE_CACHE_BYTES. Any thread
 * (reads the environment). */
#ifndef CL_REMOTE_OPTS_H
#define CL_REMOTE_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/remote/cache.h"
#include "common/remote/remote.h"

/* roots/cache_dir NULL and cache_bytes 0 take the environment's, else the
 * defaults (no roots: URL sources refused). Returns 0, -EINVAL (a bad root
 * or byte count: err names the setting), -errno (the cache directory). */
int cl_remote_new(const char *roots, const char *cache_dir, uint64_t cache_bytes, sl_remote_t **ret,
                  char *err, size_t errlen);

/* The prefix cache's store for the client's own share (docs/cache.md):
 * only where a cache_dir is given (the argument, else $SLUICE_CACHE_DIR);
 * *ret NULL without one. cache_bytes as cl_remote_new. Returns 0, -EINVAL
 * (a bad byte count), -errno (the directory: err names it). */
int cl_pcache_store_new(const char *cache_dir, uint64_t cache_bytes, sl_cache_t **ret, char *err,
                        size_t errlen);

/* True when (rc, err) is a URL refused by this host's settings: outside
 * remote_roots, or the spec's URL malformed ('..'): the CLI's exit 2. */
int cl_remote_refused(int rc, const char *err);

#endif
