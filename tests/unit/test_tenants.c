/* The tenants file (common/base/tenants.h): names, tokens, limits, and
 * errors that name file:line. */
#include <check.h>
#include <string.h>

#include "common/base/tenants.h"
#include "tests/unit/fixtures.h"

START_TEST(test_parse_ok)
{
    sl_tenants_t ts;
    char err[256] = "";
    const char *text = "# teams\n"
                       "\n"
                       "vision  tok-vision-0123456789  max_jobs=4 max_buffered_mb=2048\n"
                       "speech\ttok-speech-0123456789   # a comment\r\n";
    ck_assert_msg(sl_tenants_parse("t", text, &ts, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(ts.n, 2);
    const sl_tenant_t *v = sl_tenants_find(&ts, "vision");
    ck_assert_ptr_nonnull(v);
    ck_assert_str_eq(v->token, "tok-vision-0123456789");
    ck_assert_uint_eq(v->max_jobs, 4);
    ck_assert_uint_eq(v->max_buffered_bytes, 2048ull << 20);
    const sl_tenant_t *s = sl_tenants_find(&ts, "speech");
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s->token, "tok-speech-0123456789");
    ck_assert_uint_eq(s->max_jobs, 0);
    ck_assert_ptr_null(sl_tenants_find(&ts, "nlp"));
    ck_assert_int_eq(sl_tenants_parse("t", "", &ts, err, sizeof(err)), 0);
    ck_assert_uint_eq(ts.n, 0);
}
END_TEST

START_TEST(test_parse_errors)
{
    sl_tenants_t ts = {.n = 7};
    char err[256] = "";
    static const struct {
        const char *text, *want;
    } BAD[] = {
        {"a\n", "t:1: expected NAME TOKEN"},
        {"\n\nbad/name tok-0123456789abcdef\n", "t:3: name"},
        {"a short\n", "t:1: tenant \"a\": token"},
        {"a tok-0123456789abcdef max_jobs=x\n", "t:1: tenant \"a\": unknown"},
        {"a tok-0123456789abcdef max_jobs=5000\n", "out-of-range"},
        {"a tok-0123456789abcdef\nb tok-0123456789abcdef\n", "t:2: tenant \"b\": name or token"},
        {"a tok-0123456789abcdef\na tok-x123456789abcdef\n", "already used by \"a\""},
    };
    for (size_t i = 0; i < sizeof(BAD) / sizeof(BAD[0]); i++) {
        ck_assert_int_ne(sl_tenants_parse("t", BAD[i].text, &ts, err, sizeof(err)), 0);
        ck_assert_msg(strstr(err, BAD[i].want) != NULL, "%zu: %s", i, err);
        ck_assert_uint_eq(ts.n, 7); /* untouched on failure */
    }
    ck_assert_int_ne(sl_tenants_load("/nonexistent/tenants", &ts, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/tenants"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tenants");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_parse_ok);
    tcase_add_test(tc, test_parse_errors);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
