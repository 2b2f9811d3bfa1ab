/* test_url_pins: the client's one version per URL object
 * (client/lib/url_pins.h, docs/sources.md "One version per job"):
 *  - the table: a first read pins, the same validator passes, another is
 *    CHANGED (and a sample that differs pins none of its URLs), a saved pin
 *    differing is SAVED; the bound: URLs past it are unpinned and counted;
 *  - save/load: the hex round trip, and every broken saved table refused
 *    with the table left as it was (truncated, not hex, upper case, zero
 *    hash or validator, over the bound, a URL with two validators);
 *  - in a real resume state (sluice_state_save / resume_states over a
 *    local imagefolder job): the pins travel as "url_pins", a resumed job
 *    judges against them, a state whose table is broken (re-signed, so the
 *    checksum passes) is refused at open naming the table. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/sluice.h"
#include "client/lib/url_pins.h"
#include "common/base/log.h"
#include "common/base/sha256.h"
#include "tests/unit/fixtures.h"

static sl_url_vers_t vers2(uint64_t u1, uint64_t t1, uint64_t u2, uint64_t t2)
{
    sl_url_vers_t v = {0};
    ck_assert_int_eq(sl_url_vers_add(&v, u1, t1), 0);
    if (u2 != 0) {
        ck_assert_int_eq(sl_url_vers_add(&v, u2, t2), 0);
    }
    return v;
}

static cl_upins_verdict_e judge(cl_upins_t *p, sl_url_vers_t v, uint32_t *at, uint64_t *pinned)
{
    return cl_upins_check(p, &v, at, pinned);
}

START_TEST(test_first_pin_same_other)
{
    cl_upins_t *p;
    ck_assert_int_eq(cl_upins_new(0, &p), 0);
    uint32_t at = 99;
    uint64_t pinned = 0;
    ck_assert_int_eq(judge(p, vers2(11, 100, 0, 0), &at, &pinned), CL_UPINS_OK);
    ck_assert_uint_eq(cl_upins_count(p), 1);
    ck_assert_int_eq(judge(p, vers2(11, 100, 0, 0), &at, &pinned), CL_UPINS_OK);
    ck_assert_int_eq(judge(p, vers2(11, 101, 0, 0), &at, &pinned), CL_UPINS_CHANGED);
    ck_assert_uint_eq(at, 0);
    ck_assert_uint_eq(pinned, 100);
    /* A sample with a new URL and a changed one: a skip, the new one not
     * pinned (its bytes were not delivered). */
    ck_assert_int_eq(judge(p, vers2(12, 200, 11, 102), &at, &pinned), CL_UPINS_CHANGED);
    ck_assert_uint_eq(at, 1);
    ck_assert_uint_eq(cl_upins_count(p), 1);
    ck_assert_int_eq(judge(p, vers2(12, 201, 11, 100), &at, &pinned), CL_UPINS_OK);
    ck_assert_int_eq(judge(p, vers2(12, 200, 0, 0), &at, &pinned), CL_UPINS_CHANGED);
    ck_assert_uint_eq(pinned, 201);
    /* Many URLs: the table grows past its first size and keeps them all. */
    for (uint64_t u = 1000; u < 5000; u++) {
        ck_assert_int_eq(judge(p, vers2(u, u * 7, 0, 0), &at, &pinned), CL_UPINS_OK);
    }
    for (uint64_t u = 1000; u < 5000; u++) {
        ck_assert_int_eq(judge(p, vers2(u, u * 7 + 1, 0, 0), &at, &pinned), CL_UPINS_CHANGED);
    }
    ck_assert_uint_eq(cl_upins_count(p), 4002);
    ck_assert_uint_eq(cl_upins_unpinned(p), 0);
    cl_upins_free(p);
}
END_TEST

START_TEST(test_bound)
{
    cl_upins_t *p;
    ck_assert_int_eq(cl_upins_new(3, &p), 0);
    uint32_t at;
    uint64_t pinned;
    for (uint64_t u = 1; u <= 3; u++) {
        ck_assert_int_eq(judge(p, vers2(u, 50, 0, 0), &at, &pinned), CL_UPINS_OK);
    }
    /* Full: a fourth URL is delivered unchecked and counted, every time. */
    ck_assert_int_eq(judge(p, vers2(4, 50, 0, 0), &at, &pinned), CL_UPINS_OK);
    ck_assert_int_eq(judge(p, vers2(4, 51, 0, 0), &at, &pinned), CL_UPINS_OK);
    ck_assert_uint_eq(cl_upins_count(p), 3);
    ck_assert_uint_eq(cl_upins_unpinned(p), 2);
    /* The pinned ones are still held. */
    ck_assert_int_eq(judge(p, vers2(2, 51, 0, 0), &at, &pinned), CL_UPINS_CHANGED);
    /* A saved table over the bound is refused. */
    cl_upins_t *q;
    ck_assert_int_eq(cl_upins_new(2, &q), 0);
    char *hex;
    size_t len;
    ck_assert_int_eq(cl_upins_save(p, &hex, &len), 0);
    char err[256] = "";
    ck_assert_int_eq(cl_upins_load(q, hex, len, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "more than 2"));
    ck_assert_uint_eq(cl_upins_count(q), 0);
    /* Two states whose union is over the bound: what fits, the rest unpinned. */
    ck_assert_int_eq(cl_upins_load(q, hex, 2 * CL_UPINS_HEX, err, sizeof(err)), 0);
    ck_assert_int_eq(cl_upins_load(q, hex + CL_UPINS_HEX, 2 * CL_UPINS_HEX, err, sizeof(err)), 0);
    ck_assert_uint_eq(cl_upins_count(q), 2);
    ck_assert_uint_eq(cl_upins_unpinned(q), 1);
    free(hex);
    cl_upins_free(q);
    cl_upins_free(p);
}
END_TEST

START_TEST(test_save_load_round_trip)
{
    cl_upins_t *p, *q;
    ck_assert_int_eq(cl_upins_new(0, &p), 0);
    ck_assert_int_eq(cl_upins_new(0, &q), 0);
    uint32_t at;
    uint64_t pinned;
    ck_assert_int_eq(judge(p, vers2(0xfedcba9876543210ULL, 0x0123456789abcdefULL, 7, 8), &at,
                           &pinned),
                     CL_UPINS_OK);
    char *hex;
    size_t len;
    ck_assert_int_eq(cl_upins_save(p, &hex, &len), 0);
    ck_assert_uint_eq(len, 2 * CL_UPINS_HEX);
    ck_assert_uint_eq(strlen(hex), len);
    ck_assert_ptr_nonnull(strstr(hex, "fedcba98765432100123456789abcdef"));
    char err[256];
    ck_assert_int_eq(cl_upins_load(q, hex, len, err, sizeof(err)), 0);
    /* Loading the same pins again (another rank's state) adds nothing. */
    ck_assert_int_eq(cl_upins_load(q, hex, len, err, sizeof(err)), 0);
    ck_assert_uint_eq(cl_upins_count(q), 2);
    /* Saved: the same validator passes, another is the resume's refusal. */
    ck_assert_int_eq(judge(q, vers2(7, 8, 0, 0), &at, &pinned), CL_UPINS_OK);
    ck_assert_int_eq(judge(q, vers2(0xfedcba9876543210ULL, 5, 0, 0), &at, &pinned), CL_UPINS_SAVED);
    ck_assert_uint_eq(pinned, 0x0123456789abcdefULL);
    /* One this run pinned is CHANGED, not SAVED. */
    ck_assert_int_eq(judge(q, vers2(9, 1, 0, 0), &at, &pinned), CL_UPINS_OK);
    ck_assert_int_eq(judge(q, vers2(9, 2, 0, 0), &at, &pinned), CL_UPINS_CHANGED);
    /* Saved again, the table holds both runs' pins. */
    char *hex2;
    size_t len2;
    ck_assert_int_eq(cl_upins_save(q, &hex2, &len2), 0);
    ck_assert_uint_eq(len2, 3 * CL_UPINS_HEX);
    free(hex2);
    free(hex);
    cl_upins_free(q);
    cl_upins_free(p);
}
END_TEST

/* hex refused with err containing want; the table keeps its one pin. */
static void refused(const char *hex, int rc, const char *want)
{
    cl_upins_t *p;
    ck_assert_int_eq(cl_upins_new(0, &p), 0);
    char err[256] = "";
    const char *one = "00000000000000070000000000000008";
    ck_assert_int_eq(cl_upins_load(p, one, strlen(one), err, sizeof(err)), 0);
    ck_assert_int_eq(cl_upins_load(p, hex, strlen(hex), err, sizeof(err)), rc);
    ck_assert_msg(strstr(err, want) != NULL, "'%s' lacks '%s'", err, want);
    ck_assert_uint_eq(cl_upins_count(p), 1);
    cl_upins_free(p);
}

START_TEST(test_broken_saved_tables)
{
    const char *ok = "00000000000000010000000000000002";
    char buf[256];
    snprintf(buf, sizeof(buf), "%s%.31s", ok, ok); /* a pin cut short */
    refused(buf, -EINVAL, "not a whole number");
    refused("0000000000000001000000000000000g", -EINVAL, "not a lowercase hex digit");
    refused("00000000000000010000000000000A02", -EINVAL, "not a lowercase hex digit");
    refused("0000000000000001 000000000000002", -EINVAL, "not a lowercase hex digit");
    refused("00000000000000000000000000000002", -EINVAL, "zero URL hash or validator");
    refused("00000000000000010000000000000000", -EINVAL, "zero URL hash or validator");
    /* Two validators for one URL: within the text, and against the table. */
    snprintf(buf, sizeof(buf), "%s%s", ok, "00000000000000010000000000000003");
    refused(buf, -ESTALE, "pinned to two versions");
    refused("00000000000000070000000000000009", -ESTALE, "pinned to two versions");
    /* A good pin before a bad one: nothing of it is loaded either. */
    snprintf(buf, sizeof(buf), "%s%s", ok, "0000000000000003000000000000000Z");
    refused(buf, -EINVAL, "pin 1");
}
END_TEST

/* ---- in a real resume state ----------------------------------------- */

#define SPEC                                                                                       \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 3},"                  \
    " \"stages\": [{\"op\": \"decode_jpeg\"}], \"batch_size\": 4, \"epochs\": 2}"

static char g_root[FX_TMPDIR_LEN];

static void setup(void)
{
    sl_log_set_level(LOG_CRIT);
    ck_assert_int_eq(fx_mkdtemp(g_root), 0);
    ck_assert_int_eq(fx_make_imagefolder(g_root, 12, 16, 16), 0);
}

static void teardown(void) { fx_rmtree(g_root); }

/* Opens the spec (resuming from state when not NULL): 0 and *ret, or the
 * open's code with err filled. */
static int open_job(const char *state, sluice_job_t **ret, char *err, size_t errlen)
{
    sluice_options_t o = {.data_root = g_root, .threads = 1};
    size_t len = state != NULL ? strlen(state) : 0;
    const char *states[1] = {state};
    if (state != NULL) {
        o.resume_states = states;
        o.resume_state_lens = &len;
        o.n_resume_states = 1;
    }
    return sluice_open_json(SPEC, strlen(SPEC), "t", &o, ret, err, errlen);
}

/* A state of a job that took one batch and pinned URLs 21 -> 210, 22 -> 220. */
static char *saved_state(void)
{
    sluice_job_t *job = NULL;
    char err[512] = "";
    ck_assert_msg(open_job(NULL, &job, err, sizeof(err)) == 0, "%s", err);
    sluice_batch_t *b = NULL;
    ck_assert_int_eq(sluice_next_batch(job, &b), 0);
    sluice_release_batch(job, b);
    uint32_t at;
    uint64_t pinned;
    ck_assert_int_eq(judge(job->pins, vers2(21, 210, 22, 220), &at, &pinned), CL_UPINS_OK);
    char *st;
    size_t stlen;
    ck_assert_int_eq(sluice_state_save(job, &st, &stlen), 0);
    sluice_close(job);
    return st;
}

/* state with its url_pins value replaced by pins, signed again (a plain
 * sha256 state), so only the table is wrong. malloc'd. */
static char *with_pins(const char *state, const char *pins)
{
    const char *key = strstr(state, "\"url_pins\":\"");
    ck_assert_ptr_nonnull(key);
    const char *v = key + strlen("\"url_pins\":\"");
    const char *end = strchr(v, '"');
    const char *mac = strstr(state, "\nsha256 ");
    ck_assert_ptr_nonnull(mac);
    size_t cap = strlen(state) + strlen(pins) + 128;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    int n = snprintf(out, cap, "%.*s%s%.*s\n", (int)(v - state), state, pins, (int)(mac - end),
                     end);
    char hex[65];
    sl_sha256_hex(out, (size_t)n, hex);
    snprintf(out + n, cap - (size_t)n, "sha256 %s\n", hex);
    return out;
}

START_TEST(test_state_round_trip)
{
    char *st = saved_state();
    ck_assert_ptr_nonnull(strstr(st, "\"url_pins\":\"0000000000000015"));
    sluice_job_t *job = NULL;
    char err[512] = "";
    ck_assert_msg(open_job(st, &job, err, sizeof(err)) == 0, "%s", err);
    uint64_t pinned_n, unpinned_n;
    sluice_url_pins(job, &pinned_n, &unpinned_n);
    ck_assert_uint_eq(pinned_n, 2);
    ck_assert_uint_eq(unpinned_n, 0);
    uint32_t at;
    uint64_t pinned;
    ck_assert_int_eq(judge(job->pins, vers2(22, 220, 0, 0), &at, &pinned), CL_UPINS_OK);
    ck_assert_int_eq(judge(job->pins, vers2(21, 211, 0, 0), &at, &pinned), CL_UPINS_SAVED);
    sluice_close(job);
    sluice_state_free(st);
}
END_TEST

START_TEST(test_state_broken_table_refused)
{
    char *st = saved_state();
    const char *v = strstr(st, "\"url_pins\":\"") + strlen("\"url_pins\":\"");
    char good[2 * CL_UPINS_HEX + 1];
    snprintf(good, sizeof(good), "%.*s", 2 * CL_UPINS_HEX, v);
    char *again = with_pins(st, good); /* re-signed, the same table: accepted */
    sluice_job_t *job = NULL;
    char err[512] = "";
    ck_assert_msg(open_job(again, &job, err, sizeof(err)) == 0, "%s", err);
    sluice_close(job);
    free(again);
    struct {
        const char *pins, *want;
    } bad[] = {
        {"000000000000001500000000000000d", "state 0: damaged: url_pins: 31 characters"},
        {"0000000000000015000000000000000x", "state 0: damaged: url_pins: pin 0 has a character"},
        {"00000000000000150000000000000000", "state 0: damaged: url_pins: pin 0 has a zero"},
        {"0000000000000015000000000000000100000000000000150000000000000002",
         "state 0: saved over another source: URL 0000000000000015 is pinned to two"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *b = with_pins(st, bad[i].pins);
        job = NULL;
        err[0] = '\0';
        ck_assert_int_eq(open_job(b, &job, err, sizeof(err)), -EINVAL);
        ck_assert_ptr_null(job);
        ck_assert_msg(strstr(err, bad[i].want) != NULL, "'%s' lacks '%s'", err, bad[i].want);
        free(b);
    }
    sluice_state_free(st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("url_pins");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_first_pin_same_other);
    tcase_add_test(tc, test_bound);
    tcase_add_test(tc, test_save_load_round_trip);
    tcase_add_test(tc, test_broken_saved_tables);
    suite_add_tcase(s, tc);
    TCase *ts = tcase_create("state");
    tcase_add_checked_fixture(ts, setup, teardown);
    tcase_set_timeout(ts, 60);
    tcase_add_test(ts, test_state_round_trip);
    tcase_add_test(ts, test_state_broken_table_refused);
    suite_add_tcase(s, ts);
    return fx_run_suite(s, 0);
}
