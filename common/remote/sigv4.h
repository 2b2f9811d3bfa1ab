/* sigv4: AWS Signature Version 4 (the S3 request signer). Checked against
 * AWS's published vectors (tests/unit/test_remote.c). Pure: any thread; the
 * secret is only read, never copied anywhere but the HMAC input. */
#ifndef SL_REMOTE_SIGV4_H
#define SL_REMOTE_SIGV4_H

#include <stddef.h>

/* Hex SHA-256 of an empty payload (what a GET signs). */
#define SL_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

typedef struct sl_sigv4_hdr_s {
    const char *name;  /* any case; signed lowercased */
    const char *value; /* leading/trailing blanks trimmed when signed */
} sl_sigv4_hdr_t;

typedef struct sl_sigv4_req_s {
    const char *access_key;
    const char *secret_key;
    const char *region;         /* "us-east-1" */
    const char *service;        /* "s3" */
    const char *amz_date;       /* "YYYYMMDDTHHMMSSZ" (the x-amz-date header) */
    const char *method;         /* "GET" */
    const char *path;           /* already URI-encoded ("/" at least) */
    const char *query;          /* "a=1&b=2" already encoded, any order; "" none */
    const sl_sigv4_hdr_t *hdrs; /* every header to sign, host and x-amz-date included */
    size_t nhdrs;
    const char *payload_sha256; /* hex */
} sl_sigv4_req_t;

/* Most headers one request may sign. */
#define SL_SIGV4_MAX_HDRS 16

/* Writes the Authorization header's value into out. Returns 0, -EINVAL
 * (a missing field, too many headers, a malformed date), -ENAMETOOLONG
 * (out or an internal buffer too small). */
int sl_sigv4_authorization(const sl_sigv4_req_t *r, char *out, size_t outlen);

#endif
