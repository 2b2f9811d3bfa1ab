/* tenants: see tenants.h. */
#include "dispatcher/core/tenants.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"

int disp_tenants_apply(disp_t *d, sl_rpc_server_t *srv, size_t *ret_n, char *err,
                       size_t errlen)
{
    sl_tenants_t *ts = calloc(1, sizeof(*ts));
    sl_rpc_tenant_t *rt = calloc(SL_TENANTS_MAX, sizeof(*rt));
    int rc = 0;
    if (ts == NULL || rt == NULL) {
        rc = sl_err(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    if (d->cfg.tenants_file[0] != '\0') {
        rc = sl_tenants_load(d->cfg.tenants_file, ts, err, errlen);
        if (rc != 0) {
            goto out;
        }
    }
    for (size_t i = 0; i < ts->n; i++) {
        rt[i].name = ts->t[i].name;
        rt[i].token = ts->t[i].token;
    }
    /* The server first: if it refuses the set, d keeps the old limits that
     * go with the tokens still admitted. */
    rc = sl_rpc_server_set_tenants(srv, rt, ts->n, err, errlen);
    if (rc != 0) {
        goto out;
    }
    pthread_mutex_lock(&d->mu);
    d->tenants = *ts;
    pthread_mutex_unlock(&d->mu);
    *ret_n = ts->n;
out:
    if (ts != NULL) {
        memset(ts, 0, sizeof(*ts)); /* tokens */
    }
    free(ts);
    free(rt);
    return rc;
}

static int consttime_eq(const char *a, const char *b)
{
    size_t n = strlen(b);
    size_t m = strnlen(a, SL_SECRET_MAX);
    unsigned diff = (unsigned)(n != m);
    for (size_t i = 0; i < n; i++) {
        diff |= (unsigned)(b[i] ^ (i < m ? a[i] : 0));
    }
    return diff == 0;
}

int disp_tenants_by_token(disp_t *d, const char *token, char *name, size_t namelen)
{
    int found = 0;
    if (token == NULL) {
        return 0;
    }
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->tenants.n; i++) {
        if (consttime_eq(token, d->tenants.t[i].token) && !found) {
            snprintf(name, namelen, "%s", d->tenants.t[i].name);
            found = 1;
        }
    }
    pthread_mutex_unlock(&d->mu);
    return found;
}

int disp_tenants_http_ok(void *ctx, const char *token)
{
    char name[SL_TENANT_NAME_MAX];
    return disp_tenants_by_token(ctx, token, name, sizeof(name));
}

size_t disp_tenants_open_jobs(const disp_t *d, const char *tenant)
{
    size_t n = 0;
    for (size_t i = 0; i < d->jobs.n; i++) {
        const disp_job_t *job = d->jobs.jobs[i];
        n += job->state != DISP_JOB_CLOSED && strcmp(job->tenant, tenant) == 0;
    }
    return n;
}

int disp_tenants_admit_job(disp_t *d, const char *tenant, char *err, size_t errlen)
{
    if (tenant[0] == '\0') {
        return 0; /* the cluster itself: max_jobs and max_jobs_per_client only */
    }
    const sl_tenant_t *t = sl_tenants_find(&d->tenants, tenant);
    uint64_t cap = t != NULL && t->max_jobs > 0 ? t->max_jobs : (uint64_t)d->cfg.tenant_max_jobs;
    if (cap == 0) {
        return 0;
    }
    size_t open = disp_tenants_open_jobs(d, tenant);
    if (open >= cap) {
        return sl_err(err, errlen, -ENOSPC,
                      "tenant \"%s\" has %zu open jobs (its max_jobs is %llu): close one first",
                      tenant, open, (unsigned long long)cap);
    }
    return 0;
}
