/* journal_state: encoding the job table into journal records, when they
 * are appended and waited for, compaction (journal_state.h); replay is
 * journal_replay.c. */
#include "dispatcher/journal/journal_state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "dispatcher/journal/journal.h"
#include "dispatcher/journal/journal_replay.h"
#include "dispatcher/planner/planner.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/planner/planner_mix_journal.h"
#include "proto/sluice.pb-c.h"

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
    m->compress = p->compress != 0;
    m->local_reason = (char *)p->local_reason;
    m->cache_off = p->cache_off != 0;
    m->cache_reason = (char *)p->cache_reason;
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
    return disp_journal_append((disp_journal_t *)ctx, type, payload, len, NULL);
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
    char cpu_set[512]; /* in.client_cpu_set */
    /* A mix: its sources' costs and the profiles as profiled on the blend
     * (planner_mix_journal.h). */
    disp_pmix_pb_t mix;
    disp_hprof_t mixprof[1 + DISP_PL_MAX_CLASSES];
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
    int mixed = disp_pjob_mix_to_journal(pj, &b->mix, &b->in, &b->mixprof[0], &b->mixprof[1],
                                         &b->jp.mix_step, &b->jp.mix_changes);
    hprof_to_msg(mixed ? &b->mixprof[0] : &pj->client, &b->prof[0], b->st[0], b->pst[0]);
    b->in.client = &b->prof[0];
    b->in.client_cpu_budget = pj->client_budget;
    /* A measured budget in use stays in use after a restart. */
    b->in.client_cpu_budget_source = (char *)pj->budget_source;
    b->in.client_cpu_budget_measured = pj->budget_from_measured ? pj->client_budget : 0.0;
    b->in.recv_cpu_sec_per_byte = pj->recv_sec_per_byte;
    b->in.consumer_rate = pj->consumer_target;
    b->in.client_bandwidth = pj->client_bandwidth;
    b->in.client_machine_id = (char *)pj->client_machine;
    b->cpu_set[0] = '\0';
    if (pj->client_has_cpus) {
        sl_cpuset_format(&pj->client_cpus, b->cpu_set, sizeof(b->cpu_set));
    }
    b->in.client_cpu_set = b->cpu_set;
    /* The codec numbers as received (zeros when none: never compressed). */
    size_t nb = (size_t)pj->nunits + 1;
    b->in.n_codec_ratio = nb;
    b->in.codec_ratio = (double *)pj->codec_ratio;
    b->in.n_codec_compress_sec_per_sample = nb;
    b->in.codec_compress_sec_per_sample = (double *)pj->codec_compress;
    b->in.n_codec_decompress_sec_per_sample = nb;
    b->in.codec_decompress_sec_per_sample = (double *)pj->codec_decompress;
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
            hprof_to_msg(mixed ? &b->mixprof[1 + c] : &pc->prof, &b->prof[1 + c], b->st[1 + c],
                         b->pst[1 + c]);
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

/* Puts message m of a job record type with the job's planner state (if it
 * has a planner) hung on m's planner field *ret_planner for the put. */
static int put_planned(put_fn put, void *ctx, uint32_t type, const ProtobufCMessage *m,
                       const disp_job_t *job, Sluice__JournalPlanner **ret_planner)
{
    pl_msg_t *pb = NULL;
    if (job->planner != NULL) {
        pb = malloc(sizeof(*pb)); /* ~50 KiB: off the RPC thread's stack */
        if (pb == NULL) {
            return -ENOMEM;
        }
        planner_to_msg(job->planner, pb);
        *ret_planner = &pb->jp;
    }
    int rc = put_msg(put, ctx, type, m);
    *ret_planner = NULL; /* points into pb */
    free(pb);
    return rc;
}

static int put_job(put_fn put, void *ctx, const disp_job_t *job)
{
    Sluice__JournalJob m = SLUICE__JOURNAL_JOB__INIT;
    Sluice__Plan pm;
    plan_to_msg(&job->plan, &pm);
    m.group = (char *)job->group;
    m.first_epoch = job->first_epoch;
    m.tenant = (char *)job->tenant;
    if (job->has_cap) {
        /* The hash only: a journal on disk gives no one the job's secret. */
        m.secret_sha256.data = (uint8_t *)job->cap_hash;
        m.secret_sha256.len = SL_JOBCAP_HASH;
    }
    m.job_id = job->id;
    m.spec_json = job->spec_json;
    m.spec_name = (char *)job->spec_name;
    m.client_id = (char *)job->client_id;
    m.num_samples = job->num_samples;
    m.fingerprint = job->fingerprint;
    m.client_threads = job->client_threads;
    m.split_size = job->split_size;
    m.splits_per_epoch = job->nsplits;
    m.n_sample_costs = job->costs != NULL ? (size_t)job->num_samples : 0; /* split bounds */
    m.sample_costs = job->costs;
    m.plan = &pm;
    m.plan_nunits = job->plan.nunits;
    return put_planned(put, ctx, DISP_JREC_JOB, &m.base, job, &m.planner);
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
    if (m.n_split_ids > 0) { /* nothing new: nothing to append (the reply still waits) */
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
    return put_planned(append_cb, d->journal, DISP_JREC_PLAN, &m.base, job, &m.planner);
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

uint64_t disp_jstate_seq(disp_t *d)
{
    return d->journal != NULL ? disp_journal_last(d->journal) : 0;
}

int disp_jstate_wait(disp_t *d, uint64_t seq)
{
    return d->journal != NULL && seq > 0 ? disp_journal_wait(d->journal, seq) : 0;
}

/* disp_jobs_expire's hook: a timed-out job is closed only once its close
 * is in the log (disp_tick makes it durable after releasing the mutex; a
 * crash before that brings the job back, to time out again). */
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

void disp_jstate_maybe_compact(disp_t *d, int64_t now_ms)
{
    if (d->journal == NULL) {
        return;
    }
    uint64_t before = disp_journal_log_bytes(d->journal);
    if (disp_journal_broken(d->journal)) {
        /* A sync failed: what the log holds is in doubt, the state in
         * memory is not. A snapshot of it makes every change durable. */
        if (now_ms < d->journal_retry_ms) {
            return;
        }
        d->journal_retry_ms = now_ms + DISP_JOURNAL_RETRY_MS;
        if (compact(d) == 0) {
            SL_NOTICE("journal whole again: the state is in a new snapshot after a failed "
                      "sync");
        }
        return;
    }
    if (before > DISP_JOURNAL_COMPACT_BYTES && compact(d) == 0) {
        SL_INFO("journal compacted (%" PRIu64 " bytes of log)", before);
    }
}

int disp_jstate_open(disp_t *d, const char *dir, int64_t now_ms, char *err, size_t errlen)
{
    disp_journal_t *j = NULL;
    int rc = disp_journal_open(dir, &j, err, errlen);
    if (rc != 0) {
        return rc;
    }
    size_t restored = 0;
    rc = disp_jreplay(d, j, dir, now_ms, &restored, err, errlen);
    if (rc != 0) {
        disp_journal_close(j);
        return rc;
    }
    d->journal = j;
    d->jobs.expire_hook = expire_hook;
    d->jobs.expire_hook_ctx = d;
    SL_NOTICE("journal %s: %zu open job(s) restored", dir, restored);
    /* Start from a clean snapshot: the log holds only what follows. */
    (void)compact(d);
    return 0;
}

void disp_jstate_close(disp_t *d)
{
    d->jobs.expire_hook = NULL;
    d->jobs.expire_hook_ctx = NULL;
    disp_journal_close(d->journal);
    d->journal = NULL;
}
