/* test_client_pace: client/lib/pace.c -- the control thread's round
 * interval: doubling while answers show nothing new, back to the minimum on
 * news, and which parts of an assignment are news (the plan, the workers,
 * the client's own splits, the outcome) and which are not (remote splits,
 * which follow the client's own acknowledgements; cache counters). */
#include <check.h>
#include <string.h>

#include "client/lib/pace.h"
#include "tests/unit/fixtures.h"

/* An assignment with one remote split (worker 5) and one of the client's
 * own, the workers' endpoint, plan version 3. */
typedef struct asg_s {
    Sluice__GetAssignmentResponse r;
    Sluice__Plan plan;
    Sluice__SplitAssignment split[2];
    Sluice__SplitAssignment *psplit[2];
    Sluice__WorkerEndpoint w;
    Sluice__WorkerEndpoint *pw[1];
    Sluice__CacheStats cache;
} asg_t;

static void asg_init(asg_t *a)
{
    memset(a, 0, sizeof(*a));
    sluice__get_assignment_response__init(&a->r);
    sluice__plan__init(&a->plan);
    a->plan.version = 3;
    a->plan.split = 2;
    a->plan.mode = (char *)"auto";
    a->r.plan = &a->plan;
    for (int i = 0; i < 2; i++) {
        sluice__split_assignment__init(&a->split[i]);
        a->split[i].split_id = 10 + (uint64_t)i;
        a->split[i].begin = 32 * (uint64_t)i;
        a->split[i].end = 32 * (uint64_t)i + 32;
        a->psplit[i] = &a->split[i];
    }
    a->split[0].worker_id = 5;
    a->split[1].worker_id = 0;
    a->r.splits = a->psplit;
    a->r.n_splits = 2;
    sluice__worker_endpoint__init(&a->w);
    a->w.worker_id = 5;
    a->w.address = (char *)"127.0.0.1:7001";
    a->pw[0] = &a->w;
    a->r.workers = a->pw;
    a->r.n_workers = 1;
    a->r.failure = (char *)"";
    a->r.fallback = (char *)"";
    sluice__cache_stats__init(&a->cache);
    a->r.cache = &a->cache;
}

START_TEST(test_quiet_doubles_to_cap)
{
    cl_pace_t p;
    cl_pace_init(&p);
    ck_assert_int_eq(cl_pace_after(&p, 7), CL_PACE_MIN_MS); /* the first answer is news */
    int want = CL_PACE_MIN_MS;
    for (int i = 0; i < 8; i++) {
        want = want * 2 > CL_PACE_QUIET_MAX_MS ? CL_PACE_QUIET_MAX_MS : want * 2;
        ck_assert_int_eq(cl_pace_after(&p, 7), want);
    }
    ck_assert_int_eq(want, CL_PACE_QUIET_MAX_MS);
    /* News: at once back to the minimum, then doubling again. */
    ck_assert_int_eq(cl_pace_after(&p, 8), CL_PACE_MIN_MS);
    ck_assert_int_eq(cl_pace_after(&p, 8), 2 * CL_PACE_MIN_MS);
    /* A change back to an older answer is news too. */
    ck_assert_int_eq(cl_pace_after(&p, 7), CL_PACE_MIN_MS);
}
END_TEST

START_TEST(test_sig_ignores_remote_splits_and_cache)
{
    asg_t a;
    asg_init(&a);
    uint64_t base = cl_pace_sig(&a.r);
    ck_assert_uint_eq(cl_pace_sig(&a.r), base);
    a.split[0].split_id = 99; /* another remote split: follows an ack */
    a.split[0].begin = 64;
    ck_assert_uint_eq(cl_pace_sig(&a.r), base);
    a.r.n_splits = 1;
    a.r.splits = &a.psplit[1]; /* the remote one acknowledged and gone */
    ck_assert_uint_eq(cl_pace_sig(&a.r), base);
    a.cache.hits = 1000;
    ck_assert_uint_eq(cl_pace_sig(&a.r), base);
    a.r.cache = NULL;
    ck_assert_uint_eq(cl_pace_sig(&a.r), base);
}
END_TEST

/* Each of these is the dispatcher's news: the signature moves. */
START_TEST(test_sig_sees_news)
{
    asg_t a;
    asg_init(&a);
    uint64_t base = cl_pace_sig(&a.r);
#define MOVES(stmt)                                                                                \
    do {                                                                                           \
        asg_init(&a);                                                                              \
        stmt;                                                                                      \
        ck_assert_msg(cl_pace_sig(&a.r) != base, "no news: %s", #stmt);                            \
    } while (0)
    MOVES(a.plan.version = 4);
    MOVES(a.plan.split = 3);
    MOVES(a.plan.local_share = 0.25);
    MOVES(a.plan.compress = 1);
    MOVES(a.plan.mode = (char *)"all");
    MOVES(a.r.plan = NULL);
    MOVES(a.split[1].split_id = 12); /* another split of the client's own */
    MOVES(a.split[0].worker_id = 0); /* a remote split taken back to the client */
    MOVES(a.r.n_splits = 1);         /* the client's own split gone */
    MOVES(a.w.worker_id = 6);        /* another worker */
    MOVES(a.w.address = (char *)"127.0.0.1:7002");
    MOVES(a.r.n_workers = 0); /* the worker left */
    MOVES(a.r.finished = 1);
    MOVES(a.r.failure = (char *)"spec refused");
    MOVES(a.r.fallback = (char *)"no live worker for 5000 ms");
#undef MOVES
}
END_TEST

/* Strings are delimited: moving a character from one to the next is news. */
START_TEST(test_sig_strings_delimited)
{
    asg_t a;
    asg_init(&a);
    a.r.failure = (char *)"ab";
    a.r.fallback = (char *)"c";
    uint64_t x = cl_pace_sig(&a.r);
    a.r.failure = (char *)"a";
    a.r.fallback = (char *)"bc";
    ck_assert_uint_ne(cl_pace_sig(&a.r), x);
    a.r.failure = NULL; /* protobuf-c leaves absent strings at "" or NULL: alike */
    a.r.fallback = (char *)"";
    uint64_t y = cl_pace_sig(&a.r);
    a.r.failure = (char *)"";
    ck_assert_uint_eq(cl_pace_sig(&a.r), y);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_pace");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_quiet_doubles_to_cap);
    tcase_add_test(tc, test_sig_ignores_remote_splits_and_cache);
    tcase_add_test(tc, test_sig_sees_news);
    tcase_add_test(tc, test_sig_strings_delimited);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
