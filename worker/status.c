#include "worker/status.h"
#include "common/base/clock.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WK_STATUS_MAX_JOBS 256

static void fail_500(sl_httpd_resp_t *resp)
{
    resp->status = 500;
    resp->body = strdup("out of memory\n");
    resp->len = resp->body != NULL ? strlen(resp->body) : 0;
}

static void on_status(void *arg, const char *query, sl_httpd_resp_t *resp)
{
    (void)query;
    wk_status_ctx_t *ctx = arg;
    wk_control_status_t cs;
    memset(&cs, 0, sizeof(cs));
    if (ctx->control != NULL) {
        wk_control_get_status(ctx->control, &cs);
    }
    wk_job_info_t *rows = calloc(WK_STATUS_MAX_JOBS, sizeof(*rows));
    json_t *root = json_object();
    json_t *jobs = json_array();
    if (rows == NULL || root == NULL || jobs == NULL) {
        free(rows);
        json_decref(root);
        json_decref(jobs);
        fail_500(resp);
        return;
    }
    size_t n = wk_tasks_snapshot(ctx->tasks, rows, WK_STATUS_MAX_JOBS);
    json_object_set_new(root, "component", json_string("worker"));
    json_object_set_new(root, "version", json_string(ctx->version));
    json_object_set_new(root, "grpc", json_string(ctx->grpc_addr));
    json_object_set_new(root, "advertise", json_string(ctx->advertise));
    json_object_set_new(root, "dispatcher", json_string(ctx->dispatcher));
    json_object_set_new(root, "data_root", json_string(ctx->data_root));
    json_object_set_new(root, "threads", json_integer(ctx->threads));
    json_object_set_new(root, "uptime_sec", json_real(sl_mono_sec() - ctx->started));
    json_object_set_new(root, "state", json_string(wk_ctl_state_name(cs.state)));
    json_object_set_new(root, "worker_id", json_integer((json_int_t)cs.worker_id));
    json_object_set_new(root, "heartbeat_ms", json_integer(cs.heartbeat_ms));
    json_object_set_new(root, "registrations", json_integer((json_int_t)cs.registrations));
    json_object_set_new(root, "heartbeats", json_integer((json_int_t)cs.heartbeats));
    json_object_set_new(root, "failures", json_integer((json_int_t)cs.failures));
    json_object_set_new(root, "load", json_real(cs.load));
    json_object_set_new(root, "last_error", json_string(cs.last_error));
    /* Since start, closed jobs included (jobs[] lists only open ones). */
    wk_totals_t tot;
    wk_tasks_totals(ctx->tasks, &tot);
    json_object_set_new(root, "jobs_accepted", json_integer((json_int_t)tot.jobs));
    json_object_set_new(root, "samples_done", json_integer((json_int_t)tot.samples_done));
    json_object_set_new(root, "samples_skipped", json_integer((json_int_t)tot.samples_skipped));
    json_object_set_new(root, "splits_done", json_integer((json_int_t)tot.splits_done));
    json_object_set_new(root, "msgs_sent", json_integer((json_int_t)tot.msgs_sent));
    json_object_set_new(root, "bytes_sent", json_integer((json_int_t)tot.bytes_sent));
    json_object_set_new(root, "streams_broken", json_integer((json_int_t)tot.streams_broken));
    for (size_t i = 0; i < n && i < WK_STATUS_MAX_JOBS; i++) {
        const wk_job_info_t *r = &rows[i];
        json_t *j = json_object();
        if (j == NULL) {
            continue;
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
        json_array_append_new(jobs, j);
    }
    json_object_set_new(root, "jobs", jobs);
    free(rows);
    char *s = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (s == NULL) {
        fail_500(resp);
        return;
    }
    size_t len = strlen(s);
    /* jansson allocates with malloc by default; the server frees with free(). */
    char *body = realloc(s, len + 2);
    if (body == NULL) {
        free(s);
        fail_500(resp);
        return;
    }
    body[len] = '\n';
    body[len + 1] = '\0';
    resp->content_type = "application/json";
    resp->body = body;
    resp->len = len + 1;
}

static void on_metrics(void *arg, const char *query, sl_httpd_resp_t *resp)
{
    (void)query;
    wk_status_ctx_t *ctx = arg;
    wk_control_status_t cs;
    memset(&cs, 0, sizeof(cs));
    if (ctx->control != NULL) {
        wk_control_get_status(ctx->control, &cs);
    }
    wk_job_info_t *rows = calloc(WK_STATUS_MAX_JOBS, sizeof(*rows));
    size_t cap = 4096 + WK_STATUS_MAX_JOBS * 512;
    char *buf = malloc(cap);
    if (rows == NULL || buf == NULL) {
        free(rows);
        free(buf);
        fail_500(resp);
        return;
    }
    size_t n = wk_tasks_snapshot(ctx->tasks, rows, WK_STATUS_MAX_JOBS);
    wk_totals_t tot;
    wk_tasks_totals(ctx->tasks, &tot);
    size_t off = 0;
#define PUT(...)                                                              \
    do {                                                                      \
        int w_ = snprintf(buf + off, cap - off, __VA_ARGS__);                 \
        off += (w_ > 0 && (size_t)w_ < cap - off) ? (size_t)w_ : 0;           \
    } while (0)
    PUT("# TYPE sluice_worker_registered gauge\nsluice_worker_registered %d\n",
        cs.state == WK_CTL_REGISTERED);
    PUT("# TYPE sluice_worker_load gauge\nsluice_worker_load %g\n", cs.load);
    PUT("# TYPE sluice_worker_jobs gauge\nsluice_worker_jobs %zu\n", n);
    /* Counters are worker-wide (closed jobs included); gauges per open job. */
    PUT("# TYPE sluice_worker_samples_total counter\nsluice_worker_samples_total %" PRIu64 "\n",
        tot.samples_done);
    PUT("# TYPE sluice_worker_skipped_total counter\nsluice_worker_skipped_total %" PRIu64 "\n",
        tot.samples_skipped);
    PUT("# TYPE sluice_worker_splits_total counter\nsluice_worker_splits_total %" PRIu64 "\n",
        tot.splits_done);
    PUT("# TYPE sluice_worker_messages_sent_total counter\n"
        "sluice_worker_messages_sent_total %" PRIu64 "\n",
        tot.msgs_sent);
    PUT("# TYPE sluice_worker_bytes_sent_total counter\n"
        "sluice_worker_bytes_sent_total %" PRIu64 "\n",
        tot.bytes_sent);
    PUT("# TYPE sluice_worker_streams_broken_total counter\n"
        "sluice_worker_streams_broken_total %" PRIu64 "\n",
        tot.streams_broken);
    PUT("# TYPE sluice_worker_buffered_bytes gauge\n");
    for (size_t i = 0; i < n && i < WK_STATUS_MAX_JOBS; i++) {
        PUT("sluice_worker_buffered_bytes{job=\"%" PRIu64 "\"} %" PRIu64 "\n", rows[i].job_id,
            rows[i].buffered_bytes);
    }
#undef PUT
    free(rows);
    resp->content_type = "text/plain; version=0.0.4";
    resp->body = buf;
    resp->len = off;
}

static void on_healthz(void *arg, const char *query, sl_httpd_resp_t *resp)
{
    (void)arg;
    (void)query;
    resp->body = strdup("ok\n");
    resp->len = resp->body != NULL ? 3 : 0;
}

int wk_status_routes(sl_httpd_t *h, wk_status_ctx_t *ctx)
{
    int rc = sl_httpd_route(h, "/status", on_status, ctx);
    if (rc == 0) {
        rc = sl_httpd_route(h, "/metrics", on_metrics, ctx);
    }
    if (rc == 0) {
        rc = sl_httpd_route(h, "/healthz", on_healthz, ctx);
    }
    return rc;
}
