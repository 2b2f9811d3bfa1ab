/* The consumer side of a job: runs on the caller's thread inside
 * sluice_next_batch. It moves work forward in small steps (pump) through the
 * line (client/lib/line.h): finished samples into the batcher, received
 * samples and local positions into the executor; and it counts every batched
 * and every consumed sample towards its split (client_impl.h split states). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/profile.h"
#include "client/lib/rx.h"
#include "common/sample/record.h"
#include "common/base/clock.h"

static int set_error(sluice_job_t *job, int code, const char *fmt, const char *detail)
{
    snprintf(job->last_error, sizeof(job->last_error), fmt, detail);
    return code;
}

/* One event for the split split_id (entered as HEARD if new). Remote only:
 * local mode has no splits. */
static void count_split(sluice_job_t *job, uint64_t split_id, cl_split_ev_e ev)
{
    if (job->disp == NULL) {
        return;
    }
    pthread_mutex_lock(&job->mu);
    cl_split_t *s = cl_split_add(job, split_id);
    if (s != NULL) {
        cl_split_on(job, s, ev);
    }
    pthread_mutex_unlock(&job->mu);
}

/* What a batched sample means for the job: skip counts for the dispatcher,
 * and its split. rc is the line's answer (cl_line_put, cl_line_collect). */
static int took(sluice_job_t *job, int rc, const cl_line_took_t *t)
{
    if (rc == -EIO) {
        return set_error(job, rc, "%s (on_error is \"fail\")", t->detail);
    }
    if (rc == -ECHILD) {
        return set_error(job, -EIO, "%s", t->detail); /* a plugin crashed or hung */
    }
    if (rc < 0) {
        return set_error(job, rc, "%s",
                         "batcher refused a sample (epoch or position out of range)");
    }
    int first = !t->duplicate;
    int skipped = t->skip >= 0;
    if (first && skipped && t->skip < SL_SKIP__COUNT) {
        pthread_mutex_lock(&job->mu);
        job->skips_counted[t->skip]++;
        pthread_mutex_unlock(&job->mu);
    }
    /* Multi-rank: a delivered sample counts once its batch is consumed
     * (sluice_next_batch), so a restarted rank's acknowledged splits
     * are exactly what its training loop had. */
    if (first && job->ack_on_pop) {
        count_split(job, t->split_id, CL_SPLIT_EV_ADDED);
    }
    if (first && (!job->ack_on_pop || skipped)) {
        count_split(job, t->split_id, CL_SPLIT_EV_DONE);
    }
    if (job->ack_on_pop) {
        uint64_t ids[64];
        size_t n;
        while ((n = cl_line_take_dropped(job->line, ids, 64)) > 0) {
            for (size_t i = 0; i < n; i++) {
                count_split(job, ids[i], CL_SPLIT_EV_DONE);
            }
        }
    }
    return 0;
}

/* Finished samples from the executor into the batcher, the first waiting up
 * to timeout_ms. */
static int collect(sluice_job_t *job, int timeout_ms, int *progress)
{
    cl_line_took_t t;
    int rc;
    while ((rc = cl_line_collect(job->line, timeout_ms, &t)) != -EAGAIN) {
        *progress = 1;
        timeout_ms = 0;
        rc = took(job, rc, &t);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* Starts one position from the source (unit 0). */
static int start_local(sluice_job_t *job, sl_sample_t *s, int *progress)
{
    int rc = cl_line_run(job->line, s, 0);
    if (rc < 0) {
        return set_error(job, rc, "%s", "cannot queue a sample");
    }
    job->from_local++;
    *progress = 1;
    return 0;
}

/* Local mode: the client walks every epoch's positions itself. */
static int feed_local_cursor(sluice_job_t *job, int *progress)
{
    uint64_t *epoch = &job->local_epoch, *pos = &job->local_pos;
    while (*epoch < job->end_epoch && cl_line_room(job->line) > 0) {
        if (*pos >= job->positions) {
            (*epoch)++;
            *pos = 0;
            continue;
        }
        sl_sample_t in;
        int rc = cl_line_sample(job->line, *epoch, *pos, 0, &in);
        if (rc < 0) {
            return set_error(job, rc, "%s", "cannot start an epoch");
        }
        rc = start_local(job, &in, progress);
        if (rc < 0) {
            return rc;
        }
        (*pos)++;
    }
    return 0;
}

/* The next local split with positions left to submit (job->mu held), or
 * NULL; stale entries at the front are dropped. */
static cl_split_t *next_local_split(sluice_job_t *job)
{
    const uint64_t *id;
    while ((id = sl_ring_front(&job->local_pending)) != NULL) {
        cl_split_t *s = cl_split_find(job, *id);
        if (s != NULL && s->owner == 0 && s->next < s->end && s->state != CL_SPLIT_ACKED) {
            return s;
        }
        (void)sl_ring_pop(&job->local_pending, NULL);
    }
    return NULL;
}

/* The executor counts as about to run dry with at most this many samples
 * per thread in it: enough to cover one GetAssignment round trip, little
 * enough that a busy client never asks (docs/protocol.md "Idle clients"). */
#define CL_IDLE_INFLIGHT_PER_THREAD 2

/* Whether the client is idle (job->mu held): no local split left to start
 * (the caller found none), the executor nearly empty and CPU to spare. On becoming idle
 * it wakes the control thread, which asks the dispatcher for one more split. */
static void note_idle(sluice_job_t *job, int no_split)
{
    unsigned threads = job->opts.threads > 0 ? job->opts.threads : 1;
    int idle = no_split && !job->cpu_busy &&
               cl_line_inflight(job->line) <= threads * CL_IDLE_INFLIGHT_PER_THREAD;
    if (idle && !job->idle) {
        job->ctl_kick = 1;
        pthread_cond_signal(&job->ctl_cv);
    }
    job->idle = idle;
}

/* Remote mode: positions of splits the dispatcher gave the client itself. */
static int feed_local_splits(sluice_job_t *job, int *progress)
{
    while (cl_line_room(job->line) > 0) {
        pthread_mutex_lock(&job->mu);
        cl_split_t *s = next_local_split(job);
        note_idle(job, s == NULL);
        if (s == NULL) {
            pthread_mutex_unlock(&job->mu);
            return 0;
        }
        uint64_t epoch = s->epoch, pos = s->next++, id = s->id;
        pthread_mutex_unlock(&job->mu);
        sl_sample_t in;
        int rc = cl_line_sample(job->line, epoch, pos, id, &in);
        if (rc < 0) {
            return set_error(job, -EPROTO, "%s", "dispatcher assigned a split outside the job");
        }
        if (rc == 1) {
            continue; /* a worker delivered it before the split became ours */
        }
        rc = start_local(job, &in, progress);
        if (rc < 0) {
            return rc;
        }
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

/* Batches a received sample that needs no more units: skipped, a
 * duplicate, or (with fill) finished. */
static int put(sluice_job_t *job, sl_sample_t *s, const char *detail, sl_batcher_fill_fn fill,
               void *arg)
{
    cl_line_took_t t;
    int rc = cl_line_put(job->line, s, detail, fill, arg, &t);
    return took(job, rc, &t);
}

/* A peer's skip: its reason (unknown names count as I/O errors) into s,
 * its detail (or the reason) into detail. */
static void peer_skip(const sl_wire_sample_t *m, sl_sample_t *s, char *detail, size_t len)
{
    char reason[64];
    sl_wire_string(&m->skip_reason, reason, sizeof(reason));
    s->skip = SL_SKIP_IO;
    for (int r = 0; r < SL_SKIP__COUNT; r++) {
        if (strcmp(reason, sl_skip_name((sl_skip_e)r)) == 0) {
            s->skip = r;
        }
    }
    sl_wire_string(&m->skip_detail, detail, len);
    if (detail[0] == '\0') {
        snprintf(detail, len, "%s", reason);
    }
}

/* Validates a sample from a peer; anything inconsistent becomes a skip. */
static int take_remote_sample(sluice_job_t *job, const sl_wire_batch_t *b,
                              const sl_wire_sample_t *m, int *progress)
{
    *progress = 1;
    sl_sample_t s;
    int rc = cl_line_sample(job->line, m->epoch, m->position, b->split_id, &s);
    if (rc == -ERANGE) {
        return 0; /* not of this job: ignore */
    }
    if (rc < 0) {
        return set_error(job, -ENOMEM, "%s", "cannot start an epoch");
    }
    if (rc == 1) {
        return put(job, &s, "", NULL, NULL); /* counted as a dropped duplicate */
    }
    /* The worker says which units it ran (a re-planned split may differ from
     * the plan the client saw last); validated below like every peer field. */
    uint32_t stage_to = b->stage_to;

    char detail[256] = "";
    if (sl_pbw_left(&m->skip_reason) > 0) {
        peer_skip(m, &s, detail, sizeof(detail));
        return put(job, &s, detail, NULL, NULL);
    }
    if (sl_wire_sample_check(m, stage_to, job->nunits, detail, sizeof(detail)) < 0) {
        s.skip = SL_SKIP_CORRUPT;
        return put(job, &s, detail, NULL, NULL);
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
    if (stage_to >= job->nunits && m->dtype != SL_DT_RECORD) {
        /* Finished: straight from the slices into its slot in the batch. */
        sl_pbw_reader_t data = m->data;
        return put(job, &s, "", fill_from_wire, &data);
    }
    /* The client runs the remaining units: the executor takes a tensor. */
    s.t.data = malloc(n);
    if (s.t.data == NULL) {
        return set_error(job, -ENOMEM, "%s", "out of memory taking a received sample");
    }
    s.t.cap = n;
    fill_from_wire((void *)&m->data, s.t.data, n);
    if (m->dtype == SL_DT_RECORD) {
        /* A record is checked whole before anything reads its fields: a
         * damaged one from a peer is a skip, not a batch that fails later. */
        sl_rec_t rec;
        if (sl_rec_parse(s.t.data, n, &rec, detail, sizeof(detail)) < 0) {
            sl_tensor_free(&s.t);
            s.skip = SL_SKIP_CORRUPT;
            return put(job, &s, detail, NULL, NULL);
        }
        if (stage_to >= job->nunits) {
            return put(job, &s, "", NULL, NULL);
        }
    }
    rc = cl_line_run(job->line, &s, stage_to);
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

/* Whether sample i of b may take a place in the executor
 * (take_remote_sample): one with units left for the client. A finished or
 * skipped one goes straight to the batcher, so a full executor -- local
 * samples of the client's share -- must not hold it back: its worker's
 * stream waits on the credit the message frees. */
static int needs_executor(const sluice_job_t *job, const sl_wire_batch_t *b, size_t i)
{
    return sl_pbw_left(&b->samples[i].skip_reason) == 0 && b->stage_to < job->nunits;
}

/* The message at the head of the inbound queue into the batcher and the
 * executor, as far as the executor has room. One message per pump, never
 * "until the queue is empty": every message the consumer finishes returns a
 * credit and the next one arrives while it works, so a consumer slower than
 * the workers would never leave -- never collect the executor, start its
 * own splits or hand out the batches it filled (the job then stalled with
 * the client's local splits unacknowledged while every remote one was). */
static int feed_remote(sluice_job_t *job, int *progress)
{
    pthread_mutex_lock(&job->mu);
    cl_msg_t *msg = job->in_head;
    pthread_mutex_unlock(&job->mu);
    if (msg == NULL) {
        return 0;
    }
    /* Only the consumer removes messages, so msg stays valid unlocked. */
    if (msg->rx == NULL) { /* an unpacked Batch (tests, fuzzing): index its bytes */
        int rc = cl_rx_from_batch(msg->batch, NULL, &msg->rx, job->last_error,
                                  sizeof(job->last_error));
        if (rc < 0) {
            return rc;
        }
    }
    const sl_wire_batch_t *b = &msg->rx->wb;
    while (msg->cursor < b->n_samples &&
           (cl_line_room(job->line) > 0 || !needs_executor(job, b, msg->cursor))) {
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
    owe_credit(job, msg->worker_id);
    pthread_mutex_unlock(&job->mu);
    cl_msg_free(msg);
    *progress = 1;
    return 0;
}

/* New local work into the executor up to its capacity. */
static int feed_local(sluice_job_t *job, int *progress)
{
    return job->disp ? feed_local_splits(job, progress) : feed_local_cursor(job, progress);
}

/* One pass without waiting: finished samples to the batcher, received and
 * local work into the executor. */
static int pump_step(sluice_job_t *job, int *progress)
{
    int rc = collect(job, 0, progress);
    if (rc == 0) {
        rc = job->disp ? feed_remote(job, progress) : 0;
    }
    return rc == 0 ? feed_local(job, progress) : rc;
}

/* After every pump: the batcher's count of samples taken, for the overhead
 * per sample (profile.h; a call that waits long for its batch still shows
 * the samples it took meanwhile), and the consumer's note for diagnose.h. */
static void note_pump(sluice_job_t *job)
{
    sl_batcher_stats_t bs;
    cl_line_stats(job->line, &bs);
    cl_planner_note_accepted(job->planner, bs.delivered);
    unsigned inflight = cl_line_inflight(job->line), cap = cl_line_capacity(job->line);
    pthread_mutex_lock(&job->mu);
    job->pumps++;
    job->pump_at = sl_mono_sec();
    job->pump_inflight = inflight;
    job->pump_capacity = cap;
    pthread_mutex_unlock(&job->mu);
}

int cl_job_pump(sluice_job_t *job)
{
    int progress = 0;
    int rc = pump_step(job, &progress);
    note_pump(job);
    if (rc < 0) {
        return rc;
    }
    if (!progress) {
        if (cl_line_inflight(job->line) > 0) {
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
    if (feed_local(job, &progress) < 0) {
        pthread_mutex_lock(&job->mu);
        if (job->failure[0] == '\0') {
            snprintf(job->failure, sizeof(job->failure), "%s", job->last_error);
        }
        pthread_mutex_unlock(&job->mu);
    }
}

/* b as the public batch, in one allocation: the batch, then its arrays,
 * 8-byte ones first (sizeof(sluice_batch_t) is a multiple of 8: it holds
 * pointers). Multi-rank: b's samples are consumed now. Takes b. */
static int hand_out(sluice_job_t *job, sl_batch_t *b, sluice_batch_t **ret)
{
    size_t n = b->n;
    size_t per = 2 * sizeof(uint64_t) + 2 * sizeof(size_t) + sizeof(int32_t);
    sluice_batch_t *out = malloc(sizeof(*out) + n * per);
    if (out == NULL) {
        sl_batch_free(b);
        return set_error(job, -ENOMEM, "%s", "out of memory building a batch");
    }
    uint64_t *indices = (uint64_t *)(out + 1);
    uint64_t *positions = indices + n;
    size_t *offsets = (size_t *)(positions + n);
    size_t *sizes = offsets + n;
    int32_t *labels = (int32_t *)(sizes + n);
    for (uint32_t i = 0; i < b->n; i++) {
        if (job->ack_on_pop) {
            count_split(job, b->meta[i].split_id, CL_SPLIT_EV_DONE);
        }
        labels[i] = b->meta[i].label;
        indices[i] = b->meta[i].index;
        positions[i] = b->meta[i].position;
        offsets[i] = b->meta[i].offset;
        sizes[i] = b->meta[i].nbytes;
    }
    *out = (sluice_batch_t){.epoch = b->epoch, .n = b->n, .uniform = b->uniform,
                            .dtype = b->n ? (int)b->meta[0].dtype : 0,
                            .layout = b->n ? (int)b->meta[0].layout : 0,
                            .h = b->n ? b->meta[0].h : 0, .w = b->n ? b->meta[0].w : 0,
                            .c = b->n ? b->meta[0].c : 0, .data = b->data, .nbytes = b->nbytes,
                            .labels = labels, .indices = indices, .offsets = offsets,
                            .sizes = sizes, .priv = b};
    out->norm_on_device = sl_spec_device_norm(&job->spec, out->norm_mean, out->norm_std);
    cl_steps_add_batch(&job->steps, out);
    out->positions = positions;
    out->rank = job->spec.rank;
    out->batch_size = job->spec.batch_size;
    out->step_samples = job->spec.batching.mode == SL_BATCHING_BALANCED
                            ? job->spec.batching.microbatches * job->spec.batch_size
                            : 0;
    *ret = out;
    return 0;
}

/* Has another thread failed the job? Then its reason becomes the error. */
static int failed(sluice_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    int f = job->failure[0] != '\0';
    if (f) {
        snprintf(job->last_error, sizeof(job->last_error), "%s", job->failure);
    }
    pthread_mutex_unlock(&job->mu);
    return f;
}

int sluice_next_batch(sluice_job_t *job, sluice_batch_t **ret)
{
    double t0 = sl_mono_sec();
    int result;
    for (;;) {
        sl_batch_t *b = cl_line_pop(job->line);
        if (b != NULL) {
            top_up(job);
            result = hand_out(job, b, ret);
            break;
        }
        if (failed(job)) {
            result = -EIO;
            break;
        }
        if (cl_line_done(job->line)) {
            result = 1;
            break;
        }
        int rc = cl_job_pump(job);
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
    free(batch->priv_records);
    free(batch); /* and its arrays (sluice_next_batch) */
}

const char *sluice_last_error(const sluice_job_t *job) { return job->last_error; }
