/* batcher: turns finished samples, arriving in any order from any number of
 * producers (pool threads, worker streams), into batches -- and is the one
 * place that enforces exactly-once: every (epoch, position) is accepted once,
 * later copies are dropped and counted.
 *
 * Arrival order (default): a batch is emitted as soon as batch_size samples of
 * one epoch have arrived. Deterministic: samples are released strictly in
 * (epoch, position) order, so batch composition and order are fixed by the
 * spec and seed alone. Skipped samples take part in ordering and epoch
 * completion but are not delivered. Batches never span epochs; an epoch's last
 * short batch is emitted unless drop_last.
 *
 * Batches are assembled in place: the first pixel sample of a batch starts a
 * buffer of batch_size slots of its size, and every later sample of that size
 * is written (sl_batcher_add_fill) or copied (sl_batcher_add) into its slot
 * as it is released, so the finished buffer is handed out as the batch
 * without concatenation. Samples of other sizes keep their own buffers and
 * such a batch is concatenated when emitted. Freed batches give their
 * buffer back to a small pool (as many buffers as were ever out at once,
 * SL_BATCHER_POOL to SL_BATCHER_POOL_MAX, thread-safe, may
 * outlive the batcher), so a steady job reuses warm memory instead of
 * mapping and faulting in a fresh buffer per batch. Buffers of 2 MB and more are
 * mapped in 2 MB pages where the host allows (common/engine/bigbuf.h): the
 * first touch of the pool's buffers is then a few faults, not thousands.
 *
 * Memory: the batcher holds at most what producers hand it ahead of the next
 * position to release; producers bound that (windows, credits). Not
 * thread-safe: one owner thread. */
#ifndef SL_BATCHER_H
#define SL_BATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "common/data/skip.h"
#include "common/data/url_vers.h"
#include "common/sample/tensor.h"

typedef struct sl_sample_s {
    uint64_t epoch;
    uint64_t position; /* in the epoch order */
    uint64_t index;    /* in the source */
    int32_t label;
    int skip;          /* -1: delivered; else an sl_skip_e */
    uint64_t split_id; /* producer's bookkeeping; the batcher ignores it */
    sl_tensor_t t;     /* output (empty when skipped) */
    /* The URL objects its read fetched whole and their versions (the
     * executor's read, or a worker's: Sample.url_versions); the client
     * checks them before batching (client/lib/url_pins.h). The batcher
     * ignores them. */
    sl_url_vers_t vers;
} sl_sample_t;

typedef struct sl_sample_meta_s {
    uint64_t index, position;
    int32_t label;
    sl_dtype_e dtype;
    sl_layout_e layout;
    uint32_t h, w, c;
    size_t offset, nbytes; /* into sl_batch_t.data */
    uint64_t split_id;     /* the producer's, from sl_sample_t */
} sl_sample_meta_t;

/* A batch: samples' bytes back to back in data. uniform = every sample has
 * the same dtype, layout and shape, so data is an [n, ...] array. */
typedef struct sl_batch_s {
    uint64_t epoch;
    uint32_t n;
    int uniform;
    sl_sample_meta_t *meta;
    uint8_t *data;
    size_t nbytes;
    /* Private: where data goes back to when the batch is freed (the
     * batcher's buffer pool), and its allocated size. */
    struct sl_bufpool_s *pool;
    size_t cap;
} sl_batch_t;

typedef struct sl_batcher_s sl_batcher_t;

#define SL_BATCHER_POOL 2 /* idle batch buffers kept for reuse, at least */
/* At most: the pool keeps as many as were out at once, up to this. */
#define SL_BATCHER_POOL_MAX 8

typedef struct sl_batcher_stats_s {
    uint64_t delivered;
    uint64_t duplicates;
    uint64_t skipped[SL_SKIP__COUNT];
    uint64_t batches;
    uint64_t buffers_made; /* batch buffers allocated, not reused from the pool */
} sl_batcher_stats_t;

sl_batcher_t *sl_batcher_new(uint32_t batch_size, int drop_last, int deterministic);
void sl_batcher_free(sl_batcher_t *b);

/* Declares that epoch has n positions; must come before its samples. Epochs
 * are declared in increasing order. Returns -EINVAL otherwise. */
int sl_batcher_begin_epoch(sl_batcher_t *b, uint64_t epoch, uint64_t n);
/* Takes the sample (its tensor data moves into the batcher; s->t is left
 * empty). Returns 0 accepted, 1 duplicate (dropped), -EINVAL for an epoch not
 * declared or a position out of range, -ENOMEM. */
int sl_batcher_add(sl_batcher_t *b, sl_sample_t *s);
/* Writes exactly n bytes to dst; cannot fail (the producer checked its
 * source before calling sl_batcher_add_fill). */
typedef void (*sl_batcher_fill_fn)(void *arg, uint8_t *dst, size_t n);
/* sl_batcher_add for a delivered sample whose bytes are not in memory yet
 * (received from a peer): s->t carries dtype, layout, shape and nbytes > 0
 * but no data. Unless the sample is a duplicate or refused, fill is called
 * once, with dst the sample's final place in the batch being assembled when
 * it can be released now (arrival order, or the next position in
 * deterministic order), else a buffer of its own that the batcher holds
 * (one more copy when its batch is assembled). Same returns as
 * sl_batcher_add, plus -EINVAL for a sample that is a skip or has data. */
int sl_batcher_add_fill(sl_batcher_t *b, sl_sample_t *s, sl_batcher_fill_fn fill, void *arg);
/* Marks positions [begin, end) of a declared epoch as delivered before
 * (by an earlier process of a restarted rank, docs/protocol.md "Multi-rank
 * jobs"): they count towards the epoch's completion and ordering, are
 * delivered and counted nowhere, and later copies are dropped as
 * duplicates. Returns how many were newly marked, or -EINVAL for an
 * undeclared epoch or a range beyond it. */
int64_t sl_batcher_mark_done(sl_batcher_t *b, uint64_t epoch, uint64_t begin, uint64_t end);
/* From now on, remember the split_id of every sample a drop_last drop
 * discards (an epoch's short last batch), for sl_batcher_take_dropped:
 * a producer that counts samples when their batch is consumed (multi-rank
 * acknowledgements) must count these too. */
void sl_batcher_track_drops(sl_batcher_t *b);
/* Packed batches (common/order/pack.h): every batch_size positions of the
 * order are one batch span (a pack; holes and skips leave it short), and
 * a batch is whatever of a span was delivered -- never empty, never
 * dropped. Only for a deterministic batcher (-EINVAL otherwise). */
int sl_batcher_align(sl_batcher_t *b);
/* Moves up to max remembered split ids into out; returns how many. */
size_t sl_batcher_take_dropped(sl_batcher_t *b, uint64_t *out, size_t max);
/* Has (epoch, position) been accepted already? (Producers use it to skip work.) */
int sl_batcher_seen(const sl_batcher_t *b, uint64_t epoch, uint64_t position);
/* A ready batch (caller frees with sl_batch_free), or NULL. */
sl_batch_t *sl_batcher_pop(sl_batcher_t *b);
/* True once every position of epoch has been accepted and released and
 * every batch of it popped (its drop_last remainder discarded). */
int sl_batcher_epoch_done(const sl_batcher_t *b, uint64_t epoch);
/* True once every position of every declared epoch has been accepted and
 * every batch popped. */
int sl_batcher_done(const sl_batcher_t *b);
void sl_batcher_get_stats(const sl_batcher_t *b, sl_batcher_stats_t *ret);

/* Any thread; before or after sl_batcher_free. */
void sl_batch_free(sl_batch_t *batch);

#endif
