/* status: the HTTP view of the dispatcher (common/httpd.h):
 *   /status   JSON: version, uptime, workers, jobs (open ones: spec
 *             summary, epoch, split counts, plan, reported rates, skips),
 *             closed_jobs (closed in the last minute, with close_reason)
 *   /metrics  Prometheus text: sluice_workers, sluice_jobs,
 *             sluice_splits_acked_total, sluice_splits_reassigned_total
 *   /healthz  "ok"
 *   /         a small page that renders /status
 * Builders take d->mu themselves (they run on the http thread). */
#ifndef DISP_STATUS_H
#define DISP_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "common/httpd.h"
#include "dispatcher/disp.h"

/* malloc'd NUL-terminated text, NULL on ENOMEM. */
char *disp_status_json(disp_t *d, int64_t now_ms, size_t *ret_len);
char *disp_status_metrics(disp_t *d, int64_t now_ms, size_t *ret_len);

int disp_status_add_routes(disp_t *d, sl_httpd_t *h);

#endif
