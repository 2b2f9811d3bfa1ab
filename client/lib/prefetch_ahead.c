/* prefetch_ahead: the client's next reads' URL shards, fetched ahead
 * (prefetch_ahead.h). */
#include "client/lib/prefetch_ahead.h"

#include <stdint.h>

#include "client/lib/client_impl.h"

/* Positions [from, to) of epoch to the prefetcher. */
static void hand(struct sluice_job *job, uint64_t epoch, uint64_t from, uint64_t to)
{
    const uint64_t *order = cl_line_order(job->consumer.line, epoch);
    if (order != NULL && from < to) {
        (void)sl_source_prefetch(job->src, order + from, (size_t)(to - from));
    }
}

/* Local mode: the window ahead of the cursor, when the cursor has used up
 * half of what was handed before (so one call covers many reads). */
static void ahead_local(struct sluice_job *job)
{
    cl_job_consumer_t *c = &job->consumer;
    uint64_t e = c->local_epoch, p = c->local_pos;
    if (c->ahead_epoch > e || (c->ahead_epoch == e && c->ahead_pos > p + CL_AHEAD_POSITIONS / 2)) {
        return;
    }
    if (c->ahead_epoch == e && c->ahead_pos > p) {
        p = c->ahead_pos; /* what is before it was handed already */
    }
    uint64_t want = CL_AHEAD_POSITIONS;
    while (want > 0 && e < job->end_epoch) {
        uint64_t end = job->positions - p < want ? job->positions : p + want;
        hand(job, e, p, end);
        want -= end - p;
        p = end;
        if (p >= job->positions) {
            e++;
            p = 0;
        }
    }
    c->ahead_epoch = e;
    c->ahead_pos = p;
}

/* With a dispatcher: the next splits given to the client, each once. */
static void ahead_splits(struct sluice_job *job)
{
    for (unsigned looked = 0, i = 0;; i++) {
        pthread_mutex_lock(&job->mu);
        cl_split_t *s = NULL;
        while (s == NULL && i < sl_ring_len(&job->local_pending) && looked < CL_AHEAD_SPLITS) {
            const uint64_t *id = sl_ring_at(&job->local_pending, i);
            cl_split_t *t = cl_split_find(job, *id);
            if (t != NULL && t->owner == 0 && t->next < t->end && t->state != CL_SPLIT_ACKED) {
                looked++;
                if (!t->prefetched) {
                    s = t;
                    break;
                }
            }
            i++;
        }
        if (s == NULL) {
            pthread_mutex_unlock(&job->mu);
            return;
        }
        s->prefetched = 1;
        uint64_t epoch = s->epoch, from = s->next, to = s->end;
        pthread_mutex_unlock(&job->mu);
        /* Only the consumer runs local splits and computes orders: the
         * split's positions are still ahead of its reads. */
        hand(job, epoch, from, to);
    }
}

void cl_prefetch_ahead(struct sluice_job *job)
{
    if (job->consumer.ahead_off) {
        return;
    }
    if (job->src == NULL || !sl_source_prefetchable(job->src)) {
        job->consumer.ahead_off = 1;
        return;
    }
    if (job->disp) {
        ahead_splits(job);
    } else {
        ahead_local(job);
    }
}
