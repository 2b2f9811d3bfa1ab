#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dispatcher/journal.h"
#include "tests/unit/fixtures.h"

typedef struct {
    int n;
    uint32_t types[64];
    char payload[64][32];
} seen_t;

static int collect(void *ctx, uint32_t type, const uint8_t *p, size_t len)
{
    seen_t *s = ctx;
    if (s->n >= 64 || len >= 32) {
        return -E2BIG;
    }
    s->types[s->n] = type;
    memcpy(s->payload[s->n], p, len);
    s->payload[s->n][len] = '\0';
    s->n++;
    return 0;
}

static char dir[256];
static char log_path[300];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/sl-journal-XXXXXX");
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    snprintf(log_path, sizeof(log_path), "%s/journal.log", dir);
}

static void teardown(void) { fx_rmtree(dir); }

static disp_journal_t *reopen(seen_t *s, size_t *trunc, int want_rc)
{
    disp_journal_t *j = NULL;
    char err[512] = "";
    ck_assert_int_eq(disp_journal_open(dir, &j, err, sizeof(err)), 0);
    memset(s, 0, sizeof(*s));
    int rc = disp_journal_replay(j, collect, s, trunc, err, sizeof(err));
    ck_assert_msg(rc == want_rc, "replay rc %d: %s", rc, err);
    if (want_rc == -EBADMSG) {
        ck_assert_ptr_nonnull(strstr(err, "journal.log"));
        ck_assert_ptr_nonnull(strstr(err, "byte"));
    }
    return j;
}

static void append3(void)
{
    seen_t s;
    size_t t;
    disp_journal_t *j = reopen(&s, &t, 0);
    ck_assert_int_eq(s.n, 0);
    ck_assert_int_eq(disp_journal_append(j, 1, "alpha", 5), 0);
    ck_assert_int_eq(disp_journal_append(j, 2, "beta", 4), 0);
    ck_assert_int_eq(disp_journal_append(j, 3, "", 0), 0);
    disp_journal_close(j);
}

static off_t log_size(void)
{
    struct stat st;
    ck_assert_int_eq(stat(log_path, &st), 0);
    return st.st_size;
}

START_TEST(test_append_and_replay)
{
    append3();
    seen_t s;
    size_t t;
    disp_journal_t *j = reopen(&s, &t, 0);
    ck_assert_int_eq(s.n, 3);
    ck_assert_uint_eq(s.types[0], 1);
    ck_assert_str_eq(s.payload[0], "alpha");
    ck_assert_str_eq(s.payload[1], "beta");
    ck_assert_str_eq(s.payload[2], "");
    ck_assert_uint_eq(t, 0);
    disp_journal_close(j);
}
END_TEST

START_TEST(test_torn_tail_truncated)
{
    append3();
    off_t full = log_size();
    /* Half a record at the end, as a crash mid-append leaves it. */
    int fd = open(log_path, O_WRONLY | O_APPEND);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "SLJ1\x05\x00", 6), 6);
    close(fd);
    seen_t s;
    size_t t;
    disp_journal_t *j = reopen(&s, &t, 0);
    ck_assert_int_eq(s.n, 3);
    ck_assert_uint_eq(t, 6);
    ck_assert_int_eq(log_size(), full);
    /* Appending after the cut works and replays. */
    ck_assert_int_eq(disp_journal_append(j, 4, "delta", 5), 0);
    disp_journal_close(j);
    j = reopen(&s, &t, 0);
    ck_assert_int_eq(s.n, 4);
    ck_assert_str_eq(s.payload[3], "delta");
    disp_journal_close(j);
}
END_TEST

START_TEST(test_bad_last_record_is_torn)
{
    append3();
    off_t full = log_size();
    /* Flip a payload byte of the last non-empty record... the last one is
     * empty, so corrupt its CRC instead: nothing valid follows it. */
    int fd = open(log_path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "X", 1, full - 2), 1);
    close(fd);
    seen_t s;
    size_t t;
    disp_journal_t *j = reopen(&s, &t, 0);
    ck_assert_int_eq(s.n, 2);
    ck_assert_uint_eq(t, 16);
    disp_journal_close(j);
}
END_TEST

START_TEST(test_corrupt_middle_refused)
{
    append3();
    int fd = open(log_path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    /* Byte 17 is inside "alpha": the first record fails its CRC, two valid follow. */
    ck_assert_int_eq(pwrite(fd, "Z", 1, 17), 1);
    close(fd);
    seen_t s;
    size_t t;
    disp_journal_t *j = reopen(&s, &t, -EBADMSG);
    disp_journal_close(j);
    /* Nothing was truncated: the evidence stays for the operator. */
    ck_assert_int_gt(log_size(), 16 * 3);
}
END_TEST

static int writer(void *ctx, disp_journal_emit_fn emit, void *ectx)
{
    (void)ctx;
    int rc = emit(ectx, 9, "snap1", 5);
    return rc ? rc : emit(ectx, 9, "snap2", 5);
}

START_TEST(test_compaction)
{
    append3();
    seen_t s;
    size_t t;
    disp_journal_t *j = reopen(&s, &t, 0);
    char err[256];
    ck_assert_uint_gt(disp_journal_log_bytes(j), 0);
    ck_assert_int_eq(disp_journal_compact(j, writer, NULL, err, sizeof(err)), 0);
    ck_assert_uint_eq(disp_journal_log_bytes(j), 0);
    ck_assert_int_eq(disp_journal_append(j, 5, "after", 5), 0);
    disp_journal_close(j);
    j = reopen(&s, &t, 0);
    ck_assert_int_eq(s.n, 3);
    ck_assert_str_eq(s.payload[0], "snap1");
    ck_assert_str_eq(s.payload[1], "snap2");
    ck_assert_str_eq(s.payload[2], "after");
    disp_journal_close(j);
}
END_TEST

START_TEST(test_bad_directory)
{
    disp_journal_t *j = NULL;
    char err[256] = "";
    ck_assert_int_lt(disp_journal_open("/proc/nonexistent/x", &j, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(err, "/proc/nonexistent/x"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("journal");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_append_and_replay);
    tcase_add_test(tc, test_torn_tail_truncated);
    tcase_add_test(tc, test_bad_last_record_is_torn);
    tcase_add_test(tc, test_corrupt_middle_refused);
    tcase_add_test(tc, test_compaction);
    tcase_add_test(tc, test_bad_directory);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
