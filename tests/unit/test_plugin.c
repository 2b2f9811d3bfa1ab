/* Stage plugins on Sluice's side (common/plugin/plugin.h): the registry of
 * a directory, connections to host processes, a plugin that crashes or
 * hangs, and the plugin unit in a pipeline. Uses the plugins the build
 * makes ($(BUILD)/plugins, $(BUILD)/test-plugins) and its host program. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/engine/pipeline.h"
#include "common/plugin/plugin.h"
#include "tests/unit/fixtures.h"

static char g_build[PATH_MAX]; /* this binary's build directory */

static void find_build(void)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ck_assert_int_gt(n, 0);
    self[n] = '\0';
    *strrchr(self, '/') = '\0'; /* build/tests */
    *strrchr(self, '/') = '\0'; /* build */
    snprintf(g_build, sizeof(g_build), "%s", self);
}

static sl_plugins_t *scan(const char *sub, int timeout_ms)
{
    char dir[PATH_MAX + 32], host[PATH_MAX + 32], err[512];
    snprintf(dir, sizeof(dir), "%s/%s", g_build, sub);
    snprintf(host, sizeof(host), "%s/bin/sluice-plugin-host", g_build);
    sl_plugins_t *p = NULL;
    ck_assert_msg(sl_plugins_scan(dir, host, timeout_ms, &p, err, sizeof(err)) == 0, "%s", err);
    return p;
}

static void image(sl_tensor_t *t, uint32_t h, uint32_t w)
{
    sl_tensor_init(t);
    ck_assert_int_eq(sl_tensor_reshape(t, SL_DT_U8, SL_LAYOUT_HWC, h, w, 3), 0);
    for (size_t i = 0; i < t->nbytes; i++) {
        t->data[i] = (uint8_t)(i * 7);
    }
}

START_TEST(test_registry_lists_the_examples)
{
    find_build();
    sl_plugins_t *p = scan("plugins", 0);
    ck_assert_ptr_nonnull(sl_plugins_find(p, "cutout", NULL));
    const sl_plugin_info_t *y = sl_plugins_find(p, "rgb_to_ycbcr", NULL);
    ck_assert_ptr_nonnull(y);
    ck_assert_str_eq(y->version, "1.0");
    ck_assert_uint_eq(strlen(y->sha256), 64);
    ck_assert_ptr_null(sl_plugins_find(p, "cutout", y->sha256)); /* another file's hash */
    char why[512];
    sl_plugins_why_missing(p, "cutout", why, sizeof(why));
    ck_assert_msg(strstr(why, "(another build)") != NULL, "%s", why);
    sl_plugins_why_missing(NULL, "cutout", why, sizeof(why));
    ck_assert_str_eq(why, "no plugin_dir is configured here");
    char err[256];
    sl_plugins_t *q = NULL;
    ck_assert_int_eq(sl_plugins_scan("/nonexistent-dir", "x", 0, &q, err, sizeof(err)), -ENOENT);
    sl_plugins_free(p);
}
END_TEST

START_TEST(test_process_is_deterministic)
{
    find_build();
    sl_plugins_t *p = scan("plugins", 0);
    const sl_plugin_info_t *cut = sl_plugins_find(p, "cutout", NULL);
    sl_plugin_conn_t *a = NULL, *b = NULL;
    char err[512];
    ck_assert_int_eq(sl_plugin_conn_open(p, cut, "{\"size\": 5}", &a, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_plugin_conn_open(p, cut, "{\"size\": 5}", &b, err, sizeof(err)), 0);
    sl_tensor_t in, o1, o2;
    image(&in, 20, 30);
    sl_tensor_init(&o1);
    sl_tensor_init(&o2);
    uint64_t key[4] = {1, 2, 3, 4};
    ck_assert_int_eq(sl_plugin_conn_process(a, key, &in, &o1, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_plugin_conn_process(b, key, &in, &o2, err, sizeof(err)), 0);
    ck_assert_uint_eq(o1.nbytes, in.nbytes);
    ck_assert_int_eq(memcmp(o1.data, o2.data, o1.nbytes), 0); /* two processes, same bytes */
    ck_assert_int_ne(memcmp(o1.data, in.data, in.nbytes), 0); /* a square was cut */
    sl_plugin_conn_close(b);
    b = NULL;
    ck_assert_int_eq(sl_plugin_conn_open(p, cut, "{\"size\": -1}", &b, err, sizeof(err)),
                     -EINVAL);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(err, "need size 1..4096") != NULL, "%s", err);
    /* cutout reads its params with sluice_plugin.h's helpers, as strictly
     * as it did with jansson: other keys, types and text are refused. */
    const char *bad[][2] = {{"{\"sise\": 5}", "params: unknown key \"sise\" (keys: size, p"},
                            {"{\"size\": \"5\"}", "need size 1..4096"},
                            {"{\"size\": 5.0}", "need size 1..4096"},
                            {"{\"p\": null}", "need size 1..4096"},
                            {"{\"size\": 5, \"size\": 6}", "\"size\" given twice"},
                            {"{\"size\": 5", "not a well-formed JSON object"}};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        ck_assert_int_eq(sl_plugin_conn_open(p, cut, bad[k][0], &b, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, bad[k][1]) != NULL, "%s: %s", bad[k][0], err);
    }
    ck_assert_int_eq(sl_plugin_conn_open(p, cut, "{\"p\": 1, \"size\": 5, \"value\": 255}", &b, err,
                                         sizeof(err)),
                     0);
    sl_plugin_conn_close(b);
    b = NULL;
    sl_plugin_conn_close(a);
    sl_tensor_free(&in);
    sl_tensor_free(&o1);
    sl_tensor_free(&o2);
    sl_plugins_free(p);
}
END_TEST

START_TEST(test_crash_and_hang_are_contained)
{
    find_build();
    sl_plugins_t *p = scan("test-plugins", 300);
    const sl_plugin_info_t *mis = sl_plugins_find(p, "misbehave", NULL);
    ck_assert_ptr_nonnull(mis);
    char err[512];
    sl_tensor_t in, out;
    image(&in, 4, 4);
    sl_tensor_init(&out);
    uint64_t key[4] = {9, 9, 9, 9};
    sl_plugin_conn_t *c = NULL;
    ck_assert_int_eq(
        sl_plugin_conn_open(p, mis, "{\"mode\": \"crash\", \"from\": 1}", &c, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_plugin_conn_process(c, key, &in, &out, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_plugin_conn_process(c, key, &in, &out, err, sizeof(err)), -ECHILD);
    ck_assert_msg(strstr(err, "plugin misbehave crashed (signal 6)") != NULL, "%s", err);
    /* A fresh host for the next sample: its first call works again. */
    ck_assert_int_eq(sl_plugin_conn_process(c, key, &in, &out, err, sizeof(err)), 0);
    sl_plugin_conn_close(c);
    ck_assert_int_eq(
        sl_plugin_conn_open(p, mis, "{\"mode\": \"hang\", \"from\": 0}", &c, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_plugin_conn_process(c, key, &in, &out, err, sizeof(err)), -ECHILD);
    ck_assert_msg(strstr(err, "no answer within 300 ms (killed)") != NULL, "%s", err);
    sl_plugin_conn_close(c);
    /* A plugin writing into the reply stream: a broken frame, the host is
     * ended -- never a hang past the timeout, never bytes taken as pixels. */
    ck_assert_int_eq(
        sl_plugin_conn_open(p, mis, "{\"mode\": \"stdout\", \"from\": 0}", &c, err, sizeof(err)),
        0);
    int rc = sl_plugin_conn_process(c, key, &in, &out, err, sizeof(err));
    ck_assert_msg(rc == -ECHILD || rc == -EBADMSG, "%d %s", rc, err);
    sl_plugin_conn_close(c);
    sl_tensor_free(&in);
    sl_tensor_free(&out);
    sl_plugins_free(p);
}
END_TEST

START_TEST(test_pipeline_unit)
{
    find_build();
    sl_plugins_t *p = scan("plugins", 0);
    const sl_plugin_info_t *y = sl_plugins_find(p, "rgb_to_ycbcr", NULL);
    char json[1024], err[512];
    snprintf(json, sizeof(json),
             "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\"}, \"stages\": "
             "[{\"op\": \"decode_jpeg\"}, {\"op\": \"plugin\", \"name\": \"rgb_to_ycbcr\", "
             "\"sha256\": \"%s\"}]}",
             y->sha256);
    sl_spec_t spec;
    ck_assert_int_eq(sl_spec_parse("t", json, strlen(json), &spec, err, sizeof(err)), 0);
    sl_pipeline_t *pl = NULL;
    ck_assert_int_eq(sl_pipeline_new(&spec, 0, &pl, err, sizeof(err)), 0);
    sl_spec_clear(&spec); /* the pipeline holds its own copy */
    ck_assert_str_eq(sl_pipeline_unit_name(pl, 1), "rgb_to_ycbcr");
    ck_assert_int_eq(sl_pipeline_bind_plugins(pl, NULL, err, sizeof(err)), -ENOENT);
    ck_assert_int_eq(sl_pipeline_bind_plugins(pl, p, err, sizeof(err)), 0);
    sl_pipe_scratch_t sc;
    sl_pipe_scratch_init(&sc);
    sl_tensor_t t;
    image(&t, 2, 2);
    t.data[0] = 255, t.data[1] = 255, t.data[2] = 255; /* white: Y 255, Cb = Cr = 128 */
    ck_assert_int_eq(sl_pipeline_run(pl, 1, 2, 0, 0, &t, &sc, NULL, err, sizeof(err)), 0);
    ck_assert_uint_eq(t.data[0], 255);
    ck_assert_uint_eq(t.data[1], 128);
    ck_assert_uint_eq(t.data[2], 128);
    sl_pipe_scratch_free(&sc);
    sl_tensor_free(&t);
    sl_pipeline_free(pl);
    sl_plugins_free(p);
}
END_TEST

/* The "plugin" op's own keys, refused with the field named. */
START_TEST(test_spec_refused)
{
    static char big[1400];
    memset(big, 'x', sizeof(big) - 1);
    const char *sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    struct {
        const char *stage, *says;
    } bad[] = {
        {"{\"op\": \"plugin\", \"sha256\": \"%s\"}", "stages[1].name: must be"},
        {"{\"op\": \"plugin\", \"name\": \"Bad-Name\", \"sha256\": \"%s\"}",
         "stages[1].name: must be"},
        {"{\"op\": \"plugin\", \"name\": \"ok\", \"sha256\": \"%.63s\"}", "stages[1].sha256"},
        {"{\"op\": \"plugin\", \"name\": \"ok\", \"sha256\": \"%s\", \"params\": [1]}",
         "stages[1].params: must be an object"},
        {"{\"op\": \"plugin\", \"name\": \"ok\", \"sha256\": \"%s\", \"params\": {\"a\": \"%s\"}}",
         "stages[1].params: more than 1023 bytes"},
        {"{\"op\": \"plugin\", \"name\": \"ok\", \"sha256\": \"%s\", \"path\": \"/x.so\"}",
         "stages[1]"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char stage[2048], json[4096], err[512] = "";
        snprintf(stage, sizeof(stage), bad[i].stage, sha, big);
        snprintf(json, sizeof(json),
                 "{\"source\": {\"type\": \"imagefolder\", \"path\": \"x\"}, \"stages\": "
                 "[{\"op\": \"decode_jpeg\"}, %s]}",
                 stage);
        sl_spec_t spec;
        ck_assert_int_eq(sl_spec_parse("t", json, strlen(json), &spec, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, bad[i].says) != NULL, "%s: %s", stage, err);
    }
}
END_TEST

/* The host program is looked for ($SLUICE_PLUGIN_HOST, beside the program
 * or its library, PATH); when it is not found the registry says so, where
 * it looked and how to point to it, instead of "not in DIR". */
START_TEST(test_host_not_found)
{
    find_build();
    char dir[PATH_MAX + 32], path[64] = "", err[1024], why[2048];
    snprintf(dir, sizeof(dir), "%s/plugins", g_build);
    const char *old_path = getenv("PATH"), *old_host = getenv("SLUICE_PLUGIN_HOST");
    char *saved = old_path != NULL ? strdup(old_path) : NULL;
    char *saved_host = old_host != NULL ? strdup(old_host) : NULL;
    setenv("PATH", "/nonexistent-bin", 1);
    unsetenv("SLUICE_PLUGIN_HOST");
    ck_assert_int_eq(sl_plugin_host_find(path, sizeof(path), err, sizeof(err)), -ENOENT);
    ck_assert_str_eq(path, ""); /* untouched */
    ck_assert_msg(strstr(err, "plugin host program sluice-plugin-host was not found") != NULL &&
                      strstr(err, "/tests/sluice-plugin-host") != NULL &&
                      strstr(err, "on PATH") != NULL && strstr(err, "SLUICE_PLUGIN_HOST") != NULL,
                  "%s", err);
    sl_plugins_t *p = NULL;
    ck_assert_int_eq(sl_plugins_scan_client(dir, &p, err, sizeof(err)), 0);
    ck_assert_uint_eq(p->n, 0);
    ck_assert_msg(strstr(p->refused, "every file: the plugin host program") != NULL, "%s",
                  p->refused);
    sl_plugins_why_missing(p, "cutout", why, sizeof(why));
    ck_assert_msg(strstr(why, "could not be listed: the plugin host program") != NULL, "%s", why);
    sl_plugins_free(p);
    /* Named but not there. */
    setenv("SLUICE_PLUGIN_HOST", "/nonexistent/sluice-plugin-host", 1);
    ck_assert_int_eq(sl_plugin_host_find(path, sizeof(path), err, sizeof(err)), -ENOENT);
    ck_assert_msg(strstr(err, "SLUICE_PLUGIN_HOST=/nonexistent/sluice-plugin-host is not an "
                              "executable file") != NULL,
                  "%s", err);
    /* Named by a path, and by a name on PATH. */
    char host[PATH_MAX + 32], bin[PATH_MAX + 32], got[PATH_MAX + 64];
    snprintf(host, sizeof(host), "%s/bin/sluice-plugin-host", g_build);
    snprintf(bin, sizeof(bin), "/nonexistent-bin::%s/bin", g_build);
    setenv("SLUICE_PLUGIN_HOST", host, 1);
    ck_assert_int_eq(sl_plugin_host_find(got, sizeof(got), err, sizeof(err)), 0);
    ck_assert_str_eq(got, host);
    unsetenv("SLUICE_PLUGIN_HOST");
    setenv("PATH", bin, 1);
    ck_assert_int_eq(sl_plugin_host_find(got, sizeof(got), err, sizeof(err)), 0);
    ck_assert_str_eq(got, host);
    ck_assert_int_eq(sl_plugins_scan_client(dir, &p, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(sl_plugins_find(p, "cutout", NULL));
    sl_plugins_free(p);
    if (saved != NULL) {
        setenv("PATH", saved, 1);
    }
    if (saved_host != NULL) { /* as the suite found it, for a run without fork */
        setenv("SLUICE_PLUGIN_HOST", saved_host, 1);
    }
    free(saved);
    free(saved_host);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plugin");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_registry_lists_the_examples);
    tcase_add_test(tc, test_process_is_deterministic);
    tcase_add_test(tc, test_crash_and_hang_are_contained);
    tcase_add_test(tc, test_pipeline_unit);
    tcase_add_test(tc, test_spec_refused);
    tcase_add_test(tc, test_host_not_found);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
