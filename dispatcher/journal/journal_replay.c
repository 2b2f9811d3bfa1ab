/* journal_replay: rebuilds the job table from the journal's records (the
 * record types and what they mean: journal_state.h). Start-up only, before
 * any other thread: called by disp_jstate_open. */
#include "dispatcher/journal/journal_replay.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "dispatcher/journal/journal_state.h"
#include "dispatcher/planner/planner.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/planner/planner_mix_journal.h"
#include "dispatcher/core/ranks.h"
#include "proto/sluice.pb-c.h"

/* Jobs (open and closed tombstones) one replay may track: the log is
 * compacted at 4 MiB, so this is far beyond any real journal. */
#define RJOB_MAX (1u << 20)

static void plan_from_msg(const Sluice__Plan *m, uint32_t nunits, disp_plan_t *p)
{
    memset(p, 0, sizeof(*p));
    p->split = m->split;
    p->local_share = m->local_share;
    disp_text_copy(p->mode, sizeof(p->mode), m->mode);
    p->version = m->version;
    p->nunits = nunits;
    p->predicted = m->predicted_samples_per_sec;
    disp_text_copy(p->binding, sizeof(p->binding), m->binding);
    p->compress = m->compress;
    disp_text_copy(p->local_reason, sizeof(p->local_reason), m->local_reason);
    p->cache_off = m->cache_off;
    disp_text_copy(p->cache_reason, sizeof(p->cache_reason), m->cache_reason);
}

/* ------------------------------------------------------------ replay */

/* One job as the records so far describe it. Acks are kept as bitmaps of
 * the two oldest epochs not fully acknowledged (at most two are ever live). */
typedef struct rjob_s {
    uint64_t id;
    Sluice__JournalJob *rec; /* owned (unpacked) */
    disp_plan_t plan;
    Sluice__JournalPlan *plan_rec;          /* owned: the last plan record with a planner */
    const Sluice__JournalPlanner *planner;  /* in rec or plan_rec; NULL = none */
    char group[DISP_NAME_MAX];
    int closed;
    uint32_t nsplits;
    uint64_t done_below;
    uint8_t *bits[2];
    uint32_t count[2];
} rjob_t;

typedef struct replay_s {
    rjob_t *jobs;
    size_t n, cap;
} replay_t;

static void rjob_clear(rjob_t *r)
{
    if (r->rec != NULL) {
        sluice__journal_job__free_unpacked(r->rec, NULL);
        r->rec = NULL;
    }
    if (r->plan_rec != NULL) {
        sluice__journal_plan__free_unpacked(r->plan_rec, NULL);
        r->plan_rec = NULL;
    }
    r->planner = NULL;
    free(r->bits[0]);
    free(r->bits[1]);
    r->bits[0] = r->bits[1] = NULL;
}

static rjob_t *rjob_find(replay_t *rp, uint64_t id)
{
    for (size_t i = 0; i < rp->n; i++) {
        if (rp->jobs[i].id == id) {
            return &rp->jobs[i];
        }
    }
    return NULL;
}

static void rjob_shift(rjob_t *r)
{
    uint8_t *b = r->bits[0];
    r->bits[0] = r->bits[1];
    r->bits[1] = b;
    memset(b, 0, (r->nsplits + 7) / 8);
    r->count[0] = r->count[1];
    r->count[1] = 0;
    r->done_below++;
}

static void rjob_ack(rjob_t *r, uint64_t id)
{
    uint64_t e = id / r->nsplits;
    uint32_t i = (uint32_t)(id % r->nsplits);
    if (e < r->done_below || e > r->done_below + 1) {
        return; /* done already (a repeated record), or impossible: ignore */
    }
    unsigned slot = (unsigned)(e - r->done_below);
    uint8_t mask = (uint8_t)(1u << (i % 8));
    if (r->bits[slot][i / 8] & mask) {
        return;
    }
    r->bits[slot][i / 8] |= mask;
    r->count[slot]++;
    while (r->count[0] == r->nsplits) {
        rjob_shift(r);
    }
}

static int on_job(replay_t *rp, const uint8_t *p, size_t len)
{
    Sluice__JournalJob *m = sluice__journal_job__unpack(NULL, len, p);
    if (m == NULL) {
        return -EBADMSG;
    }
    if (rjob_find(rp, m->job_id) != NULL) {
        sluice__journal_job__free_unpacked(m, NULL); /* known (or closed): no-op */
        return 0;
    }
    /* Split ids are epoch * splits + index over the job's positions; older
     * journals did not say, and their jobs' positions were num_samples. */
    uint64_t nsplits = m->splits_per_epoch > 0 ? m->splits_per_epoch
                       : m->split_size > 0 ? (m->num_samples + m->split_size - 1) / m->split_size
                                           : 0;
    if (m->split_size == 0 || m->num_samples == 0 || nsplits == 0 ||
        nsplits > DISP_MAX_SPLITS_PER_EPOCH) {
        sluice__journal_job__free_unpacked(m, NULL);
        return -EBADMSG;
    }
    if (rp->n == rp->cap) {
        size_t cap = rp->cap > 0 ? rp->cap * 2 : 16;
        rjob_t *nj = cap <= RJOB_MAX ? realloc(rp->jobs, cap * sizeof(*nj)) : NULL;
        if (nj == NULL) {
            sluice__journal_job__free_unpacked(m, NULL);
            return -ENOMEM;
        }
        rp->jobs = nj;
        rp->cap = cap;
    }
    rjob_t *r = &rp->jobs[rp->n];
    memset(r, 0, sizeof(*r));
    r->id = m->job_id;
    r->rec = m;
    r->nsplits = (uint32_t)nsplits;
    r->done_below = m->first_epoch; /* acks name epochs from there on */
    if (m->plan != NULL) {
        plan_from_msg(m->plan, m->plan_nunits, &r->plan);
    }
    r->planner = m->planner;
    disp_text_copy(r->group, sizeof(r->group), m->group);
    r->bits[0] = calloc((r->nsplits + 7) / 8, 1);
    r->bits[1] = calloc((r->nsplits + 7) / 8, 1);
    if (r->bits[0] == NULL || r->bits[1] == NULL) {
        rjob_clear(r);
        return -ENOMEM;
    }
    rp->n++;
    return 0;
}

static int on_acks(replay_t *rp, const uint8_t *p, size_t len)
{
    Sluice__JournalAcks *m = sluice__journal_acks__unpack(NULL, len, p);
    if (m == NULL) {
        return -EBADMSG;
    }
    rjob_t *r = rjob_find(rp, m->job_id);
    if (r != NULL && !r->closed) {
        while (r->done_below < m->done_below) {
            if (m->done_below - r->done_below >= 2) {
                rjob_shift(r); /* bounded: at most twice before the slots are clear */
                rjob_shift(r);
                r->done_below = m->done_below;
                break;
            }
            rjob_shift(r);
        }
        for (size_t i = 0; i < m->n_split_ids; i++) {
            rjob_ack(r, m->split_ids[i]);
        }
    }
    sluice__journal_acks__free_unpacked(m, NULL);
    return 0;
}

static int on_plan(replay_t *rp, const uint8_t *p, size_t len)
{
    Sluice__JournalPlan *m = sluice__journal_plan__unpack(NULL, len, p);
    if (m == NULL) {
        return -EBADMSG;
    }
    rjob_t *r = rjob_find(rp, m->job_id);
    if (r != NULL && !r->closed && m->plan != NULL) {
        plan_from_msg(m->plan, m->plan_nunits, &r->plan);
        if (m->planner != NULL) { /* an older record has none: the last state stands */
            if (r->plan_rec != NULL) {
                sluice__journal_plan__free_unpacked(r->plan_rec, NULL);
            }
            r->plan_rec = m;
            r->planner = m->planner;
            return 0;
        }
    }
    sluice__journal_plan__free_unpacked(m, NULL);
    return 0;
}

static int on_rank(replay_t *rp, const uint8_t *p, size_t len)
{
    Sluice__JournalRank *m = sluice__journal_rank__unpack(NULL, len, p);
    if (m == NULL) {
        return -EBADMSG;
    }
    rjob_t *r = rjob_find(rp, m->job_id);
    if (r != NULL && !r->closed) {
        disp_text_copy(r->group, sizeof(r->group), m->group);
    }
    sluice__journal_rank__free_unpacked(m, NULL);
    return 0;
}

static int on_close(replay_t *rp, const uint8_t *p, size_t len)
{
    Sluice__JournalClose *m = sluice__journal_close__unpack(NULL, len, p);
    if (m == NULL) {
        return -EBADMSG;
    }
    rjob_t *r = rjob_find(rp, m->job_id);
    if (r != NULL && !r->closed) {
        r->closed = 1; /* a tombstone: a repeated JournalJob stays a no-op */
        rjob_clear(r);
    }
    sluice__journal_close__free_unpacked(m, NULL);
    return 0;
}

static int on_record(void *ctx, uint32_t type, const uint8_t *payload, size_t len)
{
    replay_t *rp = ctx;
    switch (type) {
    case DISP_JREC_JOB:
        return on_job(rp, payload, len);
    case DISP_JREC_ACKS:
        return on_acks(rp, payload, len);
    case DISP_JREC_PLAN:
        return on_plan(rp, payload, len);
    case DISP_JREC_CLOSE:
        return on_close(rp, payload, len);
    case DISP_JREC_RANK:
        return on_rank(rp, payload, len);
    default:
        return -EBADMSG; /* a newer dispatcher's journal: refuse rather than lose state */
    }
}

/* The recorded planner input, checked against the pipeline's unit count (a
 * record that does not fit is not used). */
static int input_from_msg(const Sluice__JournalPlannerInput *m, uint32_t nunits,
                          disp_pl_input_t *in)
{
    if (m->n_unit_sec != nunits || m->n_bytes != (size_t)nunits + 1 ||
        m->n_classes > DISP_PL_MAX_CLASSES || nunits > DISP_PL_MAX_UNITS ||
        m->nsteps > DISP_PL_MAX_STEPS ||
        (m->nsteps > 0 && m->n_step_share != (size_t)m->nsteps + 1)) {
        return -EBADMSG;
    }
    memset(in, 0, sizeof(*in));
    in->nunits = nunits;
    memcpy(in->unit_sec, m->unit_sec, nunits * sizeof(double));
    memcpy(in->bytes, m->bytes, (nunits + 1) * sizeof(double));
    in->read_sec = m->read_sec;
    in->recv_sec_per_byte = m->recv_sec_per_byte;
    in->client_cores = m->client_cores;
    in->consumer_rate = m->consumer_rate;
    in->client_bandwidth = m->client_bandwidth;
    for (size_t k = 0; k < m->n_classes; k++) {
        const Sluice__JournalPlannerClass *c = m->classes[k];
        if (c == NULL || c->n_unit_sec != nunits) {
            return -EBADMSG;
        }
        disp_pl_class_t *x = &in->classes[k];
        x->workers = c->workers;
        x->cores = c->cores;
        x->profiled = c->profiled;
        x->read_sec = c->read_sec;
        memcpy(x->unit_sec, c->unit_sec, nunits * sizeof(double));
        x->bandwidth = c->bandwidth;
    }
    in->nclasses = (uint32_t)m->n_classes;
    in->nsteps = m->nsteps;
    if (m->nsteps > 0) {
        memcpy(in->step_share, m->step_share, m->n_step_share * sizeof(double));
    }
    return 0;
}

/* Gives a restored auto/fastflow job its planner back: the client's inputs,
 * and the prediction and explanation of the plan it has (recomputed from the
 * recorded input: the planner is pure). The live worker set starts as the
 * registry's now (empty at start-up), so workers re-registering re-plan the
 * job as they would have without the restart. Anything unusable leaves the
 * job without a planner, as before: it keeps its plan. */
static void restore_planner(disp_t *d, disp_job_t *job, const Sluice__JournalPlanner *m,
                            int64_t now_ms)
{
    if (m == NULL || m->inputs == NULL) {
        return; /* not planned, or an older journal */
    }
    sl_offload_e policy = job->spec.offload;
    if (policy != SL_OFFLOAD_AUTO && policy != SL_OFFLOAD_FASTFLOW) {
        return;
    }
    disp_pjob_t *pj = NULL;
    char err[256] = "";
    if (disp_pjob_new(m->inputs, &job->spec, policy, &pj, err, sizeof(err)) != 0) {
        SL_WARN("journal: job %" PRIu64 ": planner state not restored (%s); it keeps plan v%u",
                job->id, err, job->plan.version);
        return;
    }
    /* A mix: the weights in force when journaled (planner_mix_journal.h). */
    disp_pjob_mix_from_journal(pj, m->mix_step, m->mix_changes);
    /* Derived, not journaled: the world size from the spec; the ranks on
     * the client's node from the job table, which the next tick counts
     * once every part is back (1 until then). */
    pj->world = job->spec.world_size;
    pj->node_ranks = 1;
    disp_plan_t scratch = job->plan;
    disp_pjob_plan(pj, &d->reg, &scratch, now_ms, "restored");
    disp_pl_input_t *in = malloc(sizeof(*in));
    if (in != NULL && m->input != NULL && input_from_msg(m->input, pj->nunits, in) == 0) {
        pj->input = *in;
        /* The recorded input has no codec numbers; the client's inputs do. */
        for (uint32_t k = 0; k <= pj->nunits; k++) {
            pj->input.ratio[k] = pj->codec_ratio[k];
            pj->input.compress_sec[k] = pj->codec_compress[k];
            pj->input.decompress_sec[k] = pj->codec_decompress[k];
        }
        if (disp_planner_plan(&pj->input, &pj->result) != 0 ||
            disp_planner_fastflow(&pj->input, &pj->ff) != 0) {
            disp_pjob_plan(pj, &d->reg, &scratch, now_ms, "restored");
        }
    }
    free(in);
    snprintf(pj->last_reason, sizeof(pj->last_reason), "restored (%s)",
             m->reason != NULL ? m->reason : "");
    pj->replans = m->replans;
    job->planner = pj;
}

/* Rebuilds one job in d's table with its recorded id and split size. */
static int restore_job(disp_t *d, rjob_t *r, int64_t now_ms)
{
    const Sluice__JournalJob *m = r->rec;
    disp_submit_t sub = {
        .spec_json = m->spec_json,
        .spec_len = m->spec_json != NULL ? strlen(m->spec_json) : 0,
        .spec_name = m->spec_name,
        .num_samples = m->num_samples,
        .fingerprint = m->fingerprint,
        .client_threads = m->client_threads,
        .client_id = m->client_id,
        .plan = m->plan != NULL ? &r->plan : NULL,
        .costs = m->sample_costs, /* the same costs cut the same bounds */
        .ncosts = m->n_sample_costs,
        .first_epoch = m->first_epoch,
    };
    uint64_t next_id = d->jobs.next_id;
    uint32_t split_size = d->jobs.lim.split_size;
    d->jobs.next_id = r->id;
    d->jobs.lim.split_size = m->split_size;
    disp_job_t *job = NULL;
    char err[512];
    int rc = disp_jobs_submit(&d->jobs, &sub, now_ms, &job, err, sizeof(err));
    d->jobs.lim.split_size = split_size;
    d->jobs.next_id = next_id > r->id ? next_id : r->id + 1;
    if (rc != 0) {
        SL_ERR("journal: job %" PRIu64 " cannot be restored (dropped): %s", r->id, err);
        return 0; /* one bad job does not keep the others down */
    }
    size_t n = r->count[0] + (size_t)r->count[1];
    uint64_t *ids = n > 0 ? malloc(n * sizeof(*ids)) : NULL;
    if (n > 0 && ids == NULL) {
        return -ENOMEM;
    }
    size_t k = 0;
    for (unsigned slot = 0; slot < 2; slot++) {
        for (uint32_t i = 0; i < r->nsplits && k < n; i++) {
            if (r->bits[slot][i / 8] & (1u << (i % 8))) {
                ids[k++] = (r->done_below + slot) * r->nsplits + i;
            }
        }
    }
    rc = disp_jobs_restore(&d->jobs, job, r->done_below, ids, k, now_ms);
    free(ids);
    if (rc == 0) {
        disp_text_copy(job->tenant, sizeof(job->tenant), m->tenant);
        if (m->secret_sha256.len == SL_JOBCAP_HASH) {
            memcpy(job->cap_hash, m->secret_sha256.data, SL_JOBCAP_HASH);
            job->has_cap = 1;
        } else if (m->secret_sha256.len != 0) {
            /* A capability we cannot check must not turn into none. */
            SL_ERR("journal: job %" PRIu64 ": secret_sha256 of %zu bytes (dropped)", r->id,
                   m->secret_sha256.len);
            disp_jobs_close(&d->jobs, job, "journal: bad capability", now_ms);
            return 0;
        }
        if (r->group[0] != '\0') {
            disp_ranks_tag(job, r->group);
        }
        restore_planner(d, job, r->planner, now_ms);
        SL_NOTICE("journal: job %" PRIu64 " restored: spec \"%s\", epoch %" PRIu64 " of %u, "
                  "%zu split(s) of its live epochs acknowledged, plan %s v%u%s%s%s",
                  job->id, job->spec_name, r->done_below, job->epochs, k, job->plan.mode,
                  job->plan.version, job->planner != NULL ? " with its planner" : "",
                  job->group[0] != '\0' ? ", rank of " : "", job->group);
    }
    return rc;
}

int disp_jreplay(disp_t *d, disp_journal_t *j, const char *dir, int64_t now_ms,
                 size_t *ret_restored, char *err, size_t errlen)
{
    replay_t rp = {0};
    size_t truncated = 0;
    int rc = disp_journal_replay(j, on_record, &rp, &truncated, err, errlen);
    if (rc == -EBADMSG && err[0] == '\0') {
        rc = sl_err(err, errlen, rc, "%s: a record does not decode as its type", dir);
    }
    if (rc != 0) {
        goto out;
    }
    if (truncated > 0) {
        SL_NOTICE("journal %s: truncated a torn tail of %zu bytes (an append cut short by a "
                  "crash; the RPC it belonged to was never answered)",
                  dir, truncated);
    }
    size_t restored = 0;
    for (size_t i = 0; i < rp.n && rc == 0; i++) {
        if (!rp.jobs[i].closed) {
            rc = restore_job(d, &rp.jobs[i], now_ms);
            restored++;
        }
    }
    if (rc != 0) {
        sl_err(err, errlen, rc, "journal %s: cannot restore jobs: %s", dir, strerror(-rc));
        goto out;
    }
    *ret_restored = restored;
out:
    for (size_t i = 0; i < rp.n; i++) {
        rjob_clear(&rp.jobs[i]);
    }
    free(rp.jobs);
    return rc;
}
