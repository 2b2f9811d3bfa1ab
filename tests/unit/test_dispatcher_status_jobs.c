/* dispatcher/status, each job's view: its throughput line kept by the
 * dispatcher (the whole job in a bounded number of points, a bounded number
 * of jobs with a line, hostile client reports), elapsed time and ETA, and
 * the name pages show. Driven through the service functions with a fake
 * clock (tests/unit/fixtures_status.h). */
#include <check.h>
#include <float.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/disp.h"
#include "dispatcher/service/service.h"
#include "dispatcher/status/status.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_status.h"

static double progress_num(json_t *j, const char *key)
{
    return json_number_value(json_object_get(json_object_get(j, "progress"), key));
}

/* One second of a client taking nsplits splits of 10 samples. */
static void consume_second(fx_st_t *e, uint64_t job, size_t nsplits)
{
    uint64_t ids[8];
    ck_assert_uint_le(nsplits, 8);
    ck_assert_uint_eq(fx_st_client_splits(e, job, ids, nsplits), nsplits);
    e->now += 1000;
    fx_st_ack(e, job, ids, nsplits, NULL, 0);
    disp_status_sample(e->st, e->now);
}

/* Issue #14: a page opened mid-job draws the whole job from the dispatcher's
 * line, which stays within DISP_STATUS_JOB_POINTS however long the job runs:
 * points merge in pairs, so early seconds are still there, coarser. */
START_TEST(test_job_line_covers_the_whole_job)
{
    fx_st_t e;
    fx_st_init(&e);
    uint64_t job = fx_st_submit(&e, 40000);
    disp_status_sample(e.st, e.now);
    const int secs = 8 * DISP_STATUS_JOB_POINTS + 7;
    for (int i = 0; i < secs; i++) {
        consume_second(&e, job, 2); /* 20 samples/s */
    }
    json_t *doc = fx_st_status(&e);
    json_t *j = fx_st_job(doc, job);
    json_t *h = json_object_get(j, "history");
    json_t *pts = json_object_get(h, "points");
    /* Compacted at 240, 480, 960 and 1920 samples: 120 points of 16 s and
     * the one still being built (7 samples). */
    ck_assert_double_eq(json_real_value(json_object_get(h, "interval_sec")), 16);
    ck_assert_uint_eq(json_array_size(pts), DISP_STATUS_JOB_POINTS / 2 + 1);
    /* From the job's first seconds (t in seconds since the dispatcher and
     * the job started) to the last sample. */
    double t0 = json_real_value(json_array_get(json_array_get(pts, 0), 0));
    double tn = json_real_value(json_array_get(json_array_get(pts, json_array_size(pts) - 1), 0));
    ck_assert_double_eq_tol(t0, 16, 1e-9);
    ck_assert_double_eq_tol(tn, secs, 1e-9);
    size_t i;
    json_t *pt;
    double prev = 0;
    json_array_foreach(pts, i, pt)
    {
        double t = json_real_value(json_array_get(pt, 0));
        ck_assert_msg(t > prev, "point %zu at %g after %g", i, t, prev);
        prev = t;
        ck_assert_double_eq_tol(json_real_value(json_array_get(pt, 1)), 20, 1e-3);
        ck_assert(json_is_null(json_array_get(pt, 2))); /* offload off: no prediction */
    }
    /* 40000 - 20 * 1927 = 1460 samples left at 20/s. */
    ck_assert_double_eq_tol(progress_num(j, "eta_sec"), 73, 1e-6);
    ck_assert_double_eq_tol(progress_num(j, "elapsed_sec"), secs, 1e-9);
    json_decref(doc);
    fx_st_free(&e);
}
END_TEST

/* At most DISP_STATUS_JOB_HISTORIES lines whatever the number of jobs; a
 * closed job's line goes to an open job that had none. */
START_TEST(test_job_lines_bounded)
{
    fx_st_t e;
    fx_st_init(&e);
    enum { N = DISP_STATUS_JOB_HISTORIES + 6 };
    uint64_t ids[N];
    for (int i = 0; i < N; i++) {
        ids[i] = fx_st_submit(&e, 35);
    }
    for (int s = 0; s < 2; s++) {
        e.now += 1000;
        disp_status_sample(e.st, e.now);
    }
    json_t *doc = fx_st_status(&e);
    int lined = 0;
    int closed_lined = 0;
    for (int i = 0; i < N; i++) {
        lined += !json_is_null(json_object_get(fx_st_job(doc, ids[i]), "history"));
    }
    ck_assert_int_eq(lined, DISP_STATUS_JOB_HISTORIES);
    json_decref(doc);

    for (int i = 0; i < 3; i++) {
        fx_st_close_job(&e, ids[i]);
    }
    e.now += 1000;
    disp_status_sample(e.st, e.now);
    doc = fx_st_status(&e);
    lined = 0;
    for (int i = 0; i < N; i++) {
        json_t *j = fx_st_job(doc, ids[i]);
        int has = !json_is_null(json_object_get(j, "history"));
        if (strcmp(json_string_value(json_object_get(j, "state")), "closed") == 0) {
            closed_lined += has;
        } else {
            lined += has;
        }
    }
    ck_assert_int_eq(closed_lined, 0);
    ck_assert_int_eq(lined, DISP_STATUS_JOB_HISTORIES);
    json_decref(doc);
    fx_st_free(&e);
}
END_TEST

/* ETA from the last half minute of the line ("unknown" before 3 s of it
 * and without progress), 0 once finished; elapsed stops at the finish. */
START_TEST(test_eta_and_elapsed)
{
    fx_st_t e;
    fx_st_init(&e);
    uint64_t job = fx_st_submit(&e, 100);
    disp_status_sample(e.st, e.now);
    for (int s = 1; s <= 3; s++) {
        consume_second(&e, job, 1);
    }
    json_t *doc = fx_st_status(&e);
    ck_assert(
        json_is_null(json_object_get(json_object_get(fx_st_job(doc, job), "progress"), "eta_sec")));
    json_decref(doc);
    consume_second(&e, job, 1); /* 40 done, 10/s since the line's first point */
    doc = fx_st_status(&e);
    ck_assert_double_eq_tol(progress_num(fx_st_job(doc, job), "eta_sec"), 6, 1e-9);
    ck_assert_double_eq_tol(progress_num(fx_st_job(doc, job), "elapsed_sec"), 4, 1e-9);
    json_decref(doc);
    for (int s = 0; s < 31; s++) { /* stalled for a whole window */
        e.now += 1000;
        disp_status_sample(e.st, e.now);
    }
    doc = fx_st_status(&e);
    ck_assert(
        json_is_null(json_object_get(json_object_get(fx_st_job(doc, job), "progress"), "eta_sec")));
    json_decref(doc);
    for (int s = 0; s < 6; s++) {
        consume_second(&e, job, 1);
    }
    e.now += 5000;
    disp_status_sample(e.st, e.now);
    doc = fx_st_status(&e);
    json_t *j = fx_st_job(doc, job);
    ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "finished");
    ck_assert_double_eq_tol(progress_num(j, "eta_sec"), 0, 1e-9);
    ck_assert_double_eq_tol(progress_num(j, "elapsed_sec"), 4 + 31 + 6, 1e-9);
    json_decref(doc);
    fx_st_free(&e);
}
END_TEST

static void report_rate(fx_st_t *e, uint64_t job, double delivered_per_sec)
{
    Sluice__ReportRatesRequest req = SLUICE__REPORT_RATES_REQUEST__INIT;
    req.job_secret = (char *)FX_JOB_SECRET;
    Sluice__ReportRatesResponse resp = SLUICE__REPORT_RATES_RESPONSE__INIT;
    disp_arena_t a = {0};
    char err[256] = "";
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job;
    req.delivered_per_sec = delivered_per_sec;
    ck_assert_int_eq(disp_svc_report_rates(&e->d, &req, &resp, &a, e->now, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
}

/* A client's report is the line's measured value: a huge one stays huge
 * (the page clips it), not 0 or a broken document; a negative one is none. */
START_TEST(test_hostile_rates_in_the_line)
{
    fx_st_t e;
    fx_st_init(&e);
    uint64_t job = fx_st_submit(&e, 35);
    disp_status_sample(e.st, e.now);
    static const double sent[] = {1e300, -5, DBL_MAX, 12.5};
    for (size_t i = 0; i < sizeof(sent) / sizeof(sent[0]); i++) {
        e.now += 1000;
        report_rate(&e, job, sent[i]);
        disp_status_sample(e.st, e.now);
    }
    json_t *doc = fx_st_status(&e);
    json_t *pts = json_object_get(json_object_get(fx_st_job(doc, job), "history"), "points");
    ck_assert_uint_eq(json_array_size(pts), 4);
    ck_assert_double_ge(json_real_value(json_array_get(json_array_get(pts, 0), 1)), 3e38);
    ck_assert(json_is_null(json_array_get(json_array_get(pts, 1), 1)));
    ck_assert_double_ge(json_real_value(json_array_get(json_array_get(pts, 2), 1)), 3e38);
    ck_assert_double_eq_tol(json_real_value(json_array_get(json_array_get(pts, 3), 1)), 12.5, 1e-9);
    json_decref(doc);
    fx_st_free(&e);
}
END_TEST

/* Issue #14: pages name a job by its spec's "name", else by the file's
 * basename; never by a path, never by the Python binding's temporary file. */
START_TEST(test_job_names)
{
    fx_st_t e;
    fx_st_init(&e);
    static const char named[] =
        "{\"name\": \"resnet50 train\", \"source\": {\"type\": \"imagefolder\", "
        "\"path\": \"train\"}, \"stages\": [{\"op\": \"decode_jpeg\"}], \"offload\": \"off\"}";
    struct {
        const char *spec, *spec_name, *want; /* want NULL: "job ID" */
    } cases[] = {
        {named, "/tmp/sluice-spec-k2j4x.json", "resnet50 train"},
        {named, "/home/u/specs/other.json", "resnet50 train"},
        {NULL, "/home/u/specs/train.json", "train.json"},
        {NULL, "train.json", "train.json"},
        {NULL, "/tmp/sluice-spec-k2j4x.json", NULL},
        {NULL, "", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t id = fx_st_submit_spec(&e, 35, cases[i].spec, cases[i].spec_name);
        json_t *doc = fx_st_status(&e);
        char want[64];
        snprintf(want, sizeof(want), "job %llu", (unsigned long long)id);
        const char *got = json_string_value(json_object_get(fx_st_job(doc, id), "name"));
        ck_assert_msg(got != NULL && strcmp(got, cases[i].want ? cases[i].want : want) == 0,
                      "case %zu: name \"%s\"", i, got ? got : "(none)");
        json_decref(doc);
    }
    fx_st_free(&e);
}

int main(void)
{
    Suite *s = suite_create("dispatcher_status_jobs");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_job_line_covers_the_whole_job);
    tcase_add_test(tc, test_job_lines_bounded);
    tcase_add_test(tc, test_eta_and_elapsed);
    tcase_add_test(tc, test_hostile_rates_in_the_line);
    tcase_add_test(tc, test_job_names);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
