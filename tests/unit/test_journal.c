/* dispatcher/journal: records replay in order; a torn tail is cut, a
 * corrupt middle refused; compaction; group commit: concurrent waiters
 * share syncs, none is told "durable" before a sync that started after its
 * record was written, and a failed sync fails every record it covered
 * (and every later one until a compaction). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dispatcher/journal/journal.h"
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
    ck_assert_int_eq(disp_journal_append(j, 1, "alpha", 5, NULL), 0);
    ck_assert_int_eq(disp_journal_append(j, 2, "beta", 4, NULL), 0);
    ck_assert_int_eq(disp_journal_append(j, 3, "", 0, NULL), 0);
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
    ck_assert_int_eq(disp_journal_append(j, 4, "delta", 5, NULL), 0);
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
    ck_assert_int_eq(disp_journal_append(j, 5, "after", 5, NULL), 0);
    disp_journal_close(j);
    j = reopen(&s, &t, 0);
    ck_assert_int_eq(s.n, 3);
    ck_assert_str_eq(s.payload[0], "snap1");
    ck_assert_str_eq(s.payload[1], "snap2");
    ck_assert_str_eq(s.payload[2], "after");
    disp_journal_close(j);
}
END_TEST

/* ------------------------------------------------------------ group commit */

#define GC_THREADS 8
#define GC_RECORDS 40 /* per thread */
#define GC_PAYLOAD 8  /* every record HDR + 8 bytes: the log size says what was written */

/* The fake sync: checks that every record it covers is in the file, takes
 * a while (so that appends pile up behind it), and fails call fail_at. */
typedef struct gc_s {
    disp_journal_t *j;
    pthread_mutex_t mu; /* the dispatcher's: appends are made under it */
    atomic_uint_fast64_t ok_upto; /* highest upto of a sync that succeeded */
    atomic_int nsyncs;
    int fail_at;            /* 1-based sync call that fails; 0 = none */
    uint64_t fail_lo, fail_hi; /* the records that failed sync covered */
    uint64_t last_upto;     /* syncs run one at a time: no lock needed */
    uint64_t seq[GC_THREADS][GC_RECORDS];
    int rc[GC_THREADS][GC_RECORDS];
} gc_t;

static int gc_sync(void *ctx, int fd, uint64_t upto)
{
    gc_t *g = ctx;
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert_int_ge(st.st_size, (off_t)(upto * (16 + GC_PAYLOAD)));
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    int n = atomic_fetch_add(&g->nsyncs, 1) + 1;
    int rc = 0;
    if (n == g->fail_at) {
        g->fail_lo = g->last_upto + 1;
        g->fail_hi = upto;
        rc = -EIO;
    } else if (upto > atomic_load(&g->ok_upto)) {
        atomic_store(&g->ok_upto, upto);
    }
    g->last_upto = upto;
    return rc;
}

static int gc_index;

static void *gc_thread(void *arg)
{
    gc_t *g = arg;
    pthread_mutex_lock(&g->mu);
    int t = gc_index++;
    pthread_mutex_unlock(&g->mu);
    for (int i = 0; i < GC_RECORDS; i++) {
        uint64_t seq = 0;
        pthread_mutex_lock(&g->mu);
        ck_assert_int_eq(disp_journal_append(g->j, 7, "12345678", GC_PAYLOAD, &seq), 0);
        pthread_mutex_unlock(&g->mu);
        g->seq[t][i] = seq;
        g->rc[t][i] = disp_journal_wait(g->j, seq);
        if (g->rc[t][i] == 0) {
            /* Durable means a sync that covered seq finished. */
            ck_assert_uint_ge(atomic_load(&g->ok_upto), seq);
        }
    }
    return NULL;
}

static int count_records(void *ctx, uint32_t type, const uint8_t *p, size_t len)
{
    (void)type;
    (void)p;
    (void)len;
    (*(int *)ctx)++;
    return 0;
}

static void gc_run(gc_t *g, int fail_at)
{
    seen_t s;
    size_t t;
    memset(g, 0, sizeof(*g));
    g->j = reopen(&s, &t, 0);
    g->fail_at = fail_at;
    ck_assert_int_eq(pthread_mutex_init(&g->mu, NULL), 0);
    disp_journal_set_sync(g->j, gc_sync, g);
    gc_index = 0;
    pthread_t th[GC_THREADS];
    for (int i = 0; i < GC_THREADS; i++) {
        ck_assert_int_eq(pthread_create(&th[i], NULL, gc_thread, g), 0);
    }
    for (int i = 0; i < GC_THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    pthread_mutex_destroy(&g->mu);
}

START_TEST(test_group_commit)
{
    static gc_t g;
    gc_run(&g, 0);
    int n = GC_THREADS * GC_RECORDS;
    for (int t = 0; t < GC_THREADS; t++) {
        for (int i = 0; i < GC_RECORDS; i++) {
            ck_assert_int_eq(g.rc[t][i], 0);
        }
    }
    ck_assert_uint_eq(disp_journal_last(g.j), (uint64_t)n);
    /* Waiters shared syncs: with eight threads behind a 1 ms sync, far
     * fewer syncs than records (one each before group commit). */
    int nsyncs = atomic_load(&g.nsyncs);
    printf("group commit: %d syncs for %d records from %d threads\n", nsyncs, n, GC_THREADS);
    ck_assert_msg(nsyncs < n, "%d syncs for %d records", nsyncs, n);
    ck_assert_int_eq(disp_journal_broken(g.j), 0);
    disp_journal_close(g.j);
    int count = 0;
    disp_journal_t *j = NULL;
    char err[256];
    size_t t;
    ck_assert_int_eq(disp_journal_open(dir, &j, err, sizeof(err)), 0);
    ck_assert_int_eq(disp_journal_replay(j, count_records, &count, &t, err, sizeof(err)), 0);
    ck_assert_int_eq(count, n);
    disp_journal_close(j);
}
END_TEST

START_TEST(test_sync_failure_reported)
{
    static gc_t g;
    gc_run(&g, 3);
    ck_assert_uint_ge(g.fail_hi, g.fail_lo);
    int failed = 0;
    for (int t = 0; t < GC_THREADS; t++) {
        for (int i = 0; i < GC_RECORDS; i++) {
            uint64_t seq = g.seq[t][i];
            if (seq < g.fail_lo) {
                ck_assert_int_eq(g.rc[t][i], 0); /* durable before the failure */
            } else {
                /* Covered by the failed sync, or appended to a broken journal. */
                ck_assert_msg(g.rc[t][i] == -EIO, "record %llu: %d", (unsigned long long)seq,
                              g.rc[t][i]);
                failed++;
            }
        }
    }
    ck_assert_int_ge(failed, (int)(g.fail_hi - g.fail_lo + 1));
    ck_assert_int_eq(disp_journal_broken(g.j), 1);

    /* A snapshot of the state makes the journal whole; the failed records
     * stay failed for a late waiter, the snapshot's own number does not. */
    char err[256];
    disp_journal_set_sync(g.j, NULL, NULL); /* the log restarts empty: fdatasync again */
    ck_assert_int_eq(disp_journal_compact(g.j, writer, NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(disp_journal_broken(g.j), 0);
    ck_assert_int_eq(disp_journal_wait(g.j, g.fail_lo), -EIO);
    ck_assert_int_eq(disp_journal_wait(g.j, disp_journal_last(g.j)), 0);
    uint64_t seq = 0;
    ck_assert_int_eq(disp_journal_append(g.j, 8, "12345678", GC_PAYLOAD, &seq), 0);
    ck_assert_int_eq(disp_journal_wait(g.j, seq), 0);
    disp_journal_close(g.j);
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
    tcase_add_test(tc, test_group_commit);
    tcase_add_test(tc, test_sync_failure_reported);
    tcase_add_test(tc, test_bad_directory);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
