/* journal_state: encoding the job table into journal records and replaying
 * them (journal_state.h). */
#include "dispatcher/journal_state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/log.h"
#include "dispatcher/journal.h"
#include "dispatcher/planner.h"
#include "dispatcher/planner_job.h"
#include "dispatcher/ranks.h"
#include "proto/sluice.pb-c.h"

/* Jobs (open and closed tombstones) one replay may track: the log is
 * compacted at 4 MiB, so this is far beyond any real journal. */
#define RJOB_MAX (1u << 20)

/* ------------------------------------------------------------ encoding */

static void plan_to_msg(const disp_plan_t *p, Sluice__Plan *m)
{
    sluice__plan__init(m);
    m->split = p->split;
    m->local_share = p->local_share;
    m->mode = (char *)p->mode;
    m->version = p->version;
    m->predicted_samples_per_sec = p->predicted;
    m->binding = (char *)p->binding;
}

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
}

typedef int (*put_fn)(void *ctx, uint32_t type, const void *payload, size_t len);

static int put_msg(put_fn put, void *ctx, uint32_t type, const ProtobufCMessage *m)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    if (len > DISP_JOURNAL_MAX_RECORD) {
        return -E2BIG;
    }
    uint8_t *buf = malloc(len > 0 ? len : 1);
    if (buf == NULL) {
        return -ENOMEM;
    }
    (void)protobuf_c_message_pack(m, buf);
    int rc = put(ctx, type, buf, len);
    free(buf);
    return rc;
}

static int append_cb(void *ctx, uint32_t type, const void *payload, size_t len)
{
    return disp_journal_append((disp_journal_t *)ctx, type, payload, len);
}

/* A JournalPlanner message over a planner's state: the message points into
 * this storage and into pj, both of which outlive the put. */
typedef struct pl_msg_s {
    Sluice__JournalPlanner jp;
    Sluice__PlannerInputs in;
    Sluice__HostProfile prof[1 + DISP_PL_MAX_CLASSES];
    Sluice__StageStat st[1 + DISP_PL_MAX_CLASSES][DISP_PL_MAX_UNITS];
    Sluice__StageStat *pst[1 + DISP_PL_MAX_CLASSES][DISP_PL_MAX_UNITS];
    Sluice__WorkerClass wc[DISP_PL_MAX_CLASSES];
    Sluice__WorkerClass *pwc[DISP_PL_MAX_CLASSES];
    Sluice__JournalPlannerInput pi;
    Sluice__JournalPlannerClass pc[DISP_PL_MAX_CLASSES];
    Sluice__JournalPlannerClass *ppc[DISP_PL_MAX_CLASSES];
} pl_msg_t;

static void hprof_to_msg(const disp_hprof_t *p, Sluice__HostProfile *m, Sluice__StageStat *st,
                         Sluice__StageStat **pst)
{
    sluice__host_profile__init(m);
    m->host = (char *)p->host;
    uint32_t n = p->nunits < DISP_PL_MAX_UNITS ? p->nunits : DISP_PL_MAX_UNITS;
    for (uint32_t u = 0; u < n; u++) {
        sluice__stage_stat__init(&st[u]);
        st[u].name = (char *)p->units[u].name;
        st[u].cpu_sec_per_sample = p->units[u].cpu_sec_per_sample;
        st[u].out_bytes_per_sample = p->units[u].out_bytes_per_sample;
        st[u].samples = p->units[u].samples;
        pst[u] = &st[u];
    }
    m->n_units = n;
    m->units = pst;
    m->read_cpu_sec_per_sample = p->read_sec;
    m->encoded_bytes_per_sample = p->encoded_bytes;
    m->samples = p->samples;
    m->seconds = p->seconds;
    m->cost_model_error = p->model_error;
    m->size_cost_error = p->size_error;
    m->n_cost_model_coef = p->ncoef;
    m->cost_model_coef = p->ncoef > 0 ? (double *)p->coef : NULL;
}

/* The client's inputs as the planner holds them now (its reports refine
 * the CPU budget and receive cost), and the input of the current plan. */
static void planner_to_msg(const disp_pjob_t *pj, pl_msg_t *b)
{
    sluice__journal_planner__init(&b->jp);
    sluice__planner_inputs__init(&b->in);
    b->in.spec_hash = pj->spec_hash;
    hprof_to_msg(&pj->client, &b->prof[0], b->st[0], b->pst[0]);
    b->in.client = &b->prof[0];
    b->in.client_cpu_budget = pj->client_budget;
    b->in.recv_cpu_sec_per_byte = pj->recv_sec_per_byte;
    b->in.consumer_rate = pj->consumer_target;
    b->in.client_bandwidth = pj->client_bandwidth;
    uint32_t nc = pj->nclasses < DISP_PL_MAX_CLASSES ? pj->nclasses : DISP_PL_MAX_CLASSES;
    for (uint32_t c = 0; c < nc; c++) {
        const disp_pclass_t *pc = &pj->classes[c];
        Sluice__WorkerClass *w = &b->wc[c];
        sluice__worker_class__init(w);
        w->key = (char *)pc->key;
        w->n_worker_ids = pc->nids;
        w->worker_ids = (uint64_t *)pc->ids;
        w->threads = pc->threads;
        w->cpu_budget = pc->cpu_budget;
        w->bandwidth_bytes_per_sec = pc->bandwidth;
        if (pc->prof.nunits > 0) { /* profiled, or a profile that did not fit: as sent */
            hprof_to_msg(&pc->prof, &b->prof[1 + c], b->st[1 + c], b->pst[1 + c]);
            w->profile = &b->prof[1 + c];
        }
        b->pwc[c] = w;
    }
    b->in.n_classes = nc;
    b->in.classes = b->pwc;
    b->jp.inputs = &b->in;

    const disp_pl_input_t *x = &pj->input;
    uint32_t nu = x->nunits < DISP_PL_MAX_UNITS ? x->nunits : DISP_PL_MAX_UNITS;
    sluice__journal_planner_input__init(&b->pi);
    b->pi.n_unit_sec = nu;
    b->pi.unit_sec = (double *)x->unit_sec;
    b->pi.read_sec = x->read_sec;
    b->pi.n_bytes = nu + 1;
    b->pi.bytes = (double *)x->bytes;
    b->pi.recv_sec_per_byte = x->recv_sec_per_byte;
    b->pi.client_cores = x->client_cores;
    b->pi.consumer_rate = x->consumer_rate;
    b->pi.client_bandwidth = x->client_bandwidth;
    uint32_t nk = x->nclasses < DISP_PL_MAX_CLASSES ? x->nclasses : DISP_PL_MAX_CLASSES;
    for (uint32_t k = 0; k < nk; k++) {
        const disp_pl_class_t *xc = &x->classes[k];
        Sluice__JournalPlannerClass *m = &b->pc[k];
        sluice__journal_planner_class__init(m);
        m->workers = xc->workers;
        m->cores = xc->cores;
        m->profiled = xc->profiled != 0;
        m->read_sec = xc->read_sec;
        m->n_unit_sec = nu;
        m->unit_sec = (double *)xc->unit_sec;
        m->bandwidth = xc->bandwidth;
        b->ppc[k] = m;
    }
    b->pi.n_classes = nk;
    b->pi.classes = b->ppc;
    if (x->nsteps > 0 && x->nsteps <= DISP_PL_MAX_STEPS) {
        b->pi.nsteps = x->nsteps;
        b->pi.n_step_share = x->nsteps + 1;
        b->pi.step_share = (double *)x->step_share;
    }
    b->jp.input = &b->pi;
    b->jp.reason = (char *)pj->last_reason;
    b->jp.replans = pj->replans;
}

static int put_job(put_fn put, void *ctx, const disp_job_t *job)
{
    Sluice__JournalJob m = SLUICE__JOURNAL_JOB__INIT;
    Sluice__Plan pm;
    plan_to_msg(&job->plan, &pm);
    pl_msg_t *pb = NULL;
    if (job->planner != NULL) {
        pb = malloc(sizeof(*pb)); /* ~50 KiB: off the RPC thread's stack */
        if (pb == NULL) {
            return -ENOMEM;
        }
        planner_to_msg(job->planner, pb);
        m.planner = &pb->jp;
    }
    m.group = (char *)job->group;
    m.first_epoch = job->first_epoch;
    m.job_id = job->id;
    m.spec_json = job->spec_json;
    m.spec_name = (char *)job->spec_name;
    m.client_id = (char *)job->client_id;
    m.num_samples = job->num_samples;
    m.fingerprint = job->fingerprint;
    m.client_threads = job->client_threads;
    m.split_size = job->split_size;
    m.n_sample_costs = job->costs != NULL ? (size_t)job->num_samples : 0; /* split bounds */
    m.sample_costs = job->costs;
    m.plan = &pm;
    m.plan_nunits = job->plan.nunits;
    int rc = put_msg(put, ctx, DISP_JREC_JOB, &m.base);
    free(pb);
    return rc;
}

/* The job's whole ack state: done_below + the ACKED splits of live epochs. */
static int put_progress(put_fn put, void *ctx, const disp_job_t *job)
{
    Sluice__JournalAcks m = SLUICE__JOURNAL_ACKS__INIT;
    m.job_id = job->id;
    m.done_below = job->nep > 0 ? job->ep[0].epoch : job->next_epoch;
    size_t n = 0;
    for (uint32_t k = 0; k < job->nep; k++) {
        n += job->ep[k].nacked;
    }
    if (n > 0) {
        m.split_ids = malloc(n * sizeof(*m.split_ids));
        if (m.split_ids == NULL) {
            return -ENOMEM;
        }
    }
    for (uint32_t k = 0; k < job->nep; k++) {
        const disp_epoch_t *ep = &job->ep[k];
        for (uint32_t i = 0; i < job->nsplits && m.n_split_ids < n; i++) {
            if (ep->splits[i].state == DISP_SPLIT_ACKED) {
                m.split_ids[m.n_split_ids++] = ep->epoch * job->nsplits + i;
            }
        }
    }
    int rc = put_msg(put, ctx, DISP_JREC_ACKS, &m.base);
    free(m.split_ids);
    return rc;
}

static int snapshot_writer(void *ctx, disp_journal_emit_fn emit, void *emit_ctx)
{
    disp_t *d = ctx;
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (job->state == DISP_JOB_CLOSED) {
            continue;
        }
        int rc = put_job(emit, emit_ctx, job);
        if (rc == 0) {
            rc = put_progress(emit, emit_ctx, job);
        }
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static int compact(disp_t *d)
{
    char err[512];
    int rc = disp_journal_compact(d->journal, snapshot_writer, d, err, sizeof(err));
    if (rc != 0) {
        SL_ERR("journal compaction failed (the log keeps growing): %s", err);
    }
    return rc;
}

int disp_jstate_submitted(disp_t *d, const disp_job_t *job)
{
    if (d->journal == NULL) {
        return 0;
    }
    return put_job(append_cb, d->journal, job);
}

int disp_jstate_acked(disp_t *d, disp_job_t *job, const uint64_t *ids, size_t n)
{
    if (d->journal == NULL || job->state != DISP_JOB_ACTIVE) {
        return 0;
    }
    Sluice__JournalAcks m = SLUICE__JOURNAL_ACKS__INIT;
    m.job_id = job->id;
    if (n > 0) {
        m.split_ids = malloc(n * sizeof(*m.split_ids));
        if (m.split_ids == NULL) {
            return -ENOMEM;
        }
    }
    for (size_t i = 0; i < n; i++) {
        disp_split_t *s = disp_job_split(job, ids[i], NULL, NULL, NULL);
        if (s != NULL && s->state != DISP_SPLIT_ACKED) {
            m.split_ids[m.n_split_ids++] = ids[i];
        }
    }
    int rc = 0;
    if (m.n_split_ids > 0) { /* nothing new: nothing to make durable */
        rc = put_msg(append_cb, d->journal, DISP_JREC_ACKS, &m.base);
    }
    free(m.split_ids);
    return rc;
}

int disp_jstate_plan(disp_t *d, const disp_job_t *job)
{
    if (d->journal == NULL) {
        return 0;
    }
    Sluice__JournalPlan m = SLUICE__JOURNAL_PLAN__INIT;
    Sluice__Plan pm;
    plan_to_msg(&job->plan, &pm);
    m.job_id = job->id;
    m.plan = &pm;
    m.plan_nunits = job->plan.nunits;
    pl_msg_t *pb = NULL;
    if (job->planner != NULL) {
        pb = malloc(sizeof(*pb));
        if (pb == NULL) {
            return -ENOMEM;
        }
        planner_to_msg(job->planner, pb);
        m.planner = &pb->jp;
    }
    int rc = put_msg(append_cb, d->journal, DISP_JREC_PLAN, &m.base);
    free(pb);
    return rc;
}

int disp_jstate_rank(disp_t *d, const disp_job_t *job)
{
    if (d->journal == NULL || job->state == DISP_JOB_CLOSED) {
        return 0;
    }
    Sluice__JournalRank m = SLUICE__JOURNAL_RANK__INIT;
    m.job_id = job->id;
    m.group = (char *)job->group;
    return put_msg(append_cb, d->journal, DISP_JREC_RANK, &m.base);
}

int disp_jstate_closed(disp_t *d, const disp_job_t *job, const char *reason)
{
    if (d->journal == NULL || job->state == DISP_JOB_CLOSED) {
        return 0;
    }
    Sluice__JournalClose m = SLUICE__JOURNAL_CLOSE__INIT;
    m.job_id = job->id;
    m.reason = (char *)reason;
    return put_msg(append_cb, d->journal, DISP_JREC_CLOSE, &m.base);
}

/* disp_jobs_expire's hook: a timed-out job is closed only once the close is
 * durable, or a restart would bring it back open. */
static int expire_hook(void *ctx, const disp_job_t *job, const char *reason)
{
    int rc = disp_jstate_closed(ctx, job, reason);
    if (rc != 0) {
        SL_WARN("job %" PRIu64 ": journal write of its close (%s) failed: %s; it stays open "
                "until the write succeeds",
                job->id, reason, strerror(-rc));
    }
    return rc;
}

void disp_jstate_maybe_compact(disp_t *d)
{
    if (d->journal != NULL && disp_journal_log_bytes(d->journal) > DISP_JOURNAL_COMPACT_BYTES) {
        uint64_t before = disp_journal_log_bytes(d->journal);
        if (compact(d) == 0) {
            SL_INFO("journal compacted (%" PRIu64 " bytes of log)", before);
        }
    }
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
    if (m->split_size == 0 || m->num_samples == 0 ||
        (m->num_samples + m->split_size - 1) / m->split_size > DISP_MAX_SPLITS_PER_EPOCH) {
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
    r->nsplits = (uint32_t)((m->num_samples + m->split_size - 1) / m->split_size);
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

int disp_jstate_open(disp_t *d, const char *dir, int64_t now_ms, char *err, size_t errlen)
{
    disp_journal_t *j = NULL;
    replay_t rp = {0};
    int rc = disp_journal_open(dir, &j, err, errlen);
    if (rc != 0) {
        return rc;
    }
    size_t truncated = 0;
    rc = disp_journal_replay(j, on_record, &rp, &truncated, err, errlen);
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
    d->journal = j;
    d->jobs.expire_hook = expire_hook;
    d->jobs.expire_hook_ctx = d;
    SL_NOTICE("journal %s: %zu open job(s) restored", dir, restored);
    /* Start from a clean snapshot: the log holds only what follows. */
    (void)compact(d);
    j = NULL;
out:
    for (size_t i = 0; i < rp.n; i++) {
        rjob_clear(&rp.jobs[i]);
    }
    free(rp.jobs);
    disp_journal_close(j);
    return rc;
}

void disp_jstate_close(disp_t *d)
{
    d->jobs.expire_hook = NULL;
    d->jobs.expire_hook_ctx = NULL;
    disp_journal_close(d->journal);
    d->journal = NULL;
}
