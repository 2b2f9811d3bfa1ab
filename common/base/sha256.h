/* sha256: FIPS 180-4 SHA-256 and HMAC-SHA256: the --digests output (one
 * digest per delivered sample) and job capabilities (common/base/jobcap.h).
 * Small and dependency-free on purpose: pulling in libcrypto for one hash is
 * not worth a package. */
#ifndef SL_SHA256_H
#define SL_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl_sha256_s {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t nbuf;
} sl_sha256_t;

void sl_sha256_init(sl_sha256_t *s);
void sl_sha256_update(sl_sha256_t *s, const void *data, size_t n);
void sl_sha256_final(sl_sha256_t *s, uint8_t out[32]);
/* One-shot into 64 hex characters plus NUL. */
void sl_sha256_hex(const void *data, size_t n, char out[65]);
/* HMAC-SHA256 (RFC 2104) of msg under key. */
void sl_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                    uint8_t out[32]);

#endif
