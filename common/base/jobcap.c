/* jobcap: see jobcap.h. */
#include "common/base/jobcap.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "common/base/sha256.h"

/* Hashed with a prefix so a job hash is never the plain SHA-256 of a value
 * that may be used elsewhere (a token reused as a job secret). */
static const char CAP_PREFIX[] = "sluice-job-capability\n";
static const char RANK_PREFIX[] = "sluice-rank-job\n";
static const char HEX[] = "0123456789abcdef";

int sl_jobcap_new(char out[SL_JOBCAP_MAX + 1])
{
    uint8_t r[16];
    size_t got = 0;
    while (got < sizeof(r)) {
        ssize_t n = getrandom(r + got, sizeof(r) - got, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(r); i++) {
        out[2 * i] = HEX[r[i] >> 4];
        out[2 * i + 1] = HEX[r[i] & 15];
    }
    out[2 * sizeof(r)] = '\0';
    return 0;
}

int sl_jobcap_valid(const char *s)
{
    if (s == NULL) {
        return 0;
    }
    size_t n = strnlen(s, SL_JOBCAP_MAX + 1);
    if (n < SL_JOBCAP_MIN || n > SL_JOBCAP_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] <= ' ' || s[i] > '~') {
            return 0;
        }
    }
    return 1;
}

void sl_jobcap_hash(const char *secret, uint8_t out[SL_JOBCAP_HASH])
{
    sl_sha256_t s;
    sl_sha256_init(&s);
    sl_sha256_update(&s, CAP_PREFIX, sizeof(CAP_PREFIX) - 1);
    sl_sha256_update(&s, secret, strnlen(secret, SL_JOBCAP_MAX + 1));
    sl_sha256_final(&s, out);
}

int sl_jobcap_check(const uint8_t hash[SL_JOBCAP_HASH], const char *secret)
{
    /* A malformed or missing secret is hashed all the same (as ""), so a
     * refusal takes about as long whatever was presented. */
    int ok = sl_jobcap_valid(secret);
    uint8_t h[SL_JOBCAP_HASH];
    sl_jobcap_hash(ok ? secret : "", h);
    volatile uint8_t diff = 0;
    for (size_t i = 0; i < SL_JOBCAP_HASH; i++) {
        diff |= (uint8_t)(h[i] ^ hash[i]);
    }
    return ok && diff == 0;
}

void sl_jobcap_derive(const char *key, const char *name, char out[65])
{
    uint8_t msg[sizeof(RANK_PREFIX) + 256];
    size_t pn = sizeof(RANK_PREFIX) - 1;
    size_t nn = strnlen(name, sizeof(msg) - pn);
    memcpy(msg, RANK_PREFIX, pn);
    memcpy(msg + pn, name, nn);
    uint8_t d[32];
    const char *k = key != NULL ? key : "";
    sl_hmac_sha256(k, strlen(k), msg, pn + nn, d);
    for (size_t i = 0; i < sizeof(d); i++) {
        out[2 * i] = HEX[d[i] >> 4];
        out[2 * i + 1] = HEX[d[i] & 15];
    }
    out[64] = '\0';
}

int sl_jobcap_is_public(const uint8_t hash[SL_JOBCAP_HASH], const char *name)
{
    char open_secret[65];
    sl_jobcap_derive("", name, open_secret);
    return sl_jobcap_check(hash, open_secret);
}
