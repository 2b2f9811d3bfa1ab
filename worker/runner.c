/* runner: one thread per job, from opening its source to draining its
 * executor, and the worker-wide in-flight bound the runners share.
 *
 * The runner opens the source (LOADING -> READY), then loops: submit what
 * the bounds allow (its splits in assignment order), take back finished
 * samples and pack them into the job's output queue. It never polls: with
 * samples in flight it blocks on its executor (each finished sample is a
 * chance to submit again); with none, on job->cv, which everything that can
 * let it submit broadcasts -- an assignment, a message taken by the stream,
 * a state move, a worker-wide slot given back while it is held.
 *
 * The executor, the epoch orders and the slots are the runner's alone; the
 * rest of the job is shared under job->mu (tasks_impl.h). */
#include "worker/prefetch.h"
#include "worker/tasks_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/log.h"
#include "common/base/rng.h"
#include "common/data/skip.h"
#include "common/engine/balance_costs.h"
#include "common/engine/executor.h"
#include "common/order/ranks.h"
#include "common/remote/probe.h"
#include "common/sample/record.h"

/* How often a busy runner copies its executor's unit stats for heartbeats. */
#define WK_STATS_EVERY_MS 1000

/* What submit_locked asks of the runner. */
enum { WK_SUBMIT_DONE = 0, WK_SUBMIT_NEED_ORDER = 1 };

/* ------------------------------------------------------------ shared bound */

int wk_budget_allows(size_t buffered, size_t partial, unsigned inflight, size_t est,
                     size_t limit)
{
    if (inflight == 0 && buffered == 0) {
        return 1; /* nothing a stream could drain and nothing coming: must progress */
    }
    size_t want = buffered + partial + ((size_t)inflight + 1) * est;
    return want <= limit;
}

unsigned wk_fair_share(unsigned cap, unsigned nwant)
{
    if (nwant <= 1) {
        return cap;
    }
    unsigned share = (cap + nwant - 1) / nwant; /* rounded up: no slot idles */
    return share > 0 ? share : 1;
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

/* Gives a slot back and wakes the held jobs (no lock held: takes the table's). */
static void global_release(wk_tasks_t *t)
{
    atomic_fetch_sub(&t->inflight, 1);
    if (atomic_load(&t->nheld) == 0) {
        return;
    }
    pthread_mutex_lock(&t->mu);
    for (wk_job_t *job = t->jobs; job != NULL; job = job->next_job) {
        pthread_mutex_lock(&job->mu);
        if (job->held) {
            pthread_cond_broadcast(&job->cv);
        }
        pthread_mutex_unlock(&job->mu);
    }
    pthread_mutex_unlock(&t->mu);
}

/* Sets one of a job's flags and the worker-wide count of jobs that have it
 * set: job->wants (runner only: has work and buffer room, so shares the
 * slots) and job->held (job->mu held). */
static void flag_set(int *flag, atomic_uint *count, int on)
{
    if (*flag == on) {
        return;
    }
    *flag = on;
    if (on) {
        atomic_fetch_add(count, 1);
    } else {
        atomic_fetch_sub(count, 1);
    }
}

/* One worker-wide slot for the job within its fair share (job->mu held).
 * Over its share, or with every slot taken, a job with samples in flight
 * waits for its own to come back. One with none is marked held first, so
 * the next slot given back wakes it, and then looks once more: a slot given
 * back before the mark woke nobody. */
static int share_acquire_locked(wk_job_t *job)
{
    wk_tasks_t *t = job->tasks;
    if (job->inflight >= wk_fair_share(t->inflight_cap, atomic_load(&t->nwant))) {
        return 0;
    }
    if (!global_acquire(t)) {
        if (job->inflight > 0) {
            return 0;
        }
        flag_set(&job->held, &t->nheld, 1);
        if (!global_acquire(t)) {
            return 0;
        }
    }
    flag_set(&job->held, &t->nheld, 0);
    return 1;
}

/* ------------------------------------------------------------ source, orders */

/* Opens the source and checks it against the dispatcher's view. Returns 0,
 * or the error with why in err (-ENOLINK: its data server could not be
 * reached, "data server unreachable" in err). No lock held (indexing a
 * large folder takes seconds). */
static int runner_load(wk_job_t *job, char *err, size_t errlen)
{
    char why[512];
    sl_source_t *src = NULL;
    int rc = sl_source_open_spec(job->tasks->data_root, job->tasks->remote, &job->spec, &src, why,
                                 sizeof(why));
    if (rc < 0) {
        int down = sl_remote_err_unreachable(rc);
        snprintf(err, errlen, "cannot open source: %s%s", down ? "data server unreachable: " : "",
                 why);
        return down ? -ENOLINK : rc;
    }
    const char *warn = sl_source_open_warnings(src);
    if (warn[0] != '\0') {
        SL_WARN("job %" PRIu64 ": source '%s': %s", job->id, job->spec.source_path, warn);
    }
    uint64_t n = sl_source_count(src);
    uint64_t fp = sl_source_fingerprint(src);
    if (n != job->num_samples || fp != job->fingerprint) {
        snprintf(err, errlen,
                 "source '%.512s' under this worker's data root differs from the client's: "
                 "%" PRIu64 " samples, fingerprint %016" PRIx64 " (client: %" PRIu64
                 " samples, fingerprint %016" PRIx64 ")",
                 job->spec.source_path, n, fp, job->num_samples, job->fingerprint);
        sl_source_free(src);
        return -ESTALE;
    }
    /* Balanced batching: the same predictions as the client's, for the same
     * order (common/order/balance.h). */
    if (job->spec.batching.mode != SL_BATCHING_COUNT) {
        size_t nn = n > 0 ? n : 1;
        job->tcost = malloc(nn * sizeof(*job->tcost));
        job->ttok = malloc(nn * sizeof(*job->ttok));
        job->ttiles = malloc(nn * sizeof(*job->ttiles));
        if (job->tcost == NULL || job->ttok == NULL || job->ttiles == NULL ||
            sl_balance_sample_costs(&job->spec, src, job->tcost, job->ttok, job->ttiles) < 0) {
            snprintf(err, errlen, "out of memory predicting sample costs");
            sl_source_free(src);
            return -ENOMEM;
        }
    }
    /* Before any sample runs: the pipeline is shared by the pool from then on. */
    rc = sl_pipeline_load(job->pipe, src, why, sizeof(why));
    if (rc < 0) {
        snprintf(err, errlen, "%s", why);
        sl_source_free(src);
        return rc;
    }
    job->src = src;
    return 0;
}

/* runner_load, failing the job when it cannot. A data server that cannot
 * be reached at the open is what it is mid-job (job_revive.c): the job is
 * given back naming it, the server probed, and the source opened again
 * when it answers -- the job then stays FAILED until the runner revives it
 * (runner_ready), so nothing reads job->src while it is set. */
static int runner_open(wk_job_t *job)
{
    char err[1024];
    for (;;) {
        int rc = runner_load(job, err, sizeof(err));
        if (rc == 0) {
            return 0;
        }
        if (wk_job_fail_open(job, rc == -ENOLINK, err) < 0 || rc != -ENOLINK ||
            !wk_job_probe_wait(job)) {
            return rc;
        }
    }
}

/* LOADING -> READY, or a job the open gave back and took again (runner_open)
 * FAILED -> READY. 0, or -EINVAL when it closed meanwhile. */
static int runner_ready(wk_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    int rc = job->state == WK_JOB_FAILED ? wk_job_revive_locked(job)
                                         : wk_job_transition_locked(job, WK_JOB_READY);
    pthread_mutex_unlock(&job->mu);
    return rc;
}

/* The order of epoch e. NULL when not cached. */
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
 * job's splits are over its rank's share of the epoch (common/order/ranks.h). */
static int order_fill(const wk_job_t *job, uint64_t epoch, uint64_t *order)
{
    if (job->spec.world_size <= 1) {
        return sl_rank_order_balanced(&job->spec, epoch, job->num_samples, job->tcost, job->ttok,
                                      job->ttiles, order, order);
    }
    uint64_t *scratch = malloc(sl_spec_order_len(&job->spec, job->num_samples) * sizeof(*scratch));
    if (scratch == NULL) {
        return -ENOMEM;
    }
    int rc = sl_rank_order_balanced(&job->spec, epoch, job->num_samples, job->tcost, job->ttok,
                                    job->ttiles, scratch, order);
    free(scratch);
    return rc;
}

/* Computes epoch's order into the slot of the oldest cached epoch (no lock:
 * a shuffle of a million samples takes milliseconds). */
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
        o->order = malloc(sl_spec_order_len(&job->spec, job->num_samples) * sizeof(uint64_t));
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

/* ------------------------------------------------------------ slots */

/* Records a submitted sample; returns its slot number, which travels through
 * the executor in the sample's label field (the executor and the pipeline
 * never read labels) so a finished sample finds exactly the split instance
 * that submitted it -- a dropped and a re-assigned instance of one split may
 * both have the same position in flight, possibly with different stage_to. */
static int slot_put(wk_job_t *job, wk_split_t *sp, uint64_t epoch, uint64_t pos)
{
    for (unsigned i = 0; i < job->nslots; i++) {
        if (job->slots[i].split == NULL) {
            job->slots[i] =
                (wk_slot_t){.epoch = epoch, .position = pos, .split = sp, .compress = sp->compress};
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

/* ------------------------------------------------------------ finished samples */

/* A dropped split's sample came back: the split goes with its last one. */
static void dropped_return_locked(wk_job_t *job, wk_split_t *sp)
{
    if (sp->inflight > 0) {
        return;
    }
    wk_split_t **pp = &job->dropped;
    while (*pp != NULL && *pp != sp) {
        pp = &(*pp)->next_split;
    }
    if (*pp == sp) {
        *pp = sp->next_split;
    }
    wk_split_free(sp);
}

/* Counters and the running size estimate for one finished sample. */
static void account_locked(wk_job_t *job, const sl_sample_t *out, const char *detail,
                           const wk_coding_t *cd)
{
    atomic_fetch_add(&job->tasks->n_samples, 1);
    if (out->skip >= 0) {
        job->samples_skipped++;
        atomic_fetch_add(&job->tasks->n_skipped, 1);
        SL_INFO("job %" PRIu64 ": skipped sample %" PRIu64 " (%s): %s", job->id, out->index,
                sl_skip_name((sl_skip_e)out->skip), detail);
    } else {
        size_t wire = wk_sample_wire_bytes(out, NULL, cd);
        job->est_bytes = job->est_bytes - job->est_bytes / 8 + wire / 8;
        if (wire > job->est_bytes) {
            job->est_bytes = wire; /* rise fast, fall slowly: stay under the bound */
        }
    }
    job->samples_done++;
}

/* Packs the sample into its split's message; the split's last sample
 * finishes it. Takes out's tensor (job->mu held). */
static void pack_locked(wk_job_t *job, wk_split_t *sp, sl_sample_t *out, const char *detail,
                        const wk_coding_t *cd)
{
    size_t before = wk_packer_bytes(&sp->pk);
    size_t out_before = job->out.bytes;
    sp->pk.src = job->src; /* for a sample too big to send processed (msg.c) */
    uint64_t raw_before = sp->pk.sent_raw;
    int rc = wk_packer_add(&sp->pk, out, detail, cd, &job->out);
    if (sp->pk.sent_raw != raw_before) {
        atomic_fetch_add(&job->tasks->n_unprocessed, 1);
    }
    sl_tensor_free(&out->t);
    /* Whatever the packer flushed moved from partial to the output queue. */
    job->partial_bytes = job->partial_bytes - before + wk_packer_bytes(&sp->pk);
    sp->finished++;
    if (rc == 0 && sp->finished == sp->end - sp->begin) {
        size_t last = wk_packer_bytes(&sp->pk);
        rc = wk_packer_finish(&sp->pk, &job->out);
        if (rc == 0) {
            job->partial_bytes -= last;
            wk_split_unlink_locked(job, sp);
            wk_split_free(sp);
            job->splits_done++;
            atomic_fetch_add(&job->tasks->n_splits, 1);
        }
    }
    if (rc < 0) {
        SL_ERR("job %" PRIu64 ": out of memory packing split %" PRIu64 "; dropping it", job->id,
               sp->id);
        wk_split_drop_locked(job, sp);
    }
    if (job->out.bytes != out_before) {
        pthread_cond_broadcast(&job->cv); /* the stream waits for output */
    }
}

/* A finished sample came back (job->mu held), coded as cd says. Takes
 * out's tensor. */
static void on_done_locked(wk_job_t *job, sl_sample_t *out, const char *detail,
                           const wk_coding_t *cd)
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
        dropped_return_locked(job, sp);
        return;
    }
    if (out->skip == SL_SKIP_PLUGIN_FAILED || out->skip == SL_SKIP_SOURCE_DOWN) {
        /* A plugin's process crashed or hung, or the data server cannot be
         * reached from here (every retry failed): not this sample's fault,
         * and it would again here. The job fails on this worker only: its
         * heartbeat names the reason, the dispatcher re-queues its
         * unfinished splits (this one included: it was never sent whole)
         * for other workers or the client, which fails the job only when
         * it cannot read them either. The worker's other jobs never
         * noticed. */
        sl_tensor_free(&out->t);
        if (wk_job_transition_locked(job, WK_JOB_FAILED) == 0) {
            snprintf(job->reason, sizeof(job->reason), "%s", detail);
            SL_ERR("job %" PRIu64 ": failed on this worker: %s", job->id, detail);
            if (out->skip == SL_SKIP_SOURCE_DOWN) {
                wk_job_note_down_locked(job, detail); /* it may come back: job_revive.c */
            }
        }
        return;
    }
    account_locked(job, out, detail, cd);
    pack_locked(job, sp, out, detail, cd);
}

/* ------------------------------------------------------------ submitting */

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

/* Submits the split's next position (job->mu held, a worker-wide slot
 * taken). On failure the slot goes back without waking held jobs (the
 * table's lock cannot be taken here); the next one given back will. */
static int submit_one(wk_job_t *job, sl_exec_t *ex, wk_split_t *sp, const uint64_t *order)
{
    int slot = slot_put(job, sp, sp->epoch, sp->next);
    if (slot < 0) {
        atomic_fetch_sub(&job->tasks->inflight, 1);
        return slot;
    }
    sl_sample_t s = {.epoch = sp->epoch,
                     .position = sp->next,
                     .index = order[sp->next],
                     .label = slot, /* restored from the source when it comes back */
                     .skip = -1};
    sl_tensor_init(&s.t);
    int rc = sl_exec_submit(ex, &s, 0, sp->stage_to);
    if (rc < 0) {
        atomic_fetch_sub(&job->tasks->inflight, 1);
        job->slots[slot].split = NULL;
        return rc;
    }
    sp->next++;
    sp->inflight++;
    sp->state = WK_SPLIT_RUNNING;
    job->inflight++;
    return 0;
}

/* Submits what the bounds allow (job->mu held). Returns WK_SUBMIT_DONE,
 * WK_SUBMIT_NEED_ORDER with *need_epoch (its order must be computed
 * first), or a negative errno when the executor refused a sample. */
static int submit_locked(wk_job_t *job, sl_exec_t *ex, uint64_t *need_epoch)
{
    wk_tasks_t *t = job->tasks;
    for (;;) {
        wk_split_t *sp = next_submittable(job);
        int wants = sp != NULL && wk_budget_allows(job->out.bytes, job->partial_bytes,
                                                   job->inflight, job->est_bytes,
                                                   job->buffer_bytes);
        flag_set(&job->wants, &t->nwant, wants);
        if (!wants) {
            flag_set(&job->held, &t->nheld, 0);
            return WK_SUBMIT_DONE;
        }
        if (sl_exec_inflight(ex) >= sl_exec_capacity(ex)) {
            return WK_SUBMIT_DONE;
        }
        const uint64_t *order = order_lookup(job, sp->epoch);
        if (order == NULL) {
            *need_epoch = sp->epoch;
            return WK_SUBMIT_NEED_ORDER;
        }
        if (!share_acquire_locked(job)) {
            return WK_SUBMIT_DONE;
        }
        int rc = submit_one(job, ex, sp, order);
        if (rc < 0) {
            return rc;
        }
    }
}

/* ------------------------------------------------------------ the thread */

static void stats_copy_locked(wk_job_t *job, sl_exec_t *ex)
{
    sl_unit_stat_t tmp[SL_PIPE_MAX_UNITS];
    sl_exec_unit_stats(ex, tmp);
    memcpy(job->units, tmp, job->nunits * sizeof(tmp[0]));
    if (job->pc != NULL) {
        sl_pcache_stats_t was = job->pcs;
        uint64_t failed = was.store_errors;
        sl_pcache_stats(job->pc, &job->pcs);
        const sl_pcache_stats_t *now = &job->pcs;
        const uint64_t d[8] = {now->hits - was.hits,
                               now->misses - was.misses,
                               now->bytes_read - was.bytes_read,
                               now->bytes_written - was.bytes_written,
                               now->evictions - was.evictions,
                               now->store_errors - was.store_errors,
                               now->corrupt - was.corrupt,
                               now->bytes_evicted - was.bytes_evicted};
        for (int i = 0; i < 8; i++) {
            atomic_fetch_add(&job->tasks->pc_tot[i], d[i]);
        }
        atomic_fetch_add(&job->tasks->pc_waited, now->waited - was.waited);
        atomic_fetch_add(&job->tasks->pc_claim_timeouts, now->claim_timeouts - was.claim_timeouts);
        if (failed == 0 && job->pcs.store_errors > 0) {
            /* Once per job: every later failure is only counted. */
            SL_WARN("job %" PRIu64 ": prefix cache: storing an entry failed (disk full or "
                    "unwritable?); samples go on uncached, failures counted in /metrics",
                    job->id);
        }
    }
}

/* The finished sample's split is to be compressed: the spec says "zstd",
 * or the planner chose it for the split (its assignment). Runner thread:
 * the slots are its own. */
static int wants_compress(const wk_job_t *job, const sl_sample_t *out)
{
    if (job->spec.compress != SL_COMPRESS_OFF) {
        return 1;
    }
    return out->label >= 0 && (unsigned)out->label < job->nslots &&
           job->slots[out->label].compress;
}

/* Waits (no lock held) for the next finished sample, compresses it when
 * the spec or its split's assignment says so (outside the lock: it is the
 * costly part of packing) and hands it in; returns with job->mu held. */
static void collect_one(wk_job_t *job, sl_exec_t *ex, sl_sample_t *out)
{
    char detail[256];
    wk_coding_t cd = {SL_CODEC_NONE, 0};
    /* Test-only fault injection (wk_faults_t): damage what a client must refuse. */
    const wk_faults_t *faults = &job->tasks->faults;
    int got = sl_exec_next(ex, out, detail, sizeof(detail), -1) == 0;
    if (got) {
        global_release(job->tasks);
        if (faults->corrupt_records && out->skip < 0 && out->t.dtype == SL_DT_RECORD &&
            out->t.nbytes > SL_REC_HEADER) {
            out->t.data[SL_REC_HEADER] = 0; /* the first field's kind: only a parse can tell */
        }
        if (job->codec != NULL && wants_compress(job, out) &&
            wk_sample_compress(job->codec, faults->corrupt_compressed, out, &cd) < 0) {
            SL_WARN("job %" PRIu64 ": out of memory compressing sample %" PRIu64
                    "; sending it raw", job->id, out->index);
        }
    }
    pthread_mutex_lock(&job->mu);
    if (got) {
        on_done_locked(job, out, detail, &cd);
    }
}

/* The job is READY: runs it until it moves on. */
static void runner_loop(wk_job_t *job, sl_exec_t *ex, sl_sample_t *out)
{
    int64_t last_stats = sl_mono_ms();
    int dirty = 0; /* samples came back since the last stats copy */
    pthread_mutex_lock(&job->mu);
    while (job->state == WK_JOB_READY) {
        uint64_t epoch = 0;
        int rc = submit_locked(job, ex, &epoch);
        if (rc != WK_SUBMIT_DONE) {
            pthread_mutex_unlock(&job->mu);
            if (rc == WK_SUBMIT_NEED_ORDER && order_compute(job, epoch) < 0) {
                wk_job_fail(job, "out of memory for the epoch order");
            } else if (rc < 0) {
                wk_job_fail(job, "cannot submit a sample: %s", strerror(-rc));
            }
            pthread_mutex_lock(&job->mu);
            continue;
        }
        wk_prefetch_queued_locked(job); /* URL shards of the splits ahead */
        /* Fresh stats once a second while busy, and whenever work pauses. */
        if (dirty && (job->inflight == 0 || sl_mono_ms() - last_stats >= WK_STATS_EVERY_MS)) {
            stats_copy_locked(job, ex);
            last_stats = sl_mono_ms();
            dirty = 0;
        }
        if (job->inflight == 0) {
            pthread_cond_wait(&job->cv, &job->mu); /* see the top of this file */
            continue;
        }
        pthread_mutex_unlock(&job->mu);
        collect_one(job, ex, out);
        dirty = 1;
    }
    flag_set(&job->wants, &job->tasks->nwant, 0);
    flag_set(&job->held, &job->tasks->nheld, 0);
    pthread_mutex_unlock(&job->mu);
}

/* The prefix cache for this job when the worker has a store and the spec
 * has a deterministic prefix (docs/cache.md); a cache that cannot be made
 * leaves the job uncached, never failed. */
static void runner_cache(wk_job_t *job, sl_exec_t *ex)
{
    wk_tasks_t *t = job->tasks;
    if (t->samples == NULL) {
        return;
    }
    if (job->cache_off) {
        /* The planner priced it (docs/cache.md "When"); the dispatcher's
         * /status and `sluice plan --explain` say why. */
        SL_INFO("job %" PRIu64 ": prefix cache: off (the planner's decision)", job->id);
        return;
    }
    char err[256];
    int rc = sl_pcache_new(t->samples, &job->spec, sl_source_fingerprint(job->src), t->threads,
                           &job->pc, err, sizeof(err));
    if (rc < 0) {
        SL_WARN("job %" PRIu64 ": no prefix cache: %s", job->id, err);
        return;
    }
    if (job->pc == NULL) {
        SL_INFO("job %" PRIu64 ": prefix cache: nothing to cache (%s)", job->id,
                job->spec.cache == SL_CACHE_OFF ? "\"cache\": \"off\""
                                                : "the first unit draws randomness");
        return;
    }
    uint8_t sha[32];
    if (sl_pipeline_content_hash(job->pipe, sha)) {
        sl_pcache_key_content(job->pc, sha); /* the ranks file's bytes, not its path */
    }
    job->pc_prefix = sl_pcache_prefix(job->pc);
    (void)sl_exec_set_pcache(ex, job->pc); /* before the runner's first submit */
    SL_INFO("job %" PRIu64 ": prefix cache: units 0..%u (%s .. %s) cached", job->id,
            job->pc_prefix - 1, sl_pipeline_unit_name(job->pipe, 0),
            sl_pipeline_unit_name(job->pipe, job->pc_prefix - 1));
}

void *wk_runner_main(void *arg)
{
    wk_job_t *job = arg;
    wk_tasks_t *t = job->tasks;
    sl_exec_t *ex = NULL;
    sl_sample_t out;
    sl_tensor_init(&out.t);

    if (runner_open(job) < 0) {
        goto out;
    }
    /* Per-job executor: `threads` pool threads; in-flight is also bounded
     * over all jobs by tasks->inflight_cap. */
    ex = sl_exec_new(job->pipe, job->src, t->threads, t->inflight_cap);
    job->slots = calloc(t->inflight_cap, sizeof(*job->slots));
    job->nslots = t->inflight_cap;
    /* Always: the planner may ask any split to be compressed (zstd's
     * contexts are created on first use, so an idle codec is small). */
    job->codec = sl_codec_new();
    if (ex == NULL || job->slots == NULL || job->codec == NULL) {
        wk_job_fail(job, "cannot start the job's executor (out of memory or threads)");
        goto out;
    }
    runner_cache(job, ex);
    if (runner_ready(job) < 0) {
        goto out; /* closed while loading */
    }
    SL_NOTICE("job %" PRIu64 ": ready: source '%s', %" PRIu64 " samples, %u units", job->id,
              job->spec.source_path, job->num_samples, job->nunits);
    do {
        runner_loop(job, ex, &out);
        /* Closed or failed: drain what is in flight (its splits are dropped). */
        while (sl_exec_inflight(ex) > 0) {
            collect_one(job, ex, &out);
            pthread_mutex_unlock(&job->mu);
        }
        /* Failed for its data server only: back when the server answers. */
    } while (wk_job_revive_wait(job));
    pthread_mutex_lock(&job->mu);
    stats_copy_locked(job, ex);
    pthread_mutex_unlock(&job->mu);

out:
    sl_tensor_free(&out.t);
    sl_exec_free(ex);
    sl_pcache_free(job->pc); /* after the executor: its threads used it */
    job->pc = NULL;
    sl_codec_free(job->codec);
    job->codec = NULL;
    wk_job_unref(job);
    pthread_mutex_lock(&t->mu);
    t->runners--;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}
