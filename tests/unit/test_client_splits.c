/* The client's split states (client/lib/splits.c cl_split_on): every
 * transition, the ack and received queues they feed, and the table's
 * insert/remove under collisions. A bare job: no source, no threads. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "tests/unit/fixtures.h"

static sluice_job_t *job_new(int ack_on_pop)
{
    sluice_job_t *job = calloc(1, sizeof(*job));
    ck_assert_ptr_nonnull(job);
    job->splits = calloc(CL_MAX_SPLITS, sizeof(*job->splits));
    ck_assert_ptr_nonnull(job->splits);
    job->ack_on_pop = ack_on_pop;
    return job;
}

static void job_free(sluice_job_t *job)
{
    cl_ids_free(&job->acks);
    cl_ids_free(&job->recvd);
    free(job->splits);
    free(job);
}

static void listed(sluice_job_t *job, cl_split_t *s, uint64_t begin, uint64_t end)
{
    if (s->state == CL_SPLIT_HEARD) {
        s->begin = begin;
        s->end = end;
    }
    cl_split_on(job, s, CL_SPLIT_EV_LISTED);
}

START_TEST(test_heard_then_listed_acks)
{
    sluice_job_t *job = job_new(0);
    cl_split_t *s = cl_split_add(job, 7);
    ck_assert_int_eq(s->state, CL_SPLIT_HEARD);
    ck_assert_uint_eq(s->owner, UINT64_MAX);
    /* Every sample arrives before the assignment: complete only with its range. */
    for (int i = 0; i < 3; i++) {
        cl_split_on(job, s, CL_SPLIT_EV_DONE);
    }
    ck_assert_int_eq(s->state, CL_SPLIT_HEARD);
    ck_assert_uint_eq(job->acks.n, 0);
    listed(job, s, 10, 13);
    ck_assert_int_eq(s->state, CL_SPLIT_ACKED);
    ck_assert_uint_eq(job->acks.n, 1);
    ck_assert_uint_eq(job->acks.v[0], 7);
    /* Later events change nothing and queue nothing. */
    cl_split_on(job, s, CL_SPLIT_EV_DONE);
    listed(job, s, 10, 13);
    ck_assert_int_eq(s->state, CL_SPLIT_ACKED);
    ck_assert_uint_eq(s->done, 3);
    ck_assert_uint_eq(job->acks.n, 1);
    cl_ids_drop(&job->acks, 1);
    ck_assert_uint_eq(job->acks.n, 0);
    job_free(job);
}
END_TEST

START_TEST(test_multirank_received_then_acked)
{
    sluice_job_t *job = job_new(1);
    cl_split_t *s = cl_split_add(job, 3);
    listed(job, s, 0, 2);
    ck_assert_int_eq(s->state, CL_SPLIT_OPEN);
    cl_split_on(job, s, CL_SPLIT_EV_ADDED);
    ck_assert_int_eq(s->state, CL_SPLIT_OPEN);
    cl_split_on(job, s, CL_SPLIT_EV_ADDED);
    ck_assert_int_eq(s->state, CL_SPLIT_RECEIVING);
    ck_assert_uint_eq(job->recvd.n, 1);
    cl_split_on(job, s, CL_SPLIT_EV_REPORTED);
    ck_assert_int_eq(s->state, CL_SPLIT_RECEIVED);
    /* Handed out anew after the report: reported again. */
    listed(job, s, 0, 2);
    ck_assert_int_eq(s->state, CL_SPLIT_RECEIVING);
    ck_assert_uint_eq(job->recvd.n, 2);
    /* A listing while the report is queued changes nothing. */
    listed(job, s, 0, 2);
    ck_assert_int_eq(s->state, CL_SPLIT_RECEIVING);
    ck_assert_uint_eq(job->recvd.n, 2);
    cl_split_on(job, s, CL_SPLIT_EV_DONE);
    cl_split_on(job, s, CL_SPLIT_EV_DONE);
    ck_assert_int_eq(s->state, CL_SPLIT_ACKED);
    ck_assert_uint_eq(job->acks.n, 1);
    cl_split_on(job, s, CL_SPLIT_EV_REPORTED); /* the late answer */
    ck_assert_int_eq(s->state, CL_SPLIT_ACKED);
    job_free(job);
}
END_TEST

START_TEST(test_single_consumer_never_reports_received)
{
    sluice_job_t *job = job_new(0);
    cl_split_t *s = cl_split_add(job, 1);
    listed(job, s, 0, 1);
    cl_split_on(job, s, CL_SPLIT_EV_ADDED);
    ck_assert_int_eq(s->state, CL_SPLIT_OPEN);
    ck_assert_uint_eq(job->recvd.n, 0);
    job_free(job);
}
END_TEST

START_TEST(test_table_collisions)
{
    sluice_job_t *job = job_new(0);
    /* Enough ids that probe runs collide and wrap; remove every other one. */
    enum { N = 3000 };
    for (uint64_t id = 0; id < N; id++) {
        cl_split_t *s = cl_split_add(job, id * 65536);
        ck_assert_ptr_nonnull(s);
        ck_assert_ptr_eq(cl_split_add(job, id * 65536), s);
    }
    for (uint64_t id = 0; id < N; id += 2) {
        cl_split_remove(job, cl_split_find(job, id * 65536));
    }
    for (uint64_t id = 0; id < N; id++) {
        cl_split_t *s = cl_split_find(job, id * 65536);
        if (id % 2 == 0) {
            ck_assert_ptr_null(s);
        } else {
            ck_assert_ptr_nonnull(s);
            ck_assert_uint_eq(s->id, id * 65536);
        }
    }
    job_free(job);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client_splits");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_heard_then_listed_acks);
    tcase_add_test(tc, test_multirank_received_then_acked);
    tcase_add_test(tc, test_single_consumer_never_reports_received);
    tcase_add_test(tc, test_table_collisions);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
