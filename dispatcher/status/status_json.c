/* status_json: the /status document (docs/reference/status.md "Status endpoint reference"),
 * built with jansson under d->mu (and the history's mutex). Callable from
 * any thread: the http thread for /status, an RPC handler for GetStatus.
 *
 * json_object_set_new steals its value even on failure, so the helpers
 * below only need to notice a NULL and remember: one failure drops the whole
 * document (the caller answers 500) rather than serving half of it. */
#include "dispatcher/status/json_doc.h"
#include "dispatcher/status/status_impl.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/rpc/rpc.h"
#include "dispatcher/service/planner_svc.h"

/* Ids and counters are below 2^63 (ids are seeded below 2^53). */
static json_t *jint(uint64_t v)
{
    return json_integer((json_int_t)(v > INT64_MAX ? INT64_MAX : v));
}

/* json_real refuses NaN and infinities, and one refusal drops the whole
 * page: a peer's finite but extreme number (a 1e-310 s/sample profile, a
 * 1e308 wait fraction) can still overflow in the arithmetic here. */
static json_t *jreal(double v) { return json_real(isfinite(v) ? v : 0.0); }

/* Peer-supplied text: json_string refuses invalid UTF-8, so fall back. */
static json_t *text_or_placeholder(const char *s)
{
    json_t *v = json_string(s);
    return v != NULL ? v : json_string("(not utf-8)");
}

/* Reasons come from clients: one that is not valid UTF-8 is left out
 * (set_new fails and frees v) rather than failing the page. */
static void set_count(json_t *o, const char *key, uint64_t n)
{
    json_t *v = jint(n);
    if (v != NULL) {
        (void)json_object_set_new(o, key, v);
    }
}

long long disp_status_workers_needed(const json_t *planner)
{
    const json_t *v = json_object_get(planner, "workers_needed");
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* ------------------------------------------------------------ workers */

/* Unit i ran inside the next unit's pass: it processed samples but was
 * charged no CPU, the pass being charged to the next unit (a normalize
 * followed by to_chw: common/engine/pipeline.c run_normalize_chw). */
static int fused_into_next(const disp_stage_stat_t *stages, uint32_t n, uint32_t i)
{
    return i + 1 < n && stages[i].samples > 0 && stages[i].cpu_sec_per_sample <= 0 &&
           stages[i + 1].cpu_sec_per_sample > 0;
}

/* rec: the worker's history (NULL: no rates). A unit's capacity is what the
 * worker's threads would do if they ran nothing else; a unit fused into the
 * next one's pass has that pass's capacity (and "fused_into" names it),
 * never 0. */
static json_t *stages_json(jb_t *b, const disp_stage_stat_t *stages, uint32_t n, uint32_t threads,
                           const disp_status_wrec_t *rec)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++) {
        const disp_stage_stat_t *s = &stages[i];
        json_t *o = json_object();
        jset(b, o, "name", text_or_placeholder(s->name));
        jset(b, o, "cpu_sec_per_sample", jreal(s->cpu_sec_per_sample));
        jset(b, o, "out_bytes_per_sample", jreal(s->out_bytes_per_sample));
        jset(b, o, "samples", jint(s->samples));
        const disp_stage_stat_t *pass = s;
        if (fused_into_next(stages, n, i)) {
            pass = &stages[i + 1];
            jset(b, o, "fused_into", text_or_placeholder(pass->name));
        }
        if (threads > 0) {
            double cap = pass->cpu_sec_per_sample > 0 ? threads / pass->cpu_sec_per_sample : 0;
            jset(b, o, "capacity_per_sec", jreal(cap));
        }
        if (rec != NULL) {
            jset(b, o, "samples_per_sec", jreal(disp_status_unit_rate(rec, s->name)));
        }
        jpush(b, a, o);
    }
    return a;
}

static json_t *worker_json(jb_t *b, const disp_worker_t *w, int64_t now_ms,
                           const disp_status_wrec_t *rec)
{
    json_t *o = json_object();
    jset(b, o, "id", jint(w->id));
    jset(b, o, "address", text_or_placeholder(w->address));
    jset(b, o, "hostname", text_or_placeholder(w->hostname));
    json_t *pl = json_array();
    for (uint32_t i = 0; pl != NULL && i < w->nplugins; i++) {
        json_array_append_new(pl, json_pack("{s:s,s:s,s:s}", "name", w->plugins[i].name,
                                            "version", w->plugins[i].version, "sha256",
                                            w->plugins[i].sha256));
    }
    jset(b, o, "plugins", pl);
    jset(b, o, "state", json_string(disp_worker_state_name(w->state)));
    /* Draining after SIGTERM: takes no new splits, leaves when done. */
    jset(b, o, "leaving", json_boolean(w->leaving));
    jset(b, o, "last_heartbeat_ms_ago", json_integer(now_ms - w->last_heartbeat_ms));
    jset(b, o, "registered_sec_ago", jreal((double)(now_ms - w->registered_ms) / 1000.0));
    jset(b, o, "threads", json_integer(w->threads));
    /* A lost or departed worker's last heartbeat no longer describes it:
     * its live values read 0, not frozen (its rates: disp_status_wrec). */
    int live = w->state == DISP_WORKER_LIVE;
    jset(b, o, "load", jreal(live ? w->load : 0));
    jset(b, o, "buffered_bytes", jint(live ? w->buffered_bytes : 0));
    jset(b, o, "outstanding_splits", json_integer(w->outstanding));
    jset(b, o, "splits_in_progress", json_integer(live ? w->in_progress : 0));
    if (rec != NULL) {
        jset(b, o, "samples_per_sec", jreal(disp_status_worker_rate(rec)));
    }
    jset(b, o, "stages", stages_json(b, w->stages, w->nstages, w->threads, rec));
    /* Its prefix cache's read-back cost, fitted from its hits' timings
     * (planner_cache_cost.h); null before a window of them. */
    const disp_pc_cost_t *pc = &w->pc_read.cost;
    jset(b, o, "cache_read",
         pc->have ? json_pack("{s:f, s:f, s:f}", "entry_us", pc->entry_sec * 1e6, "byte_ns",
                              pc->byte_sec * 1e9, "hits", pc->hits)
                  : json_null());
    return o;
}

/* ------------------------------------------------------------ jobs */

static json_t *spec_json(jb_t *b, const disp_job_t *job)
{
    json_t *spec = json_object();
    json_t *src = json_object();
    jset(b, src, "type", json_string(sl_source_type_name(job->spec.source_type)));
    jset(b, src, "path", text_or_placeholder(job->spec.source_path));
    jset(b, src, "shuffle", json_boolean(job->spec.shuffle));
    jset(b, spec, "source", src);
    json_t *stages = json_array();
    for (uint32_t i = 0; i < job->spec.nstages; i++) {
        jpush(b, stages, json_string(sl_op_name(job->spec.stages[i].op)));
    }
    jset(b, spec, "stages", stages);
    jset(b, spec, "batch_size", json_integer(job->spec.batch_size));
    jset(b, spec, "epochs", json_integer(job->spec.epochs));
    jset(b, spec, "offload", json_string(sl_offload_name(job->spec.offload)));
    return spec;
}

/* Multi-rank jobs: which rank of which job this is, and its share per
 * epoch (progress below is the rank's own: per-rank progress). Every job:
 * "secret", false when a stranger can act on it (a multi-rank job whose
 * capability derives from its name alone, or one restored from a journal
 * older than capabilities). */
static void rank_fields(jb_t *b, json_t *o, const disp_job_t *job)
{
    jset(b, o, "secret",
         json_boolean(job->has_cap &&
                      !(job->world_size > 1 && sl_jobcap_is_public(job->cap_hash, job->group))));
    if (job->world_size <= 1) {
        return;
    }
    json_t *r = json_object();
    jset(b, r, "job_name", text_or_placeholder(job->group));
    jset(b, r, "rank", json_integer(job->rank));
    jset(b, r, "world_size", json_integer(job->world_size));
    jset(b, r, "positions_per_epoch", jint(job->positions));
    jset(b, r, "padding", json_string(job->spec.rank_padding == SL_RANK_PAD ? "pad" : "drop"));
    jset(b, o, "rank", r);
}

/* rec: the job's history (NULL: no rate, and nothing done once closed). */
static json_t *progress_json(jb_t *b, const disp_job_t *job, const disp_status_jrec_t *rec,
                             int64_t now_ms)
{
    json_t *prog = json_object();
    uint64_t total = job->positions * job->epochs;
    uint64_t done = 0;
    int known = disp_status_job_done(job, &done) == 0;
    if (!known && rec != NULL) {
        done = rec->delivered + disp_status_job_skipped(job) + disp_status_job_resumed(job);
    }
    if (known || rec != NULL) {
        jset(b, prog, "samples_done", jint(done));
        jset(b, prog, "samples_delivered", jint(disp_status_job_delivered(job, done)));
        jset(b, prog, "fraction", jreal(total > 0 ? (double)done / (double)total : 0));
    }
    jset(b, prog, "samples_total", jint(total));
    jset(b, prog, "epochs_done", jint(disp_status_job_epoch(job) - job->first_epoch));
    jset(b, prog, "epochs", json_integer(job->epochs));
    if (rec != NULL) {
        jset(b, prog, "samples_per_sec", jreal(rec->rate));
    }
    jset(b, prog, "elapsed_sec", jreal(disp_status_job_elapsed(job, now_ms)));
    double eta = 0;
    int have_eta = job->state == DISP_JOB_FINISHED ||
                   (job->state == DISP_JOB_ACTIVE && rec != NULL &&
                    disp_status_job_eta(rec->hist, total, &eta) == 0);
    jset(b, prog, "eta_sec", have_eta ? jreal(eta) : json_null());
    return prog;
}

/* The job's line (status_job_history.c), oldest first: [seconds since the
 * dispatcher started, measured samples/s, predicted samples/s], null where
 * unknown; the last point is the one still being built. */
static json_t *job_history_json(jb_t *b, const disp_status_jrec_t *rec)
{
    if (rec == NULL || rec->hist == NULL) {
        return json_null();
    }
    const disp_status_jhist_t *h = rec->hist;
    json_t *o = json_object();
    jset(b, o, "interval_sec", jreal(h->stride * (DISP_STATUS_SAMPLE_MS / 1000.0)));
    json_t *pts = json_array();
    disp_status_jpoint_t pending;
    int more = disp_status_jhist_pending(h, &pending);
    for (uint32_t i = 0; i < h->n + (uint32_t)more; i++) {
        const disp_status_jpoint_t *p = i < h->n ? &h->pts[i] : &pending;
        json_t *pt = json_array();
        jpush(b, pt, jreal((double)p->t_ms / 1000.0));
        jpush(b, pt, p->measured >= 0 ? jreal(p->measured) : json_null());
        jpush(b, pt, p->predicted >= 0 ? jreal(p->predicted) : json_null());
        jpush(b, pts, pt);
    }
    jset(b, o, "points", pts);
    return o;
}

static json_t *splits_json(jb_t *b, const disp_job_t *job)
{
    uint64_t pending = 0;
    uint64_t assigned = 0;
    uint64_t acked = 0;
    uint64_t received = 0;
    disp_job_counts(job, &pending, &assigned, &acked, &received);
    json_t *splits = json_object();
    jset(b, splits, "per_epoch", json_integer(job->nsplits));
    jset(b, splits, "split_size", json_integer(job->split_size));
    jset(b, splits, "total", jint((uint64_t)job->nsplits * job->epochs));
    jset(b, splits, "live_epochs", json_integer(job->nep));
    jset(b, splits, "pending", jint(pending));
    jset(b, splits, "assigned", jint(assigned));
    /* multi-rank: every sample at the client, not yet taken by its loop */
    jset(b, splits, "received", jint(received));
    jset(b, splits, "acked_in_live_epochs", jint(acked));
    jset(b, splits, "acked", jint(job->acked_total));
    jset(b, splits, "reassigned", jint(job->reassigned_total));
    /* how the hand-out balanced itself: queued splits moved to a faster
     * worker, remote splits an idle client ran itself */
    jset(b, splits, "stolen", jint(job->stolen_total));
    jset(b, splits, "client_helped", jint(job->client_helped_total));
    jset(b, splits, "client_outstanding", json_integer(job->nclient));
    json_t *per_worker = json_array();
    for (size_t i = 0; i < job->njw; i++) {
        json_t *w = json_object();
        jset(b, w, "worker_id", jint(job->jw[i].worker_id));
        jset(b, w, "outstanding", json_integer(job->jw[i].n));
        jset(b, w, "refused", json_boolean(job->jw[i].banned));
        /* Out for its data server, or back (dispatcher/core/worker_back.c). */
        jset(b, w, "delivered", jint(job->jw[i].delivered));
        jset(b, w, "out_for_data_server", json_boolean(job->jw[i].banned && job->jw[i].down));
        jset(b, w, "times_out", json_integer(job->jw[i].nout));
        jset(b, w, "times_back", json_integer(job->jw[i].nback));
        if (job->jw[i].banned) {
            jset(b, w, "why_out", text_or_placeholder(job->jw[i].why_out));
        }
        jpush(b, per_worker, w);
    }
    jset(b, splits, "workers", per_worker);
    return splits;
}

/* Why a job has no prediction (so no binding and no workers-needed hint):
 * the model needs the client's profiles, and only auto and fastflow jobs
 * profile. NULL when it has one. why[len] holds the text. */
static const char *no_prediction(const disp_job_t *job, char *why, size_t len)
{
    if (job->plan.predicted > 0 || job->planner != NULL) {
        return NULL;
    }
    sl_offload_e o = job->spec.offload;
    if (o == SL_OFFLOAD_AUTO || o == SL_OFFLOAD_FASTFLOW) {
        snprintf(why, len,
                 "not planned: the client sent no profiles (profiling failed, or an "
                 "older client); the job runs the fallback plan \"all\"");
    } else {
        char given[48];
        if (o == SL_OFFLOAD_FIXED) {
            snprintf(given, sizeof(given), "%u:%g", job->spec.split, job->spec.local_share);
        } else {
            snprintf(given, sizeof(given), "%s", sl_offload_name(o));
        }
        snprintf(why, len,
                 "a fixed plan (offload %s) is not profiled, so there is nothing to "
                 "predict from; `sluice plan SPEC --offload %s --explain` diagnoses it",
                 given, given);
    }
    return why;
}

/* planner: disp_planner_status_json(job), may be NULL; borrowed. */
static json_t *plan_json(jb_t *b, const disp_job_t *job, const json_t *planner)
{
    const disp_plan_t *p = &job->plan;
    json_t *plan = json_object();
    jset(b, plan, "split", json_integer(p->split));
    jset(b, plan, "units", json_integer(p->nunits));
    jset(b, plan, "local_share", jreal(p->local_share));
    jset(b, plan, "mode", text_or_placeholder(p->mode));
    jset(b, plan, "version", json_integer(p->version));
    jset(b, plan, "changes", json_integer(p->version > 0 ? p->version - 1 : 0));
    /* Predicted by the planner (auto/fastflow; null for fixed plans) against
     * measured by the client (ReportRates; null until its first report). */
    jset(b, plan, "predicted_samples_per_sec",
         p->predicted > 0 ? jreal(p->predicted) : json_null());
    jset(b, plan, "measured_samples_per_sec",
         job->rates.have ? jreal(job->rates.delivered_per_sec) : json_null());
    jset(b, plan, "binding", p->binding[0] != '\0' ? text_or_placeholder(p->binding) : json_null());
    long long need = disp_status_workers_needed(planner);
    jset(b, plan, "workers_needed", need >= 0 ? json_integer(need) : json_null());
    char why[256];
    const char *none = no_prediction(job, why, sizeof(why));
    jset(b, plan, "no_prediction", none != NULL ? text_or_placeholder(none) : json_null());
    /* An auto plan that keeps everything on the client: why. */
    jset(b, plan, "local_reason",
         p->local_reason[0] != '\0' ? text_or_placeholder(p->local_reason) : json_null());
    return plan;
}

/* The client's last report, and the share of the training loop's time spent
 * waiting for data (both null before the first report). */
static void rates_fields(jb_t *b, json_t *o, const disp_job_t *job, int64_t now_ms)
{
    if (!job->rates.have) {
        jset(b, o, "rates", json_null());
        jset(b, o, "stall_percent", json_null());
        return;
    }
    const disp_rates_t *r = &job->rates;
    json_t *rates = json_object();
    jset(b, rates, "age_ms", json_integer(now_ms - r->at_ms));
    jset(b, rates, "delivered_per_sec", jreal(r->delivered_per_sec));
    jset(b, rates, "wait_fraction", jreal(r->wait_fraction));
    jset(b, rates, "cpu_fraction", jreal(r->cpu_fraction));
    jset(b, rates, "cpu_budget", jreal(r->cpu_budget));
    jset(b, rates, "recv_cpu_sec_per_byte", jreal(r->recv_cpu_sec_per_byte));
    jset(b, rates, "stages", stages_json(b, r->stages, r->nstages, 0, NULL));
    jset(b, o, "rates", rates);
    if (r->step_imbalance > 0) {
        /* Balanced batching: the rank's predicted load per step, the
         * schedule's imbalance per step (max / mean over ranks). */
        json_t *bal = json_pack("{s:o, s:o, s:o}", "step_load", jreal(r->step_load),
                                "imbalance_mean", jreal(r->step_imbalance), "imbalance_max",
                                jreal(r->step_imbalance_max));
        if (bal != NULL && r->pack_fill > 0) {
            /* Packed batching: how full the packs are, and the samples that
             * needed a pack of their own. */
            json_object_set_new(bal, "pack_fill", jreal(r->pack_fill));
            json_object_set_new(bal, "oversize", json_integer((json_int_t)r->pack_oversize));
        }
        jset(b, o, "balance", bal);
    }
    jset(b, o, "stall_percent", jreal(100.0 * r->wait_fraction));
}

/* A job's workers' prefix cache counters (docs/cache.md). */
static json_t *cache_json(jb_t *b, const disp_cache_stats_t *c)
{
    json_t *o = json_object();
    jset(b, o, "hits", jint(c->hits));
    jset(b, o, "misses", jint(c->misses));
    jset(b, o, "bytes_read", jint(c->bytes_read));
    jset(b, o, "bytes_written", jint(c->bytes_written));
    jset(b, o, "evictions", jint(c->evictions));
    jset(b, o, "bytes_evicted", jint(c->bytes_evicted));
    jset(b, o, "store_errors", jint(c->store_errors));
    jset(b, o, "corrupt", jint(c->corrupt));
    return o;
}

static json_t *job_json(jb_t *b, const disp_job_t *job, int64_t now_ms,
                        const disp_status_jrec_t *rec)
{
    json_t *o = json_object();
    jset(b, o, "id", jint(job->id));
    jset(b, o, "state", json_string(disp_job_state_name(job->state)));
    char name[DISP_NAME_MAX + 32];
    disp_status_job_name(job, name, sizeof(name));
    jset(b, o, "name", text_or_placeholder(name));
    jset(b, o, "spec_name", text_or_placeholder(job->spec_name));
    jset(b, o, "client_id", text_or_placeholder(job->client_id));
    jset(b, o, "tenant", json_string(job->tenant)); /* "" = the cluster token's */
    jset(b, o, "age_sec", jreal((double)(now_ms - job->created_ms) / 1000.0));
    jset(b, o, "client_silent_ms", json_integer(now_ms - job->last_client_ms));
    jset(b, o, "spec", spec_json(b, job));
    jset(b, o, "num_samples", jint(job->num_samples));
    jset(b, o, "source_fingerprint", jint(job->fingerprint));
    rank_fields(b, o, job);
    if (job->spec.mix != NULL) { /* a mixed job's sources (status_mix.c) */
        jset(b, o, "mix", disp_status_mix_json(job));
    }
    jset(b, o, "epoch", jint(disp_status_job_epoch(job)));
    jset(b, o, "first_epoch", jint(job->first_epoch));
    jset(b, o, "progress", progress_json(b, job, rec, now_ms));
    jset(b, o, "splits", splits_json(b, job));
    json_t *planner = job->state != DISP_JOB_CLOSED ? disp_planner_status_json(job) : NULL;
    jset(b, o, "plan", plan_json(b, job, planner));
    /* The planner's inputs, candidates and choice (docs/planner.md). */
    if (planner != NULL) {
        jset(b, o, "planner", planner);
    }
    rates_fields(b, o, job, now_ms);
    json_t *skips = json_object();
    for (uint32_t i = 0; i < job->nskips; i++) {
        if (strcmp(job->skips[i].reason, DISP_STATUS_RESUMED) != 0) {
            set_count(skips, job->skips[i].reason, job->skips[i].count);
        }
    }
    jset(b, o, "skipped", skips);
    jset(b, o, "skipped_total", jint(disp_status_job_skipped(job)));
    jset(b, o, "cache", cache_json(b, &job->cache)); /* docs/cache.md */
    /* Locality (docs/cache.md): splits given to a worker holding their
     * entries, and given elsewhere while one did. */
    json_t *loc = json_object();
    jset(b, loc, "held", jint(job->loc_held));
    jset(b, loc, "elsewhere", jint(job->loc_elsewhere));
    jset(b, o, "locality", loc);
    /* Positions a resumed job's predecessor delivered: not skips. */
    jset(b, o, "resumed_past", jint(disp_status_job_resumed(job)));
    if (job->worker_failure[0] != '\0') {
        jset(b, o, "worker_failure", text_or_placeholder(job->worker_failure));
    }
    if (job->fallback[0] != '\0') {
        jset(b, o, "fallback", text_or_placeholder(job->fallback));
    }
    if (job->state == DISP_JOB_CLOSED) {
        jset(b, o, "close_reason", text_or_placeholder(job->close_reason));
    }
    jset(b, o, "history", job_history_json(b, rec)); /* last: the long part */
    return o;
}

/* ------------------------------------------------------------ document */

/* st NULL: counters only from what d holds now. */
static json_t *totals_json(jb_t *b, disp_t *d, disp_status_t *st)
{
    json_t *tot = json_object();
    jset(b, tot, "workers_live", json_integer((json_int_t)d->reg.nlive));
    /* Lost (silent past the timeout) and left (drained after SIGTERM) apart. */
    jset(b, tot, "workers_lost",
         json_integer((json_int_t)disp_status_count_workers(&d->reg, DISP_WORKER_LOST)));
    jset(b, tot, "workers_left",
         json_integer((json_int_t)disp_status_count_workers(&d->reg, DISP_WORKER_LEFT)));
    jset(b, tot, "jobs_open", json_integer((json_int_t)d->jobs.nopen));
    jset(b, tot, "splits_acked_total", jint(d->jobs.splits_acked_total));
    jset(b, tot, "splits_reassigned_total", jint(d->jobs.splits_reassigned_total));
    jset(b, tot, "bytes_sent_total", jint(d->reg.bytes_sent_total));
    const uint64_t *ct = d->reg.cache_total;
    disp_cache_stats_t cache = {ct[0], ct[1], ct[2], ct[3], ct[4], ct[5], ct[6], ct[7]};
    jset(b, tot, "cache", cache_json(b, &cache));
    if (st == NULL) {
        return tot;
    }
    jset(b, tot, "samples_delivered_total", jint(st->delivered_total));
    uint64_t sk = 0;
    json_t *reasons = json_object();
    for (size_t i = 0; i < st->nskips; i++) {
        sk += st->skips[i].count;
        set_count(reasons, st->skips[i].reason, st->skips[i].count);
    }
    jset(b, tot, "samples_skipped_total", jint(sk));
    jset(b, tot, "skipped_by_reason", reasons);
    jset(b, tot, "samples_resumed_total", jint(st->resumed_total));
    jset(b, tot, "plan_changes_total", jint(st->plan_changes_total));
    double rate = 0;
    for (size_t i = 0; i < st->nj; i++) {
        rate += st->jobs[i].rate;
    }
    jset(b, tot, "samples_per_sec", jreal(rate));
    return tot;
}

/* Oldest first: [seconds since start, samples/s, live workers, open jobs]. */
static json_t *history_json(jb_t *b, const disp_status_t *st)
{
    json_t *hist = json_array();
    for (size_t i = 0; i < st->hlen; i++) {
        const disp_status_point_t *p = &st->hist[(st->hhead + i) % DISP_STATUS_HISTORY];
        json_t *pt = json_array();
        jpush(b, pt, jreal((double)p->t_ms / 1000.0));
        jpush(b, pt, jreal(p->samples_per_sec));
        jpush(b, pt, json_integer(p->workers));
        jpush(b, pt, json_integer(p->jobs));
        jpush(b, hist, pt);
    }
    return hist;
}

/* Whether the viewer may see job in detail. */
static int visible(const disp_job_t *job, disp_view_e view, const char *tenant)
{
    return view == DISP_VIEW_ALL ||
           (view == DISP_VIEW_TENANT && strcmp(job->tenant, tenant) == 0);
}

/* Every worker, summed: what an operator of thousands of them reads first. */
static json_t *workers_summary(jb_t *b, const disp_t *d)
{
    uint64_t n[3] = {0}, leaving = 0, threads = 0, buffered = 0, outstanding = 0, nlive = 0;
    double load_sum = 0, load_max = 0;
    json_t *lost = json_array();
    for (size_t i = 0; i < d->reg.n; i++) {
        const disp_worker_t *w = d->reg.workers[i];
        n[w->state <= DISP_WORKER_LEFT ? w->state : DISP_WORKER_LOST]++;
        if (w->state == DISP_WORKER_LIVE) {
            nlive++;
            leaving += w->leaving != 0;
            threads += w->threads;
            buffered += w->buffered_bytes;
            outstanding += w->outstanding;
            load_sum += w->load;
            load_max = w->load > load_max ? w->load : load_max;
        } else if (w->state == DISP_WORKER_LOST && json_array_size(lost) < 20) {
            jpush(b, lost, jint(w->id));
        }
    }
    json_t *o = json_object();
    jset(b, o, "total", jint(d->reg.n));
    jset(b, o, "live", jint(n[DISP_WORKER_LIVE]));
    jset(b, o, "lost", jint(n[DISP_WORKER_LOST]));
    jset(b, o, "left", jint(n[DISP_WORKER_LEFT]));
    jset(b, o, "leaving", jint(leaving));
    jset(b, o, "threads", jint(threads));
    jset(b, o, "load_mean", jreal(nlive > 0 ? load_sum / (double)nlive : 0));
    jset(b, o, "load_max", jreal(load_max));
    jset(b, o, "buffered_bytes", jint(buffered));
    jset(b, o, "outstanding_splits", jint(outstanding));
    jset(b, o, "lost_ids", lost); /* the first 20 */
    return o;
}

/* The workers the cluster should have per class (status_wanted.h): what
 * sluice_workers_wanted publishes, the jobs' raw sum and when a lower raw
 * figure takes effect. */
static json_t *wanted_json(jb_t *b, const disp_status_t *st, int64_t now_ms)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < st->wanted.n; i++) {
        const disp_wanted_class_t *c = &st->wanted.c[i];
        json_t *o = json_object();
        jset(b, o, "class", json_string(c->key));
        jset(b, o, "wanted", jint(c->published));
        jset(b, o, "jobs_sum", jint(c->raw));
        jset(b, o, "jobs", jint(c->jobs));
        int64_t left = c->below_since_ms > 0 ? c->below_since_ms + DISP_WANTED_DOWN_MS - now_ms
                                             : -1;
        jset(b, o, "down_in_sec", left >= 0 ? jreal((double)left / 1000.0) : json_null());
        jpush(b, a, o);
    }
    return a;
}

static json_t *document(jb_t *b, disp_t *d, disp_status_t *st, int64_t now_ms, disp_view_e view,
                        const char *tenant, const disp_status_page_t *page)
{
    json_t *root = json_object();
    jset(b, root, "component", json_string("dispatcher"));
    jset(b, root, "version", json_string(SL_VERSION));
    jset(b, root, "protocol", json_integer(SL_PROTOCOL_VERSION));
    jset(b, root, "uptime_sec", jreal((double)(now_ms - d->start_ms) / 1000.0));
    json_t *workers = json_array();
    size_t end = page->limit == SIZE_MAX || page->offset + page->limit > d->reg.n
                     ? d->reg.n
                     : page->offset + page->limit;
    for (size_t i = page->offset; i < end; i++) {
        const disp_worker_t *w = d->reg.workers[i];
        const disp_status_wrec_t *rec = st != NULL ? disp_status_wrec(st, w) : NULL;
        jpush(b, workers, worker_json(b, w, now_ms, rec));
    }
    jset(b, root, "workers", workers);
    json_t *pg = json_object();
    size_t shown = end > page->offset ? end - page->offset : 0;
    jset(b, pg, "offset", jint(page->offset));
    jset(b, pg, "shown", jint(shown));
    jset(b, pg, "total", jint(d->reg.n));
    jset(b, pg, "next", end < d->reg.n ? jint(end) : json_null());
    jset(b, root, "workers_page", pg);
    jset(b, root, "workers_summary", workers_summary(b, d));
    /* Open jobs only under "jobs"; recently closed ones (kept for a minute)
     * apart, so that counting "jobs" counts what the dispatcher works on. */
    json_t *jobs = json_array();
    json_t *closed = json_array();
    uint64_t hidden_open = 0, hidden_closed = 0;
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (!visible(job, view, tenant)) {
            /* Another team's job: counted, never described. */
            hidden_open += job->state != DISP_JOB_CLOSED;
            hidden_closed += job->state == DISP_JOB_CLOSED;
            continue;
        }
        const disp_status_jrec_t *rec = st != NULL ? disp_status_jrec(st, job->id) : NULL;
        jpush(b, job->state == DISP_JOB_CLOSED ? closed : jobs, job_json(b, job, now_ms, rec));
    }
    jset(b, root, "jobs", jobs);
    jset(b, root, "closed_jobs", closed);
    static const char *const VIEWS[] = {"all", "tenant", "aggregate"};
    json_t *viewer = json_object();
    jset(b, viewer, "view", json_string(VIEWS[view]));
    if (view == DISP_VIEW_TENANT) {
        jset(b, viewer, "tenant", text_or_placeholder(tenant));
    }
    jset(b, viewer, "other_jobs_open", jint(hidden_open));
    jset(b, viewer, "other_jobs_closed", jint(hidden_closed));
    jset(b, root, "viewer", viewer);
    if (st != NULL) {
        jset(b, root, "history", history_json(b, st));
        jset(b, root, "workers_wanted", wanted_json(b, st, now_ms));
    }
    jset(b, root, "totals", totals_json(b, d, st));
    return root;
}

static char *build_json(disp_t *d, disp_status_t *st, int64_t now_ms, disp_view_e view,
                        const char *tenant, const disp_status_page_t *page, size_t *ret_len)
{
    static const disp_status_page_t first = {0, DISP_STATUS_WORKERS_PAGE};
    jb_t b = {0};
    disp_status_lock(d, st);
    json_t *root = document(&b, d, st, now_ms, view, tenant != NULL ? tenant : "",
                            page != NULL ? page : &first);
    disp_status_unlock(d, st);
    char *s = NULL;
    if (!b.failed) {
        s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    }
    json_decref(root);
    if (s != NULL && ret_len != NULL) {
        *ret_len = strlen(s);
    }
    return s;
}

char *disp_status_json(disp_t *d, int64_t now_ms, size_t *ret_len)
{
    return build_json(d, NULL, now_ms, DISP_VIEW_ALL, NULL, NULL, ret_len);
}

char *disp_status_render_json(disp_status_t *st, int64_t now_ms, size_t *ret_len)
{
    return build_json(st->d, st, now_ms, DISP_VIEW_ALL, NULL, NULL, ret_len);
}

char *disp_status_render_json_page(disp_status_t *st, int64_t now_ms, disp_view_e view,
                                   const char *tenant, const disp_status_page_t *page,
                                   size_t *ret_len)
{
    return build_json(st->d, st, now_ms, view, tenant, page, ret_len);
}

int disp_status_page_parse(const char *query, disp_status_page_t *ret)
{
    *ret = (disp_status_page_t){0, DISP_STATUS_WORKERS_PAGE};
    for (const char *p = query; p != NULL && *p != '\0';) {
        const char *amp = strchr(p, '&');
        size_t n = amp != NULL ? (size_t)(amp - p) : strlen(p);
        char kv[64];
        if (n < sizeof(kv)) {
            memcpy(kv, p, n);
            kv[n] = '\0';
            char *eq = strchr(kv, '=');
            const char *v = eq != NULL ? eq + 1 : "";
            if (eq != NULL) {
                *eq = '\0';
            }
            char *end = NULL;
            unsigned long long x = strtoull(v, &end, 10);
            int num = v[0] >= '0' && v[0] <= '9' && end != NULL && *end == '\0';
            if (strcmp(kv, "workers") == 0) {
                if (strcmp(v, "all") == 0) {
                    ret->limit = SIZE_MAX;
                } else if (num && x >= 1 && x <= 100000) {
                    ret->limit = (size_t)x;
                } else {
                    return -EINVAL;
                }
            } else if (strcmp(kv, "workers_offset") == 0) {
                if (!num || x > 100000000ull) {
                    return -EINVAL;
                }
                ret->offset = (size_t)x;
            }
        }
        p = amp != NULL ? amp + 1 : NULL;
    }
    return 0;
}

char *disp_status_render_json_for(disp_status_t *st, int64_t now_ms, disp_view_e view,
                                  const char *tenant, size_t *ret_len)
{
    return build_json(st->d, st, now_ms, view, tenant, NULL, ret_len);
}
