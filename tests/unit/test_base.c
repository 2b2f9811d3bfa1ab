/* test_base: the one-of-each helpers in common/base/ -- HOST:PORT parsing,
 * the ring, the bounded file reader, the monotonic timed wait. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/addr.h"
#include "common/base/err.h"
#include "common/base/clock.h"
#include "common/base/file.h"
#include "common/base/ring.h"
#include "tests/unit/fixtures.h"

START_TEST(test_addr_accepts)
{
    char host[64];
    unsigned port = 1;
    ck_assert_int_eq(sl_addr_split("127.0.0.1:0", host, sizeof(host), &port, NULL, 0), 0);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_uint_eq(port, 0);
    ck_assert_int_eq(sl_addr_split("[::1]:65535", host, sizeof(host), &port, NULL, 0), 0);
    ck_assert_str_eq(host, "::1");
    ck_assert_uint_eq(port, 65535);
    ck_assert_int_eq(sl_addr_split("worker-3.example:50051", host, sizeof(host), &port, NULL, 0),
                     0);
    ck_assert_str_eq(host, "worker-3.example");
    ck_assert_uint_eq(port, 50051);
}
END_TEST

START_TEST(test_addr_refuses)
{
    static const char *bad[] = {
        "",          "localhost", ":80",       "host:",     "host:65536", "host:80x",
        "::1:80",    "[::1]80",   "[::1",      "[]:80",     "host:-1",    "host:123456",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char host[64] = "untouched";
        unsigned port = 7;
        char err[200] = "";
        ck_assert_msg(sl_addr_split(bad[i], host, sizeof(host), &port, err, sizeof(err)) ==
                          -EINVAL,
                      "accepted \"%s\"", bad[i]);
        ck_assert_msg(strstr(err, bad[i]) != NULL || bad[i][0] == '\0', "%s", err);
        ck_assert_str_eq(host, "untouched");
        ck_assert_uint_eq(port, 7);
    }
    /* A host longer than the caller's buffer is refused, not cut. */
    char small[4];
    unsigned port = 0;
    ck_assert_int_eq(sl_addr_split("abcd:1", small, sizeof(small), &port, NULL, 0), -EINVAL);
    ck_assert_int_eq(sl_addr_split(NULL, small, sizeof(small), &port, NULL, 0), -EINVAL);
}
END_TEST

START_TEST(test_ring_fifo_front_and_bounds)
{
    sl_ring_t r;
    ck_assert_int_eq(sl_ring_init(&r, sizeof(int), 3), 0);
    int v = 0;
    ck_assert_int_eq(sl_ring_pop(&r, &v), -ENOENT);
    ck_assert_ptr_null(sl_ring_front(&r));
    /* Wrap around several times: order is kept across the end of the buffer. */
    int next_in = 0, next_out = 0;
    for (int round = 0; round < 10; round++) {
        while (sl_ring_len(&r) < 3) {
            ck_assert_int_eq(sl_ring_push_back(&r, &next_in), 0);
            next_in++;
        }
        ck_assert_int_eq(sl_ring_push_back(&r, &next_in), -ENOSPC);
        ck_assert_int_eq(*(int *)sl_ring_front(&r), next_out);
        for (int i = 0; i < 3; i++) { /* indexed from the front, across the wrap */
            ck_assert_int_eq(*(int *)sl_ring_at(&r, (size_t)i), next_out + i);
        }
        ck_assert_ptr_null(sl_ring_at(&r, 3));
        ck_assert_int_eq(sl_ring_pop(&r, &v), 0);
        ck_assert_int_eq(v, next_out);
        next_out++;
    }
    /* A returned element goes back to the front. */
    int back = -5;
    ck_assert_int_eq(sl_ring_push_front(&r, &back), 0);
    ck_assert_int_eq(sl_ring_push_front(&r, &back), -ENOSPC);
    ck_assert_int_eq(sl_ring_pop(&r, &v), 0);
    ck_assert_int_eq(v, -5);
    ck_assert_int_eq(sl_ring_pop(&r, NULL), 0);
    ck_assert_uint_eq(sl_ring_len(&r), 1);
    sl_ring_free(&r);
    sl_ring_free(&r); /* a freed ring is a zeroed ring */

    ck_assert_int_eq(sl_ring_init(&r, 0, 3), -EINVAL);
    ck_assert_int_eq(sl_ring_init(&r, 8, 0), 0);
    ck_assert_int_eq(sl_ring_push_back(&r, &back), -ENOSPC);
    sl_ring_free(&r);
}
END_TEST

START_TEST(test_file_read_bounds)
{
    char dir[64];
    ck_assert_int_eq(fx_mkdtemp(dir), 0);
    char path[128];
    snprintf(path, sizeof(path), "%s/f", dir);
    ck_assert_int_eq(fx_write_file(path, "hello", 5), 0);

    char *buf = NULL;
    size_t n = 0;
    char err[256];
    ck_assert_int_eq(sl_file_read(path, 5, &buf, &n, err, sizeof(err)), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq(buf, "hello"); /* NUL-terminated */
    free(buf);

    buf = (char *)"untouched";
    n = 99;
    ck_assert_int_eq(sl_file_read(path, 4, &buf, &n, err, sizeof(err)), -E2BIG);
    ck_assert_msg(strstr(err, path) != NULL && strstr(err, "limit") != NULL, "%s", err);
    ck_assert_str_eq(buf, "untouched");
    ck_assert_uint_eq(n, 99);

    ck_assert_int_eq(sl_file_read(dir, 100, &buf, &n, err, sizeof(err)), -EISDIR);
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/none", dir);
    ck_assert_int_eq(sl_file_read(missing, 100, &buf, &n, err, sizeof(err)), -ENOENT);
    ck_assert_msg(strstr(err, missing) != NULL, "%s", err);

    /* An empty file is a valid, empty read. */
    ck_assert_int_eq(fx_write_file(path, "", 0), 0);
    ck_assert_int_eq(sl_file_read(path, 100, &buf, &n, err, sizeof(err)), 0);
    ck_assert_uint_eq(n, 0);
    free(buf);

    /* A pipe has no size: read to EOF, and the limit still holds. */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    char big[9000];
    memset(big, 'x', sizeof(big));
    ck_assert_int_eq(write(fds[1], big, sizeof(big)), (ssize_t)sizeof(big));
    close(fds[1]);
    char fdpath[64];
    snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fds[0]);
    ck_assert_int_eq(sl_file_read(fdpath, 8999, &buf, &n, err, sizeof(err)), -E2BIG);
    close(fds[0]);
    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(write(fds[1], big, sizeof(big)), (ssize_t)sizeof(big));
    close(fds[1]);
    snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fds[0]);
    ck_assert_int_eq(sl_file_read(fdpath, 9000, &buf, &n, err, sizeof(err)), 0);
    ck_assert_uint_eq(n, 9000);
    free(buf);
    close(fds[0]);
    fx_rmtree(dir);
}
END_TEST

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int flag;
} waiter_t;

static void *signal_later(void *p)
{
    waiter_t *w = p;
    usleep(20 * 1000);
    pthread_mutex_lock(&w->mu);
    w->flag = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

START_TEST(test_timed_wait)
{
    waiter_t w = {.flag = 0};
    pthread_mutex_init(&w.mu, NULL);
    ck_assert_int_eq(sl_cond_init_mono(&w.cv), 0);

    /* Times out, and not before its deadline. */
    pthread_mutex_lock(&w.mu);
    double t0 = sl_mono_sec();
    while (sl_cond_wait_ms(&w.cv, &w.mu, 30) != ETIMEDOUT) {
    }
    ck_assert(sl_mono_sec() - t0 >= 0.029);
    /* A deadline in the past returns at once. */
    ck_assert_int_eq(sl_cond_wait_until(&w.cv, &w.mu, sl_mono_sec() - 5), ETIMEDOUT);
    ck_assert_int_eq(sl_cond_wait_ms(&w.cv, &w.mu, -3), ETIMEDOUT);
    pthread_mutex_unlock(&w.mu);

    /* Woken by a signal well before a long deadline. */
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, signal_later, &w), 0);
    pthread_mutex_lock(&w.mu);
    double deadline = sl_mono_sec() + 60;
    while (!w.flag) {
        ck_assert_int_eq(sl_cond_wait_until(&w.cv, &w.mu, deadline), 0);
    }
    pthread_mutex_unlock(&w.mu);
    pthread_join(th, NULL);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
}
END_TEST

typedef struct {
    pthread_mutex_t *mu;
    int rc;
    double waited;
} locker_t;

static void *lock_until_main(void *p)
{
    locker_t *l = p;
    double t0 = sl_mono_sec();
    l->rc = sl_mutex_lock_until(l->mu, t0 + 0.05);
    l->waited = sl_mono_sec() - t0;
    if (l->rc == 0) {
        pthread_mutex_unlock(l->mu);
    }
    return NULL;
}

/* sl_mutex_lock_until: a free mutex is taken at once; one another thread
 * holds is given up at the deadline (a past one: at once), and taken when
 * released before it. */
START_TEST(test_lock_until)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    ck_assert_int_eq(sl_mutex_lock_until(&mu, sl_mono_sec() - 5), 0);
    locker_t l = {.mu = &mu};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, lock_until_main, &l), 0);
    pthread_join(th, NULL); /* mu stays held by this thread all along */
    ck_assert_int_eq(l.rc, ETIMEDOUT);
    ck_assert(l.waited >= 0.049);
    pthread_mutex_unlock(&mu);
    ck_assert_int_eq(pthread_create(&th, NULL, lock_until_main, &l), 0);
    pthread_join(th, NULL);
    ck_assert_int_eq(l.rc, 0);
    ck_assert_int_eq(pthread_mutex_lock(&mu), 0); /* it let go */
    ck_assert_int_eq(pthread_mutex_unlock(&mu), 0);
}
END_TEST

/* sl_err_prefix: the callee's message keeps its text behind the prefix,
 * within the buffer, control bytes scrubbed; NULL buffers are fine. */
START_TEST(test_err_prefix)
{
    char err[32];
    ck_assert_int_eq(sl_err(err, sizeof(err), -EILSEQ, "not a JPEG"), -EILSEQ);
    ck_assert_int_eq(sl_err_prefix(err, sizeof(err), -EDOM, "image %u", 2), -EDOM);
    ck_assert_str_eq(err, "image 2: not a JPEG");
    ck_assert_int_eq(sl_err_prefix(err, sizeof(err), -1, "a very long prefix\n%s", "xxxxx"), -1);
    ck_assert_uint_eq(strlen(err), sizeof(err) - 1); /* cut, not overrun */
    ck_assert_ptr_null(strchr(err, '\n'));
    ck_assert_int_eq(sl_err_prefix(NULL, 0, -5, "x"), -5);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("base");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_addr_accepts);
    tcase_add_test(tc, test_addr_refuses);
    tcase_add_test(tc, test_ring_fifo_front_and_bounds);
    tcase_add_test(tc, test_file_read_bounds);
    tcase_add_test(tc, test_timed_wait);
    tcase_add_test(tc, test_lock_until);
    tcase_add_test(tc, test_err_prefix);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
