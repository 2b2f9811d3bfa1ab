/* tenants: the named tokens of a cluster shared by several teams
 * (docs/protocol.md "Tenants", docs/deploy.md). One file, like a token file
 * kept out of the config and of argv, read at start and again on SIGHUP:
 *
 *     # NAME    TOKEN                     [max_jobs=N] [max_buffered_mb=N]
 *     vision    3f1c...e9  max_jobs=4 max_buffered_mb=2048
 *     speech    77ab...01
 *
 * NAME: 1..63 of [A-Za-z0-9_.-]; TOKEN: 16..511 printable non-space ASCII
 * bytes (it travels in an HTTP/2 header). Blank lines and '#' comments are
 * skipped. Limits of 0 (or absent) fall back to the daemon's defaults.
 *
 * Pure: nothing here logs; errors name file:line. */
#ifndef SL_TENANTS_H
#define SL_TENANTS_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/secret.h"

#define SL_TENANTS_MAX 64      /* tenants in one file */
#define SL_TENANT_NAME_MAX 64  /* bytes of a name, NUL included */
#define SL_TENANT_TOKEN_MIN 16 /* a shorter token is refused: it is the tenant's password */

typedef struct sl_tenant_s {
    char name[SL_TENANT_NAME_MAX];
    char token[SL_SECRET_MAX];
    uint32_t max_jobs;            /* open jobs; 0 = the daemon's default */
    uint64_t max_buffered_bytes;  /* 0 = the daemon's default */
} sl_tenant_t;

typedef struct sl_tenants_s {
    sl_tenant_t t[SL_TENANTS_MAX];
    size_t n;
} sl_tenants_t;

/* Reads path into *out (replaced only on success). Duplicate names or
 * tokens are errors: a token must name exactly one tenant. */
int sl_tenants_load(const char *path, sl_tenants_t *out, char *err, size_t errlen);
/* Parses text (the file's contents; name stands for it in errors). */
int sl_tenants_parse(const char *name, const char *text, sl_tenants_t *out, char *err,
                     size_t errlen);
/* The tenant called name, or NULL. */
const sl_tenant_t *sl_tenants_find(const sl_tenants_t *ts, const char *name);
/* 1 when s is a valid tenant name. */
int sl_tenant_name_ok(const char *s);

#endif
