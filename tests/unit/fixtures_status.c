/* fixtures_status: see fixtures_status.h. */
#include "tests/unit/fixtures_disp.h"
#include "tests/unit/fixtures_status.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/service/service.h"

void fx_st_init(fx_st_t *e)
{
    disp_config_t cfg;
    char err[256];
    memset(&cfg, 0, sizeof(cfg));
    ck_assert_int_eq(sl_conf_defaults(&disp_conf_table, &cfg, err, sizeof(err)), 0);
    cfg.split_size = 10;
    cfg.max_jobs = 2 * DISP_STATUS_JOB_HISTORIES;
    cfg.max_jobs_per_client = 0;
    e->now = 100000;
    ck_assert_int_eq(disp_init(&e->d, &cfg, 100, e->now), 0);
    e->st = disp_status_new(&e->d, e->now);
    ck_assert_ptr_nonnull(e->st);
}

void fx_st_free(fx_st_t *e)
{
    disp_status_free(e->st);
    fx_disp_destroy(&e->d);
}

uint64_t fx_st_submit_spec(fx_st_t *e, uint64_t n, const char *spec, const char *name)
{
    Sluice__SubmitJobRequest req = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.spec_json = (char *)(spec != NULL ? spec : FX_ST_SPEC_OFF);
    req.spec_name = (char *)name;
    req.num_samples = n;
    req.source_fingerprint = 7;
    ck_assert_msg(disp_svc_submit_job(&e->d, &req, &resp, &a, e->now, err, sizeof(err)) ==
                      SL_RPC_OK,
                  "%s", err);
    disp_arena_free(&a);
    return resp.job_id;
}

uint64_t fx_st_submit(fx_st_t *e, uint64_t n) { return fx_st_submit_spec(e, n, NULL, "off.json"); }

size_t fx_st_client_splits(fx_st_t *e, uint64_t job, uint64_t *ids, size_t max)
{
    size_t n = 0;
    (void)fx_disp_client_splits(&e->d, job, e->now, ids, NULL, max, &n, NULL, 0);
    return n;
}

void fx_st_ack(fx_st_t *e, uint64_t job, uint64_t *ids, size_t n, const char *reason,
               uint64_t skipped)
{
    Sluice__AckSplitsRequest req = SLUICE__ACK_SPLITS_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__AckSplitsResponse resp = SLUICE__ACK_SPLITS_RESPONSE__INIT;
    Sluice__SkipCount sk = SLUICE__SKIP_COUNT__INIT;
    Sluice__SkipCount *skp[1] = {&sk};
    disp_arena_t a = {0};
    char err[512] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job;
    req.n_split_ids = n;
    req.split_ids = ids;
    if (skipped > 0) {
        sk.reason = (char *)reason;
        sk.count = skipped;
        req.n_skipped = 1;
        req.skipped = skp;
    }
    ck_assert_int_eq(disp_svc_ack_splits(&e->d, &req, &resp, &a, e->now, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
}

void fx_st_close_job(fx_st_t *e, uint64_t job)
{
    Sluice__CloseJobRequest req = SLUICE__CLOSE_JOB_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__CloseJobResponse resp = SLUICE__CLOSE_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[256] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job;
    ck_assert_int_eq(disp_svc_close_job(&e->d, &req, &resp, &a, e->now, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
}

json_t *fx_st_status(fx_st_t *e)
{
    char *s = disp_status_render_json(e->st, e->now, NULL);
    ck_assert_ptr_nonnull(s);
    json_error_t jerr;
    json_t *doc = json_loads(s, 0, &jerr);
    ck_assert_msg(doc != NULL, "status is not JSON: %s", jerr.text);
    free(s);
    return doc;
}

json_t *fx_st_job(json_t *doc, uint64_t id)
{
    static const char *const lists[] = {"jobs", "closed_jobs"};
    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *j;
        json_array_foreach(json_object_get(doc, lists[l]), i, j)
        {
            if ((uint64_t)json_integer_value(json_object_get(j, "id")) == id) {
                return j;
            }
        }
    }
    return NULL;
}
