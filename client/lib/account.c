/* account: the job's split accounting, the one function the line tells
 * (cl_line_args_t.account, client/lib/line.h) of every sample it batched,
 * dropped or popped: what that sample means for its split (client_impl.h
 * split states) and for the skip counts the dispatcher is told about.
 * Consumer's thread; takes job->mu. */
#include "client/lib/client_impl.h"

/* One event for the split split_id (entered as HEARD if new). Remote only:
 * local mode has no splits. */
static void count_split(sluice_job_t *job, uint64_t split_id, cl_split_ev_e ev)
{
    if (job->disp == NULL) {
        return;
    }
    pthread_mutex_lock(&job->mu);
    cl_split_t *s = cl_split_find(job, split_id);
    if (s == NULL) {
        /* Samples of a split no assignment listed yet: it completes only
         * once listed, so the next poll should not wait out a quiet pace. */
        s = cl_split_add(job, split_id);
        cl_control_due(job);
    }
    if (s != NULL) {
        cl_split_on(job, s, ev);
    }
    pthread_mutex_unlock(&job->mu);
}

/* A sample the batcher took: skip counts for the dispatcher, and its split. */
static void batched(sluice_job_t *job, const cl_line_took_t *t)
{
    int first = !t->duplicate;
    int skipped = t->skip >= 0;
    if (first && skipped && t->skip < SL_SKIP__COUNT) {
        pthread_mutex_lock(&job->mu);
        job->skips_counted[t->skip]++;
        pthread_mutex_unlock(&job->mu);
    }
    /* Multi-rank: a delivered sample counts once its batch is consumed
     * (CL_LINE_EV_POPPED), so a restarted rank's acknowledged splits are
     * exactly what its training loop had. */
    if (first && job->ack_on_pop) {
        count_split(job, t->split_id, CL_SPLIT_EV_ADDED);
    }
    if (first && (!job->ack_on_pop || skipped)) {
        count_split(job, t->split_id, CL_SPLIT_EV_DONE);
    }
}

void cl_job_account(void *arg, cl_line_ev_e ev, const cl_line_took_t *t)
{
    sluice_job_t *job = arg;
    if (ev == CL_LINE_EV_BATCHED) {
        batched(job, t);
    } else if (job->ack_on_pop) { /* dropped by drop_last, or popped: done */
        count_split(job, t->split_id, CL_SPLIT_EV_DONE);
    }
}
