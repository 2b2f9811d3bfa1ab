/* The consumer side of a job: runs on the caller's thread inside
 * sluice_next_batch. It moves work forward in small steps (pump) through the
 * line's three calls (client/lib/line.h): collect what the executor
 * finished, feed received samples and local positions in, pop a ready
 * batch. What each batched, dropped or consumed sample means for its split
 * is account.c's, which the line tells. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/mix.h"
#include "client/lib/prefetch_ahead.h"
#include "client/lib/profile.h"
#include "client/lib/rx.h"
#include "common/base/clock.h"

static int set_error(sluice_job_t *job, int code, const char *fmt, const char *detail)
{
    snprintf(job->consumer.last_error, sizeof(job->consumer.last_error), fmt, detail);
    return code;
}

/* Finished samples from the executor into the batcher, the first waiting up
 * to timeout_ms. */
static int collect(sluice_job_t *job, int timeout_ms, int *progress)
{
    int n = cl_line_collect(job->consumer.line, timeout_ms, job->consumer.last_error,
                            sizeof(job->consumer.last_error));
    if (n != 0) {
        *progress = 1;
    }
    return n < 0 ? n : 0;
}

/* Local mode: the client walks every epoch's positions itself. */
static int feed_local_cursor(sluice_job_t *job, int *progress)
{
    uint64_t *epoch = &job->consumer.local_epoch, *pos = &job->consumer.local_pos;
    while (*epoch < job->end_epoch) {
        if (*pos >= job->positions) {
            (*epoch)++;
            *pos = 0;
            continue;
        }
        cl_line_in_t in = {.epoch = *epoch, .pos = *pos};
        int rc = cl_line_feed(job->consumer.line, &in, job->consumer.last_error,
                              sizeof(job->consumer.last_error));
        if (rc == -EAGAIN) {
            return 0; /* the executor is full */
        }
        if (rc < 0) {
            return rc;
        }
        job->consumer.from_local += rc == 1; /* 2: a hole, no sample */
        *progress = 1;
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
static void note_idle(sluice_job_t *job, int no_split, unsigned inflight)
{
    unsigned threads = job->opts.threads > 0 ? job->opts.threads : 1;
    int idle = no_split && !job->cpu_busy && inflight <= threads * CL_IDLE_INFLIGHT_PER_THREAD;
    if (idle && !job->idle) {
        job->control.kick = 1;
        pthread_cond_signal(&job->control.cv);
    }
    job->idle = idle;
}

/* Remote mode: positions of splits the dispatcher gave the client itself. */
static int feed_local_splits(sluice_job_t *job, int *progress)
{
    cl_line_gauge_t g;
    for (cl_line_gauge(job->consumer.line, &g); g.room > 0; cl_line_gauge(job->consumer.line, &g)) {
        pthread_mutex_lock(&job->mu);
        cl_split_t *s = next_local_split(job);
        note_idle(job, s == NULL, g.inflight);
        if (s == NULL) {
            pthread_mutex_unlock(&job->mu);
            return 0;
        }
        cl_line_in_t in = {.epoch = s->epoch, .pos = s->next++, .split_id = s->id, .once = 1};
        pthread_mutex_unlock(&job->mu);
        int rc = cl_line_feed(job->consumer.line, &in, job->consumer.last_error,
                              sizeof(job->consumer.last_error));
        if (rc == -ERANGE) {
            return set_error(job, -EPROTO, "%s", "dispatcher assigned a split outside the job");
        }
        if (rc < 0) {
            return rc;
        }
        if (rc >= 1) { /* else a worker delivered it before the split became ours */
            job->consumer.from_local += rc == 1; /* 2: a hole, no sample */
            *progress = 1;
        }
    }
    return 0;
}

static void owe_credit(sluice_job_t *job, uint64_t worker_id)
{
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        cl_fetcher_t *f = &job->fetch.fetchers[i];
        if (f->started && f->worker_id == worker_id && f->state == CL_FETCH_RUNNING) {
            cl_fetch_owe(f);
            return;
        }
    }
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
    cl_msg_t *msg = job->fetch.in_head;
    pthread_mutex_unlock(&job->mu);
    if (msg == NULL) {
        return 0;
    }
    /* Only the consumer removes messages, so msg stays valid unlocked. */
    if (msg->rx == NULL) { /* an unpacked Batch (tests, fuzzing): index its bytes */
        int rc = cl_rx_from_batch(msg->batch, NULL, &msg->rx, job->consumer.last_error,
                                  sizeof(job->consumer.last_error));
        if (rc < 0) {
            return rc;
        }
    }
    const sl_wire_batch_t *b = &msg->rx->wb;
    while (msg->cursor < b->n_samples) {
        const sl_wire_sample_t *m = &b->samples[msg->cursor];
        cl_line_in_t in = {.epoch = m->epoch,
                           .pos = m->position,
                           .split_id = b->split_id,
                           .wire = m,
                           .stage_to = b->stage_to};
        int rc = cl_line_feed(job->consumer.line, &in, job->consumer.last_error,
                              sizeof(job->consumer.last_error));
        if (rc == -EAGAIN) {
            break; /* it needs the executor, which is full */
        }
        *progress = 1;
        msg->cursor++;
        if (rc < 0) {
            return rc;
        }
        job->consumer.from_remote += rc == 1; /* 2: a hole, no sample */
    }
    if (msg->cursor < b->n_samples) {
        return 0; /* executor full: continue later */
    }
    pthread_mutex_lock(&job->mu);
    job->fetch.in_head = msg->next;
    if (job->fetch.in_head == NULL) {
        job->fetch.in_tail = NULL;
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
    cl_prefetch_ahead(job); /* URL shards of the next reads, fetched meanwhile */
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
static void note_pump(sluice_job_t *job, const cl_line_gauge_t *g)
{
    cl_planner_note_accepted(job->planner, g->accepted);
    pthread_mutex_lock(&job->mu);
    job->pumps++;
    job->pump_at = sl_mono_sec();
    job->pump_inflight = g->inflight;
    job->pump_capacity = g->capacity;
    pthread_mutex_unlock(&job->mu);
}

/* How long a consumer with nothing to do waits on job->cv in remote mode
 * before looking again. A safety net only: what gives it work wakes it (a
 * message into an empty queue and a stream's end: fetch.c; new splits, a
 * failure: the control thread after every poll; closing). Under a CPU quota
 * each wake-up is a per-second cost that shows per sample when the workers
 * are slow (issue 39): at 10 ms the waiting consumer woke 100 times a
 * second. Local mode keeps the short wait: nothing signals it. */
#define CL_CONSUMER_WAIT_MS 100
#define CL_CONSUMER_WAIT_LOCAL_MS 10

int cl_job_pump(sluice_job_t *job)
{
    int progress = 0;
    int rc = pump_step(job, &progress);
    cl_line_gauge_t g;
    cl_line_gauge(job->consumer.line, &g);
    note_pump(job, &g);
    if (rc < 0) {
        return rc;
    }
    if (!progress) {
        if (g.inflight > 0) {
            return collect(job, 10, &progress);
        }
        pthread_mutex_lock(&job->mu);
        if (job->fetch.in_head == NULL && !job->closing) {
            (void)sl_cond_wait_ms(&job->cv, &job->mu,
                                  job->disp ? CL_CONSUMER_WAIT_MS : CL_CONSUMER_WAIT_LOCAL_MS);
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
            snprintf(job->failure, sizeof(job->failure), "%s", job->consumer.last_error);
        }
        pthread_mutex_unlock(&job->mu);
    }
}

/* The spec's batch transforms over the public batch (mix.h): the images
 * mixed in place (the batch's buffer is its own), soft labels into soft. */
static int mix(sluice_job_t *job, sluice_batch_t *out, float *soft)
{
    if (out->n == 0) {
        return 0;
    }
    if (!out->uniform || out->dtype != SLUICE_DT_FLOAT32) {
        return set_error(job, -EINVAL, "%s",
                         "batch_transforms need batches of float32 images of one shape "
                         "(a plugin stage changed them?)");
    }
    cl_mix_t m;
    cl_mix_draw(&job->spec, out->epoch, out->positions[0], out->h, out->w, &m);
    float *scratch = malloc((size_t)out->c * out->h * out->w * sizeof(float) + 1);
    if (scratch == NULL) {
        return set_error(job, -ENOMEM, "%s", "out of memory mixing a batch");
    }
    int rc = cl_mix_apply(&m, (float *)(uintptr_t)out->data, out->n, out->c, out->h, out->w,
                          out->layout == SLUICE_LAYOUT_CHW, out->labels, job->spec.num_classes,
                          soft, scratch);
    free(scratch);
    if (rc < 0) {
        char why[96];
        snprintf(why, sizeof(why), "a label is outside 0..%u (num_classes %u)",
                 job->spec.num_classes - 1, job->spec.num_classes);
        return set_error(job, rc, "batch_transforms: %s: soft labels need every label in range",
                         why);
    }
    out->soft_labels = soft;
    out->num_classes = job->spec.num_classes;
    out->mix_op = m.op;
    out->mix_lambda = m.lam;
    memcpy(out->mix_box, m.box, sizeof(out->mix_box));
    return 0;
}

/* A pack's step, microbatch and loss-normalisation counts. */
static int pack_counts(sluice_job_t *job, sluice_batch_t *out)
{
    out->step = out->positions[0] / out->step_samples;
    out->microbatch = (uint32_t)(out->positions[0] % out->step_samples / out->batch_size);
    for (uint32_t i = 0; i < out->n; i++) {
        out->pack_tokens += job->ttok[out->indices[i]];
    }
    int rc = cl_line_pack_counts(job->consumer.line, out->epoch, out->step, &out->rank_step_tokens,
                                 &out->global_step_tokens);
    if (rc < 0) {
        return set_error(job, rc, "packed batching: the step counts of the epoch: %s",
                         strerror(-rc));
    }
    return 0;
}

/* b as the public batch, in one allocation: the batch, then its arrays,
 * 8-byte ones first (sizeof(sluice_batch_t) is a multiple of 8: it holds
 * pointers). Takes b. */
/* The random_erasing stages the consumer applies (after a device normalize). */
static uint32_t device_erasings(const sl_spec_t *spec)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < spec->nstages && i < SL_SPEC_MAX_STAGES; i++) {
        n += spec->stages[i].op == SL_OP_RANDOM_ERASING && spec->stages[i].aug.erase_on_device;
    }
    return n;
}

/* Each sample's boxes of those stages, in stage order: the draws the stage
 * would have made on a host (sl_pipe_erase_box), at the delivered shape. */
static uint32_t erase_boxes(const sl_spec_t *spec, const sl_batch_t *b, sluice_erase_t *out)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        for (uint32_t s = 0; s < spec->nstages && s < SL_SPEC_MAX_STAGES; s++) {
            const sl_stage_spec_t *st = &spec->stages[s];
            sl_erase_box_t box;
            if (st->op != SL_OP_RANDOM_ERASING || !st->aug.erase_on_device ||
                !sl_pipe_erase_box(spec, s, b->epoch, b->meta[i].index, b->meta[i].h, b->meta[i].w,
                                   &box)) {
                continue;
            }
            out[m++] = (sluice_erase_t){.seed = box.noise_seed,
                                        .sample = i,
                                        .x = box.x,
                                        .y = box.y,
                                        .w = box.w,
                                        .h = box.h,
                                        .random = st->aug.value_random,
                                        .value = {(float)st->aug.value[0], (float)st->aug.value[1],
                                                  (float)st->aug.value[2]},
                                        .img_h = b->meta[i].h,
                                        .img_w = b->meta[i].w};
        }
    }
    return m;
}

static int hand_out(sluice_job_t *job, sl_batch_t *b, sluice_batch_t **ret)
{
    size_t n = b->n;
    uint32_t k = job->spec.nbatch_tfs > 0 ? job->spec.num_classes : 0;
    uint32_t ne = device_erasings(&job->spec);
    /* The erase boxes (8-aligned) and the soft labels first: floats,
     * 4-aligned after the 8-byte arrays too. */
    size_t per = ne * sizeof(sluice_erase_t) + (size_t)k * sizeof(float) + 2 * sizeof(uint64_t) +
                 2 * sizeof(size_t) + sizeof(int32_t);
    sluice_batch_t *out = malloc(sizeof(*out) + n * per + sizeof(float));
    if (out == NULL) {
        sl_batch_free(b);
        return set_error(job, -ENOMEM, "%s", "out of memory building a batch");
    }
    sluice_erase_t *erase = (sluice_erase_t *)(void *)(out + 1);
    float *soft = (float *)(void *)(erase + n * ne);
    uint64_t *indices = (uint64_t *)(soft + n * k + (n * k) % 2);
    uint64_t *positions = indices + n;
    size_t *offsets = (size_t *)(positions + n);
    size_t *sizes = offsets + n;
    int32_t *labels = (int32_t *)(sizes + n);
    for (uint32_t i = 0; i < b->n; i++) {
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
    out->erase = ne > 0 ? erase : NULL;
    out->nerase = ne > 0 ? erase_boxes(&job->spec, b, erase) : 0;
    cl_steps_add_batch(&job->consumer.steps, out);
    out->positions = positions;
    out->rank = job->spec.rank;
    out->batch_size = job->spec.batch_size;
    out->step_samples = job->spec.batching.mode != SL_BATCHING_COUNT
                            ? job->spec.batching.microbatches * job->spec.batch_size
                            : 0;
    if (job->spec.batching.mode == SL_BATCHING_PACKED && out->n > 0) {
        int rc = pack_counts(job, out);
        if (rc < 0) {
            sl_batch_free(b);
            free(out);
            return rc;
        }
    }
    out->mix_lambda = 1.0;
    if (k > 0) {
        int rc = mix(job, out, soft);
        if (rc < 0) {
            sl_batch_free(b);
            free(out);
            return rc;
        }
    }
    *ret = out;
    return 0;
}

/* Has another thread failed the job? Then its reason becomes the error. */
static int failed(sluice_job_t *job)
{
    pthread_mutex_lock(&job->mu);
    int f = job->failure[0] != '\0';
    if (f) {
        snprintf(job->consumer.last_error, sizeof(job->consumer.last_error), "%s", job->failure);
    }
    pthread_mutex_unlock(&job->mu);
    return f;
}

int sluice_next_batch(sluice_job_t *job, sluice_batch_t **ret)
{
    if (job->consumer.line == NULL) {
        return set_error(job, -EINVAL, "%s",
                         "sluice_next_batch: the job was opened by sluice_describe");
    }
    double t0 = sl_mono_sec();
    cl_planner_note_enter(job->planner, t0); /* rates */
    int result;
    for (;;) {
        sl_batch_t *b = cl_line_pop(job->consumer.line);
        if (b != NULL) {
            top_up(job);
            result = hand_out(job, b, ret);
            break;
        }
        if (failed(job)) {
            result = -EIO;
            break;
        }
        cl_line_gauge_t g;
        cl_line_gauge(job->consumer.line, &g);
        if (g.done) {
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
    job->consumer.wait_sec += t1 - t0;
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

const char *sluice_last_error(const sluice_job_t *job) { return job->consumer.last_error; }
