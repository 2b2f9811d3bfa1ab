/* url: canonical source URLs and the remote_roots allow-list (url.h says
 * the rules and why each one is there). */
#include "common/remote/url.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/base/err.h"

/* One row per scheme: its prefix and default port (0: none). */
static const struct {
    const char *name;
    unsigned default_port;
} k_schemes[SL_URL__COUNT] = {
    [SL_URL_HTTP] = {"http", 80},
    [SL_URL_HTTPS] = {"https", 443},
    [SL_URL_S3] = {"s3", 0},
};

static int scheme_of(const char *s, size_t *ret_len)
{
    for (int i = 0; i < SL_URL__COUNT; i++) {
        size_t n = strlen(k_schemes[i].name);
        if (strncasecmp(s, k_schemes[i].name, n) == 0 && strncmp(s + n, "://", 3) == 0) {
            *ret_len = n + 3;
            return i;
        }
    }
    return -1;
}

bool sl_url_is_url(const char *s)
{
    size_t n;
    return s != NULL && scheme_of(s, &n) >= 0;
}

static bool unreserved(unsigned char c)
{
    return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Host (or bucket) and port from the authority [a, a+n). */
static int parse_authority(sl_url_t *u, const char *a, size_t n, char *err, size_t errlen)
{
    if (memchr(a, '@', n) != NULL) {
        return sl_err(err, errlen, -EINVAL, "userinfo ('@') is not allowed in a source URL");
    }
    size_t hn = n;
    const char *colon = NULL;
    if (n > 0 && a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (close == NULL) {
            return sl_err(err, errlen, -EINVAL, "unterminated IPv6 literal");
        }
        hn = (size_t)(close - a) + 1;
        if (hn < n) {
            if (a[hn] != ':') {
                return sl_err(err, errlen, -EINVAL, "junk after the IPv6 literal");
            }
            colon = a + hn;
        }
    } else {
        colon = memchr(a, ':', n);
        if (colon != NULL) {
            hn = (size_t)(colon - a);
        }
    }
    if (hn == 0 || hn >= sizeof(u->host)) {
        return sl_err(err, errlen, -EINVAL, "%s host", hn == 0 ? "empty" : "too long a");
    }
    for (size_t i = 0; i < hn; i++) {
        unsigned char c = (unsigned char)a[i];
        bool ok = isalnum(c) || c == '-' || c == '.' || c == '_' ||
                  (a[0] == '[' && (c == ':' || c == '[' || c == ']'));
        if (!ok) {
            return sl_err(err, errlen, -EINVAL, "character 0x%02x not allowed in a host", c);
        }
        u->host[i] = (char)tolower(c);
    }
    u->host[hn] = '\0';
    u->port = 0;
    if (colon != NULL) {
        const char *p = colon + 1, *end = a + n;
        unsigned long port = 0;
        if (p == end || u->scheme == SL_URL_S3) {
            return sl_err(err, errlen, -EINVAL, "bad port");
        }
        for (; p < end; p++) {
            if (!isdigit((unsigned char)*p) || (port = port * 10 + (unsigned)(*p - '0')) > 65535) {
                return sl_err(err, errlen, -EINVAL, "bad port");
            }
        }
        if (port == 0) {
            return sl_err(err, errlen, -EINVAL, "bad port");
        }
        u->port = port == k_schemes[u->scheme].default_port ? 0 : (unsigned)port;
    }
    return 0;
}

/* Appends byte c to the canonical path, literal or escaped. */
static int put_byte(char *out, size_t outlen, size_t *o, unsigned char c)
{
    static const char hex[] = "0123456789ABCDEF";
    bool lit = unreserved(c) || c == '/' || c == '{' || c == '}' || c == ',';
    size_t need = lit ? 1 : 3;
    if (*o + need + 1 > outlen) {
        return -ENAMETOOLONG;
    }
    if (lit) {
        out[(*o)++] = (char)c;
    } else {
        out[(*o)++] = '%';
        out[(*o)++] = hex[c >> 4];
        out[(*o)++] = hex[c & 15];
    }
    out[*o] = '\0';
    return 0;
}

/* Decodes, checks and re-encodes the path [p, p+n). */
static int parse_path(sl_url_t *u, const char *p, size_t n, char *err, size_t errlen)
{
    size_t o = 0;
    char seg[3]; /* its first decoded bytes, for "." and ".." */
    size_t seg_len = 0;
    u->path[0] = '\0';
    if (n == 0 || p[0] != '/') {
        if (put_byte(u->path, sizeof(u->path), &o, '/') < 0) {
            return -ENAMETOOLONG;
        }
    }
    for (size_t i = 0; i <= n; i++) {
        int c;
        if (i == n) {
            c = '/'; /* ends the last segment */
        } else if (p[i] == '%') {
            int hi = i + 2 < n + 1 ? hexval(p[i + 1]) : -1;
            int lo = hi >= 0 ? hexval(p[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                return sl_err(err, errlen, -EINVAL, "bad percent-escape in the path");
            }
            c = hi * 16 + lo;
            i += 2;
            if (c == '/') {
                return sl_err(err, errlen, -EINVAL, "an encoded '/' (%%2F) in the path");
            }
        } else {
            c = (unsigned char)p[i];
        }
        if (c < 0x20 || c == 0x7f || c == '\\') {
            return sl_err(err, errlen, -EINVAL, "byte 0x%02x not allowed in the path", c);
        }
        if (c == '/') {
            bool dot = seg_len == 1 && seg[0] == '.';
            bool dotdot = seg_len == 2 && seg[0] == '.' && seg[1] == '.';
            if (dot || dotdot) {
                return sl_err(err, errlen, -EPERM, "a '%s' segment in the path",
                              seg_len == 1 ? "." : "..");
            }
            seg_len = 0;
            if (i == n) {
                break;
            }
        } else if (seg_len < sizeof(seg)) {
            seg[seg_len++] = (char)c;
        } else {
            seg_len = sizeof(seg); /* longer than "..": an ordinary name */
        }
        if (put_byte(u->path, sizeof(u->path), &o, (unsigned char)c) < 0) {
            return sl_err(err, errlen, -ENAMETOOLONG, "URL too long");
        }
    }
    return 0;
}

int sl_url_parse(const char *s, sl_url_t *ret, char *err, size_t errlen)
{
    size_t plen;
    int scheme = s != NULL ? scheme_of(s, &plen) : -1;
    if (scheme < 0) {
        return sl_err(err, errlen, -EINVAL, "not an http://, https:// or s3:// URL");
    }
    if (strlen(s) >= SL_URL_MAX) {
        return sl_err(err, errlen, -ENAMETOOLONG, "URL too long");
    }
    if (strpbrk(s, "?#") != NULL) {
        return sl_err(err, errlen, -EINVAL, "a query or fragment is not allowed in a source URL");
    }
    sl_url_t *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    u->scheme = (sl_url_scheme_e)scheme;
    const char *a = s + plen;
    size_t an = strcspn(a, "/");
    int rc = parse_authority(u, a, an, err, errlen);
    if (rc == 0) {
        rc = parse_path(u, a + an, strlen(a + an), err, errlen);
    }
    if (rc == 0) {
        *ret = *u;
    }
    free(u);
    return rc;
}

int sl_url_format(const sl_url_t *u, char *out, size_t outlen)
{
    int n;
    if (u->port != 0) {
        n = snprintf(out, outlen, "%s://%s:%u%s", k_schemes[u->scheme].name, u->host, u->port,
                     u->path);
    } else {
        n = snprintf(out, outlen, "%s://%s%s", k_schemes[u->scheme].name, u->host, u->path);
    }
    return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int sl_url_canonical(const char *s, char *out, size_t outlen, char *err, size_t errlen)
{
    sl_url_t *u = malloc(sizeof(*u));
    if (u == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = sl_url_parse(s, u, err, errlen);
    if (rc == 0 && sl_url_format(u, out, outlen) < 0) {
        rc = sl_err(err, errlen, -ENAMETOOLONG, "URL too long");
    }
    free(u);
    return rc;
}

int sl_roots_parse(const char *list, sl_roots_t *ret, char *err, size_t errlen)
{
    sl_roots_t r = {0};
    if (list == NULL) {
        list = "";
    }
    const char *p = list;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        while (n > 0 && isspace((unsigned char)*p)) {
            p++;
            n--;
        }
        size_t m = n;
        while (m > 0 && isspace((unsigned char)p[m - 1])) {
            m--;
        }
        if (m > 0) {
            char one[SL_URL_MAX];
            if (m >= sizeof(one)) {
                sl_roots_free(&r);
                return sl_err(err, errlen, -EINVAL, "remote_roots: an entry is too long");
            }
            if (r.n == SL_ROOTS_MAX) {
                sl_roots_free(&r);
                return sl_err(err, errlen, -E2BIG, "remote_roots: more than %d entries",
                              SL_ROOTS_MAX);
            }
            memcpy(one, p, m);
            one[m] = '\0';
            sl_url_t *grown = realloc(r.roots, (r.n + 1) * sizeof(*grown));
            if (grown == NULL) {
                sl_roots_free(&r);
                return sl_err(err, errlen, -ENOMEM, "out of memory");
            }
            r.roots = grown;
            char why[256];
            int rc = sl_url_parse(one, &r.roots[r.n], why, sizeof(why));
            if (rc < 0) {
                sl_roots_free(&r);
                return sl_err(err, errlen, -EINVAL, "remote_roots: '%s': %s", one, why);
            }
            r.n++;
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    *ret = r;
    return 0;
}

void sl_roots_free(sl_roots_t *r)
{
    if (r != NULL) {
        free(r->roots);
        r->roots = NULL;
        r->n = 0;
    }
}

static bool root_allows(const sl_url_t *root, const sl_url_t *u)
{
    if (root->scheme != u->scheme || root->port != u->port || strcmp(root->host, u->host) != 0) {
        return false;
    }
    size_t n = strlen(root->path);
    if (strncmp(root->path, u->path, n) != 0) {
        return false;
    }
    return root->path[n - 1] == '/' || u->path[n] == '\0' || u->path[n] == '/';
}

bool sl_roots_allow(const sl_roots_t *r, const sl_url_t *u)
{
    for (size_t i = 0; r != NULL && i < r->n; i++) {
        if (root_allows(&r->roots[i], u)) {
            return true;
        }
    }
    return false;
}

int sl_url_encode_path(const char *path, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)path; *p != '\0'; p++) {
        bool keep = unreserved(*p) || *p == '/' || *p == '%';
        if (o + (keep ? 1 : 3) + 1 > outlen) {
            return -ENAMETOOLONG;
        }
        if (keep) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    if (o + 1 > outlen) {
        return -ENAMETOOLONG;
    }
    out[o] = '\0';
    return 0;
}
