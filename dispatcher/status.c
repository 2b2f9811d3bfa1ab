/* status: JSON with jansson. json_object_set_new steals its value even on
 * failure, so the helpers below only need to notice a NULL and remember. */
#include "dispatcher/status.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rpc.h"

typedef struct jb_s {
    int failed; /* any allocation failed: the whole document is dropped */
} jb_t;

static void jset(jb_t *b, json_t *o, const char *key, json_t *v)
{
    if (o == NULL || v == NULL || json_object_set_new(o, key, v) != 0) {
        b->failed = 1;
    }
}

static void jpush(jb_t *b, json_t *a, json_t *v)
{
    if (a == NULL || v == NULL || json_array_append_new(a, v) != 0) {
        b->failed = 1;
    }
}

/* Ids and counters are below 2^63 (ids are seeded below 2^53). */
static json_t *jint(uint64_t v)
{
    return json_integer((json_int_t)(v > INT64_MAX ? INT64_MAX : v));
}

static const char *source_type_name(sl_source_type_e t)
{
    switch (t) {
    case SL_SRC_IMAGEFOLDER:
        return "imagefolder";
    case SL_SRC_TAR:
        return "tar";
    case SL_SRC_FILELIST:
        return "filelist";
    }
    return "?";
}

static json_t *stages_json(jb_t *b, const disp_stage_stat_t *st, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++) {
        json_t *o = json_object();
        jset(b, o, "name", json_string(st[i].name));
        jset(b, o, "cpu_sec_per_sample", json_real(st[i].cpu_sec_per_sample));
        jset(b, o, "out_bytes_per_sample", json_real(st[i].out_bytes_per_sample));
        jset(b, o, "samples", jint(st[i].samples));
        jpush(b, a, o);
    }
    return a;
}

static json_t *worker_json(jb_t *b, const disp_worker_t *w, int64_t now_ms)
{
    json_t *o = json_object();
    jset(b, o, "id", jint(w->id));
    /* Peer-supplied text: json_string refuses invalid UTF-8, so fall back. */
    json_t *addr = json_string(w->address);
    jset(b, o, "address", addr != NULL ? addr : json_string("(not utf-8)"));
    json_t *host = json_string(w->hostname);
    jset(b, o, "hostname", host != NULL ? host : json_string("(not utf-8)"));
    jset(b, o, "state", json_string(disp_worker_state_name(w->state)));
    jset(b, o, "last_heartbeat_ms_ago", json_integer(now_ms - w->last_heartbeat_ms));
    jset(b, o, "threads", json_integer(w->threads));
    jset(b, o, "load", json_real(w->load));
    jset(b, o, "buffered_bytes", jint(w->buffered_bytes));
    jset(b, o, "outstanding_splits", json_integer(w->outstanding));
    jset(b, o, "splits_in_progress", json_integer(w->in_progress));
    jset(b, o, "stages", stages_json(b, w->stages, w->nstages));
    return o;
}

static json_t *text_or_placeholder(const char *s)
{
    json_t *v = json_string(s);
    return v != NULL ? v : json_string("(not utf-8)");
}

static json_t *job_json(jb_t *b, disp_job_t *job, int64_t now_ms)
{
    json_t *o = json_object();
    jset(b, o, "id", jint(job->id));
    jset(b, o, "state", json_string(disp_job_state_name(job->state)));
    jset(b, o, "spec_name", text_or_placeholder(job->spec_name));
    jset(b, o, "client_id", text_or_placeholder(job->client_id));
    jset(b, o, "age_sec", json_real((double)(now_ms - job->created_ms) / 1000.0));
    jset(b, o, "client_silent_ms", json_integer(now_ms - job->last_client_ms));

    json_t *spec = json_object();
    json_t *src = json_object();
    jset(b, src, "type", json_string(source_type_name(job->spec.source_type)));
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
    jset(b, o, "spec", spec);
    jset(b, o, "num_samples", jint(job->num_samples));
    jset(b, o, "source_fingerprint", jint(job->fingerprint));

    /* The oldest epoch still being delivered (= epochs once finished). */
    uint64_t epoch = job->nep > 0 ? job->ep[0].epoch : job->next_epoch;
    jset(b, o, "epoch", jint(epoch));
    uint64_t pending = 0;
    uint64_t assigned = 0;
    uint64_t acked = 0;
    disp_job_counts(job, &pending, &assigned, &acked);
    json_t *splits = json_object();
    jset(b, splits, "per_epoch", json_integer(job->nsplits));
    jset(b, splits, "split_size", json_integer(job->split_size));
    jset(b, splits, "total", jint((uint64_t)job->nsplits * job->epochs));
    jset(b, splits, "live_epochs", json_integer(job->nep));
    jset(b, splits, "pending", jint(pending));
    jset(b, splits, "assigned", jint(assigned));
    jset(b, splits, "acked_in_live_epochs", jint(acked));
    jset(b, splits, "acked", jint(job->acked_total));
    jset(b, splits, "reassigned", jint(job->reassigned_total));
    jset(b, splits, "client_outstanding", json_integer(job->nclient));
    json_t *per_worker = json_array();
    for (size_t i = 0; i < job->njw; i++) {
        json_t *w = json_object();
        jset(b, w, "worker_id", jint(job->jw[i].worker_id));
        jset(b, w, "outstanding", json_integer(job->jw[i].n));
        jset(b, w, "refused", json_boolean(job->jw[i].banned));
        jpush(b, per_worker, w);
    }
    jset(b, splits, "workers", per_worker);
    jset(b, o, "splits", splits);

    json_t *plan = json_object();
    jset(b, plan, "split", json_integer(job->plan.split));
    jset(b, plan, "units", json_integer(job->plan.nunits));
    jset(b, plan, "local_share", json_real(job->plan.local_share));
    jset(b, plan, "mode", json_string(job->plan.mode));
    jset(b, plan, "version", json_integer(job->plan.version));
    jset(b, o, "plan", plan);

    if (job->rates.have) {
        const disp_rates_t *r = &job->rates;
        json_t *rates = json_object();
        jset(b, rates, "age_ms", json_integer(now_ms - r->at_ms));
        jset(b, rates, "delivered_per_sec", json_real(r->delivered_per_sec));
        jset(b, rates, "wait_fraction", json_real(r->wait_fraction));
        jset(b, rates, "cpu_fraction", json_real(r->cpu_fraction));
        jset(b, rates, "cpu_budget", json_real(r->cpu_budget));
        jset(b, rates, "recv_cpu_sec_per_byte", json_real(r->recv_cpu_sec_per_byte));
        jset(b, rates, "stages", stages_json(b, r->stages, r->nstages));
        jset(b, o, "rates", rates);
    } else {
        jset(b, o, "rates", json_null());
    }
    json_t *skips = json_object();
    for (uint32_t i = 0; i < job->nskips; i++) {
        json_t *v = jint(job->skips[i].count);
        /* Reasons come from clients: one that is not valid UTF-8 is left
         * out (set_new fails and frees v) rather than failing the page. */
        if (v != NULL) {
            (void)json_object_set_new(skips, job->skips[i].reason, v);
        }
    }
    jset(b, o, "skipped", skips);
    if (job->worker_failure[0] != '\0') {
        jset(b, o, "worker_failure", text_or_placeholder(job->worker_failure));
    }
    if (job->state == DISP_JOB_CLOSED) {
        jset(b, o, "close_reason", text_or_placeholder(job->close_reason));
    }
    return o;
}

char *disp_status_json(disp_t *d, int64_t now_ms, size_t *ret_len)
{
    jb_t b = {0};
    json_t *root = json_object();
    pthread_mutex_lock(&d->mu);
    jset(&b, root, "version", json_string(DISP_VERSION));
    jset(&b, root, "protocol", json_integer(SL_PROTOCOL_VERSION));
    jset(&b, root, "uptime_sec", json_real((double)(now_ms - d->start_ms) / 1000.0));
    json_t *workers = json_array();
    for (size_t i = 0; i < d->reg.n; i++) {
        jpush(&b, workers, worker_json(&b, d->reg.workers[i], now_ms));
    }
    jset(&b, root, "workers", workers);
    /* Open jobs only under "jobs"; recently closed ones (kept for a minute)
     * apart, so that counting "jobs" counts what the dispatcher works on. */
    json_t *jobs = json_array();
    json_t *closed = json_array();
    for (size_t i = 0; i < d->jobs.n; i++) {
        disp_job_t *job = d->jobs.jobs[i];
        jpush(&b, job->state == DISP_JOB_CLOSED ? closed : jobs, job_json(&b, job, now_ms));
    }
    jset(&b, root, "jobs", jobs);
    jset(&b, root, "closed_jobs", closed);
    json_t *tot = json_object();
    jset(&b, tot, "workers_live", json_integer((json_int_t)d->reg.nlive));
    jset(&b, tot, "jobs_open", json_integer((json_int_t)d->jobs.nopen));
    jset(&b, tot, "splits_acked_total", jint(d->jobs.splits_acked_total));
    jset(&b, tot, "splits_reassigned_total", jint(d->jobs.splits_reassigned_total));
    jset(&b, root, "totals", tot);
    pthread_mutex_unlock(&d->mu);
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

char *disp_status_metrics(disp_t *d, int64_t now_ms, size_t *ret_len)
{
    pthread_mutex_lock(&d->mu);
    size_t nlive = d->reg.nlive;
    size_t nlost = d->reg.n - d->reg.nlive;
    size_t nopen = d->jobs.nopen;
    uint64_t acked = d->jobs.splits_acked_total;
    uint64_t reassigned = d->jobs.splits_reassigned_total;
    double uptime = (double)(now_ms - d->start_ms) / 1000.0;
    pthread_mutex_unlock(&d->mu);
    char *s = NULL;
    int n = asprintf(&s,
                     "# HELP sluice_workers Live workers.\n"
                     "# TYPE sluice_workers gauge\n"
                     "sluice_workers %zu\n"
                     "# HELP sluice_workers_lost Lost workers still listed in /status.\n"
                     "# TYPE sluice_workers_lost gauge\n"
                     "sluice_workers_lost %zu\n"
                     "# HELP sluice_jobs Open jobs.\n"
                     "# TYPE sluice_jobs gauge\n"
                     "sluice_jobs %zu\n"
                     "# HELP sluice_splits_acked_total Splits acknowledged by clients.\n"
                     "# TYPE sluice_splits_acked_total counter\n"
                     "sluice_splits_acked_total %" PRIu64 "\n"
                     "# HELP sluice_splits_reassigned_total Splits taken back from a worker.\n"
                     "# TYPE sluice_splits_reassigned_total counter\n"
                     "sluice_splits_reassigned_total %" PRIu64 "\n"
                     "# HELP sluice_uptime_seconds Seconds since the dispatcher started.\n"
                     "# TYPE sluice_uptime_seconds gauge\n"
                     "sluice_uptime_seconds %.3f\n",
                     nlive, nlost, nopen, acked, reassigned, uptime);
    if (n < 0) {
        return NULL;
    }
    if (ret_len != NULL) {
        *ret_len = (size_t)n;
    }
    return s;
}

/* ------------------------------------------------------------ routes */

static void route_status(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    resp->body = disp_status_json(ctx, disp_now_ms(), &resp->len);
    resp->content_type = "application/json";
    if (resp->body == NULL) {
        resp->status = 500;
    }
}

static void route_metrics(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    resp->body = disp_status_metrics(ctx, disp_now_ms(), &resp->len);
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    if (resp->body == NULL) {
        resp->status = 500;
    }
}

static void route_healthz(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    resp->body = strdup("ok\n");
    resp->len = resp->body != NULL ? 3 : 0;
}

static const char DASHBOARD[] =
    "<!doctype html><html><head><meta charset=\"utf-8\"><title>sluice dispatcher</title>"
    "<style>body{font-family:monospace;margin:1em}</style></head><body>"
    "<h1>sluice dispatcher</h1><p><a href=\"/status\">/status</a> "
    "<a href=\"/metrics\">/metrics</a></p><pre id=\"s\">loading…</pre><script>"
    "function r(){fetch('/status').then(x=>x.text()).then(t=>{"
    "document.getElementById('s').textContent=t;});}r();setInterval(r,2000);"
    "</script></body></html>\n";

static void route_index(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    resp->body = strdup(DASHBOARD);
    resp->len = resp->body != NULL ? strlen(resp->body) : 0;
    resp->content_type = "text/html; charset=utf-8";
}

int disp_status_add_routes(disp_t *d, sl_httpd_t *h)
{
    int rc = sl_httpd_route(h, "/status", route_status, d);
    if (rc == 0) {
        rc = sl_httpd_route(h, "/metrics", route_metrics, d);
    }
    if (rc == 0) {
        rc = sl_httpd_route(h, "/healthz", route_healthz, d);
    }
    if (rc == 0) {
        rc = sl_httpd_route(h, "/", route_index, d);
    }
    return rc;
}
