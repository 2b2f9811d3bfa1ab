/* test_conf_man: the roff the manual pages are written in (common/base/
 * conf_man.c) -- escaping, paragraphs, a daemon's page from a config table,
 * and a stream that fails. The pages themselves are rendered by groff in
 * tests/integration/test_install.sh. */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/conf_man.h"
#include "tests/unit/fixtures.h"

/* What call writes to f, as a malloc'd string in out. */
#define CAPTURE(out, call)                                                                     \
    do {                                                                                       \
        size_t len_ = 0;                                                                       \
        FILE *f = open_memstream(&(out), &len_);                                               \
        ck_assert_ptr_nonnull(f);                                                              \
        call;                                                                                  \
        ck_assert_int_eq(fclose(f), 0);                                                        \
    } while (0)

START_TEST(test_text_escapes)
{
    char *out = NULL;
    const char *in = ".leading dot\n'quote\nback\\slash --max-rate=5, re-plan -1 x--y";
    CAPTURE(out, sl_man_text(f, in, strlen(in)));
    /* A line starting with . or ' would be a request; \ an escape; a
     * --flag's hyphens are \- (ASCII when copied), other hyphens stay. */
    ck_assert_str_eq(out, "\\&.leading dot\n\\&'quote\nback\\eslash \\-\\-max\\-rate=5, "
                          "re-plan -1 x--y");
    free(out);
}
END_TEST

START_TEST(test_paragraphs)
{
    char *out = NULL;
    CAPTURE(out, sl_man_paragraphs(f, "one\ntwo\n\nthree:\n\n  verbatim --x\n  two\n\nend"));
    ck_assert_str_eq(out, "one\ntwo\n.PP\nthree:\n.PP\n.RS 4\n.nf\nverbatim \\-\\-x\ntwo\n"
                          ".fi\n.RE\n.PP\nend\n");
    free(out);
    CAPTURE(out, sl_man_tagged(f, "--listen HOST:PORT", "where"));
    ck_assert_str_eq(out, ".TP\n\\fB\\-\\-listen\\fR \\fIHOST:PORT\\fR\nwhere\n");
    free(out);
}
END_TEST

typedef struct {
    long long some_key;
    char name[SL_CONF_STR_MAX];
    int level;
} tcfg_t;

static const sl_conf_opt_t OPTS[] = {
    {"some_key", SL_CONF_INT, offsetof(tcfg_t, some_key), 1, 10, "5", "how many", 0, 0},
    {"name", SL_CONF_STR, offsetof(tcfg_t, name), 0, 0, "", "who", 1, 0},
    {"log_level", SL_CONF_LOGLEVEL, offsetof(tcfg_t, level), 0, 0, "notice", "how loud", 0, 1},
};
static const sl_conf_table_t TABLE = {"tprog", "tests the pages", "9.9", OPTS, 3};
static const sl_man_section_t SECTIONS[] = {{"FILES", "/etc/t.conf"}};
static const sl_man_page_t PAGE = {"It tests.", SECTIONS, 1, "tother(1)"};

START_TEST(test_daemon_page)
{
    char *out = NULL;
    int rc = 0;
    CAPTURE(out, rc = sl_conf_print_man(&TABLE, &PAGE, f));
    ck_assert_int_eq(rc, 0);
    static const char *want[] = {
        ".TH \"TPROG\" 1 \"\" \"sluice 9.9\"",
        ".SH NAME\ntprog \\- tests the pages\n",
        ".SH DESCRIPTION\nIt tests.\n",
        ".TP\n\\fB\\-\\-some\\-key\\fR \\fIN\\fR\nhow many. Default: 5. Range: 1..10.\n",
        ".TP\n\\fB\\-\\-name\\fR \\fITEXT\\fR\nwho. Required.\n",
        ".TP\n\\fB\\-\\-log\\-level\\fR \\fILEVEL\\fR\nhow loud. Default: notice. "
        "Re-read on SIGHUP.\n",
        ".SH FILES\n/etc/t.conf\n",
        ".SH SEE ALSO\ntother(1), " SL_MAN_README "\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        ck_assert_msg(strstr(out, want[i]) != NULL, "missing %s in:\n%s", want[i], out);
    }
    /* The options keep the table's order. */
    const char *first = strstr(out, "some\\-key"), *second = strstr(out, "\\-\\-name");
    ck_assert(first != NULL && second != NULL && first < second);
    free(out);
}
END_TEST

/* A stream that fills up (a full disk under make) is an error, not a short page. */
START_TEST(test_stream_error)
{
    char buf[64];
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    ck_assert_ptr_nonnull(f);
    setvbuf(f, NULL, _IONBF, 0);
    ck_assert_int_eq(sl_conf_print_man(&TABLE, &PAGE, f), -EIO);
    fclose(f);
}
END_TEST

START_TEST(test_requested)
{
    char *yes[] = {"prog", "--help-man"};
    char *extra[] = {"prog", "--help-man", "--listen", "x"};
    char *other[] = {"prog", "--help"};
    ck_assert_int_eq(sl_man_requested(2, yes), 1);
    ck_assert_int_eq(sl_man_requested(4, extra), 0);
    ck_assert_int_eq(sl_man_requested(2, other), 0);
    ck_assert_int_eq(sl_man_requested(1, yes), 0);
    ck_assert_int_eq(sl_conf_man_main(&TABLE, &PAGE, 2, other), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conf_man");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_text_escapes);
    tcase_add_test(tc, test_paragraphs);
    tcase_add_test(tc, test_daemon_page);
    tcase_add_test(tc, test_stream_error);
    tcase_add_test(tc, test_requested);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
