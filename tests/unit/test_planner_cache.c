/* test_planner_cache: the planner's prefix cache decision and pricing
 * (dispatcher/planner/planner_cache.h): the pure rule on hand-made numbers
 * (each reason for off, both reasons for on, the numbers in the reason),
 * the read cost, the hit-rate windows and the re-plan they trigger, the
 * pricing of the workers' classes; then through SubmitJob and Heartbeat:
 * the decision in the plan, in the explain JSON, in the JobSpec a worker
 * gets, and a plan that gets cheaper workers once the hit rate is measured. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <jansson.h>

#include "common/base/log.h"
#include "common/rpc/rpc.h"
#include "dispatcher/config.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/disp.h"
#include "dispatcher/planner/planner_cache.h"
#include "dispatcher/planner/planner_job.h"
#include "dispatcher/service/planner_svc.h"
#include "dispatcher/service/service.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"
#include "tests/unit/fixtures_planner.h"

/* A 3-epoch job whose 2-unit prefix costs 10 ms and puts out 150 KB raw
 * (no codec), 1000 samples, 1 GB of budget: on. */
static disp_pc_in_t good(void)
{
    return (disp_pc_in_t){.prefix = 2,
                          .epochs = 3,
                          .samples = 1000,
                          .compute_sec = 0.010,
                          .out_bytes = 150e3,
                          .budget = 1e9};
}

START_TEST(test_read_cost)
{
    double stored = 0;
    /* 50 us + 150e3 ns = 200 us, raw. */
    NEAR(disp_pc_read_sec(150e3, 0.0, 1e-3, &stored), 200e-6, 1e-12);
    NEAR(stored, 150e3, 1e-9);
    /* Compressed 3x: 50 us + 50 us + the decompression. */
    NEAR(disp_pc_read_sec(150e3, 3.0, 1e-4, &stored), 200e-6, 1e-12);
    NEAR(stored, 50e3, 1e-9);
    /* A ratio that does not pay is stored raw, without decompression. */
    NEAR(disp_pc_read_sec(150e3, 1.01, 1.0, NULL), 200e-6, 1e-12);
    /* Nonsense counts as 0. */
    NEAR(disp_pc_read_sec(NAN, -2.0, INFINITY, &stored), DISP_PC_ENTRY_SEC, 1e-12);
    NEAR(stored, 0.0, 0.0);
}
END_TEST

START_TEST(test_decide_on)
{
    disp_pc_in_t in = good();
    disp_pc_decision_t d;
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.on, 1);
    NEAR(d.read_sec, 200e-6, 1e-12);
    NEAR(d.total_bytes, 150e6, 1e-3);
    NEAR(d.fit, 1.0, 0.0);
    ck_assert_msg(strncmp(d.why,
                          "on: computing units 0..1 costs 10.000 ms a sample, reading "
                          "0.200 ms (assumed); 100% of its 143.1 MB fit the workers' 953.7 MB; "
                          "read again: 3 epochs",
                          400) == 0,
                  "%s", d.why);
    /* One epoch, but the spec was seen: on, and says so. */
    in.epochs = 1;
    in.seen = 1;
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.on, 1);
    ck_assert_msg(strstr(d.why, "read again: the spec seen before") != NULL, "%s", d.why);
    /* A part fits (10 %, above the 5 % floor): on. */
    in = good();
    in.budget = 15e6;
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.on, 1);
    NEAR(d.fit, 0.1, 1e-9);
    ck_assert_msg(strstr(d.why, "10% of its 143.1 MB fit the workers' 14.3 MB") != NULL, "%s",
                  d.why);
    /* No budget reported: fit not checked. */
    in.budget = 0;
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.on, 1);
    ck_assert_msg(strstr(d.why, "not checked against a budget") != NULL, "%s", d.why);
}
END_TEST

START_TEST(test_decide_off)
{
    disp_pc_decision_t d;
    disp_pc_in_t in = good();
    in.spec_off = 1;
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.on, 0);
    ck_assert_str_eq(d.why, "off: the spec says \"cache\": \"off\"");

    in = good();
    in.prefix = 0;
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.on, 0);
    ck_assert_str_eq(d.why, "off: nothing to cache (the first unit draws randomness)");

    /* Computing is cheaper than reading back: 0.1 ms against 0.2 ms. */
    in = good();
    in.compute_sec = 100e-6;
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.on, 0);
    ck_assert_msg(strcmp(d.why, "off: computing units 0..1 costs 0.100 ms a sample, reading "
                                "0.200 ms (assumed); not cheaper") == 0,
                  "%s", d.why);

    /* 4 % fits: below DISP_PC_MIN_FIT. */
    in = good();
    in.budget = 6e6;
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.on, 0);
    ck_assert_msg(strstr(d.why, "only 4% of its 143.1 MB fit") != NULL, "%s", d.why);
    ck_assert_msg(strstr(d.why, "at least 5% must") != NULL, "%s", d.why);

    /* Nothing reads it again. */
    in = good();
    in.epochs = 1;
    disp_pc_decide(&in, &d);
    ck_assert_int_eq(d.on, 0);
    ck_assert_msg(strstr(d.why, "nothing reads it again (1 epoch, the spec not seen before)") !=
                      NULL,
                  "%s", d.why);
}
END_TEST

START_TEST(test_windows)
{
    disp_pc_job_t c;
    memset(&c, 0, sizeof(c));
    char why[160];
    disp_pc_note(&c, 0, DISP_PC_WINDOW - 1);
    ck_assert_int_eq(c.have_rate, 0);
    disp_pc_note(&c, 0, DISP_PC_WINDOW);
    ck_assert_int_eq(c.have_rate, 1);
    NEAR(c.hit_rate, 0.0, 0.0);
    /* Undecided or off: priced computed, never a re-plan. */
    ck_assert(disp_pc_rate(&c) == 0.0);
    disp_pc_note(&c, DISP_PC_WINDOW, DISP_PC_WINDOW);
    NEAR(c.hit_rate, 1.0, 0.0);
    ck_assert(disp_pc_rate(&c) == 0.0);
    ck_assert_int_eq(disp_pc_replan_due(&c, why, sizeof(why)), 0);
    c.decided = 1;
    c.d.on = 1;
    NEAR(disp_pc_rate(&c), 1.0, 0.0);
    ck_assert_int_eq(disp_pc_replan_due(&c, why, sizeof(why)), 1);
    ck_assert_str_eq(why, "prefix cache hit rate 0% -> 100%");
    c.priced_rate = 0.8; /* within DISP_PC_REPLAN_DIFF: no re-plan */
    ck_assert_int_eq(disp_pc_replan_due(&c, why, sizeof(why)), 0);
    /* The second epoch's window: half hits; the rate is the window's, not
     * the job's since its start. */
    disp_pc_note(&c, DISP_PC_WINDOW + 128, DISP_PC_WINDOW + 128);
    NEAR(c.hit_rate, 0.5, 1e-12);
    /* Counters that went back (a restored job) start a new window. */
    disp_pc_note(&c, 10, 10);
    NEAR(c.hit_rate, 0.5, 1e-12);
    disp_pc_note(&c, 10 + DISP_PC_WINDOW, 10);
    NEAR(c.hit_rate, 1.0, 1e-12);
}
END_TEST

START_TEST(test_price)
{
    disp_pl_input_t in;
    fx_pl_base(&in, 4);
    in.read_sec = 1e-3;
    in.nclasses = 2;
    in.classes[0] = (disp_pl_class_t){.workers = 1, .cores = 2, .profiled = 1, .read_sec = 2e-3};
    in.classes[0].unit_sec[0] = 0.010;
    in.classes[0].unit_sec[1] = 0.002;
    in.classes[1] = (disp_pl_class_t){.workers = 1, .cores = 2, .profiled = 0};
    disp_pl_input_t before = in;
    disp_pc_price(&in, 1, 0.0, 1e-4);
    ck_assert(memcmp(&in, &before, sizeof(in)) == 0);
    disp_pc_price(&in, 0, 0.9, 1e-4);
    ck_assert(memcmp(&in, &before, sizeof(in)) == 0);
    /* 75 % hits over a 1-unit prefix: the read is 1/4 computed + 3/4 the
     * cache read, decode 1/4, normalize (after the prefix) as it was; the
     * client and the unprofiled class untouched. */
    disp_pc_price(&in, 1, 0.75, 1e-4);
    NEAR(in.classes[0].read_sec, 0.25 * 2e-3 + 0.75 * 1e-4, 1e-15);
    NEAR(in.classes[0].unit_sec[0], 0.0025, 1e-15);
    NEAR(in.classes[0].unit_sec[1], 0.002, 0.0);
    ck_assert(memcmp(&in.classes[1], &before.classes[1], sizeof(in.classes[1])) == 0);
    ck_assert(in.unit_sec[0] == before.unit_sec[0] && in.read_sec == before.read_sec);
    /* Above 1 counts as 1. */
    in = before;
    disp_pc_price(&in, 2, 7.0, 1e-4);
    NEAR(in.classes[0].read_sec, 1e-4, 1e-15);
    NEAR(in.classes[0].unit_sec[1], 0.0, 0.0);
}
END_TEST

/* ------------------------------------------------------------ through the service */

static uint64_t register_cached(disp_t *d, uint64_t cache_bytes, int64_t now)
{
    Sluice__RegisterWorkerRequest req = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    Sluice__RegisterWorkerResponse resp = SLUICE__REGISTER_WORKER_RESPONSE__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.address = "127.0.0.1:9";
    req.threads = 2;
    req.hostname = "w";
    req.cache_bytes = cache_bytes;
    disp_arena_t a = {0};
    char err[256];
    ck_assert_int_eq(disp_svc_register_worker(d, &req, &resp, &a, now, err, sizeof(err)), 0);
    disp_arena_free(&a);
    return resp.worker_id;
}

/* The explain JSON's "cache" object's string member key. */
static void check_json(const Sluice__PlanExplain *e, const char *decision, const char *reason)
{
    ck_assert_ptr_nonnull(e);
    json_t *root = json_loads(e->json, 0, NULL);
    ck_assert_ptr_nonnull(root);
    json_t *c = json_object_get(root, "cache");
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(json_string_value(json_object_get(c, "decision")), decision);
    ck_assert_str_eq(json_string_value(json_object_get(c, "reason")), reason);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "prefix_units")), 1);
    json_t *p = json_object_get(root, "plan");
    ck_assert(json_is_boolean(json_object_get(p, "cache_off")));
    ck_assert_int_eq(json_boolean_value(json_object_get(p, "cache_off")),
                     strcmp(decision, "off") == 0);
    json_decref(root);
}

/* A job of spec_json submitted with the fixture's inputs; returns whether
 * the plan caches and checks that the worker's JobSpec carries the same. */
static int submit(const char *spec_json, int seen, uint64_t cache_bytes, char *why, size_t whylen)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = register_cached(d, cache_bytes, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    pin.client.cached = seen;
    Sluice__SubmitJobRequest req;
    fx_pin_request(&pin, &req);
    req.spec_json = (char *)spec_json;
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    ck_assert_int_eq(disp_svc_submit_job(d, &req, &resp, &a, now, err, sizeof(err)), SL_RPC_OK);
    ck_assert_ptr_nonnull(resp.plan);
    int on = !resp.plan->cache_off;
    snprintf(why, whylen, "%s", resp.plan->cache_reason);
    check_json(resp.explain, on ? "on" : "off", why);
    disp_arena_free(&a);

    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse hresp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    hreq.version = SL_PROTOCOL_VERSION;
    hreq.worker_id = w1;
    ck_assert_int_eq(disp_svc_heartbeat(d, &hreq, &hresp, &a, now + 100, err, sizeof(err)), 0);
    ck_assert_uint_eq(hresp.n_jobs, 1);
    ck_assert_int_eq(hresp.jobs[0]->cache_off, !on);
    disp_arena_free(&a);
    fx_disp_destroy(d);
    free(d);
    return on;
}

START_TEST(test_submit_decides)
{
    char why[512];
    /* FX_PIN_SPEC: 3 epochs, prefix = the fused decode+crop (10 ms). */
    ck_assert_int_eq(submit(FX_PIN_SPEC, 0, 1ull << 30, why, sizeof(why)), 1);
    ck_assert_msg(strncmp(why, "on: computing units 0..0 costs 10.000 ms a sample", 49) == 0, "%s",
                  why);
    ck_assert_msg(strstr(why, "fit the workers' 1.0 GB; read again: 3 epochs") != NULL, "%s", why);

    char one[1024];
    snprintf(one, sizeof(one), "%s", FX_PIN_SPEC);
    char *e = strstr(one, "\"epochs\": 3");
    ck_assert_ptr_nonnull(e);
    e[10] = '1';
    ck_assert_int_eq(submit(one, 0, 1ull << 30, why, sizeof(why)), 0);
    ck_assert_msg(strstr(why, "nothing reads it again") != NULL, "%s", why);
    /* The same 1-epoch job of a spec the dispatcher's profile cache knew. */
    ck_assert_int_eq(submit(one, 1, 1ull << 30, why, sizeof(why)), 1);
    ck_assert_msg(strstr(why, "the spec seen before") != NULL, "%s", why);

    /* 200 samples x 192 B: 1000 B of budget (2.6 %) is below 5 %. */
    ck_assert_int_eq(submit(FX_PIN_SPEC, 0, 1000, why, sizeof(why)), 0);
    ck_assert_msg(strstr(why, "only 3% of its 37.5 KB fit the workers' 1000.0 B") != NULL, "%s",
                  why);

    char off[1024];
    snprintf(off, sizeof(off), "%s", FX_PIN_SPEC);
    char *end = strrchr(off, '}');
    snprintf(end, sizeof(off) - (size_t)(end - off), ", \"cache\": \"off\"}");
    ck_assert_int_eq(submit(off, 0, 1ull << 30, why, sizeof(why)), 0);
    ck_assert_str_eq(why, "off: the spec says \"cache\": \"off\"");
}
END_TEST

/* Hits measured: the workers' prefix is priced at the cache read, a re-plan
 * is due, and the re-plan's workers are faster. */
START_TEST(test_hits_replan)
{
    int64_t now = 50000;
    disp_t *d = fx_disp_new(now);
    uint64_t w1 = register_cached(d, 1ull << 30, now);
    fx_pin_t pin;
    fx_pin_init(&pin, w1);
    Sluice__SubmitJobRequest req;
    fx_pin_request(&pin, &req);
    Sluice__SubmitJobResponse resp = SLUICE__SUBMIT_JOB_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[1024] = "";
    ck_assert_int_eq(disp_svc_submit_job(d, &req, &resp, &a, now, err, sizeof(err)), SL_RPC_OK);
    ck_assert_int_eq(resp.plan->cache_off, 0);
    uint64_t id = resp.job_id;
    disp_arena_free(&a);
    disp_job_t *job = disp_jobs_find(&d->jobs, id);
    ck_assert_ptr_nonnull(job);
    disp_pjob_t *pj = job->planner;
    ck_assert_ptr_nonnull(pj);
    double worker_before = pj->input.classes[0].unit_sec[0];
    NEAR(worker_before, 0.010, 1e-12);
    uint32_t version = job->plan.version;

    /* The worker's heartbeat: a window of hits. */
    Sluice__CacheStats cs = SLUICE__CACHE_STATS__INIT;
    Sluice__CacheStats *pcs = &cs;
    cs.job_id = id;
    cs.hits = 3 * DISP_PC_WINDOW;
    cs.misses = DISP_PC_WINDOW;
    Sluice__HeartbeatRequest hreq = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse hresp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    hreq.version = SL_PROTOCOL_VERSION;
    hreq.worker_id = w1;
    hreq.n_job_cache = 1;
    hreq.job_cache = &pcs;
    ck_assert_int_eq(disp_svc_heartbeat(d, &hreq, &hresp, &a, now + 100, err, sizeof(err)), 0);
    disp_arena_free(&a);
    pthread_mutex_lock(&d->mu);
    disp_planner_tick(d, now + 200);
    pthread_mutex_unlock(&d->mu);
    NEAR(pj->cache.hit_rate, 0.75, 1e-12);
    NEAR(pj->cache.priced_rate, 0.75, 1e-12);
    ck_assert_uint_eq(job->plan.version, version + 1);
    ck_assert_msg(strstr(pj->last_reason, "prefix cache hit rate 0% -> 75%") != NULL, "%s",
                  pj->last_reason);
    NEAR(pj->input.classes[0].unit_sec[0], 0.25 * worker_before, 1e-12);
    /* Another tick with nothing new: no re-plan. */
    pthread_mutex_lock(&d->mu);
    disp_planner_tick(d, now + 300);
    pthread_mutex_unlock(&d->mu);
    ck_assert_uint_eq(job->plan.version, version + 1);
    /* /status shows the measured rate. */
    json_t *js = disp_pjob_json(pj, &job->plan);
    ck_assert_ptr_nonnull(js);
    json_t *c = json_object_get(js, "cache");
    NEAR(json_number_value(json_object_get(c, "hit_rate")), 0.75, 1e-12);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "lookups")), 4 * DISP_PC_WINDOW);
    json_decref(js);
    fx_disp_destroy(d);
    free(d);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_ERR);
    Suite *s = suite_create("planner_cache");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_read_cost);
    tcase_add_test(tc, test_decide_on);
    tcase_add_test(tc, test_decide_off);
    tcase_add_test(tc, test_windows);
    tcase_add_test(tc, test_price);
    tcase_add_test(tc, test_submit_decides);
    tcase_add_test(tc, test_hits_replan);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
