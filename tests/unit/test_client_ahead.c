/* client/lib/order_ahead: an epoch asked for is computed on the thread and
 * handed over (waiting while it runs), buffers go back for reuse; an epoch
 * not asked for is not handed over; a failed computation is not either;
 * freeing joins a thread in the middle of a computation. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "client/lib/order_ahead.h"
#include "tests/unit/fixtures.h"

typedef struct {
    int calls;
    int fail_epoch;
    int slow_ms;
} ctx_t;

static int fill(const void *arg, uint64_t epoch, cl_order_t *o)
{
    ctx_t *c = (ctx_t *)(uintptr_t)arg; /* the test's own counter */
    c->calls++;
    if (c->slow_ms > 0) {
        struct timespec ts = {0, (long)c->slow_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    if ((int)epoch == c->fail_epoch) {
        return -EIO;
    }
    if (o->order == NULL && (o->order = malloc(4 * sizeof(uint64_t))) == NULL) {
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < 4; i++) {
        o->order[i] = epoch * 10 + i;
    }
    return 0;
}

START_TEST(test_ahead)
{
    ctx_t c = {.fail_epoch = 7, .slow_ms = 50};
    cl_ahead_t *a;
    ck_assert_int_eq(cl_ahead_new(fill, &c, &a), 0);
    cl_order_t o = {0};
    ck_assert_int_eq(cl_ahead_take(a, 3, &o), 0); /* never asked */
    cl_ahead_request(a, 3);
    ck_assert_int_eq(cl_ahead_take(a, 4, &o), 0); /* another epoch */
    ck_assert_int_eq(cl_ahead_take(a, 3, &o), 1); /* waits while it runs */
    ck_assert_ptr_nonnull(o.order);
    ck_assert_uint_eq(o.epoch, 3);
    ck_assert_uint_eq(o.order[2], 32);
    ck_assert_int_eq(cl_ahead_take(a, 3, &o), 0); /* handed over once */
    cl_ahead_request(a, 7);
    ck_assert_int_eq(cl_ahead_take(a, 7, &o), 0); /* failed: the caller computes */
    ck_assert_uint_eq(o.order[2], 32);
    cl_ahead_request(a, 8);
    cl_ahead_free(a); /* joins a thread maybe in the middle of epoch 8 */
    ck_assert_int_ge(c.calls, 2);
    free(o.order);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_ahead");
    TCase *tc = tcase_create("ahead");
    tcase_add_test(tc, test_ahead);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
