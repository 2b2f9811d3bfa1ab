/* status: the endpoints -- /status, /metrics, /healthz and / on the status
 * HTTP server, GetStatus on the gRPC server -- and systemd's one-line
 * summary. The documents come from status_json.c and status_metrics.c, the
 * history behind them from status_history.c. Route callbacks run on the http
 * thread, GetStatus on an RPC handler thread. */
#include "dispatcher/status/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/status/status_impl.h"
#include "dispatcher/core/tenants.h"
#include "proto/sluice.pb-c.h"

/* ------------------------------------------------------------ routes */

/* What an HTTP caller sees (docs/protocol.md "Tenants"): everything on a
 * cluster without tenants or with the http token; a tenant's token, its
 * jobs in detail and the others counted; no token, only counts. */
static disp_view_e http_view(disp_status_t *st, const sl_httpd_resp_t *resp, char *tenant,
                             size_t len)
{
    disp_t *d = st->d;
    pthread_mutex_lock(&d->mu);
    size_t ntenants = d->tenants.n;
    pthread_mutex_unlock(&d->mu);
    if (ntenants == 0 || resp->own_token) {
        return DISP_VIEW_ALL;
    }
    return disp_tenants_by_token(d, resp->bearer, tenant, len) ? DISP_VIEW_TENANT
                                                                : DISP_VIEW_AGGREGATE;
}

static void route_status(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    char tenant[SL_TENANT_NAME_MAX] = "";
    disp_status_page_t page;
    if (disp_status_page_parse(query, &page) < 0) {
        resp->status = 400;
        resp->body = strdup("bad query: workers=all|1..100000, workers_offset=0..100000000\n");
        resp->len = resp->body != NULL ? strlen(resp->body) : 0;
        resp->content_type = "text/plain; charset=utf-8";
        return;
    }
    disp_view_e view = http_view(ctx, resp, tenant, sizeof(tenant));
    resp->body = disp_status_render_json_page(ctx, disp_now_ms(), view, tenant, &page,
                                              &resp->len);
    resp->content_type = "application/json";
    if (resp->body == NULL) {
        resp->status = 500;
    }
}

static void route_metrics(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    /* The same reader sees the same jobs here as in /status. */
    char tenant[SL_TENANT_NAME_MAX] = "";
    disp_view_e view = http_view(ctx, resp, tenant, sizeof(tenant));
    resp->body = disp_status_render_metrics_for(ctx, disp_now_ms(), view, tenant, &resp->len);
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    if (resp->body == NULL) {
        resp->status = 500;
    }
}

static void route_index(void *ctx, const char *query, sl_httpd_resp_t *resp)
{
    resp->body = strdup(disp_dashboard_html);
    resp->len = resp->body != NULL ? strlen(resp->body) : 0;
    resp->content_type = "text/html; charset=utf-8";
    if (resp->body == NULL) {
        resp->status = 500;
    }
}

static const sl_httpd_route_t ROUTES[] = {
    {"/status", route_status},
    {"/metrics", route_metrics},
    {"/healthz", sl_httpd_healthz},
    {"/", route_index},
};

int disp_status_add_routes(disp_status_t *st, sl_httpd_t *h)
{
    return sl_httpd_routes(h, ROUTES, sizeof(ROUTES) / sizeof(ROUTES[0]), st);
}

/* ------------------------------------------------------------ GetStatus */

static void rpc_get_status(void *ctx, const ProtobufCMessage *req, sl_rpc_reply_t *reply)
{
    (void)req;
    /* The cluster token (or an open cluster) sees everything; a tenant
     * its own jobs, the others counted. */
    const char *tenant = sl_rpc_reply_tenant(reply);
    char *json = disp_status_render_json_for(
        ctx, disp_now_ms(), tenant[0] == '\0' ? DISP_VIEW_ALL : DISP_VIEW_TENANT, tenant, NULL);
    if (json == NULL) {
        sl_rpc_reply_error(reply, SL_RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    Sluice__GetStatusResponse resp = SLUICE__GET_STATUS_RESPONSE__INIT;
    resp.version = SL_PROTOCOL_VERSION;
    resp.status_json = json;
    sl_rpc_reply_ok(reply, &resp.base);
    free(json);
}

int disp_status_add_rpc(disp_status_t *st, sl_rpc_server_t *srv)
{
    return sl_rpc_server_add_unary(srv, "/sluice.Dispatcher/GetStatus",
                                   &sluice__get_status_request__descriptor, rpc_get_status, st);
}

/* ------------------------------------------------------------ summary */

void disp_status_summary(disp_t *d, char *buf, size_t len)
{
    pthread_mutex_lock(&d->mu);
    size_t nlive = d->reg.nlive;
    size_t nopen = d->jobs.nopen;
    double rate = 0;
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        if (job->state != DISP_JOB_CLOSED && job->rates.have) {
            rate += job->rates.delivered_per_sec;
        }
    }
    pthread_mutex_unlock(&d->mu);
    /* Rounded so that the line (and the datagram) changes only on real moves. */
    snprintf(buf, len, "%zu worker%s, %zu job%s open, %.0f samples/s delivered", nlive,
             nlive == 1 ? "" : "s", nopen, nopen == 1 ? "" : "s", rate);
}

