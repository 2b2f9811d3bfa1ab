/* dispatcher/status: the history behind /status and /metrics, driven through
 * the service functions with a fake clock: counters that never go down when
 * jobs leave the table, delivered = acknowledged - skipped, rates from
 * heartbeat timestamps, the history ring, a lost worker's live values
 * cleared, and well-formed exposition text whatever a peer names its skip
 * reasons. Each job's line, ETA and name: test_dispatcher_status_jobs.c. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/disp.h"
#include "dispatcher/service/service.h"
#include "dispatcher/status/status.h"
#include "dispatcher/status/status_wanted.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_disp.h"
#include "tests/unit/fixtures_status.h"

static json_int_t total(json_t *doc, const char *key)
{
    return json_integer_value(json_object_get(json_object_get(doc, "totals"), key));
}

/* The value of the first line "NAME VALUE" / "NAME{...} VALUE" in m. */
static double metric(const char *m, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = m; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p) {
        if (strncmp(p, name, len) == 0 && (p[len] == ' ' || p[len] == '{')) {
            const char *v = strchr(p + len, ' ');
            return v != NULL ? strtod(v + 1, NULL) : -1;
        }
    }
    return -1;
}

START_TEST(test_counters_survive_the_job)
{
    fx_st_t e;
    fx_st_init(&e);
    uint64_t job = fx_st_submit(&e, 35); /* splits of 10, 10, 10 and 5 */
    disp_status_sample(e.st, e.now);
    uint64_t ids[8];
    size_t n = fx_st_client_splits(&e, job, ids, 8);
    ck_assert_uint_eq(n, 4);

    e.now += 1000;
    fx_st_ack(&e, job, ids, 2, "corrupt", 2);
    disp_status_sample(e.st, e.now);
    json_t *doc = fx_st_status(&e);
    json_t *j = json_array_get(json_object_get(doc, "jobs"), 0);
    json_t *p = json_object_get(j, "progress");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "samples_done")), 20);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "samples_delivered")), 18);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "samples_total")), 35);
    /* 18 delivered in the one second since the first sample. */
    ck_assert_double_eq_tol(json_real_value(json_object_get(p, "samples_per_sec")), 18.0, 1e-9);
    ck_assert_int_eq(total(doc, "samples_delivered_total"), 18);
    ck_assert_int_eq(total(doc, "samples_skipped_total"), 2);
    json_decref(doc);

    /* The rest, including the short last split: the job finishes. */
    e.now += 1000;
    fx_st_ack(&e, job, ids + 2, 2, "corrupt", 1);
    disp_status_sample(e.st, e.now);
    doc = fx_st_status(&e);
    ck_assert_int_eq(total(doc, "samples_delivered_total"), 32);
    ck_assert_int_eq(total(doc, "samples_skipped_total"), 3);
    j = json_array_get(json_object_get(doc, "jobs"), 0);
    p = json_object_get(j, "progress");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "samples_done")), 35);
    ck_assert_double_eq_tol(json_real_value(json_object_get(p, "fraction")), 1.0, 1e-12);
    json_decref(doc);

    /* Closed, then dropped from the table: the totals stay. */
    fx_st_close_job(&e, job);
    e.now += DISP_CLOSED_LINGER_MS + 1000;
    disp_tick(&e.d, e.now);
    disp_status_sample(e.st, e.now);
    doc = fx_st_status(&e);
    ck_assert_uint_eq(json_array_size(json_object_get(doc, "jobs")), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(doc, "closed_jobs")), 0);
    ck_assert_int_eq(total(doc, "samples_delivered_total"), 32);
    ck_assert_int_eq(total(doc, "samples_skipped_total"), 3);
    json_decref(doc);
    char *m = disp_status_render_metrics(e.st, e.now, NULL);
    ck_assert_ptr_nonnull(m);
    ck_assert_double_eq(metric(m, "sluice_samples_delivered_total"), 32);
    ck_assert_ptr_nonnull(strstr(m, "sluice_samples_skipped_total{reason=\"corrupt\"} 3\n"));
    ck_assert_double_eq(metric(m, "sluice_jobs"), 0);
    free(m);
    fx_st_free(&e);
}
END_TEST

/* A heartbeat with one unit per name in units (NULL: the usual one). */
static void heartbeat_units(fx_st_t *e, uint64_t wid, uint64_t samples, const char *const *units,
                            size_t nunits, int leaving)
{
    static const char *const one[] = {"decode_jpeg+center_crop"};
    Sluice__HeartbeatRequest req = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__HeartbeatResponse resp = SLUICE__HEARTBEAT_RESPONSE__INIT;
    Sluice__StageStat st[4];
    Sluice__StageStat *stp[4];
    disp_arena_t a = {0};
    char err[256] = "";
    if (units == NULL) {
        units = one;
        nunits = 1;
    }
    ck_assert_uint_le(nunits, 4);
    for (size_t i = 0; i < nunits; i++) {
        sluice__stage_stat__init(&st[i]);
        st[i].name = (char *)units[i];
        st[i].samples = samples;
        st[i].cpu_sec_per_sample = 0.004;
        st[i].out_bytes_per_sample = 192;
        stp[i] = &st[i];
    }
    req.version = SL_PROTOCOL_VERSION;
    req.worker_id = wid;
    req.load = 0.5;
    req.buffered_bytes = 4096;
    req.n_stages = nunits;
    req.stages = stp;
    req.leaving = leaving;
    ck_assert_int_eq(disp_svc_heartbeat(&e->d, &req, &resp, &a, e->now, err, sizeof(err)),
                     SL_RPC_OK);
    disp_arena_free(&a);
}

static void heartbeat(fx_st_t *e, uint64_t wid, uint64_t samples)
{
    heartbeat_units(e, wid, samples, NULL, 0, 0);
}

START_TEST(test_worker_rates_from_heartbeats)
{
    fx_st_t e;
    fx_st_init(&e);
    uint64_t wid = fx_disp_register(&e.d, "10.0.0.7:7500", 4, 0, e.now);

    heartbeat(&e, wid, 100);
    disp_status_sample(e.st, e.now + 300);
    /* 200 samples in the 500 ms between two heartbeats: 400/s, measured
     * between the heartbeats' own times, not the sampler's. */
    e.now += 500;
    heartbeat(&e, wid, 300);
    disp_status_sample(e.st, e.now + 700);
    json_t *doc = fx_st_status(&e);
    json_t *w = json_array_get(json_object_get(doc, "workers"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(w, "address")), "10.0.0.7:7500");
    ck_assert_double_eq_tol(json_real_value(json_object_get(w, "samples_per_sec")), 400, 1e-9);
    json_t *u = json_array_get(json_object_get(w, "stages"), 0);
    ck_assert_double_eq_tol(json_real_value(json_object_get(u, "samples_per_sec")), 400, 1e-9);
    /* 4 threads at 4 ms a sample. */
    ck_assert_double_eq_tol(json_real_value(json_object_get(u, "capacity_per_sec")), 1000, 1e-6);
    json_decref(doc);

    /* Idle: the next interval has no new samples; the rate decays. */
    e.now += 500;
    heartbeat(&e, wid, 300);
    disp_status_sample(e.st, e.now);
    doc = fx_st_status(&e);
    w = json_array_get(json_object_get(doc, "workers"), 0);
    ck_assert_double_eq_tol(json_real_value(json_object_get(w, "samples_per_sec")), 200, 1e-9);
    json_decref(doc);
    char *m = disp_status_render_metrics(e.st, e.now, NULL);
    ck_assert_ptr_nonnull(
        strstr(m, "sluice_worker_unit_samples_total{worker=\"10.0.0.7:7500\","
                  "unit=\"decode_jpeg+center_crop\"} 300\n"));
    ck_assert_ptr_nonnull(strstr(m, "sluice_worker_up{worker=\"10.0.0.7:7500\"} 1\n"));
    free(m);
    fx_st_free(&e);
}
END_TEST

START_TEST(test_history_ring)
{
    fx_st_t e;
    fx_st_init(&e);
    for (int i = 0; i < DISP_STATUS_HISTORY + 5; i++) {
        e.now += 1000;
        disp_status_sample(e.st, e.now);
    }
    json_t *doc = fx_st_status(&e);
    json_t *h = json_object_get(doc, "history");
    ck_assert_uint_eq(json_array_size(h), DISP_STATUS_HISTORY);
    /* Oldest first: the first five points were overwritten. */
    double t0 = json_real_value(json_array_get(json_array_get(h, 0), 0));
    double t1 = json_real_value(json_array_get(json_array_get(h, DISP_STATUS_HISTORY - 1), 0));
    ck_assert_double_eq_tol(t0, 6.0, 1e-9);
    ck_assert_double_eq_tol(t1, DISP_STATUS_HISTORY + 5.0, 1e-9);
    json_decref(doc);
    fx_st_free(&e);
}
END_TEST

/* Every line of the exposition is a comment or NAME[{k="v",...}] VALUE, with
 * quotes, backslashes and newlines escaped inside label values. */
static void check_exposition(const char *m)
{
    const char *p = m;
    while (*p != '\0') {
        const char *eol = strchr(p, '\n');
        ck_assert_ptr_nonnull(eol);
        if (*p != '#') {
            ck_assert_msg(strncmp(p, "sluice_", 7) == 0, "bad line: %.*s", (int)(eol - p), p);
            const char *q = p;
            while (q < eol && *q != '{' && *q != ' ') {
                q++;
            }
            if (*q == '{') {
                int in_str = 0;
                for (q++; q < eol; q++) {
                    if (in_str && *q == '\\') {
                        q++;
                        continue;
                    }
                    if (*q == '"') {
                        in_str = !in_str;
                    } else if (!in_str && *q == '}') {
                        break;
                    }
                }
                ck_assert_msg(q < eol && !in_str, "unterminated labels: %.*s", (int)(eol - p), p);
                q++;
            }
            ck_assert_msg(*q == ' ' && q + 1 < eol, "no value: %.*s", (int)(eol - p), p);
        }
        p = eol + 1;
    }
}

/* Every sample line's NAME{LABELS} part, sorted: a pair of equal ones is a
 * scrape Prometheus refuses. */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_unique_series(const char *m)
{
    char *copy = strdup(m);
    ck_assert_ptr_nonnull(copy);
    char *keys[4096];
    size_t n = 0;
    char *save = NULL;
    for (char *l = strtok_r(copy, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
        char *sp = strrchr(l, ' '); /* label values may hold spaces, never the value */
        if (l[0] != '#' && sp != NULL) {
            *sp = '\0';
            ck_assert_uint_lt(n, 4096);
            keys[n++] = l;
        }
    }
    qsort(keys, n, sizeof(keys[0]), cmp_str);
    for (size_t i = 1; i < n; i++) {
        ck_assert_msg(strcmp(keys[i - 1], keys[i]) != 0, "series twice: %s", keys[i]);
    }
    free(copy);
}

static size_t count_lines(const char *m, const char *prefix)
{
    size_t n = 0;
    size_t len = strlen(prefix);
    for (const char *p = m; *p != '\0'; p = strchr(p, '\n') + 1) {
        n += strncmp(p, prefix, len) == 0;
    }
    return n;
}

START_TEST(test_hostile_skip_reasons)
{
    fx_st_t e;
    fx_st_init(&e);
    uint64_t job = fx_st_submit(&e, 35);
    uint64_t ids[8];
    ck_assert_uint_eq(fx_st_client_splits(&e, job, ids, 8), 4);
    fx_st_ack(&e, job, ids, 1, "quote\"back\\slash\nnewline", 1);
    fx_st_ack(&e, job, ids + 1, 1, "\xff\xfe not utf-8", 1);
    /* More distinct reasons than anything keeps. */
    for (int i = 0; i < 40; i++) {
        char r[32];
        snprintf(r, sizeof(r), "reason-%d", i);
        fx_st_ack(&e, job, ids + 2, 0, r, 1);
    }
    e.now += 1000;
    disp_status_sample(e.st, e.now);
    char *m = disp_status_render_metrics(e.st, e.now, NULL);
    ck_assert_ptr_nonnull(m);
    check_exposition(m);
    check_unique_series(m);
    free(m);
    char *s = disp_status_render_json(e.st, e.now, NULL);
    ck_assert_ptr_nonnull(s);
    json_t *doc = json_loads(s, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    ck_assert_int_eq(total(doc, "samples_skipped_total"), 42);
    json_decref(doc);
    free(s);
    fx_st_free(&e);
}
END_TEST

/* How the hand-out balanced a job: splits stolen for a faster worker and
 * remote splits the idle client ran, per job in /status and /metrics. */
START_TEST(test_job_balance_counters)
{
    fx_st_t e;
    fx_st_init(&e);
    uint64_t id = fx_st_submit(&e, 35);
    pthread_mutex_lock(&e.d.mu);
    disp_job_t *job = disp_jobs_find(&e.d.jobs, id);
    ck_assert_ptr_nonnull(job);
    job->stolen_total = 3;
    job->client_helped_total = 5;
    pthread_mutex_unlock(&e.d.mu);
    e.now += 1000;
    disp_status_sample(e.st, e.now);
    char *m = disp_status_render_metrics(e.st, e.now, NULL);
    ck_assert_ptr_nonnull(m);
    check_exposition(m);
    NEAR(metric(m, "sluice_job_splits_stolen_total"), 3, 0);
    NEAR(metric(m, "sluice_job_splits_client_helped_total"), 5, 0);
    ck_assert_ptr_nonnull(strstr(m, "# TYPE sluice_job_splits_stolen_total counter"));
    free(m);
    char *s = disp_status_render_json(e.st, e.now, NULL);
    ck_assert_ptr_nonnull(s);
    json_t *doc = json_loads(s, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    json_t *splits = json_object_get(json_array_get(json_object_get(doc, "jobs"), 0), "splits");
    ck_assert_int_eq(json_integer_value(json_object_get(splits, "stolen")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(splits, "client_helped")), 5);
    json_decref(doc);
    free(s);
    fx_st_free(&e);
}
END_TEST

/* Issue #14: a worker restarted on the same HOST:PORT registers again with a
 * new id while its old entry lingers -- still live until its timeout, then
 * lost; or left, after a drain -- and its per-worker series must not appear
 * twice. A unit a worker names twice, and a client's own "other" skip reason
 * next to the overflow "other", must not either. */
START_TEST(test_one_series_per_label_set)
{
    fx_st_t e;
    fx_st_init(&e);
    static const char *const units[] = {"decode_jpeg", "decode_jpeg", "to_chw"};
    uint64_t old_a = fx_disp_register(&e.d, "10.0.0.9:7500", 4, 0, e.now);
    heartbeat_units(&e, old_a, 50, units, 3, 0);
    uint64_t old_b = fx_disp_register(&e.d, "10.0.0.9:7501", 4, 0, e.now);
    heartbeat_units(&e, old_b, 0, NULL, 0, 1); /* a drained worker's last heartbeat */

    /* A killed before its timeout: the new A and the old one are both live. */
    e.now += 1000;
    uint64_t new_a = fx_disp_register(&e.d, "10.0.0.9:7500", 4, 0, e.now);
    uint64_t new_b = fx_disp_register(&e.d, "10.0.0.9:7501", 4, 0, e.now);
    ck_assert_uint_ne(new_a, old_a);
    ck_assert_uint_ne(new_b, old_b);
    heartbeat_units(&e, new_a, 7, units, 3, 0);
    disp_status_sample(e.st, e.now);
    char *m = disp_status_render_metrics(e.st, e.now, NULL);
    ck_assert_ptr_nonnull(m);
    check_unique_series(m);
    ck_assert_uint_eq(count_lines(m, "sluice_worker_up{worker=\"10.0.0.9:7500\"} 1\n"), 1);
    ck_assert_uint_eq(count_lines(m, "sluice_worker_up{worker=\"10.0.0.9:7501\"} 1\n"), 1);
    /* The live entry registered last speaks for the address. */
    ck_assert_ptr_nonnull(strstr(m, "sluice_worker_unit_samples_total{worker=\"10.0.0.9:7500\","
                                    "unit=\"decode_jpeg\"} 7\n"));
    ck_assert_double_eq(metric(m, "sluice_workers_left"), 1);
    ck_assert_double_eq(metric(m, "sluice_workers_lost"), 0);
    free(m);

    /* Past the old A's timeout (the new ones heartbeat): lost, not left. */
    e.now += e.d.cfg.worker_timeout_ms - 500;
    heartbeat_units(&e, new_a, 9, units, 3, 0);
    heartbeat(&e, new_b, 1);
    e.now += 600;
    disp_tick(&e.d, e.now);
    disp_status_sample(e.st, e.now);
    m = disp_status_render_metrics(e.st, e.now, NULL);
    check_unique_series(m);
    ck_assert_double_eq(metric(m, "sluice_workers"), 2);
    ck_assert_double_eq(metric(m, "sluice_workers_lost"), 1);
    ck_assert_double_eq(metric(m, "sluice_workers_left"), 1);
    ck_assert_uint_eq(count_lines(m, "sluice_worker_up{worker=\"10.0.0.9:7500\"} 1\n"), 1);
    ck_assert_uint_eq(count_lines(m, "sluice_worker_up{"), 2);
    free(m);
    m = disp_status_metrics(&e.d, e.now, NULL); /* without the history too */
    ck_assert_ptr_nonnull(m);
    check_unique_series(m);
    free(m);
    json_t *doc = fx_st_status(&e);
    ck_assert_int_eq(total(doc, "workers_lost"), 1);
    ck_assert_int_eq(total(doc, "workers_left"), 1);
    ck_assert_uint_eq(json_array_size(json_object_get(doc, "workers")), 4); /* /status lists all */
    json_decref(doc);

    /* Skip reasons: a client's own "other", then more reasons than are kept. */
    uint64_t job = fx_st_submit(&e, 35);
    uint64_t ids[8];
    ck_assert_uint_eq(fx_st_client_splits(&e, job, ids, 8), 4);
    fx_st_ack(&e, job, ids, 0, "other", 1);
    for (int i = 0; i < 40; i++) {
        char r[32];
        snprintf(r, sizeof(r), "reason-%d", i);
        fx_st_ack(&e, job, ids, 0, r, 1);
    }
    e.now += 1000;
    disp_status_sample(e.st, e.now);
    m = disp_status_render_metrics(e.st, e.now, NULL);
    check_unique_series(m);
    free(m);
    fx_st_free(&e);
}
END_TEST

/* Issue #14: a lost worker's live values read 0 in /status and /metrics
 * instead of staying at its last heartbeat's. */
START_TEST(test_lost_worker_cleared)
{
    fx_st_t e;
    fx_st_init(&e);
    uint64_t wid = fx_disp_register(&e.d, "10.0.0.7:7500", 4, 0, e.now);
    heartbeat(&e, wid, 100);
    disp_status_sample(e.st, e.now);
    e.now += 500;
    heartbeat(&e, wid, 300);
    disp_status_sample(e.st, e.now);
    json_t *doc = fx_st_status(&e);
    json_t *w = json_array_get(json_object_get(doc, "workers"), 0);
    ck_assert_double_eq_tol(json_real_value(json_object_get(w, "load")), 0.5, 1e-9);
    ck_assert_int_eq(json_integer_value(json_object_get(w, "buffered_bytes")), 4096);
    ck_assert_double_eq_tol(json_real_value(json_object_get(w, "samples_per_sec")), 400, 1e-9);
    json_decref(doc);

    /* Cleared at once: not only after the next sample. */
    e.now += e.d.cfg.worker_timeout_ms + 1;
    disp_tick(&e.d, e.now);
    doc = fx_st_status(&e);
    w = json_array_get(json_object_get(doc, "workers"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(w, "state")), "lost");
    ck_assert_double_eq(json_real_value(json_object_get(w, "load")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(w, "buffered_bytes")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(w, "splits_in_progress")), 0);
    ck_assert_double_eq(json_real_value(json_object_get(w, "samples_per_sec")), 0);
    json_t *u = json_array_get(json_object_get(w, "stages"), 0);
    ck_assert_double_eq(json_real_value(json_object_get(u, "samples_per_sec")), 0);
    json_decref(doc);
    char *m = disp_status_render_metrics(e.st, e.now, NULL);
    ck_assert_ptr_nonnull(m);
    ck_assert_double_eq(metric(m, "sluice_worker_load"), 0);
    ck_assert_double_eq(metric(m, "sluice_worker_buffered_bytes"), 0);
    ck_assert_double_eq(metric(m, "sluice_worker_samples_per_second"), 0);
    free(m);
    fx_st_free(&e);
}
END_TEST

/* Positions a resumed job passed over (the client's skip reason "resumed")
 * are not skips (docs/protocol.md): they count as resumed_past /
 * samples_resumed_total / sluice_samples_resumed_total, never in skipped,
 * skipped_total, samples_skipped_total or sluice_samples_skipped_total, and
 * are still not delivered. */
START_TEST(test_resumed_are_not_skips)
{
    fx_st_t e;
    fx_st_init(&e);
    uint64_t job = fx_st_submit(&e, 35);
    disp_status_sample(e.st, e.now);
    uint64_t ids[8];
    size_t n = fx_st_client_splits(&e, job, ids, 8);
    ck_assert_uint_eq(n, 4);
    e.now += 1000;
    fx_st_ack(&e, job, ids, 2, "resumed", 20); /* the predecessor's */
    fx_st_ack(&e, job, ids + 2, 1, "corrupt", 1);
    disp_status_sample(e.st, e.now);
    json_t *doc = fx_st_status(&e);
    json_t *j = fx_st_job(doc, job);
    json_t *p = json_object_get(j, "progress");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "samples_done")), 30);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "samples_delivered")), 9);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "skipped_total")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "resumed_past")), 20);
    ck_assert_ptr_null(json_object_get(json_object_get(j, "skipped"), "resumed"));
    /* An "off" job is not profiled: its plan says why nothing is predicted. */
    const char *why = json_string_value(
        json_object_get(json_object_get(j, "plan"), "no_prediction"));
    ck_assert_ptr_nonnull(why);
    ck_assert_ptr_nonnull(strstr(why, "a fixed plan (offload off) is not profiled"));
    ck_assert_int_eq(total(doc, "samples_skipped_total"), 1);
    ck_assert_int_eq(total(doc, "samples_resumed_total"), 20);
    ck_assert_int_eq(total(doc, "samples_delivered_total"), 9);
    ck_assert_ptr_null(
        json_object_get(json_object_get(json_object_get(doc, "totals"), "skipped_by_reason"),
                        "resumed"));
    json_decref(doc);
    char *m = disp_status_render_metrics(e.st, e.now, NULL);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_null(strstr(m, "sluice_samples_skipped_total{reason=\"resumed\"}"));
    ck_assert_ptr_nonnull(strstr(m, "sluice_samples_skipped_total{reason=\"corrupt\"} 1\n"));
    ck_assert_double_eq(metric(m, "sluice_samples_resumed_total"), 20);
    free(m);
    fx_st_free(&e);
}
END_TEST

/* A normalize fused into to_chw runs in to_chw's pass, which is charged
 * all its CPU: its capacity is the pass's (4 threads at 4 ms: 1000/s) and
 * it says so (fused_into), never 0. */
START_TEST(test_fused_unit_capacity)
{
    fx_st_t e;
    fx_st_init(&e);
    uint64_t wid = fx_disp_register(&e.d, "10.0.0.7:7500", 4, 0, e.now);
    static const char *const units[] = {"decode_jpeg+center_crop", "normalize", "to_chw"};
    heartbeat_units(&e, wid, 100, units, 3, 0);
    /* The worker measured no CPU in normalize: one pass, charged to to_chw. */
    e.d.reg.workers[0]->stages[1].cpu_sec_per_sample = 0;
    disp_status_sample(e.st, e.now);
    json_t *doc = fx_st_status(&e);
    json_t *st = json_object_get(json_array_get(json_object_get(doc, "workers"), 0), "stages");
    json_t *norm = json_array_get(st, 1);
    ck_assert_str_eq(json_string_value(json_object_get(norm, "name")), "normalize");
    ck_assert_str_eq(json_string_value(json_object_get(norm, "fused_into")), "to_chw");
    ck_assert_double_eq_tol(json_real_value(json_object_get(norm, "capacity_per_sec")), 1000, 1e-6);
    ck_assert_ptr_null(json_object_get(json_array_get(st, 2), "fused_into"));
    ck_assert_ptr_null(json_object_get(json_array_get(st, 0), "fused_into"));
    json_decref(doc);
    fx_st_free(&e);
}
END_TEST

/* The workers-wanted gauge's rule (status_wanted.h): up at once, down only
 * after DISP_WANTED_DOWN_MS below without a break, to the highest figure
 * seen meanwhile; a dip that ends sooner changes nothing. */
START_TEST(test_wanted_hysteresis)
{
    disp_wanted_class_t c;
    memset(&c, 0, sizeof(c));
    int64_t t = 1000;
    ck_assert_uint_eq(disp_wanted_step(&c, 3, t), 3);
    ck_assert_uint_eq(disp_wanted_step(&c, 5, t += 1000), 5); /* up at once */
    /* A 30 s dip (a job between epochs, a re-plan): held. */
    for (int i = 0; i < 30; i++) {
        ck_assert_uint_eq(disp_wanted_step(&c, 2, t += 1000), 5);
    }
    ck_assert_uint_eq(disp_wanted_step(&c, 5, t += 1000), 5);
    ck_assert_uint_eq(c.below_since_ms, 0);
    /* Below for a minute: down to the highest seen in it (4), not 2. */
    ck_assert_uint_eq(disp_wanted_step(&c, 2, t += 1000), 5);
    int64_t start = t;
    ck_assert_uint_eq(disp_wanted_step(&c, 4, t += 1000), 5);
    while (t + 1000 - start < DISP_WANTED_DOWN_MS) {
        ck_assert_uint_eq(disp_wanted_step(&c, 2, t += 1000), 5);
    }
    ck_assert_uint_eq(disp_wanted_step(&c, 2, t += 1000), 4);
    /* Still below: another minute to 2; a rise in between goes up at once. */
    ck_assert_uint_eq(disp_wanted_step(&c, 2, t += 1000), 4);
    ck_assert_uint_eq(disp_wanted_step(&c, 7, t += 1000), 7);
    ck_assert_uint_eq(disp_wanted_step(&c, 0, t += 1000), 7);
    ck_assert_uint_eq(disp_wanted_step(&c, 0, t += DISP_WANTED_DOWN_MS), 0);
    ck_assert_uint_eq(c.raw, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dispatcher_status");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_counters_survive_the_job);
    tcase_add_test(tc, test_worker_rates_from_heartbeats);
    tcase_add_test(tc, test_history_ring);
    tcase_add_test(tc, test_hostile_skip_reasons);
    tcase_add_test(tc, test_job_balance_counters);
    tcase_add_test(tc, test_one_series_per_label_set);
    tcase_add_test(tc, test_lost_worker_cleared);
    tcase_add_test(tc, test_resumed_are_not_skips);
    tcase_add_test(tc, test_fused_unit_capacity);
    tcase_add_test(tc, test_wanted_hysteresis);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
