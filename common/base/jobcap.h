/* jobcap: per-job capabilities (docs/protocol.md "Job capabilities").
 *
 * SubmitJob hands the client a random job secret; every RPC that acts on
 * the job carries it. The dispatcher keeps (and journals) only its SHA-256
 * and sends workers that hash, so neither a journal on disk nor a worker
 * can produce the secret: they can only check one presented to them.
 *
 * Pure functions, any thread; nothing here logs. */
#ifndef SL_JOBCAP_H
#define SL_JOBCAP_H

#include <stddef.h>
#include <stdint.h>

#define SL_JOBCAP_MIN 16   /* bytes of a caller-chosen secret (>= 128 bits of hex) */
#define SL_JOBCAP_MAX 128  /* bytes of any secret */
#define SL_JOBCAP_HASH 32  /* bytes of its hash */

/* A fresh secret: 32 lowercase hex characters (128 bits from getrandom)
 * and a NUL. 0, or a negative errno when the kernel's generator fails. */
int sl_jobcap_new(char out[SL_JOBCAP_MAX + 1]);
/* 1 when s may be a secret: SL_JOBCAP_MIN..SL_JOBCAP_MAX printable,
 * non-space ASCII bytes (it travels in protobuf strings and env vars). */
int sl_jobcap_valid(const char *s);
/* The hash the dispatcher and workers hold. */
void sl_jobcap_hash(const char *secret, uint8_t out[SL_JOBCAP_HASH]);
/* 1 when secret (NULL = none) hashes to hash. The hashes are compared in
 * constant time, so the time a refusal takes says nothing about how close
 * a guess was. */
int sl_jobcap_check(const uint8_t hash[SL_JOBCAP_HASH], const char *secret);
/* The secret the ranks of a multi-rank job derive alike without talking to
 * each other: hex HMAC-SHA256(key, "sluice-rank-job\n" name), 64 chars and
 * a NUL. key: a secret the ranks share (SLUICE_JOB_SECRET, else the
 * tenant's token); NULL or "" only where the cluster has no token at all
 * (then the capability is only as secret as the job name). */
void sl_jobcap_derive(const char *key, const char *name, char out[65]);
/* 1 when hash is the capability derived from name with no key: anyone who
 * knows the job's name can produce it (a multi-rank job with no secret). */
int sl_jobcap_is_public(const uint8_t hash[SL_JOBCAP_HASH], const char *name);

#endif
