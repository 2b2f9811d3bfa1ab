/* executor: runs samples through a pipeline on a bounded pool and hands the
 * results back to one owner thread -- the local engine of `sluice run
 * --local`, of workers, and of the client shim (its local share and the units
 * after the split point). At most max_inflight samples are in flight; the
 * owner submits while there is room and collects finished samples. A
 * sample that starts mid-pipeline (from > 0: the client finishing what a
 * worker sent) is run before queued samples that start from their bytes.
 * The whole job (epochs, order, batches, splits) is client/'s business. */
#ifndef SL_EXECUTOR_H
#define SL_EXECUTOR_H

#include <stdint.h>

#include "common/engine/batcher.h"
#include "common/engine/pipeline.h"
#include "common/data/source.h"

typedef struct sl_exec_s sl_exec_t;

/* src may be NULL when no sample will start at unit 0 without bytes. */
sl_exec_t *sl_exec_new(const sl_pipeline_t *p, const sl_source_t *src, unsigned threads,
                       unsigned max_inflight);
void sl_exec_free(sl_exec_t *ex); /* waits for samples in flight; NULL ok */

/* Queues a sample for units [from, to). If from == 0 and in->t is empty, the
 * bytes are read from the source by in->index. Takes in->t's data. Returns
 * -EAGAIN when max_inflight samples are already in flight (collect first). */
int sl_exec_submit(sl_exec_t *ex, sl_sample_t *in, uint32_t from, uint32_t to);
/* Next finished sample, waiting up to timeout_ms (-1 forever). A failed
 * sample comes back with skip set and the reason in detail. Returns 0,
 * -ETIMEDOUT, or -ENOENT when nothing is in flight. */
int sl_exec_next(sl_exec_t *ex, sl_sample_t *out, char *detail, size_t detail_len,
                 int timeout_ms);
unsigned sl_exec_inflight(const sl_exec_t *ex);
unsigned sl_exec_capacity(const sl_exec_t *ex);
/* The prefix cache (common/pcache/pcache.h, docs/cache.md) for samples
 * that start from their bytes and run at least its prefix; NULL: none.
 * Only before the first submit (-EBUSY after: the pool reads it unlocked);
 * pc was made for at least `threads` threads and outlives ex. Bytes out
 * are the same with or without it. */
struct sl_pcache_s;
int sl_exec_set_pcache(sl_exec_t *ex, struct sl_pcache_s *pc);
/* Sums per-unit cost over all threads so far (sl_pipeline_nunits entries). */
void sl_exec_unit_stats(sl_exec_t *ex, sl_unit_stat_t *ret);
/* CPU seconds the executor's threads have used so far (sl_pool_cpu_sec). */
double sl_exec_cpu_sec(const sl_exec_t *ex);

#endif
