/* test_conf: common/base/conf.c (the table-driven config) and the dispatcher's
 * table in dispatcher/config.c. */
#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "common/base/conf.h"
#include "dispatcher/config.h"
#include "tests/unit/fixtures.h"

typedef struct tconf_s {
    char name[SL_CONF_STR_MAX];
    long long count;
    int flag;
    double ratio;
    int level;
    char must[SL_CONF_STR_MAX];
} tconf_t;

static const sl_conf_opt_t OPTS[] = {
    {"name", SL_CONF_STR, offsetof(tconf_t, name), 0, 0, "anon", "a name", 0, 0},
    {"count", SL_CONF_INT, offsetof(tconf_t, count), 1, 100, "10", "a count", 0, 0},
    {"flag", SL_CONF_BOOL, offsetof(tconf_t, flag), 0, 0, "false", "a flag", 0, 0},
    {"ratio", SL_CONF_DOUBLE, offsetof(tconf_t, ratio), 0, 1, "0.5", "a ratio", 0, 0},
    {"log_level", SL_CONF_LOGLEVEL, offsetof(tconf_t, level), 0, 0, "notice", "level", 0, 1},
    {"must_have", SL_CONF_STR, offsetof(tconf_t, must), 0, 0, "", "required", 0, 0},
};

static const sl_conf_table_t TABLE = {
    .progname = "tconf",
    .summary = "test table",
    .version = "9.9",
    .opts = OPTS,
    .nopts = sizeof(OPTS) / sizeof(OPTS[0]),
};

static char g_dir[FX_TMPDIR_LEN];

static void setup(void) { ck_assert_int_eq(fx_mkdtemp(g_dir), 0); }

static void teardown(void) { fx_rmtree(g_dir); }

/* Writes text to DIR/name and returns the path (static buffer). */
static const char *write_conf(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", g_dir, name);
    ck_assert_int_eq(fx_write_file(path, text, strlen(text)), 0);
    return path;
}

static int parse(tconf_t *c, char *err, size_t errlen, int argc, ...)
{
    char *argv[32];
    va_list ap;
    va_start(ap, argc);
    argv[0] = "tconf";
    for (int i = 1; i < argc; i++) {
        argv[i] = va_arg(ap, char *);
    }
    va_end(ap);
    return sl_conf_parse_args(&TABLE, c, argc, argv, NULL, 0, err, errlen);
}

START_TEST(test_defaults)
{
    tconf_t c;
    char err[256] = "";
    memset(&c, 0xaa, sizeof(c));
    ck_assert_int_eq(sl_conf_defaults(&TABLE, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.name, "anon");
    ck_assert_int_eq(c.count, 10);
    ck_assert_int_eq(c.flag, 0);
    ck_assert_double_eq(c.ratio, 0.5);
    ck_assert_int_eq(c.level, LOG_NOTICE);
    ck_assert_str_eq(c.must, "");
}
END_TEST

START_TEST(test_file_parse)
{
    tconf_t c;
    char err[256] = "";
    char p[512];
    snprintf(p, sizeof(p), "%s", write_conf("ok.conf", "# a comment\n"
                                          "\n"
                                          "   name = \"with # and spaces \"  # trailing\n"
                                          "count=42\n"
                                          "flag = yes   # inline comment\n"
                                          "ratio = 0.25\n"
                                          "log_level = debug\n"
                                          "must_have = x#y\n"
                                          "last = no newline"));
    /* "last" is unknown: first check a file without it. */
    const char *good = write_conf("good.conf", "name = \"with # and spaces \"  # trailing\n"
                                               "count=42\nflag = yes   # inline\nratio = 0.25\n"
                                               "log_level = debug\nmust_have = x#y");
    ck_assert_int_eq(sl_conf_defaults(&TABLE, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_conf_load_file(&TABLE, &c, good, err, sizeof(err)), 0);
    ck_assert_str_eq(c.name, "with # and spaces ");
    ck_assert_int_eq(c.count, 42);
    ck_assert_int_eq(c.flag, 1);
    ck_assert_double_eq(c.ratio, 0.25);
    ck_assert_int_eq(c.level, LOG_DEBUG);
    ck_assert_str_eq(c.must, "x#y"); /* '#' not after a space is data */

    ck_assert_int_ne(sl_conf_load_file(&TABLE, &c, p, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "ok.conf:9") != NULL, "err: %s", err);
    ck_assert_msg(strstr(err, "last") != NULL, "err: %s", err);
}
END_TEST

static void expect_bad(const char *text, const char *where, const char *what)
{
    tconf_t c;
    char err[512] = "";
    const char *p = write_conf("bad.conf", text);
    ck_assert_int_eq(sl_conf_defaults(&TABLE, &c, err, sizeof(err)), 0);
    ck_assert_int_lt(sl_conf_load_file(&TABLE, &c, p, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, where) != NULL, "'%s' lacks '%s'", err, where);
    ck_assert_msg(strstr(err, what) != NULL, "'%s' lacks '%s'", err, what);
}

START_TEST(test_bad_lines)
{
    expect_bad("count = 5\nno equals sign\n", "bad.conf:2", "key = value");
    expect_bad("\n\nbogus = 1\n", "bad.conf:3", "unknown key 'bogus'");
    expect_bad("count = twelve\n", "bad.conf:1", "count");
    expect_bad("count = 12x\n", "bad.conf:1", "not an integer");
    expect_bad("count = 101\n", "bad.conf:1", "1..100");
    expect_bad("count = 0\n", "bad.conf:1", "1..100");
    expect_bad("count =\n", "bad.conf:1", "count");
    expect_bad("ratio = 1.5\n", "bad.conf:1", "ratio");
    expect_bad("ratio = nan\n", "bad.conf:1", "ratio");
    expect_bad("flag = maybe\n", "bad.conf:1", "boolean");
    expect_bad("log_level = loud\n", "bad.conf:1", "log_level");
    expect_bad("name = \"open\n", "bad.conf:1", "unterminated");
    expect_bad("name = \"a\" b\n", "bad.conf:1", "after the closing quote");
    expect_bad(" = 3\n", "bad.conf:1", "missing key");
    expect_bad("count = 99999999999999999999999\n", "bad.conf:1", "count");

    /* An overlong line and an overlong string value. */
    char *big = malloc(6000);
    ck_assert_ptr_nonnull(big);
    memset(big, 'a', 5999);
    big[5999] = '\0';
    memcpy(big, "name = ", 7);
    expect_bad(big, "bad.conf:1", "longer than");
    big[400] = '\0';
    expect_bad(big, "bad.conf:1", "longer than");
    free(big);

    /* A missing file names the path. */
    tconf_t c;
    char err[512] = "";
    ck_assert_int_lt(sl_conf_load_file(&TABLE, &c, "/nonexistent/x.conf", err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "/nonexistent/x.conf") != NULL, "%s", err);
}
END_TEST

START_TEST(test_flags_override_file)
{
    tconf_t c;
    char err[512] = "";
    char cfg[600];
    const char *p = write_conf("f.conf", "count = 20\nname = fromfile\nratio = 0.1\n");
    snprintf(cfg, sizeof(cfg), "%s", p);
    /* --config comes last but is read first; flags win. */
    ck_assert_int_eq(parse(&c, err, sizeof(err), 6, "--count", "30", "--ratio=0.75", "--config",
                           cfg),
                     0);
    ck_assert_int_eq(c.count, 30);
    ck_assert_double_eq(c.ratio, 0.75);
    ck_assert_str_eq(c.name, "fromfile");
    /* '_' is '-' on the command line; a bare boolean means true. */
    ck_assert_int_eq(parse(&c, err, sizeof(err), 4, "--must-have", "v", "--flag"), 0);
    ck_assert_str_eq(c.must, "v");
    ck_assert_int_eq(c.flag, 1);
    ck_assert_int_eq(parse(&c, err, sizeof(err), 3, "--flag", "off"), 0);
    ck_assert_int_eq(c.flag, 0);
    /* The last of two flags wins. */
    ck_assert_int_eq(parse(&c, err, sizeof(err), 5, "--count", "2", "--count", "3"), 0);
    ck_assert_int_eq(c.count, 3);
    /* The config path is handed back for SIGHUP. */
    char back[600];
    char *argv[] = {"tconf", "--config", cfg};
    ck_assert_int_eq(sl_conf_parse_args(&TABLE, &c, 3, argv, back, sizeof(back), err,
                                        sizeof(err)),
                     0);
    ck_assert_str_eq(back, cfg);
    /* A bad file line through the command line still names FILE:LINE. */
    p = write_conf("g.conf", "name = ok\ncount = -1\n");
    snprintf(cfg, sizeof(cfg), "%s", p);
    ck_assert_int_eq(parse(&c, err, sizeof(err), 3, "--config", cfg), -EINVAL);
    ck_assert_msg(strstr(err, "g.conf:2") != NULL, "%s", err);
}
END_TEST

START_TEST(test_flag_errors)
{
    tconf_t c;
    char err[512] = "";
    ck_assert_int_eq(parse(&c, err, sizeof(err), 2, "--bogus"), -EINVAL);
    ck_assert_msg(strstr(err, "--bogus") != NULL, "%s", err);
    ck_assert_int_eq(parse(&c, err, sizeof(err), 2, "--count"), -EINVAL);
    ck_assert_msg(strstr(err, "--count: missing value") != NULL, "%s", err);
    ck_assert_int_eq(parse(&c, err, sizeof(err), 3, "--count", "1000"), -EINVAL);
    ck_assert_msg(strstr(err, "--count") != NULL && strstr(err, "1..100") != NULL, "%s", err);
    ck_assert_int_eq(parse(&c, err, sizeof(err), 2, "positional"), -EINVAL);
    ck_assert_int_eq(parse(&c, err, sizeof(err), 2, "--config"), -EINVAL);
    ck_assert_int_eq(parse(&c, err, sizeof(err), 3, "--config", "/nonexistent.conf"), -EINVAL);
    ck_assert_msg(strstr(err, "/nonexistent.conf") != NULL, "%s", err);
}
END_TEST

START_TEST(test_help_and_version)
{
    tconf_t c;
    char err[256] = "";
    /* Both print to stdout and return 1 (the caller exits 0), even next to
     * flags that would be errors. */
    ck_assert_int_eq(parse(&c, err, sizeof(err), 2, "--help"), 1);
    ck_assert_int_eq(parse(&c, err, sizeof(err), 3, "--bogus", "-h"), 1);
    ck_assert_int_eq(parse(&c, err, sizeof(err), 2, "--version"), 1);
    /* The help text lists every flag with its default. */
    char path[512];
    snprintf(path, sizeof(path), "%s/help.txt", g_dir);
    FILE *f = fopen(path, "w+");
    ck_assert_ptr_nonnull(f);
    sl_conf_print_help(&TABLE, f);
    fclose(f);
    uint8_t *buf = NULL;
    size_t len = 0;
    ck_assert_int_eq(fx_read_file(path, &buf, &len), 0);
    char *text = calloc(1, len + 1);
    memcpy(text, buf, len);
    ck_assert_ptr_nonnull(strstr(text, "--count N"));
    ck_assert_ptr_nonnull(strstr(text, "--must-have"));
    ck_assert_ptr_nonnull(strstr(text, "default '10'"));
    ck_assert_ptr_nonnull(strstr(text, "--log-level"));
    free(text);
    free(buf);
}
END_TEST

START_TEST(test_required)
{
    static const sl_conf_opt_t ROPTS[] = {
        {"root", SL_CONF_STR, offsetof(tconf_t, name), 0, 0, "", "data root", 1, 0},
        {"n", SL_CONF_INT, offsetof(tconf_t, count), 1, 9, "", "n", 1, 0},
    };
    static const sl_conf_table_t RT = {"r", "r", "1", ROPTS, 2};
    tconf_t c;
    char err[256] = "";
    char *argv1[] = {"r", "--root", "/x"};
    ck_assert_int_eq(sl_conf_parse_args(&RT, &c, 3, argv1, NULL, 0, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "--n") != NULL && strstr(err, "required") != NULL, "%s", err);
    char *argv2[] = {"r", "--root", "/x", "--n", "3"};
    ck_assert_int_eq(sl_conf_parse_args(&RT, &c, 5, argv2, NULL, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(c.count, 3);
}
END_TEST

START_TEST(test_reload)
{
    tconf_t c;
    char err[512] = "";
    const char *p = write_conf("r.conf", "count = 20\nlog_level = warning\n");
    ck_assert_int_eq(sl_conf_defaults(&TABLE, &c, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_conf_reload(&TABLE, &c, p, err, sizeof(err)), 0);
    ck_assert_int_eq(c.level, LOG_WARNING); /* reloadable */
    ck_assert_int_eq(c.count, 10);          /* not reloadable */
    /* A bad file changes nothing, even keys before the bad line. */
    p = write_conf("r.conf", "log_level = debug\ncount = nope\n");
    ck_assert_int_lt(sl_conf_reload(&TABLE, &c, p, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "r.conf:2") != NULL, "%s", err);
    ck_assert_int_eq(c.level, LOG_WARNING);
}
END_TEST

START_TEST(test_dispatcher_table)
{
    disp_config_t c;
    disp_config_t d;
    char err[512] = "";
    char *argv[] = {"sluice-dispatcher"};
    memset(&c, 0, sizeof(c)); /* strings and padding: compared bytewise below */
    memset(&d, 0, sizeof(d));
    ck_assert_int_eq(sl_conf_parse_args(&disp_conf_table, &c, 1, argv, NULL, 0, err,
                                        sizeof(err)),
                     0);
    ck_assert_str_eq(c.listen, "127.0.0.1:7400");
    ck_assert_str_eq(c.http, "127.0.0.1:7401");
    /* A hand-started dispatcher journals by default (a per-user state
     * directory, resolved at start): #38 item 4. */
    ck_assert_str_eq(c.journal, "auto");
    ck_assert_int_eq(c.worker_timeout_ms, 5000);
    ck_assert_int_eq(c.heartbeat_ms, 500);
    ck_assert_int_eq(c.client_timeout_ms, 30000);
    ck_assert_int_eq(c.split_size, 0); /* auto */
    ck_assert_int_eq(c.max_splits_per_worker, 4);
    ck_assert_int_eq(c.max_jobs, 64);
    ck_assert_int_eq(c.log_level, LOG_NOTICE);
    ck_assert_int_eq(disp_config_check(&c, err, sizeof(err)), 0);

    char *argv2[] = {"sluice-dispatcher", "--heartbeat-ms", "6000"};
    ck_assert_int_eq(sl_conf_parse_args(&disp_conf_table, &c, 3, argv2, NULL, 0, err,
                                        sizeof(err)),
                     0);
    ck_assert_int_ne(disp_config_check(&c, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "heartbeat_ms") != NULL, "%s", err);

    char *argv3[] = {"sluice-dispatcher", "--listen", "nocolon"};
    ck_assert_int_eq(sl_conf_parse_args(&disp_conf_table, &c, 3, argv3, NULL, 0, err,
                                        sizeof(err)),
                     0);
    ck_assert_int_ne(disp_config_check(&c, err, sizeof(err)), 0);

    /* The shipped example config parses and equals the defaults but for the
     * journal, on in the unit's state directory (a restart keeps the jobs). */
    memset(&c, 0, sizeof(c));
    char *argv4[] = {"sluice-dispatcher", "--config", "conf/dispatcher.conf"};
    ck_assert_int_eq(sl_conf_parse_args(&disp_conf_table, &d, 3, argv4, NULL, 0, err,
                                        sizeof(err)),
                     0);
    ck_assert_str_eq(d.journal, "/var/lib/sluice-dispatcher");
    memset(d.journal, 0, sizeof(d.journal));
    ck_assert_int_eq(sl_conf_parse_args(&disp_conf_table, &c, 1, argv, NULL, 0, err,
                                        sizeof(err)),
                     0);
    memset(c.journal, 0, sizeof(c.journal)); /* the default's "auto" */
    ck_assert_mem_eq(&c, &d, sizeof(c));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conf");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_file_parse);
    tcase_add_test(tc, test_bad_lines);
    tcase_add_test(tc, test_flags_override_file);
    tcase_add_test(tc, test_flag_errors);
    tcase_add_test(tc, test_help_and_version);
    tcase_add_test(tc, test_required);
    tcase_add_test(tc, test_reload);
    tcase_add_test(tc, test_dispatcher_table);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
