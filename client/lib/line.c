/* line: see line.h. */
#include "client/lib/line.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/batch_wire.h"
#include "client/lib/order_ahead.h"
#include "client/lib/taken.h"
#include "client/lib/url_pins.h"
#include "common/base/ring.h"
#include "common/data/skip.h"
#include "common/engine/executor.h"
#include "common/order/ranks.h"
#include "common/sample/record.h"

#define CL_ORDER_CACHE 3 /* epoch orders kept */
/* The executor holds CL_WINDOW_PER_THREAD samples per thread plus one
 * window of slack, and a batch (up to CL_BATCH_ROOM_MAX samples) beyond. */
#define CL_WINDOW_PER_THREAD 8
#define CL_BATCH_ROOM_MAX 4096

struct cl_line_s {
    const sl_spec_t *spec;
    const sl_source_t *src;
    uint64_t num_samples, positions;
    uint32_t nunits;
    sl_exec_t *exec;
    sl_batcher_t *batcher;
    uint64_t first_epoch, end_epoch; /* the job's epochs: [first, end) */
    uint64_t declared;        /* epochs below it are declared to the batcher (or not the job's) */
    cl_order_t orders[CL_ORDER_CACHE]; /* order NULL: a free slot */
    cl_ahead_t *ahead;                 /* balanced/packed: the next epoch's, or NULL */
    uint64_t *order_scratch;  /* multi-rank: the full epoch order (num_samples) */
    const float *tcost;       /* balanced batching: per-sample predictions, or NULL */
    const uint32_t *ttok;
    const uint32_t *ttiles;
    char first_skip[256];
    char failed_on[256];      /* on_error "fail": the sample that stopped the job */
    sl_ring_t skips;          /* sluice_skip_t, the most recent SLUICE_RECENT_SKIPS */
    cl_taken_t taken;         /* what the training loop consumed (a saved state's) */
    uint64_t popped;          /* samples in the batches cl_line_pop handed out */
    int track_drops;
    cl_line_account_fn account; /* the job's split accounting, or NULL */
    void *account_arg;
    cl_upins_t *pins; /* the job's URL versions, or NULL */
};

static int ahead_fn(const void *arg, uint64_t epoch, cl_order_t *o);

int cl_line_new(const cl_line_args_t *a, cl_line_t **ret)
{
    if (a->threads == 0) {
        return -EINVAL;
    }
    cl_line_t *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return -ENOMEM;
    }
    l->spec = a->spec;
    l->src = a->src;
    l->num_samples = a->num_samples;
    l->positions = a->positions;
    l->nunits = sl_pipeline_nunits(a->pipe);
    l->first_epoch = a->first_epoch;
    l->tcost = a->tcost;
    l->ttok = a->ttok;
    l->ttiles = a->ttiles;
    l->pins = a->pins;
    l->end_epoch = a->first_epoch + a->spec->epochs;
    l->declared = a->first_epoch;
    l->track_drops = a->track_drops;
    l->account = a->account;
    l->account_arg = a->account_arg;
    cl_taken_init(&l->taken, a->first_epoch);
    /* Room for a whole batch beyond the threads' own window, so one batch
     * can be made while the training loop works on the previous one
     * (sluice_next_batch refills before returning). */
    unsigned batch_room = a->spec->batch_size < CL_BATCH_ROOM_MAX ? a->spec->batch_size
                                                                  : CL_BATCH_ROOM_MAX;
    l->exec = sl_exec_new(a->pipe, a->src, a->threads,
                          (a->threads + 1) * CL_WINDOW_PER_THREAD + batch_room);
    if (l->exec != NULL && a->pcache != NULL) {
        (void)sl_exec_set_pcache(l->exec, a->pcache); /* new: nothing submitted */
    }
    l->batcher = sl_batcher_new(a->spec->batch_size, a->spec->drop_last, a->spec->deterministic);
    if (l->exec == NULL || l->batcher == NULL ||
        sl_ring_init(&l->skips, sizeof(sluice_skip_t), SLUICE_RECENT_SKIPS) < 0) {
        cl_line_free(l);
        return -ENOMEM;
    }
    if (a->track_drops) {
        sl_batcher_track_drops(l->batcher);
    }
    if (a->spec->batching.mode == SL_BATCHING_PACKED && sl_batcher_align(l->batcher) < 0) {
        cl_line_free(l);
        return -EINVAL; /* a packed spec is deterministic (spec_batching.c) */
    }
    /* A schedule from every sample's cost takes long enough to stall the
     * loop at an epoch's start: the next one is made ahead. */
    if (a->tcost != NULL && a->spec->epochs > 1) {
        int rc = cl_ahead_new(ahead_fn, l, &l->ahead);
        if (rc < 0) {
            cl_line_free(l);
            return rc;
        }
    }
    *ret = l;
    return 0;
}

int cl_line_drop_pcache(cl_line_t *l)
{
    return l != NULL && l->exec != NULL ? sl_exec_set_pcache(l->exec, NULL) : 0;
}

void cl_line_free(cl_line_t *l)
{
    if (l == NULL) {
        return;
    }
    cl_ahead_free(l->ahead);
    sl_exec_free(l->exec);
    sl_batcher_free(l->batcher);
    for (int i = 0; i < CL_ORDER_CACHE; i++) {
        free(l->orders[i].order);
        free(l->orders[i].step_tokens);
    }
    free(l->order_scratch);
    sl_ring_free(&l->skips);
    cl_taken_clear(&l->taken);
    free(l);
}

unsigned cl_line_room(const cl_line_t *l)
{
    return sl_exec_capacity(l->exec) - sl_exec_inflight(l->exec);
}

unsigned cl_line_inflight(const cl_line_t *l) { return sl_exec_inflight(l->exec); }

unsigned cl_line_capacity(const cl_line_t *l) { return sl_exec_capacity(l->exec); }

/* The epoch's order, computed once and cached for a few epochs. */
static const cl_order_t *order_slot(cl_line_t *l, uint64_t epoch);

static const uint64_t *order_of(cl_line_t *l, uint64_t epoch)
{
    const cl_order_t *o = order_slot(l, epoch);
    return o != NULL ? o->order : NULL;
}

/* Packed batching: the schedule and its per-step token counts at once. */
static int packed_order(const cl_line_t *l, uint64_t epoch, cl_order_t *o)
{
    uint64_t per_step = (uint64_t)l->spec->batching.microbatches * l->spec->batch_size;
    uint64_t nsteps = per_step > 0 ? l->positions / per_step : 0;
    if (o->step_tokens == NULL) {
        o->step_tokens = malloc((nsteps > 0 ? nsteps : 1) * sizeof(uint64_t));
        if (o->step_tokens == NULL) {
            return -ENOMEM;
        }
    }
    return sl_pack_rank_order(l->spec, epoch, l->num_samples, l->tcost, l->ttok, l->ttiles,
                              o->order, o->step_tokens);
}

/* Epoch's order into o (buffers allocated when NULL). scratch: num_samples
 * entries for a multi-rank epoch order, or NULL (then one of its own). Reads
 * only what never changes after cl_line_new: also the ahead thread's. */
static int compute_order(const cl_line_t *l, uint64_t epoch, cl_order_t *o, uint64_t *scratch)
{
    if (o->order == NULL) {
        o->order = malloc(sl_spec_order_len(l->spec, l->num_samples) * sizeof(uint64_t));
        if (o->order == NULL) {
            return -ENOMEM;
        }
    }
    if (l->spec->batching.mode == SL_BATCHING_PACKED) {
        return packed_order(l, epoch, o);
    }
    uint64_t *own = NULL;
    if (l->spec->world_size > 1 && scratch == NULL) {
        own = scratch = malloc(sl_spec_order_len(l->spec, l->num_samples) * sizeof(uint64_t));
        if (own == NULL) {
            return -ENOMEM;
        }
    }
    /* Multi-rank: only this rank's positions (common/order/ranks.h). */
    int rc = sl_rank_order_balanced(l->spec, epoch, l->num_samples, l->tcost, l->ttok, l->ttiles,
                                    l->spec->world_size > 1 ? scratch : o->order, o->order);
    free(own);
    return rc;
}

static int ahead_fn(const void *arg, uint64_t epoch, cl_order_t *o)
{
    return compute_order(arg, epoch, o, NULL);
}

int cl_line_pack_counts(cl_line_t *l, uint64_t epoch, uint64_t step, uint64_t *ret_rank,
                        uint64_t *ret_global)
{
    uint64_t per_step = (uint64_t)l->spec->batching.microbatches * l->spec->batch_size;
    const cl_order_t *o = order_slot(l, epoch);
    if (o == NULL || o->step_tokens == NULL || per_step == 0 || l->ttok == NULL) {
        return o == NULL ? -ENOMEM : -EINVAL;
    }
    if ((step + 1) * per_step > l->positions) {
        return -ERANGE;
    }
    *ret_global = o->step_tokens[step];
    *ret_rank = 0;
    for (uint64_t q = step * per_step; q < (step + 1) * per_step; q++) {
        *ret_rank += o->order[q] != SL_POS_HOLE ? l->ttok[o->order[q]] : 0;
    }
    return 0;
}

static const cl_order_t *order_slot(cl_line_t *l, uint64_t epoch)
{
    cl_order_t *victim = &l->orders[0];
    for (int i = 0; i < CL_ORDER_CACHE; i++) {
        if (l->orders[i].order != NULL && l->orders[i].epoch == epoch) {
            return &l->orders[i];
        }
        if (l->orders[i].order == NULL ||
            (victim->order != NULL && l->orders[i].epoch < victim->epoch)) {
            victim = &l->orders[i];
        }
    }
    /* The epoch order before ranks take their shares: a mix's epoch may be
     * longer than its samples (common/order/blend.h). */
    size_t n = sl_spec_order_len(l->spec, l->num_samples);
    if (l->spec->world_size > 1 && l->order_scratch == NULL) {
        l->order_scratch = malloc(n * sizeof(uint64_t));
        if (l->order_scratch == NULL) {
            return NULL;
        }
    }
    int rc = 0;
    if (l->ahead == NULL || !cl_ahead_take(l->ahead, epoch, victim)) {
        rc = compute_order(l, epoch, victim, l->order_scratch);
    }
    if (rc < 0) {
        free(victim->order);
        victim->order = NULL;
        return NULL;
    }
    victim->epoch = epoch;
    if (l->ahead != NULL && epoch + 1 < l->end_epoch) {
        cl_ahead_request(l->ahead, epoch + 1);
    }
    return victim;
}

/* Declares every epoch of the job up to and including epoch, in order. */
static int declare_through(cl_line_t *l, uint64_t epoch)
{
    while (l->declared <= epoch && l->declared < l->end_epoch) {
        int rc = sl_batcher_begin_epoch(l->batcher, l->declared, l->positions);
        if (rc < 0) {
            return rc;
        }
        l->declared++;
    }
    return epoch < l->end_epoch ? 0 : -ERANGE;
}

int cl_line_sample(cl_line_t *l, uint64_t epoch, uint64_t pos, uint64_t split_id,
                   sl_sample_t *ret)
{
    if (epoch < l->first_epoch || epoch >= l->end_epoch || pos >= l->positions) {
        return -ERANGE;
    }
    int rc = declare_through(l, epoch);
    const uint64_t *order = rc == 0 ? order_of(l, epoch) : NULL;
    if (order == NULL) {
        return rc < 0 ? rc : -ENOMEM;
    }
    *ret = (sl_sample_t){.epoch = epoch, .position = pos, .index = order[pos],
                         .label = sl_source_label(l->src, order[pos]), .skip = -1,
                         .split_id = split_id};
    return sl_batcher_seen(l->batcher, epoch, pos);
}

int cl_line_run(cl_line_t *l, sl_sample_t *s, uint32_t from)
{
    return sl_exec_submit(l->exec, s, from, l->nunits);
}

/* Epochs the batcher has finished and the loop has taken every batch of
 * are consumed whole (with their drop_last remainder). */
static void settle(cl_line_t *l)
{
    for (uint64_t e = l->taken.done_below; e < l->declared; e++) {
        if (sl_batcher_epoch_done(l->batcher, e)) {
            cl_taken_complete(&l->taken, e);
        } else if (e > l->taken.done_below + 1) {
            break; /* at most the two oldest are ever in part; samples come in epoch order */
        }
    }
}

/* A skipped sample the batcher counted: the first one's detail, and the
 * most recent ones (the oldest goes when the ring is full). */
static void note_skip(cl_line_t *l, const sl_sample_t *s, const char *detail)
{
    if (l->first_skip[0] == '\0') {
        snprintf(l->first_skip, sizeof(l->first_skip), "%s", detail);
    }
    sluice_skip_t k = {.epoch = s->epoch, .index = s->index};
    snprintf(k.reason, sizeof(k.reason), "%s", sl_skip_name((sl_skip_e)s->skip));
    snprintf(k.path, sizeof(k.path), "%s", sl_source_name(l->src, s->index));
    snprintf(k.detail, sizeof(k.detail), "%s", detail);
    if (sl_ring_len(&l->skips) == l->skips.cap) {
        (void)sl_ring_pop(&l->skips, NULL);
    }
    (void)sl_ring_push_back(&l->skips, &k); /* cannot fail: there is room now */
}

/* A sample about to be delivered, judged against the job's URL versions
 * (url_pins.h): 0 as it is; 1 when it became a skip (why in buf); -ESTALE
 * when the data set changed since the state the job resumed from (why in
 * buf: the job fails). */
static int judge_versions(cl_line_t *l, sl_sample_t *s, char *buf, size_t len)
{
    if (l->pins == NULL || s->skip >= 0 || s->vers.n == 0) {
        return 0;
    }
    uint32_t at = 0;
    uint64_t pinned = 0;
    cl_upins_verdict_e v = cl_upins_check(l->pins, &s->vers, &at, &pinned);
    if (v == CL_UPINS_OK) {
        return 0;
    }
    const char *name = sl_source_name(l->src, s->index);
    const sl_url_ver_t *u = &s->vers.v[at];
    if (v == CL_UPINS_SAVED) {
        snprintf(buf, len,
                 "resume: saved over another source: %s: URL %016" PRIx64 " changed since the "
                 "saved state read it (validator %016" PRIx64 ", saved %016" PRIx64 ")",
                 name, u->url, u->tag, pinned);
        return -ESTALE;
    }
    snprintf(buf, len,
             "%s: URL %016" PRIx64 " changed since the job first read it (validator %016" PRIx64
             ", first %016" PRIx64 "); restart the job to read the new data",
             name, u->url, u->tag, pinned);
    sl_tensor_free(&s->t);
    sl_tensor_init(&s->t);
    s->skip = SL_SKIP_IO;
    return 1;
}

int cl_line_put(cl_line_t *l, sl_sample_t *s, const char *detail, sl_batcher_fill_fn fill,
                void *arg, cl_line_took_t *ret)
{
    char changed[256];
    int judged = judge_versions(l, s, changed, sizeof(changed));
    if (judged != 0) {
        detail = changed;
        fill = NULL; /* nothing of its bytes goes in */
    }
    ret->split_id = s->split_id;
    ret->skip = s->skip;
    ret->duplicate = 0;
    snprintf(ret->detail, sizeof(ret->detail), "%s", detail);
    int rc;
    if (judged == -ESTALE) {
        if (l->failed_on[0] == '\0') {
            snprintf(l->failed_on, sizeof(l->failed_on), "%s", detail);
        }
        rc = -ECHILD; /* the job cannot go on: the resumed data set changed */
    } else if (s->skip == SL_SKIP_PLUGIN_FAILED || s->skip == SL_SKIP_SOURCE_DOWN) {
        /* A plugin's process crashed or hung, or the data server cannot be
         * reached (workers that could not gave the split back; this is its
         * last reader): the job cannot go on. */
        if (l->failed_on[0] == '\0') {
            snprintf(l->failed_on, sizeof(l->failed_on), "%s", detail);
        }
        rc = -ECHILD;
    } else if (s->skip >= 0 && s->skip != SL_SKIP_RESUMED &&
               l->spec->on_error == SL_ON_ERROR_FAIL) {
        /* Not a skip: the job stops here (nothing is counted as skipped). */
        if (l->failed_on[0] == '\0') {
            snprintf(l->failed_on, sizeof(l->failed_on), "%s", detail);
        }
        rc = -EIO;
    } else {
        rc = fill != NULL ? sl_batcher_add_fill(l->batcher, s, fill, arg)
                          : sl_batcher_add(l->batcher, s);
    }
    sl_tensor_free(&s->t); /* what the batcher did not take */
    if (rc < 0) {
        return rc;
    }
    ret->duplicate = rc == 1;
    if (s->skip >= 0 && s->skip != SL_SKIP_RESUMED && !ret->duplicate) {
        note_skip(l, s, detail);
    }
    if (s->skip >= 0 && !ret->duplicate) {
        (void)cl_taken_add(&l->taken, s->epoch, s->position, s->position + 1); /* overflow kept */
    }
    settle(l); /* this sample may have ended an epoch (drop_last's remainder) */
    return 0;
}

int cl_line_collect_one(cl_line_t *l, int timeout_ms, cl_line_took_t *ret)
{
    if (sl_exec_inflight(l->exec) == 0) {
        return -EAGAIN;
    }
    sl_sample_t s = {0};
    char detail[256];
    /* Only -ETIMEDOUT can fail here: a sample is in flight. */
    if (sl_exec_next(l->exec, &s, detail, sizeof(detail), timeout_ms) < 0) {
        return -EAGAIN;
    }
    return cl_line_put(l, &s, detail, NULL, NULL, ret);
}

sl_batch_t *cl_line_pop(cl_line_t *l)
{
    sl_batch_t *b = sl_batcher_pop(l->batcher);
    if (b == NULL) {
        return NULL;
    }
    l->popped += b->n;
    for (uint32_t i = 0; l->account != NULL && i < b->n; i++) {
        cl_line_took_t t = {.split_id = b->meta[i].split_id, .skip = -1};
        l->account(l->account_arg, CL_LINE_EV_POPPED, &t);
    }
    for (uint32_t i = 0; i < b->n;) {
        uint32_t k = i + 1; /* a run of consecutive positions: one range */
        while (k < b->n && b->meta[k].position == b->meta[k - 1].position + 1) {
            k++;
        }
        (void)cl_taken_add(&l->taken, b->epoch, b->meta[i].position, b->meta[k - 1].position + 1);
        i = k;
    }
    settle(l);
    return b;
}

const cl_taken_t *cl_line_taken(const cl_line_t *l) { return &l->taken; }

int cl_line_done(const cl_line_t *l)
{
    return l->declared == l->end_epoch && sl_exec_inflight(l->exec) == 0 &&
           sl_batcher_done(l->batcher);
}

void cl_line_resume_at(cl_line_t *l, uint64_t epoch)
{
    l->declared = epoch > l->first_epoch ? epoch : l->first_epoch;
    while (l->taken.done_below < l->declared) {
        cl_taken_complete(&l->taken, l->taken.done_below);
    }
}

int64_t cl_line_mark_done(cl_line_t *l, uint64_t epoch, uint64_t begin, uint64_t end)
{
    if (epoch < l->first_epoch || epoch >= l->end_epoch) {
        return -EINVAL;
    }
    int rc = declare_through(l, epoch);
    if (rc == 0) {
        (void)cl_taken_add(&l->taken, epoch, begin, end); /* the earlier process's loop took them */
    }
    return rc < 0 ? rc : sl_batcher_mark_done(l->batcher, epoch, begin, end);
}

void cl_line_gauge(const cl_line_t *l, cl_line_gauge_t *ret)
{
    sl_batcher_stats_t bs;
    sl_batcher_get_stats(l->batcher, &bs);
    ret->inflight = sl_exec_inflight(l->exec);
    ret->capacity = sl_exec_capacity(l->exec);
    ret->room = ret->capacity - ret->inflight;
    ret->accepted = bs.delivered;
    ret->done = cl_line_done(l);
}

void cl_line_stats(const cl_line_t *l, sl_batcher_stats_t *ret)
{
    sl_batcher_get_stats(l->batcher, ret);
}

uint64_t cl_line_popped(const cl_line_t *l) { return l->popped; }

void cl_line_unit_stats(cl_line_t *l, sl_unit_stat_t *ret) { sl_exec_unit_stats(l->exec, ret); }

double cl_line_threads_cpu_sec(const cl_line_t *l) { return sl_exec_cpu_sec(l->exec); }

const char *cl_line_first_skip(const cl_line_t *l) { return l->first_skip; }

size_t cl_line_recent_skips(const cl_line_t *l, sluice_skip_t *out, size_t max)
{
    size_t n = sl_ring_len(&l->skips) < max ? sl_ring_len(&l->skips) : max;
    size_t from = sl_ring_len(&l->skips) - n; /* the newest n */
    for (size_t i = 0; i < n; i++) {
        out[i] = *(const sluice_skip_t *)sl_ring_at(&l->skips, from + i);
    }
    return n;
}

const char *cl_line_failed_on(const cl_line_t *l) { return l->failed_on; }

const uint64_t *cl_line_order(cl_line_t *l, uint64_t epoch)
{
    if (epoch < l->first_epoch || epoch >= l->end_epoch) {
        return NULL;
    }
    return order_of(l, epoch);
}

/* ------------------------------------------------------------ feeding */

/* A sample the batcher took (rc: cl_line_put's answer) told to the
 * account, with the split ids drop_last discarded meanwhile (tracking
 * drops); errors into err. */
static int batched(cl_line_t *l, int rc, const cl_line_took_t *t, char *err, size_t errlen)
{
    if (rc == -EIO) {
        snprintf(err, errlen, "%s (on_error is \"fail\")", t->detail);
        return rc;
    }
    if (rc == -ECHILD) {
        snprintf(err, errlen, "%s", t->detail); /* a plugin crashed or hung, a server is gone */
        return -EIO;
    }
    if (rc < 0) {
        snprintf(err, errlen, "%s", "batcher refused a sample (epoch or position out of range)");
        return rc;
    }
    if (l->account == NULL) {
        return 0;
    }
    l->account(l->account_arg, CL_LINE_EV_BATCHED, t);
    uint64_t ids[64];
    size_t n;
    while (l->track_drops && (n = sl_batcher_take_dropped(l->batcher, ids, 64)) > 0) {
        for (size_t i = 0; i < n; i++) {
            cl_line_took_t d = {.split_id = ids[i], .skip = -1};
            l->account(l->account_arg, CL_LINE_EV_DROPPED, &d);
        }
    }
    return 0;
}

/* cl_line_put, then told to the account. */
static int put(cl_line_t *l, sl_sample_t *s, const char *detail, sl_batcher_fill_fn fill, void *arg,
               char *err, size_t errlen)
{
    cl_line_took_t t;
    int rc = cl_line_put(l, s, detail, fill, arg, &t);
    return batched(l, rc, &t, err, errlen);
}

int cl_line_collect(cl_line_t *l, int timeout_ms, char *err, size_t errlen)
{
    cl_line_took_t t;
    int rc;
    int n = 0;
    while ((rc = cl_line_collect_one(l, timeout_ms, &t)) != -EAGAIN) {
        n++;
        timeout_ms = 0;
        rc = batched(l, rc, &t, err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    return n;
}

/* sl_batcher_fill_fn: the one copy of a received sample, from the message's
 * slices to its place (arg: a reader over exactly its bytes, checked by
 * sl_wire_sample_check, so the copy cannot fall short). */
static void fill_from_wire(void *arg, uint8_t *dst, size_t n)
{
    sl_pbw_reader_t r = *(const sl_pbw_reader_t *)arg;
    (void)sl_pbw_copy(&r, dst, n);
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

/* The received payload of m (judged fine) into the line: finished, straight
 * from the slices into its slot in the batch; else the executor runs the
 * remaining units on a copy. Returns 1, or a negative code. */
static int take_payload(cl_line_t *l, const sl_wire_sample_t *m, uint32_t stage_to, sl_sample_t *s,
                        char *err, size_t errlen)
{
    size_t n = sl_pbw_left(&m->data);
    if (m->dtype == SL_DT_BYTES) {
        s->t = (sl_tensor_t){.dtype = SL_DT_BYTES,
                             .layout = SL_LAYOUT_HWC,
                             .h = (uint32_t)n,
                             .w = 1,
                             .c = 1,
                             .nbytes = n};
    } else {
        s->t = (sl_tensor_t){.dtype = (sl_dtype_e)m->dtype,
                             .layout = (sl_layout_e)m->layout,
                             .h = m->h,
                             .w = m->w,
                             .c = m->c,
                             .nbytes = n};
    }
    if (stage_to >= l->nunits && m->dtype != SL_DT_RECORD) {
        sl_pbw_reader_t data = m->data;
        int rc = put(l, s, "", fill_from_wire, &data, err, errlen);
        return rc < 0 ? rc : 1;
    }
    s->t.data = malloc(n);
    if (s->t.data == NULL) {
        snprintf(err, errlen, "%s", "out of memory taking a received sample");
        return -ENOMEM;
    }
    s->t.cap = n;
    fill_from_wire((void *)&m->data, s->t.data, n);
    if (m->dtype == SL_DT_RECORD) {
        /* A record is checked whole before anything reads its fields: a
         * damaged one from a peer is a skip, not a batch that fails later. */
        char detail[256] = "";
        sl_rec_t rec;
        if (sl_rec_parse(s->t.data, n, &rec, detail, sizeof(detail)) < 0) {
            sl_tensor_free(&s->t);
            s->skip = SL_SKIP_CORRUPT;
            int rc = put(l, s, detail, NULL, NULL, err, errlen);
            return rc < 0 ? rc : 1;
        }
        if (stage_to >= l->nunits) {
            int rc = put(l, s, "", NULL, NULL, err, errlen);
            return rc < 0 ? rc : 1;
        }
    }
    int rc = cl_line_run(l, s, stage_to);
    sl_tensor_free(&s->t);
    if (rc < 0) {
        snprintf(err, errlen, "%s", "cannot queue a received sample");
        return rc;
    }
    return 1;
}

/* A received sample: validated like every peer field; anything
 * inconsistent becomes a skip. */
static int feed_wire(cl_line_t *l, const cl_line_in_t *in, char *err, size_t errlen)
{
    const sl_wire_sample_t *m = in->wire;
    /* The worker says which units it ran (a re-planned split may differ from
     * the plan the client saw last). A finished or skipped sample goes
     * straight to the batcher, so a full executor -- local samples of the
     * client's share -- must not hold it back: its worker's stream waits on
     * the credit the message frees. */
    uint32_t stage_to = in->stage_to;
    if (sl_pbw_left(&m->skip_reason) == 0 && stage_to < l->nunits && cl_line_room(l) == 0) {
        return -EAGAIN;
    }
    sl_sample_t s;
    int rc = cl_line_sample(l, in->epoch, in->pos, in->split_id, &s);
    if (rc == -ERANGE) {
        return 0; /* not of this job: ignore */
    }
    if (rc < 0) {
        snprintf(err, errlen, "%s", "cannot start an epoch");
        return -ENOMEM;
    }
    if (rc == 1) {
        return put(l, &s, "", NULL, NULL, err, errlen); /* counted as a dropped duplicate */
    }
    char detail[256] = "";
    if (sl_pbw_left(&m->skip_reason) > 0) {
        peer_skip(m, &s, detail, sizeof(detail));
        rc = put(l, &s, detail, NULL, NULL, err, errlen);
        return rc == 1 && s.skip == SL_SKIP_RESUMED ? 2 : rc; /* a hole: no sample */
    }
    if (sl_wire_sample_check(m, stage_to, l->nunits, detail, sizeof(detail)) < 0 ||
        sl_wire_url_versions(m, &s.vers, detail, sizeof(detail)) < 0) {
        s.skip = SL_SKIP_CORRUPT;
        return put(l, &s, detail, NULL, NULL, err, errlen);
    }
    return take_payload(l, m, stage_to, &s, err, errlen);
}

int cl_line_feed(cl_line_t *l, const cl_line_in_t *in, char *err, size_t errlen)
{
    if (in->wire != NULL) {
        return feed_wire(l, in, err, errlen);
    }
    if (cl_line_room(l) == 0) {
        return -EAGAIN;
    }
    sl_sample_t s;
    int rc = cl_line_sample(l, in->epoch, in->pos, in->split_id, &s);
    if (rc < 0) {
        snprintf(err, errlen, "%s", "cannot start an epoch");
        return rc;
    }
    if (rc == 1 && in->once) {
        return 0;
    }
    int hole = s.index == SL_POS_HOLE;
    rc = cl_line_run(l, &s, 0);
    if (rc < 0) {
        snprintf(err, errlen, "%s", "cannot queue a sample");
        return rc;
    }
    return hole ? 2 : 1;
}
