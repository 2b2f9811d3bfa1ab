#include "tests/unit/fixtures_jobs.h"

#include <check.h>
#include <string.h>

void fx_jobs_init(fx_jobs_t *e, const disp_limits_t *lim)
{
    e->now = 100000;
    ck_assert_int_eq(disp_registry_init(&e->reg, 16, 1, e->now), 0);
    ck_assert_int_eq(disp_jobs_init(&e->js, &e->reg, lim, 1000), 0);
}

void fx_jobs_free(fx_jobs_t *e)
{
    disp_jobs_destroy(&e->js);
    disp_registry_destroy(&e->reg);
}

disp_job_t *fx_jobs_submit(fx_jobs_t *e, const char *spec_json, uint64_t n)
{
    disp_submit_t sub = {.spec_json = spec_json, .spec_len = strlen(spec_json),
                         .spec_name = "t.json", .num_samples = n, .fingerprint = 1,
                         .client_id = "c"};
    disp_job_t *job = NULL;
    char err[512] = "";
    int rc = disp_jobs_submit(&e->js, &sub, e->now, &job, err, sizeof(err));
    ck_assert_msg(rc == 0, "submit: %d %s", rc, err);
    return job;
}

uint64_t fx_jobs_add_worker(fx_jobs_t *e, const char *addr)
{
    disp_worker_t *w = NULL;
    int is_new = 0;
    ck_assert_int_eq(disp_registry_register(&e->reg, addr, "h", 4, 0, e->now, &w, &is_new), 0);
    ck_assert_int_eq(is_new, 1);
    disp_jobs_assign_all(&e->js, e->now);
    return w->id;
}
