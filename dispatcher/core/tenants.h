/* tenants: the dispatcher's side of named tokens (docs/protocol.md
 * "Tenants"): loading the tenants file into the RPC server (who may call)
 * and into disp_t (their limits), and the per-tenant open-jobs cap.
 * Main thread (start, SIGHUP) and handler threads (the cap, under d->mu). */
#ifndef DISP_TENANTS_H
#define DISP_TENANTS_H

#include <stddef.h>

#include "common/rpc/rpc.h"
#include "dispatcher/disp.h"

/* Reads d->cfg.tenants_file ("" = no tenants) and installs it in srv and
 * d, replacing the previous set (a revoked tenant's next RPC is
 * UNAUTHENTICATED; its open jobs stay until their client times out). On
 * failure nothing changes. *ret_n: tenants now known. Main thread. */
int disp_tenants_apply(disp_t *d, sl_rpc_server_t *srv, size_t *ret_n, char *err,
                       size_t errlen);

/* 0, or -ENOSPC with err saying so when tenant ("" = the cluster: no cap)
 * already has its cap of open jobs (its line's max_jobs, else
 * cfg.tenant_max_jobs; 0 = no cap). d->mu held. */
int disp_tenants_admit_job(disp_t *d, const char *tenant, char *err, size_t errlen);

/* 1 with the tenant's name in name when token is a tenant's, else 0.
 * Every tenant is compared in constant time. Takes d->mu. */
int disp_tenants_by_token(disp_t *d, const char *token, char *name, size_t namelen);
/* sl_httpd_opts_t.token_ok for the status endpoint: ctx is the disp_t. */
int disp_tenants_http_ok(void *ctx, const char *token);

/* Open jobs of tenant. d->mu held. */
size_t disp_tenants_open_jobs(const disp_t *d, const char *tenant);

#endif
