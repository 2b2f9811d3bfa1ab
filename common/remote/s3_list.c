/* s3_list: ListObjectsV2 pages (s3_list.h). The XML is S3's own fixed
 * shape, so a scan for its few elements is enough; entities in keys are
 * decoded (&amp; &lt; &gt; &quot; &apos; &#N; &#xH;). */
#include "common/remote/s3_list.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/remote/url.h"

/* Appends v percent-encoded (everything but RFC 3986 unreserved). */
static int put_enc(char *out, size_t outlen, size_t *o, const char *v)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)v; *p != '\0'; p++) {
        bool keep = isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~';
        if (*o + (keep ? 1 : 3) + 1 > outlen) {
            return -ENAMETOOLONG;
        }
        if (keep) {
            out[(*o)++] = (char)*p;
        } else {
            out[(*o)++] = '%';
            out[(*o)++] = hex[*p >> 4];
            out[(*o)++] = hex[*p & 15];
        }
    }
    out[*o] = '\0';
    return 0;
}

static int put_raw(char *out, size_t outlen, size_t *o, const char *s)
{
    size_t n = strlen(s);
    if (*o + n + 1 > outlen) {
        return -ENAMETOOLONG;
    }
    memcpy(out + *o, s, n + 1);
    *o += n;
    return 0;
}

int sl_s3_list_query(const char *prefix, const char *token, char *out, size_t outlen)
{
    size_t o = 0;
    int rc = 0;
    if (outlen == 0) {
        return -ENAMETOOLONG;
    }
    out[0] = '\0';
    /* Sorted by name, as SigV4's canonical query wants. */
    if (token != NULL && token[0] != '\0') {
        rc = put_raw(out, outlen, &o, "continuation-token=");
        rc = rc < 0 ? rc : put_enc(out, outlen, &o, token);
        rc = rc < 0 ? rc : put_raw(out, outlen, &o, "&");
    }
    rc = rc < 0 ? rc : put_raw(out, outlen, &o, "list-type=2");
    if (prefix[0] == '\0') {
        return rc; /* the whole bucket */
    }
    rc = rc < 0 ? rc : put_raw(out, outlen, &o, "&prefix=");
    return rc < 0 ? rc : put_enc(out, outlen, &o, prefix);
}

/* The text of the first <tag>...</tag> in [p, end), entities decoded into
 * out. Returns its length, -ENOENT (absent), -EPROTO, -ENAMETOOLONG. */
static int element(const char *p, const char *end, const char *tag, char *out, size_t outlen)
{
    char open[64], close[64];
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    const char *a = memmem(p, (size_t)(end - p), open, strlen(open));
    if (a == NULL) {
        return -ENOENT;
    }
    a += strlen(open);
    const char *b = memmem(a, (size_t)(end - a), close, strlen(close));
    if (b == NULL) {
        return -EPROTO;
    }
    size_t o = 0;
    for (const char *q = a; q < b;) {
        char c = *q;
        if (c == '&') {
            const char *semi = memchr(q, ';', (size_t)(b - q));
            if (semi == NULL || semi - q > 10) {
                return -EPROTO;
            }
            size_t n = (size_t)(semi - q - 1);
            const char *e = q + 1;
            long v = -1;
            if (n == 3 && strncmp(e, "amp", 3) == 0) {
                v = '&';
            } else if (n == 2 && strncmp(e, "lt", 2) == 0) {
                v = '<';
            } else if (n == 2 && strncmp(e, "gt", 2) == 0) {
                v = '>';
            } else if (n == 4 && strncmp(e, "quot", 4) == 0) {
                v = '"';
            } else if (n == 4 && strncmp(e, "apos", 4) == 0) {
                v = '\'';
            } else if (n >= 2 && e[0] == '#') {
                char num[12];
                memcpy(num, e + 1, n - 1);
                num[n - 1] = '\0';
                char *stop;
                v = num[0] == 'x' ? strtol(num + 1, &stop, 16) : strtol(num, &stop, 10);
                if (*stop != '\0' || v <= 0 || v > 127) {
                    return -EPROTO; /* keys outside ASCII arrive as UTF-8 bytes, not refs */
                }
            }
            if (v < 0) {
                return -EPROTO;
            }
            c = (char)v;
            q = semi + 1;
        } else {
            q++;
        }
        if (o + 2 > outlen) {
            return -ENAMETOOLONG;
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return (int)o;
}

int sl_s3_list_parse(const char *xml, size_t n, sl_s3_list_fn fn, void *ctx, bool *ret_truncated,
                     char *token, size_t tokenlen)
{
    const char *end = xml + n;
    if (memmem(xml, n, "<ListBucketResult", 17) == NULL) {
        return -EPROTO;
    }
    char *key = malloc(SL_URL_MAX);
    if (key == NULL) {
        return -ENOMEM;
    }
    int rc = 0;
    const char *p = xml;
    for (;;) {
        const char *c = memmem(p, (size_t)(end - p), "<Contents>", 10);
        if (c == NULL) {
            break;
        }
        const char *ce = memmem(c, (size_t)(end - c), "</Contents>", 11);
        if (ce == NULL) {
            rc = -EPROTO;
            break;
        }
        char size[32], etag[256];
        if (element(c, ce, "Key", key, SL_URL_MAX) <= 0 ||
            element(c, ce, "Size", size, sizeof(size)) <= 0) {
            rc = -EPROTO;
            break;
        }
        if (element(c, ce, "ETag", etag, sizeof(etag)) < 0) {
            etag[0] = '\0';
        }
        char *stop;
        unsigned long long sz = strtoull(size, &stop, 10);
        if (*stop != '\0') {
            rc = -EPROTO;
            break;
        }
        rc = fn(ctx, key, (uint64_t)sz, etag);
        if (rc < 0) {
            break;
        }
        p = ce + 11;
    }
    free(key);
    if (rc < 0) {
        return rc;
    }
    char trunc[16];
    *ret_truncated = element(xml, end, "IsTruncated", trunc, sizeof(trunc)) > 0 &&
                     strcmp(trunc, "true") == 0;
    token[0] = '\0';
    if (*ret_truncated && element(xml, end, "NextContinuationToken", token, tokenlen) <= 0) {
        return -EPROTO;
    }
    return 0;
}
