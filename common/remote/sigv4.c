/* sigv4: AWS Signature Version 4: canonical request, string to sign,
 * derived key, signature (docs.aws.amazon.com "Create a signed AWS API
 * request"). */
#include "common/remote/sigv4.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/base/sha256.h"

/* A bounded string builder: once full it stays full and says so. */
typedef struct sb_s {
    char *buf;
    size_t len, cap;
    int rc;
} sb_t;

static void sb_putn(sb_t *b, const char *s, size_t n)
{
    if (b->rc < 0 || b->len + n + 1 > b->cap) {
        b->rc = -ENAMETOOLONG;
        return;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

static void sb_put(sb_t *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void hex32(const uint8_t in[32], char out[65])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[in[i] >> 4];
        out[2 * i + 1] = hex[in[i] & 15];
    }
    out[64] = '\0';
}

static int cmp_hdr(const void *a, const void *b)
{
    return strcasecmp(((const sl_sigv4_hdr_t *)a)->name, ((const sl_sigv4_hdr_t *)b)->name);
}

/* Query parameters sorted by name then value (byte order). */
typedef struct qparam_s {
    const char *s;
    size_t n;
} qparam_t;

static int cmp_param(const void *a, const void *b)
{
    const qparam_t *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    return c != 0 ? c : (x->n > y->n) - (x->n < y->n);
}

static void put_query(sb_t *b, const char *q)
{
    qparam_t ps[32];
    size_t n = 0;
    for (const char *p = q; *p != '\0';) {
        size_t len = strcspn(p, "&");
        if (len > 0) {
            if (n == sizeof(ps) / sizeof(ps[0])) {
                b->rc = -EINVAL;
                return;
            }
            ps[n++] = (qparam_t){p, len};
        }
        p += len + (p[len] == '&');
    }
    qsort(ps, n, sizeof(ps[0]), cmp_param);
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            sb_put(b, "&");
        }
        sb_putn(b, ps[i].s, ps[i].n);
        if (memchr(ps[i].s, '=', ps[i].n) == NULL) {
            sb_put(b, "="); /* "?lifecycle" signs as "lifecycle=" */
        }
    }
}

/* "name:value\n" lines and the signed-header list, from sorted hdrs. */
static void put_headers(sb_t *canon, sb_t *signed_list, const sl_sigv4_hdr_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char lower[64];
        size_t ln = strlen(h[i].name);
        if (ln >= sizeof(lower)) {
            canon->rc = -ENAMETOOLONG;
            return;
        }
        for (size_t k = 0; k <= ln; k++) {
            lower[k] = (char)tolower((unsigned char)h[i].name[k]);
        }
        const char *v = h[i].value;
        size_t vn = strlen(v);
        while (vn > 0 && isspace((unsigned char)*v)) {
            v++;
            vn--;
        }
        while (vn > 0 && isspace((unsigned char)v[vn - 1])) {
            vn--;
        }
        sb_put(canon, lower);
        sb_put(canon, ":");
        sb_putn(canon, v, vn);
        sb_put(canon, "\n");
        if (i > 0) {
            sb_put(signed_list, ";");
        }
        sb_put(signed_list, lower);
    }
}

int sl_sigv4_authorization(const sl_sigv4_req_t *r, char *out, size_t outlen)
{
    if (r->access_key == NULL || r->secret_key == NULL || r->region == NULL || r->service == NULL ||
        r->amz_date == NULL || strlen(r->amz_date) != 16 || r->method == NULL || r->path == NULL ||
        r->nhdrs > SL_SIGV4_MAX_HDRS || r->payload_sha256 == NULL) {
        return -EINVAL;
    }
    sl_sigv4_hdr_t hdrs[SL_SIGV4_MAX_HDRS];
    memcpy(hdrs, r->hdrs, r->nhdrs * sizeof(hdrs[0]));
    qsort(hdrs, r->nhdrs, sizeof(hdrs[0]), cmp_hdr);

    char canon_buf[16384], signed_buf[1024];
    sb_t canon = {canon_buf, 0, sizeof(canon_buf), 0};
    sb_t signed_list = {signed_buf, 0, sizeof(signed_buf), 0};
    signed_buf[0] = '\0';
    sb_put(&canon, r->method);
    sb_put(&canon, "\n");
    sb_put(&canon, r->path);
    sb_put(&canon, "\n");
    put_query(&canon, r->query != NULL ? r->query : "");
    sb_put(&canon, "\n");
    put_headers(&canon, &signed_list, hdrs, r->nhdrs);
    sb_put(&canon, "\n");
    sb_put(&canon, signed_buf);
    sb_put(&canon, "\n");
    sb_put(&canon, r->payload_sha256);
    if (canon.rc < 0 || signed_list.rc < 0) {
        return canon.rc < 0 ? canon.rc : signed_list.rc;
    }

    char date[9], scope[256], canon_hex[65], sts[512];
    memcpy(date, r->amz_date, 8);
    date[8] = '\0';
    int n = snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", date, r->region, r->service);
    if (n < 0 || (size_t)n >= sizeof(scope)) {
        return -ENAMETOOLONG;
    }
    sl_sha256_hex(canon_buf, canon.len, canon_hex);
    n = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", r->amz_date, scope, canon_hex);
    if (n < 0 || (size_t)n >= sizeof(sts)) {
        return -ENAMETOOLONG;
    }

    /* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service),
     * "aws4_request") */
    char ksecret[256];
    uint8_t k[32];
    n = snprintf(ksecret, sizeof(ksecret), "AWS4%s", r->secret_key);
    if (n < 0 || (size_t)n >= sizeof(ksecret)) {
        return -ENAMETOOLONG;
    }
    sl_hmac_sha256(ksecret, (size_t)n, date, 8, k);
    memset(ksecret, 0, sizeof(ksecret));
    sl_hmac_sha256(k, 32, r->region, strlen(r->region), k);
    sl_hmac_sha256(k, 32, r->service, strlen(r->service), k);
    sl_hmac_sha256(k, 32, "aws4_request", 12, k);
    uint8_t sig[32];
    char sig_hex[65];
    sl_hmac_sha256(k, 32, sts, (size_t)strlen(sts), sig);
    memset(k, 0, sizeof(k));
    hex32(sig, sig_hex);
    n = snprintf(out, outlen, "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
                 r->access_key, scope, signed_buf, sig_hex);
    return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}
