/* rpc_creds: see rpc_creds.h. */
#include "common/rpc/rpc_creds.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/file.h"

#define PEM_MAX_BYTES (1 << 20)
#define TOKEN_MAX 4096

typedef struct pems_s {
    char *cert, *key, *ca; /* NUL-terminated file contents; NULL: not given */
} pems_t;

static int read_pem(const char *path, char **ret, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t n = 0;
    int r = sl_file_read(path, PEM_MAX_BYTES, &buf, &n, err, errlen);
    if (r < 0) {
        return r;
    }
    if (n == 0) {
        free(buf);
        return sl_err(err, errlen, -EINVAL, "\"%s\" is not a PEM file of 1..%d bytes", path,
                      PEM_MAX_BYTES);
    }
    *ret = buf;
    return 0;
}

static void pems_free(pems_t *p)
{
    free(p->cert);
    free(p->ca);
    if (p->key != NULL) {
        explicit_bzero(p->key, strlen(p->key)); /* gRPC has its own copy */
        free(p->key);
    }
    memset(p, 0, sizeof(*p));
}

/* Reads every PEM file sec names; on failure none is kept. */
static int pems_read(const sl_rpc_security_t *sec, pems_t *ret, char *err, size_t errlen)
{
    const char *paths[] = {sec->tls_cert, sec->tls_key, sec->tls_ca};
    char **dst[] = {&ret->cert, &ret->key, &ret->ca};
    memset(ret, 0, sizeof(*ret));
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        int rc = paths[i] != NULL ? read_pem(paths[i], dst[i], err, errlen) : 0;
        if (rc < 0) {
            pems_free(ret);
            return rc;
        }
    }
    return 0;
}

static int tls_wanted(const sl_rpc_security_t *sec)
{
    return sec != NULL && (sec->tls_cert != NULL || sec->tls_key != NULL || sec->tls_ca != NULL);
}

int sl_rpc_creds_server(const sl_rpc_security_t *sec, grpc_server_credentials **ret, char *err,
                        size_t errlen)
{
    grpc_server_credentials *creds = NULL;
    pems_t p = {0};
    int rc = 0;
    if (!tls_wanted(sec)) {
        creds = grpc_insecure_server_credentials_create();
    } else if (sec->tls_cert == NULL || sec->tls_key == NULL) {
        return sl_err(err, errlen, -EINVAL, "TLS needs both a certificate and a key");
    } else if ((rc = pems_read(sec, &p, err, errlen)) == 0) {
        grpc_ssl_pem_key_cert_pair pair = {p.key, p.cert};
        /* With a CA, clients must present a certificate it signed. */
        creds = grpc_ssl_server_credentials_create_ex(
            p.ca, &pair, 1,
            p.ca != NULL ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                         : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
            NULL);
    }
    pems_free(&p);
    if (rc == 0 && creds == NULL) {
        rc = sl_err(err, errlen, -EINVAL, "cannot create server credentials");
    }
    if (rc == 0) {
        *ret = creds;
    }
    return rc;
}

int sl_rpc_creds_channel(const sl_rpc_security_t *sec, grpc_channel_credentials **ret, char *err,
                         size_t errlen)
{
    grpc_channel_credentials *creds = NULL;
    pems_t p = {0};
    int rc = 0;
    if (!tls_wanted(sec)) {
        creds = grpc_insecure_credentials_create();
    } else if ((sec->tls_cert == NULL) != (sec->tls_key == NULL)) {
        return sl_err(err, errlen, -EINVAL,
                      "TLS client certificate and key must be given together");
    } else if ((rc = pems_read(sec, &p, err, errlen)) == 0) {
        grpc_ssl_pem_key_cert_pair pair = {p.key, p.cert};
        /* ca NULL: gRPC's default roots. The strings are copied. */
        creds = grpc_ssl_credentials_create(p.ca, p.cert != NULL ? &pair : NULL, NULL, NULL);
    }
    pems_free(&p);
    if (rc == 0 && creds == NULL) {
        rc = sl_err(err, errlen, -EINVAL, "cannot create channel credentials");
    }
    if (rc == 0) {
        *ret = creds;
    }
    return rc;
}

int sl_rpc_creds_bearer(const sl_rpc_security_t *sec, char **ret, char *err, size_t errlen)
{
    if (sec == NULL || sec->token == NULL) {
        *ret = NULL;
        return 0;
    }
    size_t n = strlen(sec->token);
    if (n == 0 || n > TOKEN_MAX) {
        return sl_err(err, errlen, -EINVAL, "token must be 1..%d bytes", TOKEN_MAX);
    }
    char *v = malloc(n + 8);
    if (v == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    snprintf(v, n + 8, "Bearer %s", sec->token);
    grpc_slice s = grpc_slice_from_static_string(v);
    int legal = grpc_header_nonbin_value_is_legal(s);
    grpc_slice_unref(s);
    if (!legal) {
        free(v);
        return sl_err(err, errlen, -EINVAL, "token contains characters not allowed in a header");
    }
    *ret = v;
    return 0;
}

static int consttime_eq(const void *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    unsigned char diff = alen != blen;
    const unsigned char *pa = a;
    for (size_t i = 0; i < blen; i++) {
        diff |= (unsigned char)((i < alen ? pa[i] : 0) ^ (unsigned char)b[i]);
    }
    return diff == 0;
}

int sl_rpc_creds_bearer_ok(const char *bearer, const grpc_metadata_array *md)
{
    if (bearer == NULL) {
        return 1;
    }
    for (size_t i = 0; i < md->count; i++) {
        if (grpc_slice_str_cmp(md->metadata[i].key, "authorization") == 0) {
            grpc_slice v = md->metadata[i].value;
            return consttime_eq(GRPC_SLICE_START_PTR(v), GRPC_SLICE_LENGTH(v), bearer);
        }
    }
    return 0;
}
