#include "common/base/clock.h"
#include "common/engine/executor.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/err.h"
#include "common/engine/pool.h"
#include "common/order/ranks.h"
#include "common/pcache/pcache.h"

typedef struct slot_s {
    sl_exec_t *ex;
    sl_sample_t s;
    uint32_t from, to;
    int rc;
    char detail[256];
    struct slot_s *next; /* free list or done list */
} slot_t;

struct sl_exec_s {
    const sl_pipeline_t *p;
    const sl_source_t *src;
    sl_pool_t *pool;
    unsigned cap;
    slot_t *slots;
    slot_t *free_list; /* owner thread only */
    unsigned inflight; /* owner thread only */
    bool submitted;    /* owner thread only: a sample was ever submitted */

    pthread_mutex_t mu; /* guards the done list */
    pthread_cond_t cv;
    slot_t *done_head, *done_tail;

    unsigned nthreads;
    sl_pipe_scratch_t *scratch; /* one per pool thread */
    sl_unit_stat_t *stats;      /* nthreads x SL_PIPE_MAX_UNITS, each row its thread's */
    sl_pcache_t *pc;            /* the prefix cache, or NULL; set before the first submit */
};

static int run_units(slot_t *sl, unsigned tid, uint32_t from, uint32_t to)
{
    sl_exec_t *ex = sl->ex;
    char msg[200];
    int rc = sl_pipeline_run(ex->p, from, to, sl->s.epoch, sl->s.index, &sl->s.t, &ex->scratch[tid],
                             &ex->stats[(size_t)tid * SL_PIPE_MAX_UNITS], msg, sizeof(msg));
    if (rc < 0) {
        const char *name = ex->src ? sl_source_name(ex->src, sl->s.index) : "sample";
        snprintf(sl->detail, sizeof(sl->detail), "%s: %s", name, msg);
    }
    return rc;
}

/* A sample from its bytes through the prefix cache (docs/cache.md): a hit
 * starts after the prefix without reading the file; a miss reads it, runs
 * the prefix, stores its output (a failed store only counts) and goes on.
 * 1 when the cache does not apply (the caller runs the sample as ever). */
static int run_cached(slot_t *sl, unsigned tid)
{
    sl_exec_t *ex = sl->ex;
    uint32_t pre = sl_pcache_prefix(ex->pc);
    if (pre > sl->to || sl->s.index == SL_POS_HOLE || ex->src == NULL) {
        return 1;
    }
    if (sl_pcache_get(ex->pc, tid, sl->s.index, &sl->s.t) == 0) {
        return pre < sl->to ? run_units(sl, tid, pre, sl->to) : 0;
    }
    sl->s.t.nbytes = 0;
    sl->s.t.dtype = SL_DT_BYTES;
    int rc = sl_source_read_v(ex->src, sl->s.index, &sl->s.t, &sl->s.vers, sl->detail,
                              sizeof(sl->detail));
    if (rc == 0) {
        rc = run_units(sl, tid, 0, pre);
    }
    if (rc == 0) {
        (void)sl_pcache_put(ex->pc, tid, sl->s.index, &sl->s.t);
    }
    /* The put released this thread's claim on the key; a failed sample
     * releases it here (its waiters compute it themselves), before the
     * units after the prefix either way. */
    sl_pcache_release(ex->pc, tid);
    if (rc == 0 && pre < sl->to) {
        rc = run_units(sl, tid, pre, sl->to);
    }
    return rc;
}

static void run_slot(void *arg, unsigned tid)
{
    slot_t *sl = arg;
    sl_exec_t *ex = sl->ex;
    sl->rc = 0;
    sl->detail[0] = '\0';
    int fresh = sl->from == 0 && sl->s.t.nbytes == 0 && sl->s.t.dtype == SL_DT_BYTES;
    if (fresh) {
        /* Read here: its versions are this read's. A prefix cache hit reads
         * nothing and has none (docs/sources.md "One version per job"). */
        sl->s.vers.n = 0;
    }
    int rc = fresh && ex->pc != NULL ? run_cached(sl, tid) : 1;
    if (rc <= 0) {
        sl->rc = rc;
    } else if (fresh) {
        if (sl->s.index == SL_POS_HOLE) {
            sl->rc = sl_err(sl->detail, sizeof(sl->detail), -ECANCELED,
                            "position %" PRIu64 ": consumed before the resume", sl->s.position);
        } else if (ex->src == NULL) {
            sl->rc = sl_err(sl->detail, sizeof(sl->detail), -EINVAL, "no source to read from");
        } else {
            sl->rc = sl_source_read_v(ex->src, sl->s.index, &sl->s.t, &sl->s.vers, sl->detail,
                                      sizeof(sl->detail));
        }
    }
    if (rc > 0 && sl->rc == 0) {
        sl->rc = run_units(sl, tid, sl->from, sl->to);
    }
    sl->next = NULL;
    pthread_mutex_lock(&ex->mu);
    if (ex->done_tail != NULL) {
        ex->done_tail->next = sl;
    } else {
        ex->done_head = sl;
    }
    ex->done_tail = sl;
    pthread_cond_signal(&ex->cv);
    pthread_mutex_unlock(&ex->mu);
}

sl_exec_t *sl_exec_new(const sl_pipeline_t *p, const sl_source_t *src, unsigned threads,
                       unsigned max_inflight)
{
    if (threads == 0 || max_inflight == 0) {
        return NULL;
    }
    sl_exec_t *ex = calloc(1, sizeof(*ex));
    if (ex == NULL) {
        return NULL;
    }
    ex->p = p;
    ex->src = src;
    ex->cap = max_inflight;
    ex->nthreads = threads;
    ex->slots = calloc(max_inflight, sizeof(*ex->slots));
    ex->scratch = calloc(threads, sizeof(*ex->scratch));
    ex->stats = calloc((size_t)threads * SL_PIPE_MAX_UNITS, sizeof(*ex->stats));
    if (sl_cond_init_mono(&ex->cv) != 0) {
        free(ex->slots);
        free(ex->scratch);
        free(ex->stats);
        free(ex);
        return NULL;
    }
    pthread_mutex_init(&ex->mu, NULL);
    if (ex->slots == NULL || ex->scratch == NULL || ex->stats == NULL) {
        sl_exec_free(ex);
        return NULL;
    }
    for (unsigned i = 0; i < threads; i++) {
        sl_pipe_scratch_init(&ex->scratch[i]);
    }
    for (unsigned i = 0; i < max_inflight; i++) {
        ex->slots[i].ex = ex;
        sl_tensor_init(&ex->slots[i].s.t);
        ex->slots[i].next = ex->free_list;
        ex->free_list = &ex->slots[i];
    }
    /* The queue holds every slot, so submit never blocks in the pool. */
    ex->pool = sl_pool_new(threads, max_inflight);
    if (ex->pool == NULL) {
        sl_exec_free(ex);
        return NULL;
    }
    return ex;
}

void sl_exec_free(sl_exec_t *ex)
{
    if (ex == NULL) {
        return;
    }
    sl_pool_free(ex->pool); /* runs what is queued, joins */
    if (ex->slots != NULL) {
        for (unsigned i = 0; i < ex->cap; i++) {
            sl_tensor_free(&ex->slots[i].s.t);
        }
    }
    if (ex->scratch != NULL) {
        for (unsigned i = 0; i < ex->nthreads; i++) {
            sl_pipe_scratch_free(&ex->scratch[i]);
        }
    }
    pthread_mutex_destroy(&ex->mu);
    pthread_cond_destroy(&ex->cv);
    free(ex->slots);
    free(ex->scratch);
    free(ex->stats);
    free(ex);
}

int sl_exec_submit(sl_exec_t *ex, sl_sample_t *in, uint32_t from, uint32_t to)
{
    slot_t *sl = ex->free_list;
    if (sl == NULL) {
        return -EAGAIN;
    }
    ex->free_list = sl->next;
    sl_tensor_t keep = sl->s.t; /* reuse the slot's buffer when the input has none */
    sl->s = *in;
    if (in->t.data == NULL) {
        sl->s.t = keep;
        sl->s.t.nbytes = 0;
        sl->s.t.dtype = SL_DT_BYTES;
    } else {
        sl_tensor_free(&keep);
    }
    sl_tensor_init(&in->t);
    sl->from = from;
    sl->to = to;
    /* A sample that resumes mid-pipeline is the client finishing what a
     * worker sent (a few cheap units); behind a queue of local samples
     * started from their bytes it would wait for all of them, and the
     * worker's stream with it. It goes first. */
    int rc = from > 0 ? sl_pool_submit_urgent(ex->pool, run_slot, sl)
                      : sl_pool_submit(ex->pool, run_slot, sl);
    if (rc < 0) {
        sl->next = ex->free_list;
        ex->free_list = sl;
        return rc;
    }
    ex->inflight++;
    ex->submitted = true;
    return 0;
}

int sl_exec_next(sl_exec_t *ex, sl_sample_t *out, char *detail, size_t detail_len,
                 int timeout_ms)
{
    if (ex->inflight == 0) {
        return -ENOENT;
    }
    double until = sl_mono_sec() + (timeout_ms > 0 ? timeout_ms / 1000.0 : 0);
    pthread_mutex_lock(&ex->mu);
    while (ex->done_head == NULL) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&ex->cv, &ex->mu);
        } else if (timeout_ms == 0 ||
                   sl_cond_wait_until(&ex->cv, &ex->mu, until) == ETIMEDOUT) {
            if (ex->done_head == NULL) {
                pthread_mutex_unlock(&ex->mu);
                return -ETIMEDOUT;
            }
        }
    }
    slot_t *sl = ex->done_head;
    ex->done_head = sl->next;
    if (ex->done_head == NULL) {
        ex->done_tail = NULL;
    }
    pthread_mutex_unlock(&ex->mu);

    ex->inflight--;
    sl_tensor_free(&out->t);
    *out = sl->s;
    out->skip = sl->rc < 0 ? (int)sl_skip_from_errno(sl->rc) : -1;
    if (sl->rc < 0) {
        /* Keep the buffer in the slot for reuse; the caller gets nothing. */
        sl_tensor_init(&out->t);
    } else {
        sl_tensor_init(&sl->s.t);
    }
    if (detail != NULL && detail_len > 0) {
        snprintf(detail, detail_len, "%s", sl->rc < 0 ? sl->detail : "");
    }
    sl->next = ex->free_list;
    ex->free_list = sl;
    return 0;
}

unsigned sl_exec_inflight(const sl_exec_t *ex) { return ex->inflight; }
unsigned sl_exec_capacity(const sl_exec_t *ex) { return ex->cap; }

double sl_exec_cpu_sec(const sl_exec_t *ex) { return sl_pool_cpu_sec(ex->pool); }

void sl_exec_unit_stats(sl_exec_t *ex, sl_unit_stat_t *ret)
{
    uint32_t n = sl_pipeline_nunits(ex->p);
    memset(ret, 0, n * sizeof(*ret));
    /* Rows are written by their pool threads without locks; reading them
     * while samples are in flight gives a slightly stale sum, which is all a
     * profile needs. At the end of a run the pool is idle and sums are exact. */
    for (unsigned t = 0; t < ex->nthreads; t++) {
        const sl_unit_stat_t *row = &ex->stats[(size_t)t * SL_PIPE_MAX_UNITS];
        for (uint32_t u = 0; u < n; u++) {
            ret[u].cpu_sec += row[u].cpu_sec;
            ret[u].out_bytes += row[u].out_bytes;
            ret[u].samples += row[u].samples;
            for (int k = 0; k < SL_SUB__COUNT; k++) {
                ret[u].sub_sec[k] += row[u].sub_sec[k];
            }
        }
    }
}

int sl_exec_set_pcache(sl_exec_t *ex, struct sl_pcache_s *pc)
{
    if (ex->submitted) {
        return -EBUSY; /* pool threads may be reading ex->pc without a lock */
    }
    ex->pc = pc;
    return 0;
}
