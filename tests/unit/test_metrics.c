/* test_metrics: the one Prometheus text writer (common/base/metrics) -- HELP
 * and TYPE for every family, label values and help text escaped, values as
 * the format spells them, a sample only after its family, and a bound that
 * fails the whole exposition instead of cutting it. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/metrics.h"
#include "tests/unit/fixtures.h"

static const sl_metric_t UP = {"sluice_up", SL_METRIC_GAUGE, "1 when up.", {NULL}, 0};
static const sl_metric_t BYTES = {
    "sluice_bytes_total", SL_METRIC_COUNTER, "Bytes, by peer and unit.", {"peer", "unit"}, 0};
static const sl_metric_t LOAD = {"sluice_load", SL_METRIC_GAUGE, "Load.", {NULL}, SL_METRIC_G};
static const sl_metric_t RATIO = {"sluice_ratio", SL_METRIC_GAUGE, "Ratio.", {"job"}, 4};

static char *take(sl_metrics_t *m)
{
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(sl_metrics_take(m, &text, &len), 0);
    ck_assert_uint_eq(len, strlen(text));
    return text;
}

START_TEST(test_families_and_samples)
{
    sl_metrics_t *m = sl_metrics_new(1 << 20);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(sl_metrics_family(m, &UP), 0);
    ck_assert_int_eq(sl_metrics_sample(m, &UP, NULL, 1), 0);
    ck_assert_int_eq(sl_metrics_family(m, &BYTES), 0);
    const char *a[] = {"10.0.0.7:7500", "decode_jpeg"};
    ck_assert_int_eq(sl_metrics_sample(m, &BYTES, a, 1234567), 0);
    ck_assert_int_eq(sl_metrics_family(m, &LOAD), 0);
    ck_assert_int_eq(sl_metrics_sample(m, &LOAD, NULL, 0.25), 0);
    ck_assert_int_eq(sl_metrics_family(m, &RATIO), 0); /* a family with no sample */
    char *text = take(m);
    ck_assert_str_eq(text, "# HELP sluice_up 1 when up.\n"
                           "# TYPE sluice_up gauge\n"
                           "sluice_up 1\n"
                           "# HELP sluice_bytes_total Bytes, by peer and unit.\n"
                           "# TYPE sluice_bytes_total counter\n"
                           "sluice_bytes_total{peer=\"10.0.0.7:7500\",unit=\"decode_jpeg\"} "
                           "1234567\n"
                           "# HELP sluice_load Load.\n"
                           "# TYPE sluice_load gauge\n"
                           "sluice_load 0.25\n"
                           "# HELP sluice_ratio Ratio.\n"
                           "# TYPE sluice_ratio gauge\n");
    free(text);
    /* Taken: the writer starts again, empty. */
    text = take(m);
    ck_assert_str_eq(text, "");
    free(text);
    sl_metrics_free(m);
    sl_metrics_free(NULL);
}
END_TEST

START_TEST(test_escaping)
{
    static const sl_metric_t f = {
        "sluice_skipped_total", SL_METRIC_COUNTER, "back\\slash\nand newline", {"reason"}, 0};
    sl_metrics_t *m = sl_metrics_new(1 << 20);
    ck_assert_int_eq(sl_metrics_family(m, &f), 0);
    const char *v[] = {"quote\"back\\slash\nnewline"};
    ck_assert_int_eq(sl_metrics_sample(m, &f, v, 3), 0);
    const char *empty[] = {NULL};
    ck_assert_int_eq(sl_metrics_sample(m, &f, empty, 4), 0);
    char *text = take(m);
    ck_assert_str_eq(text, "# HELP sluice_skipped_total back\\\\slash\\nand newline\n"
                           "# TYPE sluice_skipped_total counter\n"
                           "sluice_skipped_total{reason=\"quote\\\"back\\\\slash\\nnewline\"} 3\n"
                           "sluice_skipped_total{reason=\"\"} 4\n");
    free(text);
    sl_metrics_free(m);
}
END_TEST

START_TEST(test_values)
{
    sl_metrics_t *m = sl_metrics_new(1 << 20);
    ck_assert_int_eq(sl_metrics_family(m, &RATIO), 0);
    const char *j[] = {"1"};
    ck_assert_int_eq(sl_metrics_sample(m, &RATIO, j, 0.123456), 0);
    ck_assert_int_eq(sl_metrics_sample(m, &RATIO, j, NAN), 0);
    ck_assert_int_eq(sl_metrics_sample(m, &RATIO, j, INFINITY), 0);
    ck_assert_int_eq(sl_metrics_sample(m, &RATIO, j, -INFINITY), 0);
    ck_assert_int_eq(sl_metrics_sample(m, &RATIO, j, 1e20), 0);
    char *text = take(m);
    const char *want = "sluice_ratio{job=\"1\"} 0.1235\n"
                       "sluice_ratio{job=\"1\"} NaN\n"
                       "sluice_ratio{job=\"1\"} +Inf\n"
                       "sluice_ratio{job=\"1\"} -Inf\n"
                       "sluice_ratio{job=\"1\"} 100000000000000000000.0000\n";
    ck_assert_msg(strstr(text, want) != NULL, "%s", text);
    free(text);
    sl_metrics_free(m);
}
END_TEST

/* The format wants a family's samples after its HELP and TYPE, and names it
 * can parse: anything else fails the exposition. */
START_TEST(test_refusals)
{
    sl_metrics_t *m = sl_metrics_new(1 << 20);
    ck_assert_int_eq(sl_metrics_sample(m, &UP, NULL, 1), -EINVAL);
    char *text = NULL;
    ck_assert_int_eq(sl_metrics_take(m, &text, NULL), -EINVAL);
    ck_assert_ptr_null(text);
    sl_metrics_free(m);

    m = sl_metrics_new(1 << 20);
    ck_assert_int_eq(sl_metrics_family(m, &UP), 0);
    ck_assert_int_eq(sl_metrics_sample(m, &LOAD, NULL, 1), -EINVAL);
    sl_metrics_free(m);

    static const sl_metric_t bad[] = {
        {"9lives", SL_METRIC_GAUGE, "", {NULL}, 0},
        {"sluice-dash", SL_METRIC_GAUGE, "", {NULL}, 0},
        {"", SL_METRIC_GAUGE, "", {NULL}, 0},
        {"sluice_ok", SL_METRIC_GAUGE, "", {"a:b"}, 0},
        {"sluice_ok", SL_METRIC_GAUGE, "", {"job", "0x"}, 0},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        m = sl_metrics_new(1 << 20);
        ck_assert_int_eq(sl_metrics_family(m, &bad[i]), -EINVAL);
        sl_metrics_free(m);
    }
    static const sl_metric_t colon = {"sluice:rule", SL_METRIC_GAUGE, "", {NULL}, 0};
    m = sl_metrics_new(1 << 20);
    ck_assert_int_eq(sl_metrics_family(m, &colon), 0);
    sl_metrics_free(m);
}
END_TEST

/* Past the bound nothing is written and nothing is handed out: a scrape
 * gets an error, never a cut exposition. */
START_TEST(test_bound)
{
    static const char head[] = "# HELP sluice_up 1 when up.\n# TYPE sluice_up gauge\n";
    size_t line = strlen("sluice_up 1\n");
    sl_metrics_t *m = sl_metrics_new(strlen(head) + 2 * line);
    ck_assert_int_eq(sl_metrics_family(m, &UP), 0);
    ck_assert_int_eq(sl_metrics_sample(m, &UP, NULL, 1), 0);
    ck_assert_int_eq(sl_metrics_sample(m, &UP, NULL, 1), 0); /* exactly at the bound */
    char *text = take(m);
    ck_assert_uint_eq(strlen(text), strlen(head) + 2 * line);
    free(text);
    sl_metrics_free(m);

    m = sl_metrics_new(strlen(head) + 2 * line);
    ck_assert_int_eq(sl_metrics_family(m, &UP), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(sl_metrics_sample(m, &UP, NULL, 1), 0);
    }
    ck_assert_int_eq(sl_metrics_sample(m, &UP, NULL, 1), -EMSGSIZE);
    ck_assert_int_eq(sl_metrics_family(m, &LOAD), -EMSGSIZE); /* it sticks */
    text = NULL;
    ck_assert_int_eq(sl_metrics_take(m, &text, NULL), -EMSGSIZE);
    ck_assert_ptr_null(text);
    sl_metrics_free(m);

    /* Growth past the first allocation, well within the bound. */
    m = sl_metrics_new(1 << 20);
    ck_assert_int_eq(sl_metrics_family(m, &RATIO), 0);
    for (int i = 0; i < 2000; i++) {
        const char *j[] = {"12345"};
        ck_assert_int_eq(sl_metrics_sample(m, &RATIO, j, i), 0);
    }
    text = take(m);
    ck_assert_ptr_nonnull(strstr(text, "sluice_ratio{job=\"12345\"} 1999.0000\n"));
    free(text);
    sl_metrics_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_families_and_samples);
    tcase_add_test(tc, test_escaping);
    tcase_add_test(tc, test_values);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_bound);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
