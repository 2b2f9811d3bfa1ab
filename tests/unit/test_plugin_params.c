/* The params helpers of the public plugin header (sluice_plugin.h,
 * sluice_plugin_param_*): what a plugin reads from its params text without
 * a JSON library, on canonical params and on malformed or hostile ones. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/plugin/sluice_plugin.h"
#include "tests/unit/fixtures.h"

#define P(s) (s), strlen(s)

static int num(const char *params, const char *key, double *v)
{
    return sluice_plugin_param_number(params, strlen(params), key, v);
}

static int int64(const char *params, const char *key, int64_t *v)
{
    return sluice_plugin_param_int(params, strlen(params), key, v);
}

START_TEST(test_canonical)
{
    /* What the spec hands a plugin: compact, keys sorted. */
    const char *p = "{\"name\":\"a \\\"b\\\"\\n\",\"on\":true,\"p\":0.25,\"size\":12,"
                    "\"sub\":{\"size\":99},\"value\":-3e2}";
    double d = -1;
    int64_t i = -1;
    int b = -1;
    char s[16];
    ck_assert_int_eq(num(p, "p", &d), 0);
    ck_assert(d == 0.25);
    ck_assert_int_eq(num(p, "size", &d), 0); /* an integer is a number too */
    ck_assert(d == 12);
    ck_assert_int_eq(num(p, "value", &d), 0);
    ck_assert(d == -300);
    ck_assert_int_eq(int64(p, "size", &i), 0);
    ck_assert_int_eq(i, 12);
    ck_assert_int_eq(sluice_plugin_param_bool(P(p), "on", &b), 0);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(sluice_plugin_param_string(P(p), "name", s, sizeof(s)), 0);
    ck_assert_str_eq(s, "a \"b\"\n");
    ck_assert_int_eq(sluice_plugin_param_bool(P("{\"x\":false}"), "x", &b), 0);
    ck_assert_int_eq(b, 0);
    ck_assert_int_eq(num("{}", "p", &d), -ENOENT);
    /* White space as JSON allows, anywhere between tokens. */
    ck_assert_int_eq(num(" \t\n{ \"p\" :\r 1.5e-1 , \"q\" : [ 1 , { } , [ ] ] } \n", "p", &d), 0);
    ck_assert(d == 0.15);
}
END_TEST

START_TEST(test_missing_keeps_the_default)
{
    double d = 7;
    int64_t i = 7;
    int b = 7;
    char s[8] = "keep";
    const char *p = "{\"other\":1}";
    ck_assert_int_eq(num(p, "p", &d), -ENOENT);
    ck_assert_int_eq(int64(p, "p", &i), -ENOENT);
    ck_assert_int_eq(sluice_plugin_param_bool(P(p), "p", &b), -ENOENT);
    ck_assert_int_eq(sluice_plugin_param_string(P(p), "p", s, sizeof(s)), -ENOENT);
    ck_assert(d == 7 && i == 7 && b == 7);
    ck_assert_str_eq(s, "keep");
}
END_TEST

/* Only top-level keys match: a key's name as a string value, inside a
 * nested object or array, or as a prefix of a longer key never does. */
START_TEST(test_only_top_level_keys)
{
    double d = 0;
    ck_assert_int_eq(num("{\"a\":\"size\",\"b\":{\"size\":3},\"c\":[{\"size\":4}]}", "size", &d),
                     -ENOENT);
    ck_assert_int_eq(num("{\"sizes\":1,\"siz\":2}", "size", &d), -ENOENT);
    ck_assert_int_eq(num("{\"size\\\"\":1}", "size", &d), -ENOENT);
    /* A key found after a nested value with the same key in it. */
    ck_assert_int_eq(num("{\"a\":{\"size\":3,\"x\":{\"size\":[1,2]}},\"size\":5}", "size", &d), 0);
    ck_assert(d == 5);
    /* Escaped keys decode before they are compared. */
    ck_assert_int_eq(num("{\"si\\u007ae\":6}", "size", &d), 0);
    ck_assert(d == 6);
    ck_assert_int_eq(num("{\"\\u00e9t\\u00e9\":2}", "\xc3\xa9t\xc3\xa9", &d), 0);
    ck_assert(d == 2);
    ck_assert_int_eq(num("{\"k\\ud83d\\ude00\":3}", "k\xf0\x9f\x98\x80", &d), 0);
    ck_assert(d == 3);
}
END_TEST

START_TEST(test_wrong_types)
{
    double d = 1;
    int64_t i = 1;
    int b = 1;
    char s[8] = "keep";
    const char *p = "{\"n\":null,\"s\":\"3\",\"t\":true,\"o\":{},\"a\":[1],\"r\":12.0,\"e\":1e2}";
    const char *keys[] = {"n", "s", "t", "o", "a"};
    for (int k = 0; k < 5; k++) {
        ck_assert_int_eq(num(p, keys[k], &d), -EINVAL);
        ck_assert_int_eq(int64(p, keys[k], &i), -EINVAL);
    }
    ck_assert_int_eq(int64(p, "r", &i), -EINVAL); /* a real, as jansson's "I" says */
    ck_assert_int_eq(int64(p, "e", &i), -EINVAL);
    ck_assert_int_eq(num(p, "e", &d), 0);
    ck_assert(d == 100);
    ck_assert_int_eq(sluice_plugin_param_bool(P(p), "s", &b), -EINVAL);
    ck_assert_int_eq(sluice_plugin_param_bool(P(p), "n", &b), -EINVAL);
    ck_assert_int_eq(sluice_plugin_param_bool(P("{\"b\":1}"), "b", &b), -EINVAL);
    ck_assert_int_eq(sluice_plugin_param_string(P(p), "t", s, sizeof(s)), -EINVAL);
    ck_assert_int_eq(sluice_plugin_param_string(P(p), "n", s, sizeof(s)), -EINVAL);
    ck_assert_int_eq(sluice_plugin_param_string(P(p), "s", NULL, 0), -EINVAL);
    ck_assert(d == 100 && i == 1 && b == 1);
    ck_assert_str_eq(s, "keep");
}
END_TEST

START_TEST(test_ranges)
{
    double d = 0;
    int64_t i = 0;
    char s[4] = "xyz";
    ck_assert_int_eq(int64("{\"i\":9223372036854775807}", "i", &i), 0);
    ck_assert(i == INT64_MAX);
    ck_assert_int_eq(int64("{\"i\":-9223372036854775808}", "i", &i), 0);
    ck_assert(i == INT64_MIN);
    ck_assert_int_eq(int64("{\"i\":9223372036854775808}", "i", &i), -ERANGE);
    ck_assert_int_eq(int64("{\"i\":-99999999999999999999}", "i", &i), -ERANGE);
    ck_assert(i == INT64_MIN);
    ck_assert_int_eq(num("{\"d\":1e999}", "d", &d), -ERANGE);
    ck_assert_int_eq(num("{\"d\":-1e999}", "d", &d), -ERANGE);
    ck_assert_int_eq(num("{\"d\":1e-999}", "d", &d), 0); /* rounds to 0 */
    ck_assert(d == 0);
    ck_assert_int_eq(num("{\"d\":-0}", "d", &d), 0);
    /* A string that does not fit (with its NUL): buf untouched. */
    ck_assert_int_eq(sluice_plugin_param_string(P("{\"s\":\"abcd\"}"), "s", s, sizeof(s)), -ENOSPC);
    ck_assert_str_eq(s, "xyz");
    ck_assert_int_eq(sluice_plugin_param_string(P("{\"s\":\"abc\"}"), "s", s, sizeof(s)), 0);
    ck_assert_str_eq(s, "abc");
    ck_assert_int_eq(sluice_plugin_param_string(P("{\"s\":\"\\u00e9\\u00e9\"}"), "s", s, sizeof(s)),
                     -ENOSPC); /* 4 bytes decoded */
    /* Numbers of more than 63 characters are refused (bounded copy). */
    char big[128];
    snprintf(big, sizeof(big), "{\"d\":0.%061d1}", 0);
    ck_assert_int_eq(num(big, "d", &d), -EINVAL);
    snprintf(big, sizeof(big), "{\"d\":0.%060d1}", 0);
    ck_assert_int_eq(num(big, "d", &d), 0);
    /* Keys longer than SLUICE_PLUGIN_PARAMS_KEY_MAX: never matched. */
    char key[80], obj[200];
    memset(key, 'k', 70);
    key[70] = '\0';
    snprintf(obj, sizeof(obj), "{\"%s\":1,\"%.64s\":2}", key, key);
    ck_assert_int_eq(num(obj, key, &d), -EINVAL); /* a key too long to look for */
    key[64] = '\0';
    ck_assert_int_eq(num(obj, key, &d), 0);
    ck_assert(d == 2);
}
END_TEST

/* Anything not one well-formed object is -EINVAL, whichever key is
 * asked for, and never read past len. */
START_TEST(test_malformed)
{
    static const char *const bad[] = {
        "",
        "   ",
        "[]",
        "\"p\"",
        "1",
        "null",
        "{",
        "}",
        "{\"p\"}",
        "{\"p\":}",
        "{\"p\":1,}",
        "{,\"p\":1}",
        "{\"p\":1}}",
        "{\"p\":1} x",
        "{\"p\":1 \"q\":2}",
        "{p:1}",
        "{'p':1}",
        "{\"p\":01}",
        "{\"p\":1.}",
        "{\"p\":.5}",
        "{\"p\":+1}",
        "{\"p\":-}",
        "{\"p\":1e}",
        "{\"p\":0x10}",
        "{\"p\":NaN}",
        "{\"p\":Infinity}",
        "{\"p\":tru}",
        "{\"p\":True}",
        "{\"p\":nul}",
        "{\"p\":\"a}",
        "{\"p\":\"\\x41\"}",
        "{\"p\":\"\\u12\"}",
        "{\"p\":\"\\u0000\"}",
        "{\"p\":\"\\ud800\"}",
        "{\"p\":\"\\udc00\"}",
        "{\"p\":\"\\ud800\\u0041\"}",
        "{\"p\":\"a\tb\"}",
        "{\"p\":\"\xc3\"}",
        "{\"p\":\"\xc0\xaf\"}",
        "{\"p\":\"\xed\xa0\x80\"}",
        "{\"p\":\"\xf4\x90\x80\x80\"}",
        "{\"p\":\"\x80\"}",
        "{\"p\":[1,2}",
        "{\"p\":{\"a\":1]}",
        "{\"p\":{\"a\"}}",
        "{\"p\":{1:2}}",
        "{\"p\":[1,]}",
        "{\"p\":1,\"p\":2}",
        "{\"q\":1,\"q\"}",
        "{\"x\":[,]}",
        "{\"x\":{,}}",
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        double d = 42;
        ck_assert_msg(num(bad[k], "p", &d) == -EINVAL, "%s", bad[k]);
        /* A key twice is the asked key's concern only (params_check: any). */
        ck_assert_msg(num(bad[k], "zz", &d) == (strstr(bad[k], "\"p\":2") ? -ENOENT : -EINVAL),
                      "%s (another key)", bad[k]);
        ck_assert(d == 42);
    }
    double d = 0;
    /* A NUL inside len; len shorter than the text. */
    ck_assert_int_eq(sluice_plugin_param_number("{\"p\":1}\0", 8, "p", &d), -EINVAL);
    ck_assert_int_eq(sluice_plugin_param_number("{\"p\":12}", 6, "p", &d), -EINVAL);
    ck_assert_int_eq(sluice_plugin_param_number("{\"p\":12}xyz", 8, "p", &d), 0);
    ck_assert(d == 12);
    ck_assert_int_eq(sluice_plugin_param_number(NULL, 0, "p", &d), -EINVAL);
    /* The one in the middle of a string is not the end. */
    ck_assert_int_eq(sluice_plugin_param_number("{\"s\":\"}\",\"p\":3}", 15, "p", &d), 0);
    ck_assert(d == 3);
}
END_TEST

/* Nesting is bounded (no recursion either way): 32 levels with the
 * params object itself, deeper is refused; a long flat array is fine. */
START_TEST(test_depth_and_size)
{
    char buf[4096];
    double d = 0;
    for (int depth = 30; depth <= 33; depth++) {
        size_t n = (size_t)snprintf(buf, sizeof(buf), "{\"x\":");
        for (int k = 0; k < depth - 1; k++) {
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, k % 2 ? "{\"a\":" : "[");
        }
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "1");
        for (int k = depth - 2; k >= 0; k--) {
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, k % 2 ? "}" : "]");
        }
        snprintf(buf + n, sizeof(buf) - n, ",\"p\":%d}", depth);
        int rc = num(buf, "p", &d);
        ck_assert_msg(rc == (depth <= SLUICE_PLUGIN_PARAMS_DEPTH ? 0 : -EINVAL), "depth %d: %d",
                      depth, rc);
    }
    ck_assert(d == SLUICE_PLUGIN_PARAMS_DEPTH);
    /* 100000 levels of '[': refused, without a stack overflow. */
    char *deep = malloc(200010);
    ck_assert_ptr_nonnull(deep);
    memcpy(deep, "{\"x\":", 5);
    memset(deep + 5, '[', 100000);
    memset(deep + 100005, ']', 100000);
    memcpy(deep + 200005, "}", 2);
    ck_assert_int_eq(num(deep, "x", &d), -EINVAL);
    free(deep);
    /* A wide array and a long string: no limit but len. */
    size_t n = (size_t)snprintf(buf, sizeof(buf), "{\"a\":[");
    for (int k = 0; k < 500; k++) {
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%d", k ? "," : "", k);
    }
    snprintf(buf + n, sizeof(buf) - n, "],\"p\":2.5}");
    ck_assert_int_eq(num(buf, "p", &d), 0);
    ck_assert(d == 2.5);
}
END_TEST

START_TEST(test_check_keys)
{
    static const char *const keys[] = {"size", "p", "value", NULL};
    char err[256];
    ck_assert_int_eq(sluice_plugin_params_check(P("{}"), keys, err, sizeof(err)), 0);
    ck_assert_int_eq(sluice_plugin_params_check(P("{\"p\":0.5,\"size\":3}"), keys, err,
                                                sizeof(err)),
                     0);
    ck_assert_int_eq(sluice_plugin_params_check(P("{\"p\":1,\"sise\":3}"), keys, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "params: unknown key \"sise\" (keys: size, p, value)");
    ck_assert_int_eq(sluice_plugin_params_check(P("{\"a\\nb\":1}"), keys, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "params: unknown key \"a?b\" (keys: size, p, value)");
    ck_assert_int_eq(sluice_plugin_params_check(P("{\"p\":1,\"p\":1}"), keys, err, sizeof(err)),
                     -EINVAL);
    ck_assert_str_eq(err, "params: \"p\" given twice");
    ck_assert_int_eq(sluice_plugin_params_check(P("{\"p\":[}"), keys, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "params: not a well-formed JSON object") != NULL, "%s", err);
    ck_assert_int_eq(sluice_plugin_params_check(P("{\"x\":1}"), keys, NULL, 0), -EINVAL);
    /* Nested keys are not checked: they are the value's business. */
    ck_assert_int_eq(sluice_plugin_params_check(P("{\"p\":{\"zz\":1}}"), keys, err, sizeof(err)),
                     0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plugin_params");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_canonical);
    tcase_add_test(tc, test_missing_keeps_the_default);
    tcase_add_test(tc, test_only_top_level_keys);
    tcase_add_test(tc, test_wrong_types);
    tcase_add_test(tc, test_ranges);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_depth_and_size);
    tcase_add_test(tc, test_check_keys);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
