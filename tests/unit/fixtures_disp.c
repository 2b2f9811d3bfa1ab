#include "tests/unit/fixtures_disp.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/conf.h"
#include "common/rpc/rpc.h"
#include "dispatcher/config.h"
#include "dispatcher/service/service.h"

disp_t *fx_disp_new(int64_t now)
{
    disp_config_t cfg; /* disp_init copies it */
    char err[256] = "";
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
    cfg.split_size = 10;
    cfg.max_splits_per_worker = 2;
    cfg.max_jobs_per_client = 0;
    disp_t *d = calloc(1, sizeof(*d));
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(disp_init(d, &cfg, 100, now), 0);
    return d;
}

uint64_t fx_disp_register(disp_t *d, const char *addr, uint32_t threads, uint64_t want,
                          int64_t now)
{
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    Sluice__RegisterWorkerResponse resp = SLUICE__REGISTER_WORKER_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[256] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.address = (char *)addr;
    req.threads = threads;
    req.worker_id = want;
    ck_assert_msg(disp_svc_register_worker(d, &req, &resp, &a, now, err, sizeof(err)) == 0,
                  "%s", err);
    disp_arena_free(&a);
    return resp.worker_id;
}

int fx_disp_client_splits(disp_t *d, uint64_t job, int64_t now, uint64_t *ids, uint64_t *epochs,
                          size_t max, size_t *ret_n, char *fallback, size_t fblen)
{
    Sluice__GetAssignmentRequest req = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__GetAssignmentResponse resp = SLUICE__GET_ASSIGNMENT_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job;
    ck_assert_msg(disp_svc_get_assignment(d, &req, &resp, &a, now, err, sizeof(err)) == 0, "%s",
                  err);
    size_t n = 0;
    for (size_t i = 0; i < resp.n_splits && n < max; i++) {
        if (resp.splits[i]->worker_id == 0) {
            ids[n] = resp.splits[i]->split_id;
            if (epochs != NULL) {
                epochs[n] = resp.splits[i]->epoch;
            }
            n++;
        }
    }
    *ret_n = n;
    if (fallback != NULL) {
        snprintf(fallback, fblen, "%s", resp.fallback != NULL ? resp.fallback : "(null)");
    }
    int finished = resp.finished;
    disp_arena_free(&a);
    return finished;
}

void fx_disp_destroy(disp_t *d)
{
    ck_assert_uint_eq(d->jobs.split_moves_refused, 0);
    disp_destroy(d);
}
