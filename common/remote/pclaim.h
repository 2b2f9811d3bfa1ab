/* pclaim: in-progress markers in the cache directory, so two threads or
 * processes of one host that need the same thing at the same time make it
 * once: the first claims the key, the others wait for its result. Used by
 * the prefix cache for samples (docs/cache.md "Concurrent fillers": a miss
 * is computed once) and by partial entries for range fetches
 * (partial.c: a range is fetched over the link once; the others wait for
 * its bytes in the entry).
 *
 * A claim is a file ".claim-<key>" in the namespace's directory (names starting
 * with '.' are not entries: eviction and usage skip them), held by an
 * exclusive flock(2) on it. The lock, not the file, is the claim: the
 * kernel drops it when its holder closes the file or dies, so a claim of a
 * crashed or killed process never blocks anyone (its file is taken over by
 * the next claimer, which removes it on release). The file's contents --
 * the holder's pid and deadline -- are informative, and the deadline bounds
 * waiters (a holder alive but stuck: stopped, or computing far too long).
 * Release unlinks the file before it unlocks, so a claimer that locked a
 * file already unlinked sees it and retries on the new one.
 *
 * Locks are per open file: two threads of one process conflict as two
 * processes do. No mutable state but the caller's sl_pclaim_t. A thread
 * holds at most one claim of each kind: a sample's (held while the sample
 * is computed, which may wait for a range) and a range's (held only while
 * its fetch runs, which waits for no claim), so waits cannot form a cycle. */
#ifndef SL_PCLAIM_H
#define SL_PCLAIM_H

#include <stdint.h>

#include "common/remote/cache.h"

/* How long a waiter waits at most, and the deadline a claimer writes:
 * far beyond a sample's prefix (milliseconds, a few seconds for a long
 * video), so only a stuck holder reaches it. */
#define SL_PCLAIM_WAIT_MS 10000

/* A claim held, or none (fd < 0). */
typedef struct sl_pclaim_s {
    int fd;
    char name[SL_CACHE_KEY_MAX + 8]; /* ".claim-<key>" */
} sl_pclaim_t;

/* What a busy claim's file says of its holder (zeros: not written yet, or
 * unreadable). */
typedef struct sl_pclaim_holder_s {
    int64_t pid;
    int64_t deadline_ms; /* CLOCK_REALTIME ms: comparable across processes */
} sl_pclaim_holder_t;

void sl_pclaim_init(sl_pclaim_t *c);

/* Tries once to claim key in directory dir_fd, never blocking. 0: claimed
 * (c holds it, its file says our pid and now + ttl_ms); -EBUSY: another
 * holds it (*ret_holder, may be NULL, gets what its file says); -errno when
 * no claim file can be made (read-only or full directory: the caller goes
 * on unclaimed). c must hold nothing. */
int sl_pclaim_try(int dir_fd, const char *key, int64_t ttl_ms, sl_pclaim_t *c,
                  sl_pclaim_holder_t *ret_holder);

/* Drops c's claim (nothing held: no-op): removes its file, then unlocks. */
void sl_pclaim_release(int dir_fd, sl_pclaim_t *c);

/* Whether a holder's deadline has passed (CLOCK_REALTIME); an unknown
 * deadline (0) has not. */
int sl_pclaim_expired(const sl_pclaim_holder_t *h);

/* The pause before a waiter's next look, having waited waited_us so far: a
 * quarter of it within [50 us, 2 ms], so a wake-up comes at most ~25 %
 * after the entry (plus 2 ms) and a long wait costs few looks. */
int64_t sl_pclaim_backoff_us(int64_t waited_us);

#endif
