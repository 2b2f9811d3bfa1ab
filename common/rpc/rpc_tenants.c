/* rpc_tenants: the named tokens a server admits besides its own (rpc.h
 * sl_rpc_server_set_tenants), and which one a call came with. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/tenants.h"
#include "common/rpc/rpc_creds.h"
#include "common/rpc/rpc_server_impl.h"

typedef struct srv_tenant_s {
    char name[SL_RPC_TENANT_MAX];
    char *bearer; /* "Bearer TOKEN", malloc'd */
} srv_tenant_t;

static void tenants_free(srv_tenant_t *t, size_t n)
{
    for (size_t i = 0; t != NULL && i < n; i++) {
        if (t[i].bearer != NULL) {
            memset(t[i].bearer, 0, strlen(t[i].bearer));
        }
        free(t[i].bearer);
    }
    free(t);
}

void sl_rpc_srv_tenants_free(sl_rpc_server_t *srv)
{
    tenants_free(srv->tenants, srv->ntenants);
    srv->tenants = NULL;
    srv->ntenants = 0;
}

int sl_rpc_server_set_tenants(sl_rpc_server_t *srv, const sl_rpc_tenant_t *t, size_t n,
                              char *err, size_t errlen)
{
    if (n > SL_RPC_TENANTS_MAX) {
        return sl_err(err, errlen, -EINVAL, "more than %d tenants", SL_RPC_TENANTS_MAX);
    }
    srv_tenant_t *nt = n > 0 ? calloc(n, sizeof(*nt)) : NULL;
    if (n > 0 && nt == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = t[i].name != NULL ? strlen(t[i].name) : 0;
        if (len == 0 || len >= SL_RPC_TENANT_MAX) {
            tenants_free(nt, n);
            return sl_err(err, errlen, -EINVAL, "tenant %zu: name must be 1..%d bytes", i,
                          SL_RPC_TENANT_MAX - 1);
        }
        snprintf(nt[i].name, sizeof(nt[i].name), "%s", t[i].name);
        sl_rpc_security_t sec = {.token = t[i].token};
        int rc = sl_rpc_creds_bearer(&sec, &nt[i].bearer, err, errlen);
        if (rc == 0 && nt[i].bearer == NULL) {
            rc = sl_err(err, errlen, -EINVAL, "tenant \"%s\": no token", nt[i].name);
        }
        if (rc != 0) {
            tenants_free(nt, n);
            return rc;
        }
    }
    pthread_mutex_lock(&srv->tenants_mu);
    srv_tenant_t *old = srv->tenants;
    size_t nold = srv->ntenants;
    srv->tenants = nt;
    srv->ntenants = n;
    pthread_mutex_unlock(&srv->tenants_mu);
    tenants_free(old, nold);
    return 0;
}

int sl_rpc_server_load_tenants(sl_rpc_server_t *srv, const char *path, size_t *ret_n, char *err,
                               size_t errlen)
{
    sl_tenants_t *ts = calloc(1, sizeof(*ts));
    sl_rpc_tenant_t *rt = calloc(SL_TENANTS_MAX, sizeof(*rt));
    int rc = ts != NULL && rt != NULL ? 0 : sl_err(err, errlen, -ENOMEM, "out of memory");
    if (rc == 0 && path[0] != '\0') {
        rc = sl_tenants_load(path, ts, err, errlen);
    }
    for (size_t i = 0; rc == 0 && i < ts->n; i++) {
        rt[i].name = ts->t[i].name;
        rt[i].token = ts->t[i].token;
    }
    if (rc == 0) {
        rc = sl_rpc_server_set_tenants(srv, rt, ts->n, err, errlen);
    }
    if (rc == 0) {
        *ret_n = ts->n;
    }
    if (ts != NULL) {
        memset(ts, 0, sizeof(*ts)); /* tokens */
    }
    free(ts);
    free(rt);
    return rc;
}

int sl_rpc_srv_admit_tenant(sl_rpc_server_t *srv, srv_call_t *c)
{
    c->tenant[0] = '\0';
    pthread_mutex_lock(&srv->tenants_mu);
    size_t n = srv->ntenants;
    int ok = 0;
    if (srv->bearer == NULL && n == 0) {
        ok = 1; /* an open server: everyone is the cluster */
    } else if (srv->bearer != NULL && sl_rpc_creds_bearer_ok(srv->bearer, &c->md)) {
        ok = 1;
    } else {
        /* Every tenant is compared (each in constant time), so how long a
         * refusal takes does not tell which tenant's token was closest. */
        for (size_t i = 0; i < n; i++) {
            if (sl_rpc_creds_bearer_ok(srv->tenants[i].bearer, &c->md) && !ok) {
                snprintf(c->tenant, sizeof(c->tenant), "%s", srv->tenants[i].name);
                ok = 1;
            }
        }
    }
    pthread_mutex_unlock(&srv->tenants_mu);
    return ok;
}

const char *sl_rpc_reply_tenant(const sl_rpc_reply_t *reply) { return reply->call->tenant; }

const char *sl_rpc_stream_tenant(const sl_rpc_stream_t *st) { return st->call->tenant; }
