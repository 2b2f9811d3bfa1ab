/* The consumer side of a job: runs on the caller's thread inside
 * sluice_next_batch. It moves work forward in small steps (pump): finished
 * samples into the batcher, received samples and local positions into the
 * executor, completed splits into the acknowledgement queue. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/lib/client_impl.h"
#include "client/lib/profile.h"
#include "client/lib/rx.h"
#include "common/base/err.h"
#include "common/engine/ranks.h"
#include "common/base/rng.h"
#include "common/base/clock.h"

static int set_error(sluice_job_t *job, int code, const char *fmt, const char *detail)
{
    snprintf(job->last_error, sizeof(job->last_error), fmt, detail);
    return code;
}

/* The epoch's order, computed once and cached for a few epochs. */
static const uint64_t *order_of(sluice_job_t *job, uint64_t epoch)
{
    cl_order_t *victim = &job->orders[0];
    for (int i = 0; i < CL_ORDER_CACHE; i++) {
        if (job->orders[i].order != NULL && job->orders[i].epoch == epoch) {
            return job->orders[i].order;
        }
        if (job->orders[i].order == NULL ||
            (victim->order != NULL && job->orders[i].epoch < victim->epoch)) {
            victim = &job->orders[i];
        }
    }
    if (victim->order == NULL) {
        victim->order = malloc((job->num_samples ? job->num_samples : 1) * sizeof(uint64_t));
        if (victim->order == NULL) {
            return NULL;
        }
    }
    if (job->spec.world_size > 1 && job->order_scratch == NULL) {
        job->order_scratch = malloc((job->num_samples ? job->num_samples : 1) * sizeof(uint64_t));
        if (job->order_scratch == NULL) {
            return NULL;
        }
    }
    victim->epoch = epoch;
    /* Multi-rank: only this rank's positions (common/engine/ranks.h). */
    sl_rank_order(&job->spec, epoch, job->num_samples,
                  job->spec.world_size > 1 ? job->order_scratch : victim->order, victim->order);
    return victim->order;
}

static int declare_epochs_through(sluice_job_t *job, uint64_t epoch)
{
    while (job->declared_epochs <= epoch && job->declared_epochs < job->spec.epochs) {
        int rc = sl_batcher_begin_epoch(job->batcher, job->declared_epochs, job->positions);
        if (rc < 0) {
            return rc;
        }
        job->declared_epochs++;
    }
    return epoch < job->spec.epochs ? 0 : -ERANGE;
}

void cl_split_check_done(sluice_job_t *job, cl_split_t *s)
{
    if (s->acked || !s->range_known || s->done < s->end - s->begin) {
        return;
    }
    if (job->nacks == job->capacks) {
        size_t cap = job->capacks ? job->capacks * 2 : 64;
        uint64_t *p = realloc(job->acks, cap * sizeof(*p));
        if (p == NULL) {
            snprintf(job->failure, sizeof(job->failure), "out of memory queueing acks");
            return;
        }
        job->acks = p;
        job->capacks = cap;
    }
    s->acked = 1;
    job->acks[job->nacks++] = s->id;
}

/* Multi-rank splits are acknowledged when the training loop has taken them
 * (so a restarted rank resumes exactly), but waiting in a partial batch they
 * must not hold the worker slots the samples completing that batch need:
 * "received" frees the slot at the dispatcher without making the split done
 * (docs/protocol.md "Acknowledgement on consumption"). */
void cl_split_check_received(sluice_job_t *job, cl_split_t *s)
{
    if (!job->ack_on_pop || s->acked || s->received != 0 || !s->range_known ||
        s->added < s->end - s->begin) {
        return;
    }
    if (job->nrecvd == job->caprecvd) {
        size_t cap = job->caprecvd ? job->caprecvd * 2 : 64;
        uint64_t *p = realloc(job->recvd, cap * sizeof(*p));
        if (p == NULL) {
            snprintf(job->failure, sizeof(job->failure), "out of memory queueing acks");
            return;
        }
        job->recvd = p;
        job->caprecvd = cap;
    }
    s->received = 1;
    job->recvd[job->nrecvd++] = s->id;
}

static void count_split(sluice_job_t *job, uint64_t split_id, int consumed);

/* Counts a first copy towards its split. A split not yet known from an
 * assignment is entered now and completes when its range arrives. */
static void count_for_split(sluice_job_t *job, uint64_t split_id)
{
    count_split(job, split_id, 1);
}

/* consumed: the sample is done for acknowledgement (s->done); else it only
 * reached the batcher (s->added, multi-rank acknowledgement on pop). */
static void count_split(sluice_job_t *job, uint64_t split_id, int consumed)
{
    if (job->disp == NULL) {
        return;
    }
    pthread_mutex_lock(&job->mu);
    cl_split_t *s = cl_split_find(job, split_id);
    if (s == NULL) {
        s = cl_split_add(job, split_id);
        if (s == NULL) {
            snprintf(job->failure, sizeof(job->failure),
                     "more than %d live splits: raise split_size", CL_MAX_SPLITS);
        } else {
            s->owner = UINT64_MAX;
        }
    }
    if (s != NULL && !s->acked && !consumed) {
        s->added++;
        cl_split_check_received(job, s);
    } else if (s != NULL && !s->acked) {
        s->done++;
        cl_split_check_done(job, s);
    }
    pthread_mutex_unlock(&job->mu);
}

/* With fill, s is a received sample whose bytes are still in the message
 * (sl_batcher_add_fill); otherwise s owns its bytes. */
static int add_to_batcher_fill(sluice_job_t *job, sl_sample_t *s, const char *detail,
                               sl_batcher_fill_fn fill, void *arg)
{
    if (s->skip >= 0 && job->first_skip[0] == '\0') {
        snprintf(job->first_skip, sizeof(job->first_skip), "%s", detail);
    }
    if (s->skip >= 0 && job->spec.on_error == SL_ON_ERROR_FAIL) {
        return set_error(job, -EIO, "%s (on_error is \"fail\")", detail);
    }
    uint64_t split_id = s->split_id;
    int skipped = s->skip >= 0;
    int reason = s->skip;
    int rc = fill != NULL ? sl_batcher_add_fill(job->batcher, s, fill, arg)
                          : sl_batcher_add(job->batcher, s);
    if (rc < 0) {
        sl_tensor_free(&s->t);
        return set_error(job, rc, "%s",
                         "batcher refused a sample (epoch or position out of range)");
    }
    if (rc == 0 && skipped && reason < SL_SKIP__COUNT) {
        pthread_mutex_lock(&job->mu);
        job->skips_counted[reason]++;
        pthread_mutex_unlock(&job->mu);
    }
    /* Multi-rank: a delivered sample counts once its batch is consumed
     * (sluice_next_batch), so a restarted rank's acknowledged splits
     * are exactly what its training loop had. */
    if (rc == 0 && job->ack_on_pop) {
        count_split(job, split_id, 0);
    }
    if (rc == 0 && (!job->ack_on_pop || skipped)) {
        count_for_split(job, split_id);
    }
    if (job->ack_on_pop) {
        uint64_t ids[64];
        size_t n;
        while ((n = sl_batcher_take_dropped(job->batcher, ids, 64)) > 0) {
            for (size_t i = 0; i < n; i++) {
                count_for_split(job, ids[i]);
            }
        }
    }
    return 0;
}

static int add_to_batcher(sluice_job_t *job, sl_sample_t *s, const char *detail)
{
    return add_to_batcher_fill(job, s, detail, NULL, NULL);
}

static int collect(sluice_job_t *job, int timeout_ms, int *progress)
{
    sl_sample_t s = {0};
    char detail[256];
    while (sl_exec_inflight(job->exec) > 0) {
        int rc = sl_exec_next(job->exec, &s, detail, sizeof(detail), timeout_ms);
        if (rc == -ETIMEDOUT) {
            return 0;
        }
        if (rc < 0) {
            return set_error(job, rc, "%s", "executor failed");
        }
        *progress = 1;
        timeout_ms = 0;
        rc = add_to_batcher(job, &s, detail);
        sl_tensor_free(&s.t);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* Local mode: the client walks every epoch's positions itself. */
static int feed_local_cursor(sluice_job_t *job, uint64_t *epoch, uint64_t *pos, int *progress)
{
    while (*epoch < job->spec.epochs && sl_exec_inflight(job->exec) < sl_exec_capacity(job->exec)) {
        if (*pos >= job->positions) {
            (*epoch)++;
            *pos = 0;
            continue;
        }
        int rc = declare_epochs_through(job, *epoch);
        const uint64_t *order = order_of(job, *epoch);
        if (rc < 0 || order == NULL) {
            return set_error(job, rc < 0 ? rc : -ENOMEM, "%s", "cannot start an epoch");
        }
        sl_sample_t in = {.epoch = *epoch, .position = *pos, .index = order[*pos],
                          .label = sl_source_label(job->src, order[*pos]), .skip = -1};
        rc = sl_exec_submit(job->exec, &in, 0, job->nunits);
        if (rc < 0) {
            return set_error(job, rc, "%s", "cannot queue a sample");
        }
        job->from_local++;
        (*pos)++;
        *progress = 1;
    }
    return 0;
}

/* Remote mode: positions of splits the dispatcher gave the client itself. */
static int feed_local_splits(sluice_job_t *job, int *progress)
{
    while (sl_exec_inflight(job->exec) < sl_exec_capacity(job->exec)) {
        pthread_mutex_lock(&job->mu);
        cl_split_t *s = NULL;
        while (job->nlocal_pending > 0) {
            s = cl_split_find(job, job->local_pending[0]);
            if (s != NULL && s->owner == 0 && s->next < s->end && !s->acked) {
                break;
            }
            memmove(job->local_pending, job->local_pending + 1,
                    (job->nlocal_pending - 1) * sizeof(uint64_t));
            job->nlocal_pending--;
            s = NULL;
        }
        if (s == NULL) {
            pthread_mutex_unlock(&job->mu);
            return 0;
        }
        uint64_t epoch = s->epoch, pos = s->next++, id = s->id;
        pthread_mutex_unlock(&job->mu);
        int rc = declare_epochs_through(job, epoch);
        const uint64_t *order = order_of(job, epoch);
        if (rc < 0 || order == NULL || pos >= job->positions) {
            return set_error(job, -EPROTO, "%s", "dispatcher assigned a split outside the job");
        }
        if (sl_batcher_seen(job->batcher, epoch, pos)) {
            continue; /* a worker delivered it before the split became ours */
        }
        sl_sample_t in = {.epoch = epoch, .position = pos, .index = order[pos],
                          .label = sl_source_label(job->src, order[pos]), .skip = -1,
                          .split_id = id};
        rc = sl_exec_submit(job->exec, &in, 0, job->nunits);
        if (rc < 0) {
            return set_error(job, rc, "%s", "cannot queue a sample");
        }
        job->from_local++;
        *progress = 1;
    }
    return 0;
}

/* sl_batcher_fill_fn: the one copy of a received sample, from the message's
 * slices to its place (arg: a reader over exactly its bytes, checked by
 * sl_wire_sample_check, so the copy cannot fall short). */
static void fill_from_wire(void *arg, uint8_t *dst, size_t n)
{
    sl_pbw_reader_t r = *(const sl_pbw_reader_t *)arg;
    (void)sl_pbw_copy(&r, dst, n);
}

/* Validates a sample from a peer; anything inconsistent becomes a skip. */
static int take_remote_sample(sluice_job_t *job, const sl_wire_batch_t *b,
                              const sl_wire_sample_t *m, int *progress)
{
    *progress = 1;
    if (m->epoch >= job->spec.epochs || m->position >= job->positions) {
        return 0; /* not of this job: ignore */
    }
    int rc = declare_epochs_through(job, m->epoch);
    const uint64_t *order = order_of(job, m->epoch);
    if (rc < 0 || order == NULL) {
        return set_error(job, -ENOMEM, "%s", "cannot start an epoch");
    }
    sl_sample_t s = {.epoch = m->epoch, .position = m->position, .index = order[m->position],
                     .label = sl_source_label(job->src, order[m->position]), .skip = -1,
                     .split_id = b->split_id};
    if (sl_batcher_seen(job->batcher, s.epoch, s.position)) {
        return add_to_batcher(job, &s, ""); /* counted as a dropped duplicate */
    }
    /* The worker says which units it ran (a re-planned split may differ from
     * the plan the client saw last); validated below like every peer field. */
    uint32_t stage_to = b->stage_to;

    char detail[256] = "";
    if (sl_pbw_left(&m->skip_reason) > 0) {
        char reason[64];
        sl_wire_string(&m->skip_reason, reason, sizeof(reason));
        s.skip = SL_SKIP_IO;
        for (int r = 0; r < SL_SKIP__COUNT; r++) {
            if (strcmp(reason, sl_skip_name((sl_skip_e)r)) == 0) {
                s.skip = r;
            }
        }
        sl_wire_string(&m->skip_detail, detail, sizeof(detail));
        if (detail[0] == '\0') {
            snprintf(detail, sizeof(detail), "%s", reason);
        }
        return add_to_batcher(job, &s, detail);
    }
    if (sl_wire_sample_check(m, stage_to, job->nunits, detail, sizeof(detail)) < 0) {
        s.skip = SL_SKIP_CORRUPT;
        return add_to_batcher(job, &s, detail);
    }
    size_t n = sl_pbw_left(&m->data);
    if (m->dtype == SL_DT_BYTES) {
        s.t = (sl_tensor_t){.dtype = SL_DT_BYTES, .layout = SL_LAYOUT_HWC, .h = (uint32_t)n,
                            .w = 1, .c = 1, .nbytes = n};
    } else {
        s.t = (sl_tensor_t){.dtype = (sl_dtype_e)m->dtype, .layout = (sl_layout_e)m->layout,
                            .h = m->h, .w = m->w, .c = m->c, .nbytes = n};
    }
    job->from_remote++;
    if (stage_to >= job->nunits) {
        /* Finished: straight from the slices into its slot in the batch. */
        sl_pbw_reader_t data = m->data;
        rc = add_to_batcher_fill(job, &s, "", fill_from_wire, &data);
        sl_tensor_free(&s.t);
        return rc;
    }
    /* The client runs the remaining units: the executor takes a tensor. */
    s.t.data = malloc(n);
    if (s.t.data == NULL) {
        return set_error(job, -ENOMEM, "%s", "out of memory taking a received sample");
    }
    s.t.cap = n;
    fill_from_wire((void *)&m->data, s.t.data, n);
    rc = sl_exec_submit(job->exec, &s, stage_to, job->nunits);
    sl_tensor_free(&s.t);
    return rc < 0 ? set_error(job, rc, "%s", "cannot queue a received sample") : 0;
}

static void owe_credit(sluice_job_t *job, uint64_t worker_id)
{
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        cl_fetcher_t *f = &job->fetchers[i];
        if (f->started && f->worker_id == worker_id && f->state == CL_FETCH_RUNNING) {
            f->credits_owed++;
            return;
        }
    }
}

static int feed_remote(sluice_job_t *job, int *progress)
{
    for (;;) {
        pthread_mutex_lock(&job->mu);
        cl_msg_t *msg = job->in_head;
        pthread_mutex_unlock(&job->mu);
        if (msg == NULL) {
            return 0;
        }
        /* Only the consumer removes messages, so msg stays valid unlocked. */
        if (msg->rx == NULL) { /* an unpacked Batch (tests, fuzzing): index its bytes */
            int rc = cl_rx_from_batch(msg->batch, &msg->rx, job->last_error,
                                      sizeof(job->last_error));
            if (rc < 0) {
                return rc;
            }
        }
        const sl_wire_batch_t *b = &msg->rx->wb;
        while (msg->cursor < b->n_samples &&
               sl_exec_inflight(job->exec) < sl_exec_capacity(job->exec)) {
            int rc = take_remote_sample(job, b, &b->samples[msg->cursor], progress);
            msg->cursor++;
            if (rc < 0) {
                return rc;
            }
        }
        if (msg->cursor < b->n_samples) {
            return 0; /* executor full: continue later */
        }
        pthread_mutex_lock(&job->mu);
        job->in_head = msg->next;
        if (job->in_head == NULL) {
            job->in_tail = NULL;
        }
        job->in_count--;
        owe_credit(job, msg->worker_id);
        pthread_mutex_unlock(&job->mu);
        cl_msg_free(msg);
        *progress = 1;
    }
}

static int all_delivered(sluice_job_t *job)
{
    return job->declared_epochs == job->spec.epochs && sl_exec_inflight(job->exec) == 0 &&
           sl_batcher_done(job->batcher);
}

/* New local work into the executor up to its capacity. */
static int feed_local(sluice_job_t *job, uint64_t *local_epoch, uint64_t *local_pos,
                      int *progress)
{
    return job->disp ? feed_local_splits(job, progress)
                     : feed_local_cursor(job, local_epoch, local_pos, progress);
}

/* One pass without waiting: finished samples to the batcher, received and
 * local work into the executor. */
static int pump_step(sluice_job_t *job, uint64_t *local_epoch, uint64_t *local_pos,
                     int *progress)
{
    int rc = collect(job, 0, progress);
    if (rc == 0) {
        rc = job->disp ? feed_remote(job, progress) : 0;
    }
    return rc == 0 ? feed_local(job, local_epoch, local_pos, progress) : rc;
}

int cl_job_pump(sluice_job_t *job, uint64_t *local_epoch, uint64_t *local_pos)
{
    int progress = 0;
    int rc = pump_step(job, local_epoch, local_pos, &progress);
    if (rc < 0) {
        return rc;
    }
    if (!progress) {
        if (sl_exec_inflight(job->exec) > 0) {
            return collect(job, 10, &progress);
        }
        pthread_mutex_lock(&job->mu);
        if (job->in_head == NULL && !job->closing) {
            (void)sl_cond_wait_ms(&job->cv, &job->mu, 10);
        }
        pthread_mutex_unlock(&job->mu);
    }
    return 0;
}

/* The pipeline runs only while the library is called, so before a ready
 * batch goes to the training loop the executor is refilled: its threads
 * then work while the loop trains (like a DataLoader's prefetch), instead
 * of only while the loop waits (the pump's last step before a pop may be
 * a collect, which leaves it short). Feeding only, no collecting: finished
 * samples wait in the executor (bounded by its capacity) until a call
 * finds no batch ready, so the batcher cannot run ahead of the loop (the
 * soak caught a version that collected too: +1 MB/s of RSS). A failure
 * here is kept for the next call. */
static void top_up(sluice_job_t *job)
{
    int progress = 0;
    /* Not feed_remote: finished remote samples go straight to the batcher,
     * and workers already work while the loop trains. */
    if (feed_local(job, &job->local_epoch, &job->local_pos, &progress) < 0) {
        pthread_mutex_lock(&job->mu);
        if (job->failure[0] == '\0') {
            snprintf(job->failure, sizeof(job->failure), "%s", job->last_error);
        }
        pthread_mutex_unlock(&job->mu);
    }
}

int sluice_next_batch(sluice_job_t *job, sluice_batch_t **ret)
{
    double t0 = sl_mono_sec();
    int result;
    for (;;) {
        sl_batch_t *b = sl_batcher_pop(job->batcher);
        if (b != NULL) {
            top_up(job);
            /* One allocation: the batch, then its arrays, 8-byte ones first
             * (sizeof(sluice_batch_t) is a multiple of 8: it holds pointers). */
            size_t n = b->n;
            size_t per = sizeof(uint64_t) + 2 * sizeof(size_t) + sizeof(int32_t);
            sluice_batch_t *out = malloc(sizeof(*out) + n * per);
            if (out == NULL) {
                sl_batch_free(b);
                result = set_error(job, -ENOMEM, "%s", "out of memory building a batch");
                break;
            }
            uint64_t *indices = (uint64_t *)(out + 1);
            size_t *offsets = (size_t *)(indices + n);
            size_t *sizes = offsets + n;
            int32_t *labels = (int32_t *)(sizes + n);
            for (uint32_t i = 0; i < b->n; i++) {
                if (job->ack_on_pop) {
                    count_for_split(job, b->meta[i].split_id); /* consumed now */
                }
                labels[i] = b->meta[i].label;
                indices[i] = b->meta[i].index;
                offsets[i] = b->meta[i].offset;
                sizes[i] = b->meta[i].nbytes;
            }
            *out = (sluice_batch_t){.epoch = b->epoch, .n = b->n, .uniform = b->uniform,
                                    .dtype = b->n ? (int)b->meta[0].dtype : 0,
                                    .layout = b->n ? (int)b->meta[0].layout : 0,
                                    .h = b->n ? b->meta[0].h : 0, .w = b->n ? b->meta[0].w : 0,
                                    .c = b->n ? b->meta[0].c : 0, .data = b->data,
                                    .nbytes = b->nbytes, .labels = labels, .indices = indices,
                                    .offsets = offsets, .sizes = sizes, .priv = b};
            *ret = out;
            result = 0;
            break;
        }
        pthread_mutex_lock(&job->mu);
        int failed = job->failure[0] != '\0';
        if (failed) {
            snprintf(job->last_error, sizeof(job->last_error), "%s", job->failure);
        }
        pthread_mutex_unlock(&job->mu);
        if (failed) {
            result = -EIO;
            break;
        }
        if (all_delivered(job)) {
            result = 1;
            break;
        }
        int rc = cl_job_pump(job, &job->local_epoch, &job->local_pos);
        if (rc < 0) {
            result = rc;
            break;
        }
    }
    double t1 = sl_mono_sec();
    job->wait_sec += t1 - t0;
    cl_planner_note_batch(job->planner, t0, t1, result == 0 ? (*ret)->n : 0); /* rates */
    return result;
}

void sluice_release_batch(sluice_job_t *job, sluice_batch_t *batch)
{
    (void)job;
    if (batch == NULL) {
        return;
    }
    sl_batch_free(batch->priv);
    free(batch); /* and its arrays (sluice_next_batch) */
}

const char *sluice_last_error(const sluice_job_t *job) { return job->last_error; }

void sluice_get_stats(const sluice_job_t *job, sluice_stats_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    sl_batcher_stats_t bs;
    sl_batcher_get_stats(job->batcher, &bs);
    ret->delivered = bs.delivered;
    for (int i = 0; i < SL_SKIP__COUNT; i++) {
        ret->skipped += bs.skipped[i];
    }
    ret->duplicates_dropped = bs.duplicates;
    ret->from_local = job->from_local;
    ret->from_remote = job->from_remote;
    ret->seconds = sl_mono_sec() - job->t_start;
    ret->wait_seconds = job->wait_sec;
    ret->plan_split = job->split_units;
    ret->plan_local_share = job->local_share;
    snprintf(ret->plan_mode, sizeof(ret->plan_mode), "%s", job->plan_mode);
    ret->job_id = job->job_id;
    /* planner (client/lib/profile.h): the prediction of the current plan */
    cl_plan_info_t pi;
    cl_planner_get(job->planner, &pi);
    ret->plan_predicted = pi.predicted;
    snprintf(ret->plan_binding, sizeof(ret->plan_binding), "%s", pi.binding);
    ret->plan_version = pi.version;
    ret->profile_seconds = job->planner != NULL ? cl_planner_profile_seconds(job->planner) : 0;
    snprintf(ret->sample_costs, sizeof(ret->sample_costs), "%s", job->sample_costs);
}

int sluice_skip_counts(const sluice_job_t *job, const char **names, uint64_t *counts, int n)
{
    sl_batcher_stats_t bs;
    sl_batcher_get_stats(job->batcher, &bs);
    int k = 0;
    for (int i = 0; i < SL_SKIP__COUNT && k < n; i++) {
        names[k] = sl_skip_name((sl_skip_e)i);
        counts[k] = bs.skipped[i];
        k++;
    }
    return k;
}
