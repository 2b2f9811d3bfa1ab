/* test_dispatcher_splits: a split's state moves only through disp_split_move
 * (dispatcher/core/jobs_impl.h) and its allow table. The table itself, every
 * (from, to) pair; then on a real job: an allowed move keeps the epoch's
 * per-state counts, a refused one changes nothing, returns -EINVAL and is
 * counted in split_moves_refused. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <syslog.h>

#include "common/base/log.h"
#include "dispatcher/core/jobs.h"
#include "dispatcher/core/jobs_impl.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_jobs.h"

#define SPEC                                                                                       \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"                  \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8}],"            \
    " \"batch_size\": 4, \"epochs\": 1, \"offload\": \"all\"}"

static const disp_limits_t LIM = {
    .split_size = 10,
    .max_splits_per_worker = 2,
    .max_client_splits = 2,
    .max_jobs = 4,
    .worker_timeout_ms = 1000,
    .client_timeout_ms = 5000,
};

/* The moves the dispatcher makes (jobs_impl.h): give, take back, ack from
 * any live state, received and its requeue. */
static const int ALLOWED[DISP_SPLIT_NSTATES][DISP_SPLIT_NSTATES] = {
    /*                      PENDING ASSIGNED ACKED RECEIVED */
    [DISP_SPLIT_PENDING] = {0, 1, 1, 0},
    [DISP_SPLIT_ASSIGNED] = {1, 0, 1, 1},
    [DISP_SPLIT_ACKED] = {0, 0, 0, 0},
    [DISP_SPLIT_RECEIVED] = {1, 0, 1, 0},
};

START_TEST(test_allow_table)
{
    for (int from = 0; from < DISP_SPLIT_NSTATES; from++) {
        for (int to = 0; to < DISP_SPLIT_NSTATES; to++) {
            ck_assert_msg(disp_split_move_allowed((disp_split_state_e)from,
                                                  (disp_split_state_e)to) == ALLOWED[from][to],
                          "move %d -> %d", from, to);
        }
    }
    /* Out-of-range states are refused, not read past the table. */
    ck_assert_int_eq(disp_split_move_allowed((disp_split_state_e)DISP_SPLIT_NSTATES,
                                             DISP_SPLIT_PENDING),
                     0);
    ck_assert_int_eq(disp_split_move_allowed(DISP_SPLIT_PENDING,
                                             (disp_split_state_e)DISP_SPLIT_NSTATES),
                     0);
}
END_TEST

static void counts(const disp_epoch_t *ep, uint32_t p, uint32_t k, uint32_t r)
{
    ck_assert_uint_eq(ep->npending, p);
    ck_assert_uint_eq(ep->nacked, k);
    ck_assert_uint_eq(ep->nreceived, r);
}

START_TEST(test_move_keeps_counts)
{
    sl_log_set_level(LOG_CRIT);
    fx_jobs_t e;
    fx_jobs_init(&e, &LIM);
    /* No worker, offload all: nothing is handed out, every split PENDING. */
    disp_job_t *job = fx_jobs_submit(&e, SPEC, 100); /* 10 splits */
    ck_assert_uint_eq(job->nep, 1);
    disp_epoch_t *ep = &job->ep[0];
    ck_assert_uint_eq(ep->splits[0].state, DISP_SPLIT_PENDING);
    counts(ep, 10, 0, 0);

    ck_assert_int_eq(disp_split_move(&e.js, job, ep, 0, DISP_SPLIT_ASSIGNED), 0);
    counts(ep, 9, 0, 0);
    ck_assert_int_eq(disp_split_move(&e.js, job, ep, 0, DISP_SPLIT_RECEIVED), 0);
    counts(ep, 9, 0, 1);
    ck_assert_int_eq(disp_split_move(&e.js, job, ep, 0, DISP_SPLIT_PENDING), 0);
    counts(ep, 10, 0, 0);
    uint64_t acked = job->acked_total;
    ck_assert_int_eq(disp_split_move(&e.js, job, ep, 0, DISP_SPLIT_ACKED), 0);
    counts(ep, 9, 1, 0);
    ck_assert_uint_eq(job->acked_total, acked + 1);
    ck_assert_uint_eq(ep->acked_positions, 10);
    ck_assert_uint_eq(e.js.split_moves_refused, 0);

    /* Refused: ACKED is final; PENDING cannot be RECEIVED. Nothing changes. */
    ck_assert_int_eq(disp_split_move(&e.js, job, ep, 0, DISP_SPLIT_PENDING), -EINVAL);
    ck_assert_int_eq(disp_split_move(&e.js, job, ep, 0, DISP_SPLIT_ASSIGNED), -EINVAL);
    ck_assert_int_eq(disp_split_move(&e.js, job, ep, 1, DISP_SPLIT_RECEIVED), -EINVAL);
    ck_assert_int_eq(disp_split_move(&e.js, job, ep, 1, DISP_SPLIT_PENDING), -EINVAL);
    ck_assert_uint_eq(ep->splits[0].state, DISP_SPLIT_ACKED);
    ck_assert_uint_eq(ep->splits[1].state, DISP_SPLIT_PENDING);
    counts(ep, 9, 1, 0);
    ck_assert_uint_eq(job->acked_total, acked + 1);
    ck_assert_uint_eq(e.js.split_moves_refused, 4);
    e.js.split_moves_refused = 0; /* refused on purpose: fx_jobs_free checks it */
    fx_jobs_free(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dispatcher_splits");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_allow_table);
    tcase_add_test(tc, test_move_keeps_counts);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
