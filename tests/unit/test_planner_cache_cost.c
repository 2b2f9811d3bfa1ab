/* test_planner_cache_cost: the prefix cache's measured read-back cost and
 * the client's own hits (dispatcher/planner/planner_cache_cost.h,
 * planner_cache.h): the least-squares fit per entry and per byte, its
 * fallback for entries of one size, the windows it is cut into (a source
 * that sends its growth, one that sends its totals and restarts), the mean
 * over workers; the decision priced at the measured cost and saying so; the
 * client's local samples priced at its own hit rate; then through the
 * service: a worker's heartbeat timings make the next job's decision
 * "measured", and a client's GetAssignment counters re-plan the job with
 * more of it local. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <jansson.h>

#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/disp.h"
#include "dispatcher/planner/planner_cache.h"
#include "dispatcher/planner/planner_cache_cost.h"
#include "dispatcher/planner/planner_impl.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/service/service.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"
#include "tests/unit/fixtures_planner.h"

/* Adds one timed hit of b bytes taking a + k b seconds to s. */
static void hit(disp_pc_sums_t *s, double b, double a, double k)
{
    double ns = (a + k * b) * 1e9;
    s->n += 1;
    s->b += b;
    s->t += ns;
    s->bb += b * b;
    s->bt += b * ns;
}

START_TEST(test_fit_sizes)
{
    /* Sizes 10..200 KB, 20 us + 0.5 ns/B: both terms come back. */
    disp_pc_sums_t s = {0};
    for (int i = 0; i < 300; i++) {
        hit(&s, 10e3 + (double)(i % 20) * 10e3, 20e-6, 0.5e-9);
    }
    disp_pc_cost_t c = {0};
    ck_assert_int_eq(disp_pc_cost_fit(&s, &c), 0);
    ck_assert_int_eq(c.have, 1);
    NEAR(c.entry_sec, 20e-6, 1e-10);
    NEAR(c.byte_sec, 0.5e-9, 1e-14);
    NEAR(c.hits, 300, 0);
    NEAR(disp_pc_cost_sec(&c, 100e3), 70e-6, 1e-10);

    /* A line through below the origin (time falls off faster than the
     * sizes): no negative per-entry cost, all of it per byte. */
    s = (disp_pc_sums_t){0};
    for (int i = 0; i < 10; i++) {
        hit(&s, 100e3 + (double)i * 20e3, -50e-6, 1e-9);
    }
    ck_assert_int_eq(disp_pc_cost_fit(&s, &c), 0);
    NEAR(c.entry_sec, 0.0, 0.0);
    NEAR(c.byte_sec, (s.t / s.n * 1e-9) / (s.b / s.n), 1e-18);
}
END_TEST

START_TEST(test_fit_one_size)
{
    /* Every entry 150 KB, 100 us each: the assumed model's shape (50 us +
     * 150 us at 150 KB, 1:3) scaled to 100 us: 25 us + 75 us. */
    disp_pc_sums_t s = {0};
    for (int i = 0; i < 256; i++) {
        hit(&s, 150e3, 100e-6, 0.0);
    }
    disp_pc_cost_t c = {0};
    ck_assert_int_eq(disp_pc_cost_fit(&s, &c), 0);
    NEAR(c.entry_sec, 25e-6, 1e-12);
    NEAR(c.byte_sec, 75e-6 / 150e3, 1e-17);
    NEAR(disp_pc_cost_sec(&c, 150e3), 100e-6, 1e-12);
    /* Within the size spread's floor (5 % < 10 %): still the shape. */
    s = (disp_pc_sums_t){0};
    hit(&s, 95e3, 10e-6, 1e-9);
    hit(&s, 105e3, 10e-6, 1e-9);
    ck_assert_int_eq(disp_pc_cost_fit(&s, &c), 0);
    NEAR(disp_pc_cost_sec(&c, 100e3), 110e-6, 1e-12);
    NEAR(c.entry_sec / c.byte_sec, DISP_PC_ENTRY_SEC / DISP_PC_SEC_PER_BYTE, 1e-3);

    /* Nothing measured: no figure, *ret untouched. */
    disp_pc_cost_t keep = {.have = 7};
    s = (disp_pc_sums_t){0};
    ck_assert_int_eq(disp_pc_cost_fit(&s, &keep), -1);
    s.n = 10; /* hits from a peer that does not time them */
    ck_assert_int_eq(disp_pc_cost_fit(&s, &keep), -1);
    s.t = NAN;
    ck_assert_int_eq(disp_pc_cost_fit(&s, &keep), -1);
    ck_assert_int_eq(keep.have, 7);
}
END_TEST

START_TEST(test_windows)
{
    /* Growth: nothing until DISP_PC_COST_WINDOW hits, then that window's
     * fit; the next window's replaces it (a cache gone to disk). */
    disp_pc_costwin_t w = {0};
    disp_pc_sums_t d = {0};
    for (int i = 0; i < DISP_PC_COST_WINDOW - 1; i++) {
        hit(&d, 100e3, 100e-6, 0.0);
    }
    ck_assert_int_eq(disp_pc_costwin_add(&w, &d), 0);
    ck_assert_int_eq(w.cost.have, 0);
    d = (disp_pc_sums_t){0};
    hit(&d, 100e3, 100e-6, 0.0);
    ck_assert_int_eq(disp_pc_costwin_add(&w, &d), 1);
    ck_assert_int_eq(w.cost.have, 1);
    NEAR(disp_pc_cost_sec(&w.cost, 100e3), 100e-6, 1e-12);
    d = (disp_pc_sums_t){0};
    for (int i = 0; i < DISP_PC_COST_WINDOW; i++) {
        hit(&d, 100e3, 1e-3, 0.0);
    }
    ck_assert_int_eq(disp_pc_costwin_add(&w, &d), 1);
    NEAR(disp_pc_cost_sec(&w.cost, 100e3), 1e-3, 1e-12);
    /* A window of untimed hits (an older peer) keeps the last figure. */
    d = (disp_pc_sums_t){.n = DISP_PC_COST_WINDOW, .b = 1e6};
    ck_assert_int_eq(disp_pc_costwin_add(&w, &d), 0);
    NEAR(disp_pc_cost_sec(&w.cost, 100e3), 1e-3, 1e-12);
    /* Nonsense growth counts as nothing. */
    d = (disp_pc_sums_t){.n = -5, .t = INFINITY};
    ck_assert_int_eq(disp_pc_costwin_add(&w, &d), 0);

    /* Totals (the client): windows by difference; a restart (totals that
     * went back) starts a new window from there, no negative window. */
    disp_pc_costwin_t t = {0};
    disp_pc_sums_t cum = {0};
    for (int i = 0; i < 200; i++) {
        hit(&cum, 50e3, 40e-6, 0.0);
    }
    ck_assert_int_eq(disp_pc_costwin_set(&t, &cum), 0);
    for (int i = 0; i < 100; i++) {
        hit(&cum, 50e3, 40e-6, 0.0);
    }
    ck_assert_int_eq(disp_pc_costwin_set(&t, &cum), 1);
    NEAR(disp_pc_cost_sec(&t.cost, 50e3), 40e-6, 1e-12);
    cum = (disp_pc_sums_t){0};
    for (int i = 0; i < 10; i++) {
        hit(&cum, 50e3, 80e-6, 0.0);
    }
    ck_assert_int_eq(disp_pc_costwin_set(&t, &cum), 0);
    for (int i = 0; i < DISP_PC_COST_WINDOW - 10; i++) {
        hit(&cum, 50e3, 80e-6, 0.0);
    }
    ck_assert_int_eq(disp_pc_costwin_set(&t, &cum), 0); /* 246 since the restart */
    for (int i = 0; i < 10; i++) {
        hit(&cum, 50e3, 80e-6, 0.0);
    }
    ck_assert_int_eq(disp_pc_costwin_set(&t, &cum), 1);
    NEAR(disp_pc_cost_sec(&t.cost, 50e3), 80e-6, 1e-12);

    /* The hit-rate windows of the client: as the workers' (planner_cache.h). */
    disp_pc_hitwin_t h = {0};
    ck_assert_int_eq(disp_pc_hitwin_note(&h, 100, 100), 0);
    ck_assert_int_eq(h.have_rate, 0);
    ck_assert_int_eq(disp_pc_hitwin_note(&h, 192, 64), 1);
    NEAR(h.hit_rate, 0.75, 1e-12);
    ck_assert_int_eq(disp_pc_hitwin_note(&h, 192 + 256, 64), 1);
    NEAR(h.hit_rate, 1.0, 1e-12);
    ck_assert_int_eq(disp_pc_hitwin_note(&h, 5, 5), 0); /* restarted */
    NEAR(h.hit_rate, 1.0, 1e-12);
    ck_assert_int_eq(disp_pc_hitwin_note(&h, 5, 5 + 256), 1);
    NEAR(h.hit_rate, 0.0, 1e-12);
}
END_TEST

START_TEST(test_mean)
{
    disp_pc_cost_t a = {.have = 1, .entry_sec = 10e-6, .byte_sec = 1e-9, .hits = 300};
    disp_pc_cost_t b = {.have = 1, .entry_sec = 40e-6, .byte_sec = 4e-9, .hits = 100};
    disp_pc_cost_t none = {.have = 0, .entry_sec = 1, .byte_sec = 1, .hits = 1e6};
    const disp_pc_cost_t *v[] = {&a, &none, &b, NULL};
    disp_pc_cost_t m;
    disp_pc_cost_mean(v, 4, &m);
    ck_assert_int_eq(m.have, 1);
    NEAR(m.entry_sec, 17.5e-6, 1e-15);
    NEAR(m.byte_sec, 1.75e-9, 1e-18);
    NEAR(m.hits, 400, 0);
    disp_pc_cost_mean(v + 1, 1, &m);
    ck_assert_int_eq(m.have, 0);
}
END_TEST

/* A 3-epoch job whose 2-unit prefix costs 10 ms and puts out 150 KB raw
 * (test_planner_cache.c's good()). */
static disp_pc_in_t good(void)
{
    return (disp_pc_in_t){.prefix = 2,
                          .epochs = 3,
                          .samples = 1000,
                          .compute_sec = 0.010,
                          .out_bytes = 150e3,
                          .budget = 1e9};
}

START_TEST(test_decide_measured)
{
    disp_pc_in_t in = good();
    disp_pc_decision_t d;
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.measured, 0);
    NEAR(d.read_sec, 200e-6, 1e-12);
    ck_assert_msg(strstr(d.why, "reading 0.200 ms (assumed);") != NULL, "%s", d.why);
    /* Measured: 30 us + 0.2 ns/B at 150 KB = 60 us, decompression included
     * (none added even with a codec). */
    in.measured = (disp_pc_cost_t){.have = 1, .entry_sec = 30e-6, .byte_sec = 0.2e-9, .hits = 256};
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.measured, 1);
    NEAR(d.read_sec, 60e-6, 1e-12);
    ck_assert_msg(strstr(d.why, "reading 0.060 ms (measured);") != NULL, "%s", d.why);
    in.ratio = 3.0;
    in.decompress_sec = 1e-3;
    disp_pc_decide(&in, &d);
    NEAR(d.read_sec, 40e-6, 1e-12); /* 30 us + 50 KB stored x 0.2 ns */
    /* A measured read dearer than computing turns it off. */
    in = good();
    in.measured = (disp_pc_cost_t){.have = 1, .entry_sec = 20e-3, .hits = 256};
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.on, 0);
    ck_assert_msg(strstr(d.why, "reading 20.000 ms (measured); not cheaper") != NULL, "%s", d.why);
}
END_TEST

START_TEST(test_price_client)
{
    disp_pl_input_t in;
    fx_pl_base(&in, 4);
    in.read_sec = 1e-3;
    in.nclasses = 1;
    in.classes[0] = (disp_pl_class_t){.workers = 1, .cores = 2, .profiled = 0};
    disp_pl_input_t before = in;
    double all = disp_pl_client_all(&in);
    disp_pc_price_client(&in, 1, 0.0, 1e-4);
    ck_assert(memcmp(&in, &before, sizeof(in)) == 0);
    disp_pc_price_client(&in, 0, 0.9, 1e-4);
    ck_assert(memcmp(&in, &before, sizeof(in)) == 0);
    /* 75 % hits over a 1-unit prefix (read 1 ms + decode 10 ms, back in
     * 0.1 ms): a local sample saves 0.75 x 10.9 ms; the units themselves,
     * what a sample finished from a worker's output costs, and the class
     * priced at the client's costs stay. */
    disp_pc_price_client(&in, 1, 0.75, 1e-4);
    NEAR(in.local_cache_sec, 0.75 * (1e-3 + 0.010 - 1e-4), 1e-15);
    NEAR(disp_pl_client_all(&in), all - in.local_cache_sec, 1e-15);
    ck_assert(memcmp(in.unit_sec, before.unit_sec, sizeof(in.unit_sec)) == 0);
    ck_assert(in.read_sec == before.read_sec);
    NEAR(disp_pl_client_after(&in, 1), disp_pl_client_after(&before, 1), 0.0);
    ck_assert(memcmp(&in.classes[0], &before.classes[0], sizeof(in.classes[0])) == 0);
    /* Reading back dearer than computing: nothing saved. */
    disp_pc_price_client(&in, 1, 1.0, 1.0);
    NEAR(in.local_cache_sec, 0.0, 0.0);
    NEAR(disp_pl_client_all(&in), all, 0.0);
}
END_TEST

/* ------------------------------------------------------------ through the service */

static uint64_t register_cached(disp_t *d, int64_t now)
{
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    Sluice__RegisterWorkerResponse resp = SLUICE__REGISTER_WORKER_RESPONSE__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.address = "127.0.0.1:9";
    req.threads = 2;
    req.hostname = "w";
    req.cache_bytes = 1ull << 30;
    disp_arena_t a = {0};
    char err[256];
    ck_assert_int_eq(disp_svc_register_worker(d, &req, &resp, &a, now, err, sizeof(err)), 0);
    disp_arena_free(&a);
    return resp.worker_id;
}

static disp_job_t *submit(disp_t *d, uint64_t w1, int64_t now)
{
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    Sluice__SubmitJobRequest req;
    fx_pin_request(&pin, &req);
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    ck_assert_int_eq(disp_svc_submit_job(d, &req, &resp, &a, now, err, sizeof(err)), SL_RPC_OK);
    uint64_t id = resp.job_id;
    disp_arena_free(&a);
    disp_job_t *job = disp_jobs_find(&d->jobs, id);
    ck_assert_ptr_nonnull(job);
    ck_assert_ptr_nonnull(job->planner);
    return job;
}

/* n hits of b bytes at sec each, as CacheStats' sums. */
static void timed(Sluice__CacheStats *cs, uint64_t n, double b, double sec)
{
    cs->hits += n;
    cs->bytes_read += (uint64_t)(b * (double)n);
    cs->read_ns += (uint64_t)(sec * 1e9 * (double)n);
    cs->read_bytes_sq += b * b * (double)n;
    cs->read_bytes_ns += b * sec * 1e9 * (double)n;
}

START_TEST(test_worker_measured)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = register_cached(d, now);
    disp_job_t *first = submit(d, w1, now);
    ck_assert_msg(strstr(first->plan.cache_reason, "(assumed)") != NULL, "%s",
                  first->plan.cache_reason);
    /* The worker's heartbeat: a window of timed hits, 80 us each. */
    Sluice__CacheStats cs = SLUICE__CACHE_STATS__INIT;
    Sluice__CacheStats *pcs = &cs;
    cs.job_id = first->id;
    timed(&cs, DISP_PC_COST_WINDOW, 192, 80e-6);
    cs.evictions = 3;
    cs.bytes_evicted = 3 * 192;
    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse hresp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    hreq.version = SL_PROTOCOL_VERSION;
    hreq.worker_id = w1;
    hreq.n_job_cache = 1;
    hreq.job_cache = &pcs;
    disp_arena_t a = {0};
    char err[512];
    ck_assert_int_eq(disp_svc_heartbeat(d, &hreq, &hresp, &a, now + 100, err, sizeof(err)), 0);
    disp_arena_free(&a);
    ck_assert_uint_eq(first->cache.bytes_evicted, 3 * 192);
    ck_assert_uint_eq(d->reg.cache_total[7], 3 * 192);
    /* The next job's decision is priced at it, and says so. */
    disp_job_t *second = submit(d, w1, now + 200);
    disp_pjob_t *pj = second->planner;
    ck_assert_int_eq(pj->cache.d.measured, 1);
    NEAR(pj->cache.d.read_sec, 80e-6, 1e-9);
    ck_assert_msg(strstr(second->plan.cache_reason, "reading 0.080 ms (measured)") != NULL, "%s",
                  second->plan.cache_reason);
    json_t *js = disp_pjob_json(pj, &second->plan);
    ck_assert_ptr_nonnull(js);
    json_t *c = json_object_get(js, "cache");
    ck_assert(json_is_true(json_object_get(c, "read_measured")));
    NEAR(json_number_value(json_object_get(c, "worker_read_ms")), 0.080, 1e-6);
    json_decref(js);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

START_TEST(test_client_priced)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = register_cached(d, now);
    disp_job_t *job = submit(d, w1, now);
    disp_pjob_t *pj = job->planner;
    ck_assert_int_eq(job->plan.cache_off, 0);
    double share = job->plan.local_share;
    uint32_t version = job->plan.version;
    NEAR(pj->input.local_cache_sec, 0.0, 0.0);
    ck_assert_msg(share > 0.0 && share < 1.0, "share %f", share);

    /* The client's GetAssignment: its own cache hit 3 of 4 lookups at
     * 50 us each. */
    Sluice__CacheStats cs = SLUICE__CACHE_STATS__INIT;
    timed(&cs, 3 * DISP_PC_WINDOW, 192, 50e-6);
    cs.misses = DISP_PC_WINDOW;
    Sluice__GetAssignmentRequest req = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job->id;
    req.job_secret = (char *)FX_JOB_SECRET;
    req.cache = &cs;
    Sluice__GetAssignmentResponse resp = SLUICE__GET_ASSIGNMENT_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[512] = "";
    ck_assert_msg(disp_svc_get_assignment(d, &req, &resp, &a, now + 100, err, sizeof(err)) == 0,
                  "%s", err);
    disp_arena_free(&a);
    pthread_mutex_lock(&d->mu);
    disp_planner_tick(d, now + 200);
    pthread_mutex_unlock(&d->mu);
    ck_assert_uint_eq(job->plan.version, version + 1);
    ck_assert_msg(strstr(pj->last_reason, "the client's prefix cache hit rate 0% -> 75%") != NULL,
                  "%s", pj->last_reason);
    NEAR(pj->cache.client_priced_rate, 0.75, 1e-12);
    ck_assert_int_eq(pj->cache.client_read_measured, 1);
    NEAR(pj->cache.client_read_sec, 50e-6, 1e-9);
    /* A local sample: read + the fused decode (10 ms) at 75 % hits. */
    ck_assert_msg(pj->input.local_cache_sec > 0.75 * 0.009, "saved %f", pj->input.local_cache_sec);
    /* Cheaper local samples: more of the job local. */
    ck_assert_msg(job->plan.local_share > share, "local share %f -> %f", share,
                  job->plan.local_share);
    /* Nothing new: no second re-plan. */
    pthread_mutex_lock(&d->mu);
    disp_planner_tick(d, now + 300);
    pthread_mutex_unlock(&d->mu);
    ck_assert_uint_eq(job->plan.version, version + 1);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_ERR);
    Suite *s = suite_create("planner_cache_cost");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fit_sizes);
    tcase_add_test(tc, test_fit_one_size);
    tcase_add_test(tc, test_windows);
    tcase_add_test(tc, test_mean);
    tcase_add_test(tc, test_decide_measured);
    tcase_add_test(tc, test_price_client);
    tcase_add_test(tc, test_worker_measured);
    tcase_add_test(tc, test_client_priced);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
