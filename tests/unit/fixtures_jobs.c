#include "tests/unit/fixtures_jobs.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

void fx_jobs_init(fx_jobs_t *e, const disp_limits_t *lim)
{
    e->now = 100000;
    ck_assert_int_eq(disp_registry_init(&e->reg, 16, 1, e->now), 0);
    ck_assert_int_eq(disp_jobs_init(&e->js, &e->reg, lim, 1000), 0);
}

void fx_jobs_free(fx_jobs_t *e)
{
    ck_assert_uint_eq(e->js.split_moves_refused, 0); /* disp_split_move: never refused */
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

int fx_jobs_ack_random(fx_jobs_t *e, disp_job_t *job, uint8_t *acked, uint64_t total)
{
    uint64_t id = UINT64_MAX;
    if (job->nclient > 0 && rand() % 2 == 0) {
        id = job->client_ids[rand() % job->nclient];
    } else if (job->njw > 0) {
        disp_jw_t *jw = &job->jw[rand() % job->njw];
        if (jw->n > 0) {
            id = jw->ids[0];
        }
    }
    if (id == UINT64_MAX) {
        return 0;
    }
    ck_assert_uint_lt(id, total);
    ck_assert_int_eq(acked[id], 0);
    ck_assert_uint_eq(disp_jobs_ack(&e->js, job, &id, 1, e->now), 1);
    acked[id] = 1;
    /* Duplicate acks count nothing. */
    ck_assert_uint_eq(disp_jobs_ack(&e->js, job, &id, 1, e->now), 0);
    return 1;
}

void fx_jobs_beat_random(fx_jobs_t *e, const uint64_t *ids, int n, int64_t timeout_ms)
{
    for (int k = 0; k < n; k++) {
        disp_worker_t *w = disp_registry_live(&e->reg, ids[k]);
        if (w != NULL && w->last_heartbeat_ms > e->now - timeout_ms && rand() % 2 == 0) {
            w->last_heartbeat_ms = e->now;
        }
    }
}

float *fx_skewed_costs(uint64_t n)
{
    float *c = malloc(n * sizeof(*c));
    ck_assert_ptr_nonnull(c);
    for (uint64_t i = 0; i < n; i++) {
        c[i] = i % 10 == 3 ? 8.0f : 1.0f;
    }
    return c;
}
