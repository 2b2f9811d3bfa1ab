/* status: the worker's HTTP endpoints (common/http/httpd.h): /status (JSON: the
 * worker, its registration and every job), /metrics (Prometheus text: a table
 * of families rendered by common/base/metrics.h) and /healthz. Callbacks run
 * on the http thread and only read snapshots. */
#ifndef WK_STATUS_H
#define WK_STATUS_H

#include "common/http/httpd.h"
#include "worker/control.h"
#include "worker/tasks.h"

typedef struct wk_status_ctx_s {
    wk_tasks_t *tasks;
    wk_control_t *control; /* may be NULL before it starts */
    const char *version;
    const char *grpc_addr;
    const char *advertise;
    const char *dispatcher;
    const char *data_root;
    unsigned threads;
    double started; /* CLOCK_MONOTONIC seconds */
} wk_status_ctx_t;

/* Adds the routes; ctx must outlive the server. */
int wk_status_routes(sl_httpd_t *h, wk_status_ctx_t *ctx);

#endif
