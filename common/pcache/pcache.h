/* pcache: the prefix cache (docs/cache.md, issue #36): the output of a
 * spec's deterministic prefix (common/spec/spec_prefix.h) per sample, kept
 * in the sample namespace of a cache directory (common/remote/cache.h), so
 * a later epoch, a later job of the same spec, or a concurrent one skips
 * those units.
 *
 * Key: (SHA-256 of the prefix's canonical form, the source fingerprint, the
 * sample index). An entry is a header -- magic, format version, the whole
 * key, the tensor's shape, codec, lengths, a checksum of the header and the
 * payload -- then the tensor, compressed with the wire's codec
 * (common/sample/codec.h) when that makes it smaller. An entry that is
 * short, corrupt, of another format version or of another key is never
 * served: the lookup counts it (corrupt), removes it and misses, so the
 * sample is computed and the entry written again.
 *
 * One sl_pcache_t per job (a prefix and a source); thread-safe: lookups and
 * stores from up to nthreads threads at once, each with its own tid (its
 * codec context), counters atomic. The store is shared and outlives it. */
#ifndef SL_PCACHE_H
#define SL_PCACHE_H

#include <stdint.h>

#include "common/remote/cache.h"
#include "common/sample/tensor.h"
#include "common/spec/spec.h"

/* "SLPC": a file under samples/ that does not start with it is not ours. */
#define SL_PCACHE_MAGIC 0x43504c53u
/* Bumped with any change of the entry's layout or meaning. */
#define SL_PCACHE_VERSION 1u

typedef struct sl_pcache_s sl_pcache_t;

typedef struct sl_pcache_stats_s {
    uint64_t hits, misses;
    uint64_t bytes_read;    /* entry bytes read on hits */
    uint64_t bytes_written; /* entry bytes stored */
    uint64_t evictions;     /* entries the stores of this job evicted */
    uint64_t store_errors;  /* stores that failed (ENOSPC, EIO, ...): the sample went on */
    uint64_t corrupt;       /* entries refused: short, bad magic/version/key/checksum */
    uint64_t bytes_evicted; /* the bytes of those evictions */
    /* The hits' read-back cost, measured (thread CPU time from the lookup
     * to the tensor decoded, b = the entry's stored bytes): the sums the
     * dispatcher fits a cost per entry and per byte from
     * (dispatcher/planner/planner_cache_cost.h): sum t (ns), sum b^2,
     * sum b*t (bytes * ns); n is hits, sum b is bytes_read. */
    uint64_t read_ns;
    double read_bytes_sq, read_bytes_ns;
    /* Concurrent fillers (common/remote/pclaim.h): hits that waited for
     * another job's claim on the key (counted in hits too), and lookups
     * that waited until the claim's deadline and computed (in misses). */
    uint64_t waited, claim_timeouts;
} sl_pcache_stats_t;

/* For spec (its layout with fusion, as sl_pipeline_new builds it) over a
 * source with fingerprint: *ret gets a cache of the prefix, or NULL when
 * there is nothing to cache (spec "cache": "off", or the first unit
 * draws). store: the sample namespace (sl_cache_open); nthreads > 0.
 * Returns 0, -EINVAL, -ENOMEM (err says why). */
int sl_pcache_new(sl_cache_t *store, const sl_spec_t *spec, uint64_t fingerprint, unsigned nthreads,
                  sl_pcache_t **ret, char *err, size_t errlen);
void sl_pcache_free(sl_pcache_t *pc); /* NULL ok */

/* Keys the cache also by sha, the contents of files the prefix reads
 * besides the sample (sl_pipeline_content_hash: tokenize's ranks file), so
 * a file replaced under the same path never serves the old entries. Before
 * the first get or put. */
void sl_pcache_key_content(sl_pcache_t *pc, const uint8_t sha[32]);

/* Units [0, prefix) are cached (> 0). */
uint32_t sl_pcache_prefix(const sl_pcache_t *pc);

/* The output of the prefix for sample index into out (reshaped; its buffer
 * reused): 0 on a hit, -ENOENT on a miss (a bad entry is a miss, counted
 * and removed), -ENOMEM. Thread tid < nthreads.
 * A miss claims the key for thread tid (pclaim.h) when no one else holds
 * it; when someone does, the lookup waits for its entry (bounded by the
 * claim's deadline; past it, a miss without the claim). The claimer then
 * computes and calls sl_pcache_put, or sl_pcache_release when it cannot:
 * a thread's next get releases its claim too. */
int sl_pcache_get(sl_pcache_t *pc, unsigned tid, uint64_t index, sl_tensor_t *out);

/* Stores t, the prefix's output for index. 0, or -errno of the store
 * (counted in store_errors; the caller goes on without the entry).
 * Releases thread tid's claim on index (stored or not). */
int sl_pcache_put(sl_pcache_t *pc, unsigned tid, uint64_t index, const sl_tensor_t *t);

/* Releases thread tid's claim, if any (its sample failed: the waiters
 * compute it themselves). */
void sl_pcache_release(sl_pcache_t *pc, unsigned tid);

/* How long a lookup waits at most for another's claim, and the deadline
 * of its own (default SL_PCLAIM_WAIT_MS; $SLUICE_PCACHE_CLAIMS=off at
 * sl_pcache_new makes it 0); 0: no claims, concurrent fillers each
 * compute (as before claims; for side-by-side benchmarks). */
void sl_pcache_set_claim_ms(sl_pcache_t *pc, int64_t ms);

void sl_pcache_stats(const sl_pcache_t *pc, sl_pcache_stats_t *ret);
/* Adds a's counters to *sum. */
void sl_pcache_stats_add(sl_pcache_stats_t *sum, const sl_pcache_stats_t *a);

#endif
