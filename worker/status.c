#include "worker/status.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/metrics.h"

#define WK_STATUS_MAX_JOBS 256
/* 256 job lines and a dozen families are a few kilobytes. */
#define WK_METRICS_MAX_BYTES ((size_t)1 << 20)

/* What one request reads, taken once: the registration and the jobs. */
typedef struct wk_view_s {
    wk_control_status_t cs;
    wk_totals_t tot;
    wk_job_info_t *rows; /* WK_STATUS_MAX_JOBS, owned */
    size_t n;            /* open jobs; rows holds the first WK_STATUS_MAX_JOBS */
} wk_view_t;

static int view_take(wk_status_ctx_t *ctx, wk_view_t *v)
{
    memset(v, 0, sizeof(*v));
    if (ctx->control != NULL) {
        wk_control_get_status(ctx->control, &v->cs);
    }
    v->rows = calloc(WK_STATUS_MAX_JOBS, sizeof(*v->rows));
    if (v->rows == NULL) {
        return -ENOMEM;
    }
    v->n = wk_tasks_snapshot(ctx->tasks, v->rows, WK_STATUS_MAX_JOBS);
    wk_tasks_totals(ctx->tasks, &v->tot);
    return 0;
}

static size_t view_rows(const wk_view_t *v)
{
    return v->n < WK_STATUS_MAX_JOBS ? v->n : WK_STATUS_MAX_JOBS;
}

static void fail_500(sl_httpd_resp_t *resp)
{
    resp->status = 500;
    resp->body = strdup("out of memory\n");
    resp->len = resp->body != NULL ? strlen(resp->body) : 0;
}

/* ------------------------------------------------------------ /status */

/* The prefix cache's counters (docs/cache.md). */
static json_t *cache_json(const sl_pcache_stats_t *c)
{
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "hits", (json_int_t)c->hits,
                          "misses", (json_int_t)c->misses, "bytes_read", (json_int_t)c->bytes_read,
                          "bytes_written", (json_int_t)c->bytes_written, "evictions",
                          (json_int_t)c->evictions, "bytes_evicted", (json_int_t)c->bytes_evicted,
                          "store_errors", (json_int_t)c->store_errors, "corrupt",
                          (json_int_t)c->corrupt);
    /* Concurrent fillers (docs/cache.md): waited-for hits, claims timed out. */
    json_object_set_new(o, "waited", json_integer((json_int_t)c->waited));
    json_object_set_new(o, "claim_timeouts", json_integer((json_int_t)c->claim_timeouts));
    return o;
}

static json_t *job_json(const wk_job_info_t *r)
{
    json_t *j = json_object();
    if (j == NULL) {
        return NULL;
    }
    json_object_set_new(j, "job_id", json_integer((json_int_t)r->job_id));
    json_object_set_new(j, "state", json_string(wk_job_state_name(r->state)));
    if (r->reason[0] != '\0') {
        json_object_set_new(j, "reason", json_string(r->reason));
    }
    json_object_set_new(j, "source", json_string(r->source));
    json_object_set_new(j, "num_samples", json_integer((json_int_t)r->num_samples));
    json_object_set_new(j, "units", json_integer(r->nunits));
    json_object_set_new(j, "splits_queued", json_integer((json_int_t)r->splits_queued));
    json_object_set_new(j, "splits_running", json_integer((json_int_t)r->splits_running));
    json_object_set_new(j, "splits_done", json_integer((json_int_t)r->splits_done));
    json_object_set_new(j, "buffered_bytes", json_integer((json_int_t)r->buffered_bytes));
    json_object_set_new(j, "buffered_msgs", json_integer((json_int_t)r->buffered_msgs));
    json_object_set_new(j, "inflight", json_integer(r->inflight));
    json_object_set_new(j, "samples_done", json_integer((json_int_t)r->samples_done));
    json_object_set_new(j, "samples_skipped", json_integer((json_int_t)r->samples_skipped));
    json_object_set_new(j, "msgs_sent", json_integer((json_int_t)r->msgs_sent));
    json_object_set_new(j, "streams", json_integer((json_int_t)r->streams));
    json_object_set_new(j, "streams_broken", json_integer((json_int_t)r->streams_broken));
    json_object_set_new(j, "stream_attached", json_boolean(r->stream_attached));
    json_object_set_new(j, "cache_prefix_units", json_integer(r->cache_prefix));
    json_object_set_new(j, "cache", cache_json(&r->cache));
    return j;
}

/* The worker, its registration and its totals since start (closed jobs
 * included; jobs[] lists only open ones). */
static void worker_fields(json_t *root, const wk_status_ctx_t *ctx, const wk_view_t *v)
{
    const wk_control_status_t *cs = &v->cs;
    const wk_totals_t *tot = &v->tot;
    json_object_set_new(root, "component", json_string("worker"));
    json_object_set_new(root, "version", json_string(ctx->version));
    json_object_set_new(root, "grpc", json_string(ctx->grpc_addr));
    json_object_set_new(root, "advertise", json_string(ctx->advertise));
    json_object_set_new(root, "dispatcher", json_string(ctx->dispatcher));
    json_object_set_new(root, "data_root", json_string(ctx->data_root));
    json_object_set_new(root, "threads", json_integer(ctx->threads));
    json_object_set_new(root, "uptime_sec", json_real(sl_mono_sec() - ctx->started));
    json_object_set_new(root, "state", json_string(wk_ctl_state_name(cs->state)));
    json_object_set_new(root, "worker_id", json_integer((json_int_t)cs->worker_id));
    json_object_set_new(root, "heartbeat_ms", json_integer(cs->heartbeat_ms));
    json_object_set_new(root, "registrations", json_integer((json_int_t)cs->registrations));
    json_object_set_new(root, "heartbeats", json_integer((json_int_t)cs->heartbeats));
    json_object_set_new(root, "failures", json_integer((json_int_t)cs->failures));
    json_object_set_new(root, "load", json_real(cs->load));
    json_object_set_new(root, "last_error", json_string(cs->last_error));
    json_object_set_new(root, "jobs_accepted", json_integer((json_int_t)tot->jobs));
    json_object_set_new(root, "samples_done", json_integer((json_int_t)tot->samples_done));
    json_object_set_new(root, "samples_skipped", json_integer((json_int_t)tot->samples_skipped));
    json_object_set_new(root, "splits_done", json_integer((json_int_t)tot->splits_done));
    json_object_set_new(root, "msgs_sent", json_integer((json_int_t)tot->msgs_sent));
    json_object_set_new(root, "bytes_sent", json_integer((json_int_t)tot->bytes_sent));
    json_object_set_new(root, "streams_broken", json_integer((json_int_t)tot->streams_broken));
    json_object_set_new(root, "samples_sent_unprocessed",
                        json_integer((json_int_t)tot->sent_unprocessed));
    json_object_set_new(root, "cache", cache_json(&tot->cache));
}

/* The document, one line feed after it; NULL on ENOMEM. */
static char *status_text(const wk_status_ctx_t *ctx, const wk_view_t *v, size_t *ret_len)
{
    json_t *root = json_object();
    json_t *jobs = json_array();
    char *s = NULL;
    if (root == NULL || jobs == NULL) {
        json_decref(jobs);
        goto out;
    }
    worker_fields(root, ctx, v);
    for (size_t i = 0; i < view_rows(v); i++) {
        json_t *j = job_json(&v->rows[i]);
        if (j != NULL) {
            json_array_append_new(jobs, j);
        }
    }
    json_object_set_new(root, "jobs", jobs);
    s = json_dumps(root, JSON_INDENT(2));
    if (s != NULL) {
        size_t len = strlen(s);
        /* jansson allocates with malloc by default; the server frees with free(). */
        char *body = realloc(s, len + 2);
        if (body == NULL) {
            free(s);
            s = NULL;
            goto out;
        }
        s = body;
        s[len] = '\n';
        s[len + 1] = '\0';
        *ret_len = len + 1;
    }
out:
    json_decref(root);
    return s;
}

static void on_status(void *arg, const char *query, sl_httpd_resp_t *resp)
{
    (void)query;
    wk_view_t v;
    size_t len = 0;
    char *body = view_take(arg, &v) == 0 ? status_text(arg, &v, &len) : NULL;
    free(v.rows);
    if (body == NULL) {
        fail_500(resp);
        return;
    }
    resp->content_type = "application/json";
    resp->body = body;
    resp->len = len;
}

/* ------------------------------------------------------------ /metrics */

/* The worker-wide values, one column each; counters include closed jobs. */
typedef struct wk_cols_s {
    double registered, load, jobs, samples, skipped, splits, msgs, bytes, broken, unprocessed;
    double c_hits, c_misses, c_read, c_written, c_evicted, c_errors, c_corrupt;
    double c_waited, c_claim_timeouts;
    double c_evicted_bytes;
} wk_cols_t;

typedef struct wk_family_s {
    sl_metric_t m;
    size_t column; /* offsetof(wk_cols_t, ...) */
} wk_family_t;

#define G SL_METRIC_GAUGE
#define C SL_METRIC_COUNTER
static const wk_family_t WK_FAMILIES[] = {
    {{"sluice_worker_registered", G, "1 while registered with the dispatcher.", {NULL}, 0},
     offsetof(wk_cols_t, registered)},
    {{"sluice_worker_load", G, "Busy threads / threads, last interval.", {NULL}, SL_METRIC_G},
     offsetof(wk_cols_t, load)},
    {{"sluice_worker_jobs", G, "Open jobs.", {NULL}, 0}, offsetof(wk_cols_t, jobs)},
    {{"sluice_worker_samples_total", C, "Samples processed (delivered or skipped).", {NULL}, 0},
     offsetof(wk_cols_t, samples)},
    {{"sluice_worker_skipped_total", C, "Samples skipped.", {NULL}, 0},
     offsetof(wk_cols_t, skipped)},
    {{"sluice_worker_splits_total", C, "Splits finished.", {NULL}, 0}, offsetof(wk_cols_t, splits)},
    {{"sluice_worker_messages_sent_total", C, "Batch messages sent to clients.", {NULL}, 0},
     offsetof(wk_cols_t, msgs)},
    {{"sluice_worker_bytes_sent_total", C, "Batch bytes sent to clients.", {NULL}, 0},
     offsetof(wk_cols_t, bytes)},
    {{"sluice_worker_streams_broken_total", C, "Fetch streams that ended abnormally.", {NULL}, 0},
     offsetof(wk_cols_t, broken)},
    {{"sluice_worker_samples_sent_unprocessed_total",
      C,
      "Samples whose output did not fit a message, sent as their source bytes for the client "
      "to finish.",
      {NULL},
      0},
     offsetof(wk_cols_t, unprocessed)},
    {{"sluice_worker_cache_hits_total",
      C,
      "Prefix cache lookups that hit (docs/cache.md).",
      {NULL},
      0},
     offsetof(wk_cols_t, c_hits)},
    {{"sluice_worker_cache_misses_total",
      C,
      "Prefix cache lookups that missed (computed).",
      {NULL},
      0},
     offsetof(wk_cols_t, c_misses)},
    {{"sluice_worker_cache_read_bytes_total",
      C,
      "Prefix cache entry bytes read on hits.",
      {NULL},
      0},
     offsetof(wk_cols_t, c_read)},
    {{"sluice_worker_cache_written_bytes_total", C, "Prefix cache entry bytes stored.", {NULL}, 0},
     offsetof(wk_cols_t, c_written)},
    {{"sluice_worker_cache_evictions_total",
      C,
      "Prefix cache entries evicted by this worker.",
      {NULL},
      0},
     offsetof(wk_cols_t, c_evicted)},
    {{"sluice_worker_cache_evicted_bytes_total",
      C,
      "Bytes of the prefix cache entries evicted by this worker.",
      {NULL},
      0},
     offsetof(wk_cols_t, c_evicted_bytes)},
    {{"sluice_worker_cache_store_errors_total",
      C,
      "Prefix cache stores that failed (disk full, unwritable); the samples went on.",
      {NULL},
      0},
     offsetof(wk_cols_t, c_errors)},
    {{"sluice_worker_cache_corrupt_total",
      C,
      "Prefix cache entries refused (truncated, corrupt, other version) and recomputed.",
      {NULL},
      0},
     offsetof(wk_cols_t, c_corrupt)},
    {{"sluice_worker_cache_waited_total",
      C,
      "Prefix cache hits that waited for another job's claim on the sample (computed once).",
      {NULL},
      0},
     offsetof(wk_cols_t, c_waited)},
    {{"sluice_worker_cache_claim_timeouts_total",
      C,
      "Prefix cache lookups that waited until a claim's deadline, then computed the sample.",
      {NULL},
      0},
     offsetof(wk_cols_t, c_claim_timeouts)},
};
static const sl_metric_t WK_CACHE_HITS = {"sluice_worker_job_cache_hits_total",
                                          SL_METRIC_COUNTER,
                                          "Prefix cache hits of an open job.",
                                          {"job"},
                                          0};
static const sl_metric_t WK_CACHE_MISSES = {"sluice_worker_job_cache_misses_total",
                                            SL_METRIC_COUNTER,
                                            "Prefix cache misses of an open job.",
                                            {"job"},
                                            0};
static const sl_metric_t WK_BUFFERED = {
    "sluice_worker_buffered_bytes", G, "Finished batches waiting for the job's client.", {"job"},
    0};
#undef G
#undef C

static int metrics_text(const wk_view_t *v, char **ret_text, size_t *ret_len)
{
    wk_cols_t c = {
        .registered = v->cs.state == WK_CTL_REGISTERED,
        .load = v->cs.load,
        .jobs = (double)v->n,
        .samples = (double)v->tot.samples_done,
        .skipped = (double)v->tot.samples_skipped,
        .splits = (double)v->tot.splits_done,
        .msgs = (double)v->tot.msgs_sent,
        .bytes = (double)v->tot.bytes_sent,
        .broken = (double)v->tot.streams_broken,
        .unprocessed = (double)v->tot.sent_unprocessed,
        .c_hits = (double)v->tot.cache.hits,
        .c_misses = (double)v->tot.cache.misses,
        .c_read = (double)v->tot.cache.bytes_read,
        .c_written = (double)v->tot.cache.bytes_written,
        .c_evicted = (double)v->tot.cache.evictions,
        .c_evicted_bytes = (double)v->tot.cache.bytes_evicted,
        .c_errors = (double)v->tot.cache.store_errors,
        .c_corrupt = (double)v->tot.cache.corrupt,
        .c_waited = (double)v->tot.cache.waited,
        .c_claim_timeouts = (double)v->tot.cache.claim_timeouts,
    };
    sl_metrics_t *m = sl_metrics_new(WK_METRICS_MAX_BYTES);
    if (m == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < sizeof(WK_FAMILIES) / sizeof(WK_FAMILIES[0]); i++) {
        const wk_family_t *f = &WK_FAMILIES[i];
        (void)sl_metrics_family(m, &f->m); /* an error sticks in m */
        (void)sl_metrics_sample(m, &f->m, NULL, *(const double *)((const char *)&c + f->column));
    }
    (void)sl_metrics_family(m, &WK_BUFFERED);
    for (size_t i = 0; i < view_rows(v); i++) {
        char job[24];
        const char *labels[] = {job};
        snprintf(job, sizeof(job), "%" PRIu64, v->rows[i].job_id);
        (void)sl_metrics_sample(m, &WK_BUFFERED, labels, (double)v->rows[i].buffered_bytes);
    }
    (void)sl_metrics_family(m, &WK_CACHE_HITS);
    for (size_t i = 0; i < view_rows(v); i++) {
        char job[24];
        const char *labels[] = {job};
        snprintf(job, sizeof(job), "%" PRIu64, v->rows[i].job_id);
        (void)sl_metrics_sample(m, &WK_CACHE_HITS, labels, (double)v->rows[i].cache.hits);
    }
    (void)sl_metrics_family(m, &WK_CACHE_MISSES);
    for (size_t i = 0; i < view_rows(v); i++) {
        char job[24];
        const char *labels[] = {job};
        snprintf(job, sizeof(job), "%" PRIu64, v->rows[i].job_id);
        (void)sl_metrics_sample(m, &WK_CACHE_MISSES, labels, (double)v->rows[i].cache.misses);
    }
    int rc = sl_metrics_take(m, ret_text, ret_len);
    sl_metrics_free(m);
    return rc;
}

static void on_metrics(void *arg, const char *query, sl_httpd_resp_t *resp)
{
    (void)query;
    wk_view_t v;
    char *text = NULL;
    size_t len = 0;
    int rc = view_take(arg, &v);
    if (rc == 0) {
        rc = metrics_text(&v, &text, &len);
    }
    free(v.rows);
    if (rc != 0) {
        fail_500(resp);
        return;
    }
    resp->content_type = "text/plain; version=0.0.4";
    resp->body = text;
    resp->len = len;
}

/* ------------------------------------------------------------ routes */

static const sl_httpd_route_t ROUTES[] = {
    {"/status", on_status},
    {"/metrics", on_metrics},
    {"/healthz", sl_httpd_healthz},
};

int wk_status_routes(sl_httpd_t *h, wk_status_ctx_t *ctx)
{
    return sl_httpd_routes(h, ROUTES, sizeof(ROUTES) / sizeof(ROUTES[0]), ctx);
}
