/* prefetch: the queued splits' URL shards handed to the host's background
 * fetcher (prefetch.h). Under job->mu: the work here is a walk over the
 * split's positions and a cache look-up per distinct shard; the downloads
 * run on the fetcher's own threads. */
#include "worker/prefetch.h"

#include "common/data/source.h"
#include "worker/tasks_impl.h"

/* The cached order of epoch, or NULL (the runner computes it when it
 * reaches the split; the split is looked at again then). */
static const uint64_t *cached_order(const wk_job_t *job, uint64_t epoch)
{
    for (int i = 0; i < WK_ORDER_SLOTS; i++) {
        if (job->orders[i].valid && job->orders[i].epoch == epoch) {
            return job->orders[i].order;
        }
    }
    return NULL;
}

void wk_prefetch_queued_locked(wk_job_t *job)
{
    if (job->src == NULL) {
        return;
    }
    unsigned looked = 0;
    for (wk_split_t *sp = job->splits; sp != NULL && looked < WK_PREFETCH_SPLITS;
         sp = sp->next_split) {
        if (sp->next >= sp->end) {
            continue;
        }
        looked++;
        const uint64_t *order = sp->prefetched ? NULL : cached_order(job, sp->epoch);
        if (order == NULL) {
            continue;
        }
        sl_source_prefetch(job->src, order + sp->next, (size_t)(sp->end - sp->next));
        sp->prefetched = 1;
    }
}
