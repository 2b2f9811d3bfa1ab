/* url: source URLs (http://, https://, s3://bucket/key) in one canonical
 * form, and the remote_roots allow-list they are checked against.
 *
 * A spec is data from a client, so a URL in it must never make a host fetch
 * something its operator did not allow (server-side request forgery). The
 * check compares canonical forms, never raw strings:
 *  - scheme and host are lowercased, a default port (80, 443) is dropped;
 *  - userinfo ('@' in the authority), a fragment, a query, a backslash and
 *    control bytes are refused outright;
 *  - the path is percent-decoded once and re-encoded one way (RFC 3986
 *    unreserved characters, '/' and the brace-pattern characters "{},"
 *    literal, everything else %XX), so "%61" and "a" compare equal;
 *  - a "." or ".." segment (also when percent-encoded) is refused, not
 *    resolved, so no prefix can be escaped lexically.
 * A root matches a URL when scheme, host and port are equal and the root's
 * path is the URL's path or a prefix of it ending on a '/' boundary.
 * Pure functions: any thread. */
#ifndef SL_REMOTE_URL_H
#define SL_REMOTE_URL_H

#include <stdbool.h>
#include <stddef.h>

/* Longest URL we accept. */
#define SL_URL_MAX 4096
/* Most entries in a remote_roots list. */
#define SL_ROOTS_MAX 64

typedef enum { SL_URL_HTTP = 0, SL_URL_HTTPS, SL_URL_S3, SL_URL__COUNT } sl_url_scheme_e;

/* A URL split into its canonical parts (each NUL-terminated). */
typedef struct sl_url_s {
    sl_url_scheme_e scheme;
    char host[256];        /* lowercased host, or the S3 bucket */
    unsigned port;         /* 0: the scheme's default (none for s3) */
    char path[SL_URL_MAX]; /* canonical path, starts with '/' ("/" at least) */
} sl_url_t;

/* True when s starts with a scheme this module handles (any case), so the
 * caller treats it as a URL rather than a path under the data root. */
bool sl_url_is_url(const char *s);

/* Parses and canonicalises s. Returns 0, -EINVAL (malformed, a query, a
 * fragment, userinfo, a bad port or escape; err says which), -EPERM (a "."
 * or ".." segment), -ENAMETOOLONG. */
int sl_url_parse(const char *s, sl_url_t *ret, char *err, size_t errlen);

/* The canonical text of u into out (scheme://host[:port]/path). Returns 0
 * or -ENAMETOOLONG. */
int sl_url_format(const sl_url_t *u, char *out, size_t outlen);

/* Canonical text of s in one step (sl_url_parse + sl_url_format). */
int sl_url_canonical(const char *s, char *out, size_t outlen, char *err, size_t errlen);

/* The remote_roots allow-list: canonical prefixes. */
typedef struct sl_roots_s {
    sl_url_t *roots;
    size_t n;
} sl_roots_t;

/* Parses a comma-separated list ("" or NULL: none, so every URL is
 * refused). Each entry must be a URL this module parses; err names the
 * entry that is not. Returns 0, -EINVAL, -E2BIG (over SL_ROOTS_MAX),
 * -ENOMEM. */
int sl_roots_parse(const char *list, sl_roots_t *ret, char *err, size_t errlen);
void sl_roots_free(sl_roots_t *r);

/* True when the canonical u lies under one of r's prefixes. */
bool sl_roots_allow(const sl_roots_t *r, const sl_url_t *u);

/* Percent-encodes the path for a request line: unreserved characters and
 * '/' stay, everything else (braces included) becomes %XX. Returns 0 or
 * -ENAMETOOLONG. */
int sl_url_encode_path(const char *path, char *out, size_t outlen);

#endif
