/* status: the operator's view of the dispatcher (docs/reference/status.md "Status endpoint
 * reference" documents every field and metric):
 *   GET /status   JSON: dispatcher (version, uptime), workers (address,
 *                 state, heartbeat age, threads, load, per-unit rates,
 *                 buffered bytes), jobs (spec summary, epoch, progress,
 *                 splits, plan with prediction vs measurement, stall %,
 *                 skips by reason), closed_jobs, totals, history
 *   GET /metrics  Prometheus text, every name prefixed sluice_
 *   GET /healthz  "ok"
 *   GET /         the dashboard (dispatcher/status/dashboard.c), self-contained
 *   gRPC /sluice.Dispatcher/GetStatus: the /status document, for
 *                 `sluice status --dispatcher HOST:PORT`
 *
 * Rates and monotonic counters need memory across polls; that history
 * lives in disp_status_t, fed once a second by the main loop
 * (disp_status_sample) so that it does not depend on anyone polling.
 *
 * Files: status.c the endpoints and the summary, status_history.c the
 * history, status_job_history.c each job's throughput line, status_json.c
 * /status, status_metrics.c /metrics (a table of families rendered by
 * common/base/metrics.h), status_impl.h what they share.
 *
 * Locking: builders and the sampler take d->mu, then the history's own
 * mutex; never the other way round. Callable from any thread. */
#ifndef DISP_STATUS_H
#define DISP_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "common/http/httpd.h"
#include "common/rpc/rpc.h"
#include "dispatcher/disp.h"

#define DISP_STATUS_HISTORY 300    /* throughput points kept (one per sample) */
#define DISP_STATUS_SAMPLE_MS 1000 /* how often main calls disp_status_sample */
/* Per job: its whole run in at most this many points (coarser as it runs),
 * for at most this many jobs at a time (status_job_history.c). */
#define DISP_STATUS_JOB_POINTS 240
#define DISP_STATUS_JOB_HISTORIES 64

typedef struct disp_status_s disp_status_t;

/* The history for d (not owned; must outlive it). NULL on ENOMEM. */
/* now_ms: the caller's clock (unused today; kept so that callers, tests and
 * fuzz targets included, need not change when the history starts at it). */
disp_status_t *disp_status_new(disp_t *d, int64_t now_ms);
void disp_status_free(disp_status_t *st); /* NULL ok */

/* Takes one sample: per-worker unit rates, per-job delivery rates, the
 * monotonic totals, a throughput history point. */
void disp_status_sample(disp_status_t *st, int64_t now_ms);

/* malloc'd NUL-terminated text, NULL on ENOMEM. The disp_t variants have no
 * history (no rates, counters only from what d holds now): unit tests. */
char *disp_status_json(disp_t *d, int64_t now_ms, size_t *ret_len);
char *disp_status_metrics(disp_t *d, int64_t now_ms, size_t *ret_len);
char *disp_status_render_json(disp_status_t *st, int64_t now_ms, size_t *ret_len);
/* Who reads /status (docs/protocol.md "Tenants"): everything (the cluster
 * token, the http token, or a cluster without tenants), one tenant's jobs
 * in detail and the others only counted, or only counts. */
typedef enum {
    DISP_VIEW_ALL = 0,
    DISP_VIEW_TENANT,
    DISP_VIEW_AGGREGATE,
} disp_view_e;
/* disp_status_render_json for one viewer: tenant names it for
 * DISP_VIEW_TENANT (ignored otherwise). */
char *disp_status_render_json_for(disp_status_t *st, int64_t now_ms, disp_view_e view,
                                  const char *tenant, size_t *ret_len);

/* Which rows of "workers" a /status shows (docs/reference/status.md "Status endpoint
 * reference"): a page of at most limit workers from offset, in registration
 * order, beside a summary of all of them; a cluster of thousands of workers
 * is a summary, not a 5,000-row table. /status?workers=all (every row),
 * ?workers=N (1..100000), ?workers_offset=K. */
#define DISP_STATUS_WORKERS_PAGE 200 /* the default page */
typedef struct disp_status_page_s {
    size_t offset;
    size_t limit; /* SIZE_MAX: all */
} disp_status_page_t;
/* Parses a query string ("workers=50&workers_offset=100"; NULL or "" = the
 * default page). -EINVAL for a value out of range (unknown keys are
 * ignored, as HTTP servers do). */
int disp_status_page_parse(const char *query, disp_status_page_t *ret);
char *disp_status_render_json_page(disp_status_t *st, int64_t now_ms, disp_view_e view,
                                   const char *tenant, const disp_status_page_t *page,
                                   size_t *ret_len);
char *disp_status_render_metrics(disp_status_t *st, int64_t now_ms, size_t *ret_len);
/* The same for one viewer: per-job series only of the jobs it may see. */
char *disp_status_render_metrics_for(disp_status_t *st, int64_t now_ms, disp_view_e view,
                                     const char *tenant, size_t *ret_len);

/* /status, /metrics, /healthz and / on h (before sl_httpd_start). */
int disp_status_add_routes(disp_status_t *st, sl_httpd_t *h);
/* GetStatus on srv (before sl_rpc_server_start). */
int disp_status_add_rpc(disp_status_t *st, sl_rpc_server_t *srv);

/* One line for systemd's STATUS= ("2 workers, 1 job open, 350 samples/s"). */
void disp_status_summary(disp_t *d, char *buf, size_t len);

/* The dashboard page (dispatcher/status/dashboard.c). */
extern const char disp_dashboard_html[];

#endif
