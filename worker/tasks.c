#include "worker/tasks.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/clock.h"
#include "common/engine/executor.h"
#include "common/base/log.h"
#include "common/engine/pipeline.h"
#include "common/engine/ranks.h"
#include "common/base/rng.h"
#include "common/data/skip.h"
#include "common/data/source.h"
#include "common/spec/spec.h"

/* Cached epoch orders per job: splits of at most two epochs are outstanding
 * (docs/protocol.md), so two slots make a miss rare. */
#define WK_ORDER_SLOTS 2
/* First guess of a finished sample's bytes, before any has finished. */
#define WK_EST_INITIAL ((size_t)1 << 20)
/* How often a runner copies its executor's unit stats for heartbeats. */
#define WK_STATS_EVERY_MS 1000
/* How soon a runner held back by the worker-wide in-flight bound looks
 * again (a slot another job gives up is not signalled to it). */
#define WK_SLOT_POLL_MS 5

typedef enum {
    WK_SPLIT_QUEUED = 0, /* nothing submitted yet */
    WK_SPLIT_RUNNING,    /* some positions submitted */
    WK_SPLIT_DROPPED,    /* revoked or its stream broke: finished samples are discarded */
} wk_split_state_e;

typedef struct wk_split_s {
    uint64_t id, epoch, begin, end;
    uint64_t assignment; /* the dispatcher's hand-out id, echoed in reports */
    uint32_t stage_to;
    wk_split_state_e state;
    uint64_t next;      /* next position to submit */
    uint64_t finished;  /* samples back from the executor */
    unsigned inflight;  /* samples in the executor */
    wk_packer_t pk;     /* its partial message */
    struct wk_split_s *next_split;
} wk_split_t;

/* A sample in the executor, so a finished one finds its split. Runner only. */
typedef struct wk_slot_s {
    uint64_t epoch, position;
    wk_split_t *split; /* NULL = free slot */
} wk_slot_t;

typedef struct wk_order_s {
    int valid;
    uint64_t epoch;
    uint64_t *order;
} wk_order_t;

struct wk_job_s {
    wk_tasks_t *tasks;
    uint64_t id;
    uint64_t fingerprint, num_samples; /* as the dispatcher sent them */
    sl_spec_t spec;                    /* immutable after add */
    sl_pipeline_t *pipe;               /* immutable after add; NULL when FAILED at add */
    uint32_t nunits;
    sl_source_t *src; /* set by the runner before READY, then immutable */

    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;  /* output, assignments, state, stream detach */
    int refs;
    wk_job_state_e state;
    int stopping;      /* CLOSED because the worker stops */
    int lost_work;     /* quiesce/stop dropped some of its work (stream: UNAVAILABLE) */
    int sending;       /* the stream thread holds a popped message of sending_split */
    uint64_t sending_split, sending_assignment;
    char reason[1024]; /* why FAILED */
    wk_split_t *splits, *splits_tail; /* QUEUED and RUNNING, assignment order */
    size_t nsplits;
    wk_split_t *dropped; /* DROPPED with samples still in flight */
    wk_msglist_t out;    /* finished messages for the stream */
    size_t partial_bytes; /* sum of the splits' partial messages */
    unsigned inflight;
    size_t est_bytes;     /* running average of a finished sample's wire bytes */
    int stream_attached;
    sl_unit_stat_t units[SL_PIPE_MAX_UNITS];
    uint64_t samples_done, samples_skipped, splits_done, msgs_sent, streams, streams_broken;

    /* Runner thread only. */
    int wants; /* counted in tasks->nwant: has work and buffer room */
    wk_order_t orders[WK_ORDER_SLOTS];
    wk_slot_t *slots;
    unsigned nslots;

    wk_job_t *next_job; /* table link, under tasks->mu */
};

struct wk_tasks_s {
    char data_root[4096];
    unsigned threads;
    unsigned inflight_cap; /* over all jobs */
    size_t buffer_bytes;
    size_t max_message_bytes;

    pthread_mutex_t mu; /* the table, runners, stopping */
    pthread_cond_t cv;  /* a job was added, a runner ended */
    wk_job_t *jobs;
    size_t njobs, nfailed;
    unsigned runners;
    int stopping;

    atomic_int draining;  /* no new splits (SIGTERM) */
    atomic_uint inflight; /* samples in flight over all jobs */
    /* Jobs that could submit now (work queued, room in their buffer): the
     * in-flight bound is shared among them (wk_fair_share), so no job --
     * say one rank of a multi-rank job -- waits for another's whole queue,
     * and a job whose buffer is full holds no share. */
    atomic_uint nwant;

    /* Splits whose last message went out, until a heartbeat reports them
     * (FIFO, seq increasing; the oldest goes when full). A leaf lock: taken
     * under job->mu, never the other way. */
    pthread_mutex_t sent_mu;
    wk_split_ref_t sent[WK_MAX_SENT];
    uint64_t sent_seqs[WK_MAX_SENT];
    size_t nsent;
    uint64_t next_sent_seq;
    /* Worker-wide counters for /status; bumped next to the job's own. */
    atomic_uint_fast64_t n_jobs, n_samples, n_skipped, n_splits, n_msgs, n_broken;
    atomic_uint_fast64_t n_early_fetches; /* Fetch streams that came before their job */
    atomic_uint_fast64_t n_bytes_sent; /* packed Batch bytes handed to streams */
};

/* ------------------------------------------------------------ helpers */

const char *wk_job_state_name(wk_job_state_e s)
{
    switch (s) {
    case WK_JOB_LOADING:
        return "loading";
    case WK_JOB_READY:
        return "ready";
    case WK_JOB_FAILED:
        return "failed";
    case WK_JOB_CLOSED:
        return "closed";
    }
    return "?";
}

int wk_budget_allows(size_t buffered, size_t partial, unsigned inflight, size_t est,
                     size_t limit)
{
    if (inflight == 0 && buffered == 0) {
        return 1; /* nothing a stream could drain and nothing coming: must progress */
    }
    size_t want = buffered + partial + ((size_t)inflight + 1) * est;
    return want <= limit;
}

uint64_t wk_job_id(const wk_job_t *job) { return job->id; }

static void split_free(wk_split_t *sp)
{
    if (sp != NULL) {
        wk_packer_reset(&sp->pk);
        free(sp);
    }
}

static void job_unref(wk_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    int left = --job->refs;
    pthread_mutex_unlock(&job->mu);
    if (left > 0) {
        return;
    }
    wk_msglist_clear(&job->out);
    for (wk_split_t *sp = job->splits, *nx; sp != NULL; sp = nx) {
        nx = sp->next_split;
        split_free(sp);
    }
    for (wk_split_t *sp = job->dropped, *nx; sp != NULL; sp = nx) {
        nx = sp->next_split;
        split_free(sp);
    }
    for (int i = 0; i < WK_ORDER_SLOTS; i++) {
        free(job->orders[i].order);
    }
    free(job->slots);
    sl_source_free(job->src);
    sl_pipeline_free(job->pipe);
    pthread_mutex_destroy(&job->mu);
    pthread_cond_destroy(&job->cv);
    free(job);
}

/* Drops one active split (job->mu held): its partial message goes, and it is
 * freed now or, with samples in flight, parked until they come back. */
static void split_drop_locked(wk_job_t *job, wk_split_t *sp, wk_split_t *prev)
{
    if (prev != NULL) {
        prev->next_split = sp->next_split;
    } else {
        job->splits = sp->next_split;
    }
    if (job->splits_tail == sp) {
        job->splits_tail = prev;
    }
    job->nsplits--;
    job->partial_bytes -= wk_packer_bytes(&sp->pk);
    wk_packer_reset(&sp->pk);
    sp->state = WK_SPLIT_DROPPED;
    if (sp->inflight == 0) {
        split_free(sp);
    } else {
        sp->next_split = job->dropped;
        job->dropped = sp;
    }
}

/* Removes the buffered messages of one split (split_id) or of all (all = 1). */
static size_t out_drop_locked(wk_job_t *job, uint64_t split_id, int all)
{
    wk_msglist_t keep;
    wk_msglist_init(&keep);
    size_t dropped = 0;
    wk_msg_t *m;
    while ((m = wk_msglist_pop(&job->out)) != NULL) {
        if (all || m->batch.split_id == split_id) {
            wk_msg_free(m);
            dropped++;
        } else {
            wk_msglist_push(&keep, m);
        }
    }
    job->out = keep;
    return dropped;
}

/* Everything of the job goes (stream broke, job closed, worker stopping). */
static void job_drop_all_locked(wk_job_t *job, size_t *ret_msgs, size_t *ret_splits)
{
    size_t nsplits = 0;
    while (job->splits != NULL) {
        split_drop_locked(job, job->splits, NULL);
        nsplits++;
    }
    size_t nmsgs = out_drop_locked(job, 0, 1);
    if (ret_msgs != NULL) {
        *ret_msgs = nmsgs;
    }
    if (ret_splits != NULL) {
        *ret_splits = nsplits;
    }
    pthread_cond_broadcast(&job->cv);
}

/* Closes a job (job->mu held). */
static void job_close_locked(wk_job_t *job, int stopping)
{
    if (job->state == WK_JOB_CLOSED) {
        return;
    }
    size_t nmsgs = 0, nsplits = 0;
    job->state = WK_JOB_CLOSED;
    job->stopping = stopping;
    job_drop_all_locked(job, &nmsgs, &nsplits);
    if (nmsgs + nsplits > 0) {
        job->lost_work = 1;
    }
}

/* ------------------------------------------------------------ runner */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms)
{
    (void)sl_cond_wait_ms(cv, mu, ms);
}

static int global_acquire(wk_tasks_t *t)
{
    unsigned cur = atomic_load(&t->inflight);
    while (cur < t->inflight_cap) {
        if (atomic_compare_exchange_weak(&t->inflight, &cur, cur + 1)) {
            return 1;
        }
    }
    return 0;
}

static void global_release(wk_tasks_t *t) { atomic_fetch_sub(&t->inflight, 1); }

unsigned wk_fair_share(unsigned cap, unsigned nwant)
{
    if (nwant <= 1) {
        return cap;
    }
    unsigned share = (cap + nwant - 1) / nwant; /* rounded up: no slot idles */
    return share > 0 ? share : 1;
}

/* Runner only: whether the job counts among those sharing the slots. */
static void set_wants(wk_job_t *job, int wants)
{
    if (job->wants == wants) {
        return;
    }
    job->wants = wants;
    if (wants) {
        atomic_fetch_add(&job->tasks->nwant, 1);
    } else {
        atomic_fetch_sub(&job->tasks->nwant, 1);
    }
}

/* Opens the source and checks it against the dispatcher's view. Runner
 * thread, no lock held (indexing a large folder takes seconds). */
static int runner_load(wk_job_t *job, char *why, size_t whylen)
{
    char err[512];
    sl_source_t *src = NULL;
    int rc = sl_source_open(job->tasks->data_root, job->spec.source_type, job->spec.source_path,
                            &src, err, sizeof(err));
    if (rc < 0) {
        snprintf(why, whylen, "cannot open source: %s", err);
        return rc;
    }
    const char *warn = sl_source_open_warnings(src);
    if (warn[0] != '\0') {
        SL_WARN("job %" PRIu64 ": source '%s': %s", job->id, job->spec.source_path, warn);
    }
    uint64_t n = sl_source_count(src);
    uint64_t fp = sl_source_fingerprint(src);
    if (n != job->num_samples || fp != job->fingerprint) {
        snprintf(why, whylen,
                 "source '%.512s' under this worker's data root differs from the client's: "
                 "%" PRIu64 " samples, fingerprint %016" PRIx64 " (client: %" PRIu64
                 " samples, fingerprint %016" PRIx64 ")",
                 job->spec.source_path, n, fp, job->num_samples, job->fingerprint);
        sl_source_free(src);
        return -ESTALE;
    }
    job->src = src;
    return 0;
}

/* The order of epoch e (runner only). NULL when not cached. */
static const uint64_t *order_lookup(wk_job_t *job, uint64_t epoch)
{
    for (int i = 0; i < WK_ORDER_SLOTS; i++) {
        if (job->orders[i].valid && job->orders[i].epoch == epoch) {
            return job->orders[i].order;
        }
    }
    return NULL;
}

/* The job's epoch order into order (num_samples entries): a multi-rank
 * job's splits are over its rank's share of the epoch (common/engine/ranks.h). */
static int order_fill(const wk_job_t *job, uint64_t epoch, uint64_t *order)
{
    if (job->spec.world_size <= 1) {
        sl_epoch_order(job->spec.seed, epoch, job->spec.shuffle, job->num_samples, order);
        return 0;
    }
    uint64_t *scratch = malloc((job->num_samples > 0 ? job->num_samples : 1) * sizeof(*scratch));
    if (scratch == NULL) {
        return -ENOMEM;
    }
    sl_rank_order(&job->spec, epoch, job->num_samples, scratch, order);
    free(scratch);
    return 0;
}

/* Computes epoch's order into the slot of the oldest cached epoch (runner, no
 * lock: a shuffle of a million samples takes milliseconds). */
static int order_compute(wk_job_t *job, uint64_t epoch)
{
    int victim = 0;
    for (int i = 0; i < WK_ORDER_SLOTS; i++) {
        if (!job->orders[i].valid) {
            victim = i;
            break;
        }
        if (job->orders[i].epoch < job->orders[victim].epoch) {
            victim = i;
        }
    }
    wk_order_t *o = &job->orders[victim];
    if (o->order == NULL) {
        size_t n = job->num_samples > 0 ? (size_t)job->num_samples : 1;
        o->order = malloc(n * sizeof(uint64_t));
        if (o->order == NULL) {
            return -ENOMEM;
        }
    }
    int rc = order_fill(job, epoch, o->order);
    if (rc < 0) {
        return rc;
    }
    o->epoch = epoch;
    o->valid = 1;
    return 0;
}

/* First active split with positions left to submit. */
static wk_split_t *next_submittable(wk_job_t *job)
{
    for (wk_split_t *sp = job->splits; sp != NULL; sp = sp->next_split) {
        if (sp->next < sp->end) {
            return sp;
        }
    }
    return NULL;
}

/* Records a submitted sample; returns its slot number, which travels through
 * the executor in the sample's label field (the executor and the pipeline
 * never read labels) so a finished sample finds exactly the split instance
 * that submitted it -- a dropped and a re-assigned instance of one split may
 * both have the same position in flight, possibly with different stage_to. */
static int slot_put(wk_job_t *job, wk_split_t *sp, uint64_t epoch, uint64_t pos)
{
    for (unsigned i = 0; i < job->nslots; i++) {
        if (job->slots[i].split == NULL) {
            job->slots[i] = (wk_slot_t){.epoch = epoch, .position = pos, .split = sp};
            return (int)i;
        }
    }
    return -ENOSPC; /* cannot happen: nslots = the executor's capacity */
}

static wk_split_t *slot_take(wk_job_t *job, int32_t slot, uint64_t epoch, uint64_t pos)
{
    if (slot < 0 || (unsigned)slot >= job->nslots) {
        return NULL;
    }
    wk_slot_t *s = &job->slots[slot];
    if (s->split == NULL || s->epoch != epoch || s->position != pos) {
        return NULL;
    }
    wk_split_t *sp = s->split;
    s->split = NULL;
    return sp;
}

/* Unlinks an active split that has finished (job->mu held). */
static void split_unlink_locked(wk_job_t *job, wk_split_t *sp)
{
    wk_split_t *prev = NULL;
    for (wk_split_t *cur = job->splits; cur != NULL; prev = cur, cur = cur->next_split) {
        if (cur == sp) {
            if (prev != NULL) {
                prev->next_split = sp->next_split;
            } else {
                job->splits = sp->next_split;
            }
            if (job->splits_tail == sp) {
                job->splits_tail = prev;
            }
            job->nsplits--;
            return;
        }
    }
}

/* A finished sample came back (job->mu held). Takes out's tensor. */
static void on_done_locked(wk_job_t *job, sl_sample_t *out, const char *detail)
{
    wk_split_t *sp = slot_take(job, out->label, out->epoch, out->position);
    out->label = sl_source_label(job->src, out->index);
    job->inflight--;
    if (sp == NULL) {
        SL_ERR("job %" PRIu64 ": finished sample (epoch %" PRIu64 ", position %" PRIu64
               ") has no split",
               job->id, out->epoch, out->position);
        sl_tensor_free(&out->t);
        return;
    }
    sp->inflight--;
    if (sp->state == WK_SPLIT_DROPPED) {
        sl_tensor_free(&out->t);
        if (sp->inflight == 0) {
            wk_split_t **pp = &job->dropped;
            while (*pp != NULL && *pp != sp) {
                pp = &(*pp)->next_split;
            }
            if (*pp == sp) {
                *pp = sp->next_split;
            }
            split_free(sp);
        }
        return;
    }
    atomic_fetch_add(&job->tasks->n_samples, 1);
    if (out->skip >= 0) {
        job->samples_skipped++;
        atomic_fetch_add(&job->tasks->n_skipped, 1);
        SL_INFO("job %" PRIu64 ": skipped sample %" PRIu64 " (%s): %s", job->id, out->index,
                sl_skip_name((sl_skip_e)out->skip), detail);
    } else {
        size_t wire = wk_sample_wire_bytes(out, NULL);
        job->est_bytes = job->est_bytes - job->est_bytes / 8 + wire / 8;
        if (wire > job->est_bytes) {
            job->est_bytes = wire; /* rise fast, fall slowly: stay under the bound */
        }
    }
    job->samples_done++;
    size_t before = wk_packer_bytes(&sp->pk);
    size_t out_before = job->out.bytes;
    int rc = wk_packer_add(&sp->pk, out, detail, &job->out);
    sl_tensor_free(&out->t);
    /* Whatever the packer flushed moved from partial to the output queue. */
    job->partial_bytes = job->partial_bytes - before + wk_packer_bytes(&sp->pk);
    sp->finished++;
    if (rc == 0 && sp->finished == sp->end - sp->begin) {
        size_t last = wk_packer_bytes(&sp->pk);
        rc = wk_packer_finish(&sp->pk, &job->out);
        if (rc == 0) {
            job->partial_bytes -= last;
            split_unlink_locked(job, sp);
            split_free(sp);
            job->splits_done++;
            atomic_fetch_add(&job->tasks->n_splits, 1);
            pthread_cond_broadcast(&job->cv);
            return;
        }
    }
    if (rc < 0) {
        SL_ERR("job %" PRIu64 ": out of memory packing split %" PRIu64 "; dropping it", job->id,
               sp->id);
        wk_split_t *prev = NULL;
        for (wk_split_t *c = job->splits; c != NULL && c != sp; c = c->next_split) {
            prev = c;
        }
        split_drop_locked(job, sp, prev);
    }
    if (job->out.bytes != out_before) {
        pthread_cond_broadcast(&job->cv);
    }
}

/* Submits what the bounds allow (job->mu held). Returns an epoch whose order
 * must be computed first through *need_epoch (returns 1), else 0.
 * *held_back: the job has work and room but its share of the worker-wide
 * in-flight bound is used up (it polls again soon). */
static int submit_locked(wk_job_t *job, sl_exec_t *ex, uint64_t *need_epoch, int *held_back)
{
    wk_tasks_t *t = job->tasks;
    *held_back = 0;
    for (;;) {
        wk_split_t *sp = next_submittable(job);
        int wants = sp != NULL && wk_budget_allows(job->out.bytes, job->partial_bytes,
                                                   job->inflight, job->est_bytes,
                                                   t->buffer_bytes);
        set_wants(job, wants);
        if (!wants) {
            return 0;
        }
        if (sl_exec_inflight(ex) >= sl_exec_capacity(ex)) {
            return 0;
        }
        const uint64_t *order = order_lookup(job, sp->epoch);
        if (order == NULL) {
            *need_epoch = sp->epoch;
            return 1;
        }
        /* Over its share: finishing samples give slots back to the others. */
        if (job->inflight >= wk_fair_share(t->inflight_cap, atomic_load(&t->nwant)) ||
            !global_acquire(t)) {
            *held_back = 1;
            return 0;
        }
        int slot = slot_put(job, sp, sp->epoch, sp->next);
        if (slot < 0) {
            global_release(t);
            SL_ERR("job %" PRIu64 ": no free in-flight slot", job->id);
            return 0;
        }
        sl_sample_t s = {.epoch = sp->epoch,
                         .position = sp->next,
                         .index = order[sp->next],
                         .label = slot, /* restored from the source when it comes back */
                         .skip = -1};
        sl_tensor_init(&s.t);
        int rc = sl_exec_submit(ex, &s, 0, sp->stage_to);
        if (rc < 0) {
            global_release(t);
            job->slots[slot].split = NULL;
            if (rc != -EAGAIN) {
                SL_ERR("job %" PRIu64 ": cannot submit a sample: %s", job->id, strerror(-rc));
            }
            return 0;
        }
        sp->next++;
        sp->inflight++;
        sp->state = WK_SPLIT_RUNNING;
        job->inflight++;
    }
}

static void stats_snapshot(wk_job_t *job, sl_exec_t *ex)
{
    sl_unit_stat_t tmp[SL_PIPE_MAX_UNITS];
    sl_exec_unit_stats(ex, tmp);
    pthread_mutex_lock(&job->mu);
    memcpy(job->units, tmp, job->nunits * sizeof(tmp[0]));
    pthread_mutex_unlock(&job->mu);
}

static void runner_fail(wk_job_t *job, const char *why)
{
    SL_ERR("job %" PRIu64 ": failed on this worker: %s", job->id, why);
    wk_tasks_t *t = job->tasks;
    pthread_mutex_lock(&t->mu);
    pthread_mutex_lock(&job->mu);
    /* A job not CLOSED is still in the table (close and stop change both under t->mu). */
    if (job->state != WK_JOB_CLOSED && job->state != WK_JOB_FAILED) {
        job->state = WK_JOB_FAILED;
        snprintf(job->reason, sizeof(job->reason), "%s", why);
        job_drop_all_locked(job, NULL, NULL);
        t->nfailed++;
    }
    pthread_mutex_unlock(&job->mu);
    pthread_mutex_unlock(&t->mu);
}

static void runner_loop(wk_job_t *job, sl_exec_t *ex)
{
    wk_tasks_t *t = job->tasks;
    uint64_t last_stats = now_ms();
    int dirty = 0;
    char detail[256];
    sl_sample_t out;
    sl_tensor_init(&out.t);
    for (;;) {
        pthread_mutex_lock(&job->mu);
        if (job->state != WK_JOB_READY) {
            pthread_mutex_unlock(&job->mu);
            break;
        }
        uint64_t need_epoch = 0;
        int held_back = 0;
        int need = submit_locked(job, ex, &need_epoch, &held_back);
        unsigned inflight = job->inflight;
        if (!need && inflight == 0) {
            /* Idle: wait for an assignment, a drained buffer or a close --
             * or, held back, for a slot another job gave up. */
            cond_wait_ms(&job->cv, &job->mu, held_back ? WK_SLOT_POLL_MS : 100);
        }
        pthread_mutex_unlock(&job->mu);
        if (need) {
            int rc = order_compute(job, need_epoch);
            if (rc < 0) {
                runner_fail(job, "out of memory for the epoch order");
                break;
            }
            continue;
        }
        /* Collect: block briefly for the first, then take whatever is ready. */
        int timeout = 20;
        while (inflight > 0 && sl_exec_next(ex, &out, detail, sizeof(detail), timeout) == 0) {
            global_release(t);
            pthread_mutex_lock(&job->mu);
            on_done_locked(job, &out, detail);
            pthread_mutex_unlock(&job->mu);
            timeout = 0;
            dirty = 1;
        }
        /* Fresh stats once a second while busy, and whenever work pauses. */
        if (dirty && (inflight == 0 || now_ms() - last_stats >= WK_STATS_EVERY_MS)) {
            stats_snapshot(job, ex);
            last_stats = now_ms();
            dirty = 0;
        }
    }
    set_wants(job, 0);
    /* Closing: drain what is in flight (its splits are dropped by now). */
    while (sl_exec_next(ex, &out, detail, sizeof(detail), -1) == 0) {
        global_release(t);
        pthread_mutex_lock(&job->mu);
        on_done_locked(job, &out, detail);
        pthread_mutex_unlock(&job->mu);
    }
    sl_tensor_free(&out.t);
    stats_snapshot(job, ex);
}

static void *job_runner(void *arg)
{
    wk_job_t *job = arg;
    wk_tasks_t *t = job->tasks;
    char why[1024];
    sl_exec_t *ex = NULL;

    int rc = runner_load(job, why, sizeof(why));
    if (rc < 0) {
        runner_fail(job, why);
        goto out;
    }
    /* Per-job executor: `threads` pool threads; in-flight is also bounded
     * over all jobs by tasks->inflight_cap. */
    ex = sl_exec_new(job->pipe, job->src, t->threads, t->inflight_cap);
    job->slots = calloc(t->inflight_cap, sizeof(*job->slots));
    job->nslots = t->inflight_cap;
    if (ex == NULL || job->slots == NULL) {
        runner_fail(job, "cannot start the job's executor (out of memory or threads)");
        goto out;
    }
    pthread_mutex_lock(&job->mu);
    int ready = job->state == WK_JOB_LOADING;
    if (ready) {
        job->state = WK_JOB_READY;
        pthread_cond_broadcast(&job->cv);
    }
    pthread_mutex_unlock(&job->mu);
    if (ready) {
        SL_NOTICE("job %" PRIu64 ": ready: source '%s', %" PRIu64 " samples, %u units",
                  job->id, job->spec.source_path, job->num_samples, job->nunits);
        runner_loop(job, ex);
    }

out:
    sl_exec_free(ex);
    job_unref(job);
    pthread_mutex_lock(&t->mu);
    t->runners--;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* ------------------------------------------------------------ table */

wk_tasks_t *wk_tasks_new(const wk_tasks_opts_t *o)
{
    wk_tasks_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return NULL;
    }
    snprintf(t->data_root, sizeof(t->data_root), "%s", o->data_root);
    t->threads = o->threads > 0 ? o->threads : 1;
    t->inflight_cap = 2 * t->threads;
    t->buffer_bytes = o->buffer_bytes;
    t->max_message_bytes = o->max_message_bytes;
    pthread_mutex_init(&t->mu, NULL);
    sl_cond_init_mono(&t->cv);
    pthread_mutex_init(&t->sent_mu, NULL);
    atomic_init(&t->draining, 0);
    atomic_init(&t->inflight, 0);
    atomic_init(&t->nwant, 0);
    atomic_init(&t->n_jobs, 0);
    atomic_init(&t->n_samples, 0);
    atomic_init(&t->n_skipped, 0);
    atomic_init(&t->n_splits, 0);
    atomic_init(&t->n_msgs, 0);
    atomic_init(&t->n_bytes_sent, 0);
    atomic_init(&t->n_broken, 0);
    atomic_init(&t->n_early_fetches, 0);
    return t;
}

void wk_tasks_begin_drain(wk_tasks_t *t)
{
    atomic_store(&t->draining, 1);
}

void wk_tasks_quiesce(wk_tasks_t *t)
{
    atomic_store(&t->draining, 1);
    size_t njobs = 0, nmsgs = 0, nsplits = 0;
    pthread_mutex_lock(&t->mu);
    for (wk_job_t *job = t->jobs; job != NULL; job = job->next_job) {
        size_t m = 0, s = 0;
        pthread_mutex_lock(&job->mu);
        job_drop_all_locked(job, &m, &s);
        /* A message being sent is not ours to take back: if it goes out, the
         * split is reported sent; if not, its stream breaks. Either way it
         * is no longer "in progress" here. */
        job->sending = 0;
        if (m + s > 0) {
            job->lost_work = 1;
            njobs++;
        }
        pthread_mutex_unlock(&job->mu);
        nmsgs += m;
        nsplits += s;
    }
    pthread_mutex_unlock(&t->mu);
    if (njobs > 0) {
        SL_NOTICE("stopping: dropped %zu unfinished split(s) and %zu buffered message(s) of %zu "
                  "job(s); the dispatcher re-assigns them",
                  nsplits, nmsgs, njobs);
    }
}

void wk_tasks_stop(wk_tasks_t *t)
{
    atomic_store(&t->draining, 1);
    pthread_mutex_lock(&t->mu);
    t->stopping = 1;
    wk_job_t *list = t->jobs;
    t->jobs = NULL;
    t->njobs = 0;
    t->nfailed = 0;
    for (wk_job_t *job = list; job != NULL; job = job->next_job) {
        pthread_mutex_lock(&job->mu);
        job_close_locked(job, 1);
        pthread_mutex_unlock(&job->mu);
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    for (wk_job_t *job = list, *nx; job != NULL; job = nx) {
        nx = job->next_job;
        job_unref(job); /* the table's reference */
    }
}

void wk_tasks_free(wk_tasks_t *t)
{
    if (t == NULL) {
        return;
    }
    wk_tasks_stop(t);
    pthread_mutex_lock(&t->mu);
    while (t->runners > 0) {
        pthread_cond_wait(&t->cv, &t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->sent_mu);
    free(t);
}

/* Table lookup with a new reference (tasks->mu held). */
static wk_job_t *find_locked(wk_tasks_t *t, uint64_t id)
{
    for (wk_job_t *job = t->jobs; job != NULL; job = job->next_job) {
        if (job->id == id) {
            return job;
        }
    }
    return NULL;
}

static wk_job_t *find_ref(wk_tasks_t *t, uint64_t id)
{
    pthread_mutex_lock(&t->mu);
    wk_job_t *job = find_locked(t, id);
    if (job != NULL) {
        pthread_mutex_lock(&job->mu);
        job->refs++;
        pthread_mutex_unlock(&job->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return job;
}

void wk_tasks_add_job(wk_tasks_t *t, const Sluice__JobSpec *js)
{
    if (js->job_id == 0) {
        SL_WARN("dispatcher sent a job spec with job_id 0; ignored");
        return;
    }
    wk_job_t *dup = find_ref(t, js->job_id);
    if (dup != NULL) {
        job_unref(dup);
        SL_DEBUG("job %" PRIu64 ": spec already held", js->job_id);
        return;
    }
    wk_job_t *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        SL_ERR("job %" PRIu64 ": out of memory", js->job_id);
        return;
    }
    job->tasks = t;
    job->id = js->job_id;
    job->fingerprint = js->source_fingerprint;
    job->num_samples = js->num_samples;
    job->refs = 1; /* the table's */
    job->est_bytes = WK_EST_INITIAL;
    pthread_mutex_init(&job->mu, NULL);
    sl_cond_init_mono(&job->cv);
    wk_msglist_init(&job->out);

    /* Parse and compile here (cheap) so assignments can be validated against
     * the unit count at once; the slow source indexing runs on the runner. */
    char err[512];
    const char *json = js->spec_json != NULL ? js->spec_json : "";
    int rc = sl_spec_parse("<rpc>", json, strlen(json), &job->spec, err, sizeof(err));
    if (rc == 0) {
        rc = sl_pipeline_new(&job->spec, 0, &job->pipe, err, sizeof(err));
    }
    if (rc == 0 && job->num_samples > SL_SOURCE_MAX_SAMPLES) {
        rc = -E2BIG;
        snprintf(err, sizeof(err), "num_samples %" PRIu64 " is above the limit %u",
                 job->num_samples, SL_SOURCE_MAX_SAMPLES);
    }
    if (rc < 0) {
        job->state = WK_JOB_FAILED;
        snprintf(job->reason, sizeof(job->reason), "invalid job spec: %s", err);
        SL_ERR("job %" PRIu64 ": %s", job->id, job->reason);
    } else {
        job->nunits = sl_pipeline_nunits(job->pipe);
        job->state = WK_JOB_LOADING;
    }

    pthread_mutex_lock(&t->mu);
    if (t->stopping) {
        pthread_mutex_unlock(&t->mu);
        job_unref(job);
        return;
    }
    if (job->state == WK_JOB_LOADING && t->njobs - t->nfailed >= WK_MAX_JOBS) {
        job->state = WK_JOB_FAILED;
        snprintf(job->reason, sizeof(job->reason), "worker already runs %d jobs", WK_MAX_JOBS);
        SL_WARN("job %" PRIu64 ": refused: %s", job->id, job->reason);
    }
    if (job->state == WK_JOB_FAILED && t->nfailed >= WK_MAX_FAILED_JOBS) {
        pthread_mutex_unlock(&t->mu);
        SL_WARN("job %" PRIu64 ": too many failed jobs held; not tracked", job->id);
        job_unref(job);
        return;
    }
    if (job->state == WK_JOB_LOADING) {
        job->refs++; /* the runner's */
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&th, &attr, job_runner, job);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            job->refs--;
            job->state = WK_JOB_FAILED;
            snprintf(job->reason, sizeof(job->reason), "cannot start a thread: %s",
                     strerror(rc));
            SL_ERR("job %" PRIu64 ": %s", job->id, job->reason);
        } else {
            t->runners++;
        }
    }
    job->next_job = t->jobs;
    t->jobs = job;
    t->njobs++;
    if (job->state == WK_JOB_FAILED) {
        t->nfailed++;
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (job->state != WK_JOB_FAILED) {
        atomic_fetch_add(&t->n_jobs, 1);
        SL_NOTICE("job %" PRIu64 ": accepted: %" PRIu64 " samples, %u units, batch %u",
                  job->id, job->num_samples, job->nunits, job->spec.batch_size);
    }
}

void wk_tasks_assign(wk_tasks_t *t, const Sluice__SplitAssignment *a)
{
    wk_job_t *job = find_ref(t, a->job_id);
    if (job == NULL) {
        SL_WARN("assignment of split %" PRIu64 " for unknown job %" PRIu64 "; ignored",
                a->split_id, a->job_id);
        return;
    }
    pthread_mutex_lock(&job->mu);
    const char *bad = NULL;
    if (atomic_load(&t->draining)) {
        bad = "the worker is draining"; /* the dispatcher re-queues it */
    } else if (job->state == WK_JOB_FAILED || job->state == WK_JOB_CLOSED) {
        bad = job->state == WK_JOB_FAILED ? "the job failed here" : "the job is closed";
    } else if (a->begin > a->end || a->end > sl_spec_positions(&job->spec, job->num_samples)) {
        bad = "range outside the job's samples";
    } else if (a->stage_to > job->nunits) {
        bad = "stage_to beyond the pipeline's units";
    } else if (job->nsplits >= WK_MAX_SPLITS_PER_JOB) {
        bad = "too many splits queued";
    } else {
        for (wk_split_t *sp = job->splits; sp != NULL; sp = sp->next_split) {
            if (sp->id == a->split_id) {
                /* Handed out again while we still run it (its revocation was
                 * lost): the same work, so it just takes the new hand-out's
                 * id, which is the one the dispatcher now waits for. */
                sp->assignment = a->assignment;
                sp->pk.assignment = a->assignment;
                bad = "already held";
                break;
            }
        }
    }
    if (bad != NULL) {
        pthread_mutex_unlock(&job->mu);
        SL_WARN("job %" PRIu64 ": split %" PRIu64 " (epoch %" PRIu64 ", [%" PRIu64 ", %" PRIu64
                "), stage_to %u) ignored: %s",
                a->job_id, a->split_id, a->epoch, a->begin, a->end, a->stage_to, bad);
        job_unref(job);
        return;
    }
    wk_split_t *sp = calloc(1, sizeof(*sp));
    if (sp == NULL) {
        pthread_mutex_unlock(&job->mu);
        SL_ERR("job %" PRIu64 ": out of memory for split %" PRIu64, a->job_id, a->split_id);
        job_unref(job);
        return;
    }
    sp->id = a->split_id;
    sp->epoch = a->epoch;
    sp->begin = a->begin;
    sp->end = a->end;
    sp->next = a->begin;
    sp->stage_to = a->stage_to;
    sp->assignment = a->assignment;
    sp->state = WK_SPLIT_QUEUED;
    wk_packer_init(&sp->pk, job->id, sp->id, sp->stage_to, job->spec.batch_size,
                   t->max_message_bytes);
    sp->pk.assignment = sp->assignment;
    if (sp->begin == sp->end) {
        /* An empty split is done at once: one message with split_done. */
        if (wk_packer_finish(&sp->pk, &job->out) == 0) {
            job->splits_done++;
            atomic_fetch_add(&t->n_splits, 1);
        }
        split_free(sp);
    } else {
        if (job->splits_tail != NULL) {
            job->splits_tail->next_split = sp;
        } else {
            job->splits = sp;
        }
        job->splits_tail = sp;
        job->nsplits++;
    }
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
    SL_DEBUG("job %" PRIu64 ": split %" PRIu64 " assigned (epoch %" PRIu64 ", [%" PRIu64
             ", %" PRIu64 "), units [0, %u))",
             a->job_id, a->split_id, a->epoch, a->begin, a->end, a->stage_to);
    job_unref(job);
}

void wk_tasks_close_job(wk_tasks_t *t, uint64_t job_id)
{
    pthread_mutex_lock(&t->mu);
    wk_job_t **pp = &t->jobs;
    while (*pp != NULL && (*pp)->id != job_id) {
        pp = &(*pp)->next_job;
    }
    wk_job_t *job = *pp;
    if (job != NULL) {
        *pp = job->next_job;
        t->njobs--;
        pthread_mutex_lock(&job->mu);
        if (job->state == WK_JOB_FAILED) {
            t->nfailed--;
        }
        job_close_locked(job, 0);
        pthread_mutex_unlock(&job->mu);
    }
    pthread_mutex_unlock(&t->mu);
    if (job == NULL) {
        SL_DEBUG("close of unknown job %" PRIu64 "; ignored", job_id);
        return;
    }
    SL_NOTICE("job %" PRIu64 ": closed by the dispatcher", job_id);
    job_unref(job); /* the table's reference */
}

void wk_tasks_revoke(wk_tasks_t *t, uint64_t job_id, uint64_t split_id)
{
    wk_job_t *job = find_ref(t, job_id);
    if (job == NULL) {
        SL_DEBUG("revocation of split %" PRIu64 " of unknown job %" PRIu64 "; ignored", split_id,
                 job_id);
        return;
    }
    pthread_mutex_lock(&job->mu);
    int found = 0;
    wk_split_t *prev = NULL;
    for (wk_split_t *sp = job->splits; sp != NULL; prev = sp, sp = sp->next_split) {
        if (sp->id == split_id) {
            split_drop_locked(job, sp, prev);
            found = 1;
            break;
        }
    }
    size_t n = out_drop_locked(job, split_id, 0);
    if (found || n > 0) {
        pthread_cond_broadcast(&job->cv);
    }
    pthread_mutex_unlock(&job->mu);
    if (found || n > 0) {
        SL_INFO("job %" PRIu64 ": split %" PRIu64 " revoked (%zu buffered messages dropped)",
                job_id, split_id, n);
    }
    job_unref(job);
}

/* ------------------------------------------------------------ reports */

static int u64_push(uint64_t **arr, size_t *n, size_t *cap, uint64_t v)
{
    for (size_t i = 0; i < *n; i++) {
        if ((*arr)[i] == v) {
            return 0;
        }
    }
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        uint64_t *na = realloc(*arr, nc * sizeof(*na));
        if (na == NULL) {
            return -ENOMEM;
        }
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = v;
    return 0;
}

static int unit_add(wk_tasks_report_t *r, size_t *cap, const char *name, const sl_unit_stat_t *u)
{
    for (size_t i = 0; i < r->n_units; i++) {
        if (strcmp(r->units[i].name, name) == 0) {
            r->units[i].cpu_sec += u->cpu_sec;
            r->units[i].out_bytes += u->out_bytes;
            r->units[i].samples += u->samples;
            return 0;
        }
    }
    if (r->n_units == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        wk_unit_report_t *na = realloc(r->units, nc * sizeof(*na));
        if (na == NULL) {
            return -ENOMEM;
        }
        r->units = na;
        *cap = nc;
    }
    wk_unit_report_t *w = &r->units[r->n_units++];
    snprintf(w->name, sizeof(w->name), "%s", name);
    w->cpu_sec = u->cpu_sec;
    w->out_bytes = u->out_bytes;
    w->samples = u->samples;
    return 0;
}

/* Appends (job, split, assignment) unless already listed for this job:
 * entries of one job are contiguous from `from`. */
static int ref_push(wk_split_ref_t **arr, size_t *n, size_t *cap, size_t from, uint64_t job_id,
                    uint64_t split_id, uint64_t assignment)
{
    for (size_t i = from; i < *n; i++) {
        if ((*arr)[i].split_id == split_id && (*arr)[i].assignment == assignment) {
            return 0;
        }
    }
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        wk_split_ref_t *na = realloc(*arr, nc * sizeof(*na));
        if (na == NULL) {
            return -ENOMEM;
        }
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] =
        (wk_split_ref_t){.job_id = job_id, .split_id = split_id, .assignment = assignment};
    return 0;
}

static int ref_held(const wk_tasks_report_t *r, uint64_t job_id, uint64_t split_id)
{
    for (size_t i = 0; i < r->n_splits; i++) {
        if (r->splits[i].job_id == job_id && r->splits[i].split_id == split_id) {
            return 1;
        }
    }
    return 0;
}

int wk_tasks_report(wk_tasks_t *t, wk_tasks_report_t *r)
{
    memset(r, 0, sizeof(*r));
    r->bytes_sent = atomic_load(&t->n_bytes_sent);
    size_t cap_known = 0, cap_splits = 0, cap_failed = 0, cap_units = 0;
    int rc = 0;
    size_t flen = 0;
    pthread_mutex_lock(&t->mu);
    for (wk_job_t *job = t->jobs; job != NULL && rc == 0; job = job->next_job) {
        pthread_mutex_lock(&job->mu);
        rc = u64_push(&r->known_jobs, &r->n_known, &cap_known, job->id);
        if (rc == 0 && job->state == WK_JOB_FAILED) {
            rc = u64_push(&r->failed_jobs, &r->n_failed, &cap_failed, job->id);
            if (flen < sizeof(r->failure) - 1) {
                int w = snprintf(r->failure + flen, sizeof(r->failure) - flen,
                                 "%sjob %" PRIu64 ": %.300s", flen > 0 ? "; " : "", job->id,
                                 job->reason);
                flen += w > 0 ? (size_t)w : 0;
                if (flen >= sizeof(r->failure)) {
                    flen = sizeof(r->failure) - 1;
                }
            }
        }
        size_t from = r->n_splits;
        for (wk_split_t *sp = job->splits; sp != NULL && rc == 0; sp = sp->next_split) {
            rc = ref_push(&r->splits, &r->n_splits, &cap_splits, from, job->id, sp->id,
                          sp->assignment);
        }
        for (wk_msg_t *m = job->out.head; m != NULL && rc == 0; m = m->next) {
            rc = ref_push(&r->splits, &r->n_splits, &cap_splits, from, job->id,
                          m->batch.split_id, m->assignment);
        }
        if (rc == 0 && job->sending) {
            rc = ref_push(&r->splits, &r->n_splits, &cap_splits, from, job->id,
                          job->sending_split, job->sending_assignment);
        }
        r->buffered_bytes += job->out.bytes + job->partial_bytes;
        for (uint32_t u = 0; u < job->nunits && rc == 0; u++) {
            if (job->units[u].samples > 0) {
                rc = unit_add(r, &cap_units, sl_pipeline_unit_name(job->pipe, u),
                              &job->units[u]);
            }
        }
        pthread_mutex_unlock(&job->mu);
    }
    pthread_mutex_unlock(&t->mu);
    /* Sent splits after the jobs: one whose last message went out meanwhile
     * is then listed in progress and sent; a split listed in progress is
     * left out of sent (a re-assigned split may be held again) and kept for
     * the next report. */
    pthread_mutex_lock(&t->sent_mu);
    if (rc == 0 && t->nsent > 0) {
        r->sent = malloc(t->nsent * sizeof(*r->sent));
        r->sent_seq = malloc(t->nsent * sizeof(*r->sent_seq));
        if (r->sent == NULL || r->sent_seq == NULL) {
            rc = -ENOMEM;
        }
    }
    for (size_t i = 0; rc == 0 && i < t->nsent; i++) {
        if (!ref_held(r, t->sent[i].job_id, t->sent[i].split_id)) {
            r->sent[r->n_sent] = t->sent[i];
            r->sent_seq[r->n_sent] = t->sent_seqs[i];
            r->n_sent++;
        }
    }
    pthread_mutex_unlock(&t->sent_mu);
    if (rc < 0) {
        wk_tasks_report_free(r);
    }
    return rc;
}

void wk_tasks_report_done(wk_tasks_t *t, const wk_tasks_report_t *r)
{
    pthread_mutex_lock(&t->sent_mu);
    /* Both lists are in increasing seq order: one merge pass. */
    size_t keep = 0;
    size_t j = 0;
    for (size_t i = 0; i < t->nsent; i++) {
        while (j < r->n_sent && r->sent_seq[j] < t->sent_seqs[i]) {
            j++;
        }
        if (j < r->n_sent && r->sent_seq[j] == t->sent_seqs[i]) {
            continue; /* reported */
        }
        t->sent[keep] = t->sent[i];
        t->sent_seqs[keep] = t->sent_seqs[i];
        keep++;
    }
    t->nsent = keep;
    pthread_mutex_unlock(&t->sent_mu);
}

void wk_tasks_report_free(wk_tasks_report_t *r)
{
    free(r->known_jobs);
    free(r->splits);
    free(r->sent);
    free(r->sent_seq);
    free(r->failed_jobs);
    free(r->units);
    memset(r, 0, sizeof(*r));
}

void wk_tasks_totals(wk_tasks_t *t, wk_totals_t *ret)
{
    ret->jobs = atomic_load(&t->n_jobs);
    ret->samples_done = atomic_load(&t->n_samples);
    ret->samples_skipped = atomic_load(&t->n_skipped);
    ret->splits_done = atomic_load(&t->n_splits);
    ret->msgs_sent = atomic_load(&t->n_msgs);
    ret->bytes_sent = atomic_load(&t->n_bytes_sent);
    ret->streams_broken = atomic_load(&t->n_broken);
    ret->early_fetches = atomic_load(&t->n_early_fetches);
}

size_t wk_tasks_snapshot(wk_tasks_t *t, wk_job_info_t *rows, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (wk_job_t *job = t->jobs; job != NULL; job = job->next_job, n++) {
        if (n >= max) {
            continue;
        }
        wk_job_info_t *r = &rows[n];
        memset(r, 0, sizeof(*r));
        pthread_mutex_lock(&job->mu);
        r->job_id = job->id;
        r->state = job->state;
        snprintf(r->reason, sizeof(r->reason), "%s", job->reason);
        snprintf(r->source, sizeof(r->source), "%.127s", job->spec.source_path);
        r->num_samples = job->num_samples;
        r->nunits = job->nunits;
        for (wk_split_t *sp = job->splits; sp != NULL; sp = sp->next_split) {
            if (sp->state == WK_SPLIT_QUEUED) {
                r->splits_queued++;
            } else {
                r->splits_running++;
            }
        }
        r->buffered_bytes = job->out.bytes + job->partial_bytes;
        r->buffered_msgs = job->out.count + (job->sending ? 1 : 0);
        r->inflight = job->inflight;
        r->samples_done = job->samples_done;
        r->samples_skipped = job->samples_skipped;
        r->splits_done = job->splits_done;
        r->msgs_sent = job->msgs_sent;
        r->streams = job->streams;
        r->streams_broken = job->streams_broken;
        r->stream_attached = job->stream_attached;
        pthread_mutex_unlock(&job->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* ------------------------------------------------------------ streams */

wk_attach_e wk_tasks_attach(wk_tasks_t *t, uint64_t job_id, int wait_ms, wk_job_t **ret_job,
                            char *why, size_t whylen)
{
    uint64_t until = now_ms() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
    wk_job_t *job = NULL;
    int counted = 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        if (t->stopping) {
            pthread_mutex_unlock(&t->mu);
            snprintf(why, whylen, "worker is shutting down");
            return WK_ATTACH_SHUTTING_DOWN;
        }
        job = find_locked(t, job_id);
        if (job != NULL) {
            pthread_mutex_lock(&job->mu);
            job->refs++;
            pthread_mutex_unlock(&job->mu);
            break;
        }
        if (!counted) {
            /* The client knows of work for us the dispatcher has not told
             * us yet: the control thread heartbeats early to fetch it. */
            atomic_fetch_add(&t->n_early_fetches, 1);
            counted = 1;
        }
        uint64_t now = now_ms();
        if (now >= until) {
            pthread_mutex_unlock(&t->mu);
            snprintf(why, whylen, "job %" PRIu64 " is not known to this worker", job_id);
            return WK_ATTACH_NOT_FOUND;
        }
        cond_wait_ms(&t->cv, &t->mu, (int)(until - now < 100 ? until - now : 100));
    }
    pthread_mutex_unlock(&t->mu);

    pthread_mutex_lock(&job->mu);
    for (;;) {
        if (job->state == WK_JOB_FAILED) {
            snprintf(why, whylen, "job %" PRIu64 " failed on this worker: %s", job_id,
                     job->reason);
            pthread_mutex_unlock(&job->mu);
            job_unref(job);
            return WK_ATTACH_FAILED;
        }
        if (job->state == WK_JOB_CLOSED) {
            int stopping = job->stopping;
            snprintf(why, whylen, "job %" PRIu64 " is %s", job_id,
                     stopping ? "stopping with the worker" : "closed");
            pthread_mutex_unlock(&job->mu);
            job_unref(job);
            return stopping ? WK_ATTACH_SHUTTING_DOWN : WK_ATTACH_NOT_FOUND;
        }
        if (!job->stream_attached) {
            break;
        }
        uint64_t now = now_ms();
        if (now >= until) {
            snprintf(why, whylen, "job %" PRIu64 " already has a Fetch stream on this worker",
                     job_id);
            pthread_mutex_unlock(&job->mu);
            job_unref(job);
            return WK_ATTACH_BUSY;
        }
        cond_wait_ms(&job->cv, &job->mu, (int)(until - now < 100 ? until - now : 100));
    }
    job->stream_attached = 1;
    job->streams++;
    pthread_mutex_unlock(&job->mu);
    *ret_job = job;
    return WK_ATTACH_OK;
}

static wk_next_e state_locked(const wk_job_t *job)
{
    if (job->state == WK_JOB_CLOSED) {
        if (!job->stopping) {
            return WK_NEXT_CLOSED;
        }
        return job->lost_work ? WK_NEXT_STOPPING : WK_NEXT_LEFT;
    }
    if (job->state == WK_JOB_FAILED) {
        return WK_NEXT_FAILED;
    }
    return WK_NEXT_TIMEOUT;
}

wk_next_e wk_job_poll_state(wk_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    wk_next_e s = state_locked(job);
    pthread_mutex_unlock(&job->mu);
    return s;
}

wk_next_e wk_job_next_msg(wk_job_t *job, int wait_ms, wk_msg_t **ret_msg)
{
    pthread_mutex_lock(&job->mu);
    wk_next_e s = state_locked(job);
    if (s == WK_NEXT_TIMEOUT && job->out.head == NULL && wait_ms > 0) {
        cond_wait_ms(&job->cv, &job->mu, wait_ms);
        s = state_locked(job);
    }
    if (s == WK_NEXT_TIMEOUT) {
        wk_msg_t *m = wk_msglist_pop(&job->out);
        if (m != NULL) {
            *ret_msg = m;
            s = WK_NEXT_MSG;
            job->sending = 1;
            job->sending_split = m->batch.split_id;
            job->sending_assignment = m->assignment;
            pthread_cond_broadcast(&job->cv); /* room in the buffer: the runner may submit */
        }
    }
    pthread_mutex_unlock(&job->mu);
    return s;
}

/* Remembers a split whose last message went out (t->sent_mu not held). */
static void sent_add(wk_tasks_t *t, uint64_t job_id, uint64_t split_id, uint64_t assignment)
{
    pthread_mutex_lock(&t->sent_mu);
    if (t->nsent == WK_MAX_SENT) {
        /* Heartbeats have failed for a long time: forget the oldest. The
         * dispatcher may then re-assign it; the client drops duplicates. */
        memmove(&t->sent[0], &t->sent[1], (WK_MAX_SENT - 1) * sizeof(t->sent[0]));
        memmove(&t->sent_seqs[0], &t->sent_seqs[1], (WK_MAX_SENT - 1) * sizeof(t->sent_seqs[0]));
        t->nsent--;
    }
    t->sent[t->nsent] =
        (wk_split_ref_t){.job_id = job_id, .split_id = split_id, .assignment = assignment};
    t->sent_seqs[t->nsent] = ++t->next_sent_seq;
    t->nsent++;
    pthread_mutex_unlock(&t->sent_mu);
}

void wk_job_note_sent(wk_job_t *job, const wk_msg_t *m)
{
    pthread_mutex_lock(&job->mu);
    job->msgs_sent++;
    if (job->sending && job->sending_split == m->batch.split_id) {
        job->sending = 0;
    }
    /* Under job->mu, so a heartbeat report sees the split either in
     * progress or sent, never in neither. */
    if (m->batch.split_done) {
        sent_add(job->tasks, job->id, m->batch.split_id, m->assignment);
    }
    pthread_mutex_unlock(&job->mu);
    atomic_fetch_add(&job->tasks->n_msgs, 1);
    atomic_fetch_add(&job->tasks->n_bytes_sent, sluice__batch__get_packed_size(&m->batch));
}

void wk_job_detach(wk_job_t *job, int broken, const char *why)
{
    size_t nmsgs = 0, nsplits = 0;
    pthread_mutex_lock(&job->mu);
    job->stream_attached = 0;
    job->sending = 0; /* whatever the stream held is gone with it */
    if (broken && job->state != WK_JOB_CLOSED) {
        job->streams_broken++;
        atomic_fetch_add(&job->tasks->n_broken, 1);
        job_drop_all_locked(job, &nmsgs, &nsplits);
    }
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
    if (broken && nmsgs + nsplits > 0) {
        SL_NOTICE("job %" PRIu64 ": Fetch stream ended abnormally (%s); dropped %zu buffered "
                  "messages and %zu unfinished splits",
                  job->id, why != NULL ? why : "?", nmsgs, nsplits);
    } else if (broken) {
        SL_INFO("job %" PRIu64 ": Fetch stream ended abnormally (%s) with nothing pending",
                job->id, why != NULL ? why : "?");
    }
    job_unref(job);
}

void wk_job_reason(wk_job_t *job, char *buf, size_t len)
{
    pthread_mutex_lock(&job->mu);
    snprintf(buf, len, "%s", job->reason);
    pthread_mutex_unlock(&job->mu);
}
