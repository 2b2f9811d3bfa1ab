/* test_worker_revive: the URL a failed job's worker probes is taken from
 * its read's failure (worker/job_revive.c wk_url_in_text). The probing and
 * the job's return run against real nginx in
 * tests/integration/test_remote_server_gone.sh. */
#include <check.h>
#include <errno.h>
#include <string.h>
#include <syslog.h>

#include "common/base/log.h"
#include "worker/tasks_impl.h"

static void expect(const char *text, const char *url)
{
    char got[256];
    ck_assert_int_eq(wk_url_in_text(text, got, sizeof(got)), 0);
    ck_assert_str_eq(got, url);
}

START_TEST(test_url_in_text)
{
    expect("data server unreachable: after 4 attempts: http://127.0.0.1:8080/d/s-1.tar: "
           "Couldn't connect to server",
           "http://127.0.0.1:8080/d/s-1.tar");
    expect("data server unreachable: https://h/x.tar", "https://h/x.tar");
    expect("data server unreachable: 's3://b/k/x.tar': HTTP 503", "s3://b/k/x.tar");
    /* The first URL of several. */
    expect("x: http://a/1.tar: redirected: http://b/2.tar", "http://a/1.tar");
    char got[16];
    ck_assert_int_eq(wk_url_in_text("data server unreachable: no url", got, sizeof(got)), -ENOENT);
    ck_assert_int_eq(wk_url_in_text("http://a-very-long-host-name/x.tar", got, sizeof(got)),
                     -ENAMETOOLONG);
}
END_TEST

int main(void)
{
    sl_log_set_level(LOG_CRIT);
    Suite *s = suite_create("worker_revive");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_url_in_text);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
