/* The control thread: every 100 ms it acknowledges completed splits, asks
 * for retries of splits whose stream broke, fetches the assignment, and keeps
 * one fetcher per worker that holds splits of this job. Acks and
 * GetAssignment run in that order on this one thread, so an assignment never
 * shows a split this client already acknowledged as new. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_impl.h"

#define CL_POLL_MS 100

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void fail_job(sluice_job_t *job, const char *why)
{
    pthread_mutex_lock(&job->mu);
    if (job->failure[0] == '\0') {
        snprintf(job->failure, sizeof(job->failure), "%s", why);
    }
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
}

/* Sends queued acks and retries; on success removes acked splits. */
static int send_acks(sluice_job_t *job, uint64_t *retry, size_t nretry)
{
    pthread_mutex_lock(&job->mu);
    size_t n = job->nacks;
    uint64_t *ids = n ? malloc(n * sizeof(*ids)) : NULL;
    if (n && ids == NULL) {
        pthread_mutex_unlock(&job->mu);
        return -ENOMEM;
    }
    if (n) {
        memcpy(ids, job->acks, n * sizeof(*ids));
    }
    pthread_mutex_unlock(&job->mu);
    if (n == 0 && nretry == 0) {
        return 0;
    }
    Sluice__AckSplitsRequest req = SLUICE__ACK_SPLITS_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job->job_id;
    req.n_split_ids = n;
    req.split_ids = ids;
    req.n_retry_split_ids = nretry;
    req.retry_split_ids = retry;
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    int rc = sl_rpc_unary(job->disp, "/sluice.Dispatcher/AckSplits", &req.base,
                          &sluice__ack_splits_response__descriptor, job->timeout_ms, 0, &resp,
                          &st);
    if (rc == 0) {
        protobuf_c_message_free_unpacked(resp, NULL);
        pthread_mutex_lock(&job->mu);
        /* Acks queued meanwhile stay; the first n were sent. */
        memmove(job->acks, job->acks + n, (job->nacks - n) * sizeof(*ids));
        job->nacks -= n;
        for (size_t i = 0; i < n; i++) {
            cl_split_t *s = cl_split_find(job, ids[i]);
            if (s != NULL) {
                cl_split_remove(job, s);
            }
        }
        pthread_mutex_unlock(&job->mu);
    } else if (rc == -ECOMM && st.code == SL_RPC_NOT_FOUND) {
        fail_job(job, "the dispatcher no longer knows this job (timed out or restarted)");
    }
    free(ids);
    return rc;
}

static cl_fetcher_t *fetcher_for(sluice_job_t *job, uint64_t worker_id)
{
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        if (job->fetchers[i].started && job->fetchers[i].worker_id == worker_id) {
            return &job->fetchers[i];
        }
    }
    return NULL;
}

static void ensure_fetcher(sluice_job_t *job, uint64_t worker_id, const char *address)
{
    pthread_mutex_lock(&job->mu);
    cl_fetcher_t *f = fetcher_for(job, worker_id);
    if (f != NULL || job->closing) {
        pthread_mutex_unlock(&job->mu);
        return;
    }
    for (int i = 0; i < CL_MAX_FETCHERS && f == NULL; i++) {
        if (!job->fetchers[i].started) {
            f = &job->fetchers[i];
        }
    }
    if (f == NULL) {
        pthread_mutex_unlock(&job->mu);
        return; /* more workers than streams: the others wait for a slot */
    }
    memset(f, 0, sizeof(*f));
    f->job = job;
    f->worker_id = worker_id;
    snprintf(f->address, sizeof(f->address), "%s", address);
    f->state = CL_FETCH_RUNNING;
    f->started = 1;
    if (pthread_create(&f->thread, NULL, cl_fetch_main, f) != 0) {
        f->started = 0;
    }
    pthread_mutex_unlock(&job->mu);
}

/* Joins fetchers whose stream ended; for broken ones, returns the splits
 * of that worker that are not complete so the dispatcher re-assigns them. */
static size_t reap_fetchers(sluice_job_t *job, uint64_t **ret_retry)
{
    size_t n = 0, cap = 0;
    uint64_t *retry = NULL;
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        cl_fetcher_t *f = &job->fetchers[i];
        pthread_mutex_lock(&job->mu);
        int done = f->started && f->state != CL_FETCH_RUNNING;
        pthread_mutex_unlock(&job->mu);
        if (!done) {
            continue;
        }
        pthread_join(f->thread, NULL);
        pthread_mutex_lock(&job->mu);
        if (f->state == CL_FETCH_BROKEN) {
            for (size_t k = 0; k < CL_MAX_SPLITS; k++) {
                cl_split_t *s = &job->splits[k];
                if (s->in_use && !s->acked && s->owner == f->worker_id) {
                    if (n == cap) {
                        cap = cap ? cap * 2 : 64;
                        uint64_t *p = realloc(retry, cap * sizeof(*p));
                        if (p == NULL) {
                            break;
                        }
                        retry = p;
                    }
                    retry[n++] = s->id;
                    s->owner = UINT64_MAX; /* unknown until the next assignment */
                }
            }
        }
        f->started = 0;
        pthread_mutex_unlock(&job->mu);
    }
    *ret_retry = retry;
    return n;
}

static void apply_assignment(sluice_job_t *job, const Sluice__GetAssignmentResponse *r)
{
    pthread_mutex_lock(&job->mu);
    if (r->plan != NULL) {
        job->split_units = r->plan->split;
        job->local_share = r->plan->local_share;
    }
    for (size_t i = 0; i < r->n_splits; i++) {
        const Sluice__SplitAssignment *a = r->splits[i];
        if (a->epoch >= job->spec.epochs || a->begin > a->end || a->end > job->num_samples ||
            a->stage_to > job->nunits) {
            continue; /* not a split of this job: ignore rather than trust */
        }
        cl_split_t *s = cl_split_find(job, a->split_id);
        if (s == NULL) {
            s = cl_split_add(job, a->split_id);
            if (s == NULL) {
                snprintf(job->failure, sizeof(job->failure),
                         "more than %d live splits: raise split_size", CL_MAX_SPLITS);
                break;
            }
            s->owner = UINT64_MAX;
        }
        if (!s->range_known) {
            s->epoch = a->epoch;
            s->begin = a->begin;
            s->end = a->end;
            s->next = a->begin;
            s->range_known = 1;
            cl_split_check_done(job, s); /* its samples may all be here already */
        }
        if (s->acked) {
            continue;
        }
        s->stage_to = a->stage_to;
        if (a->worker_id == 0 && s->owner != 0) {
            s->next = s->begin; /* now ours: run every position not yet delivered */
            if (job->nlocal_pending == job->caplocal) {
                size_t cap = job->caplocal ? job->caplocal * 2 : 64;
                uint64_t *p = realloc(job->local_pending, cap * sizeof(*p));
                if (p == NULL) {
                    snprintf(job->failure, sizeof(job->failure), "out of memory");
                    break;
                }
                job->local_pending = p;
                job->caplocal = cap;
            }
            job->local_pending[job->nlocal_pending++] = s->id;
        }
        s->owner = a->worker_id;
    }
    if (r->finished) {
        job->finished_remote = 1;
    }
    if (r->failure != NULL && r->failure[0] != '\0' && job->failure[0] == '\0') {
        snprintf(job->failure, sizeof(job->failure), "job failed: %s", r->failure);
    }
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
}

static void *control_main(void *arg)
{
    sluice_job_t *job = arg;
    int failures = 0;
    for (;;) {
        pthread_mutex_lock(&job->mu);
        int closing = job->closing;
        pthread_mutex_unlock(&job->mu);
        if (closing) {
            break;
        }
        uint64_t *retry = NULL;
        size_t nretry = reap_fetchers(job, &retry);
        int rc = send_acks(job, retry, nretry);
        free(retry);
        Sluice__GetAssignmentRequest req = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
        req.version = SL_PROTOCOL_VERSION;
        req.job_id = job->job_id;
        ProtobufCMessage *resp = NULL;
        sl_rpc_status_t st;
        if (rc == 0 || rc == -ECOMM) {
            rc = sl_rpc_unary(job->disp, "/sluice.Dispatcher/GetAssignment", &req.base,
                              &sluice__get_assignment_response__descriptor, job->timeout_ms, 0,
                              &resp, &st);
        }
        if (rc == 0) {
            failures = 0;
            Sluice__GetAssignmentResponse *r = (Sluice__GetAssignmentResponse *)resp;
            apply_assignment(job, r);
            for (size_t i = 0; i < r->n_workers; i++) {
                if (r->workers[i]->worker_id != 0 && r->workers[i]->address != NULL) {
                    ensure_fetcher(job, r->workers[i]->worker_id, r->workers[i]->address);
                }
            }
            protobuf_c_message_free_unpacked(resp, NULL);
        } else if (rc == -ECOMM && st.code == SL_RPC_NOT_FOUND) {
            fail_job(job, "the dispatcher no longer knows this job (timed out or restarted)");
        } else if (++failures * CL_POLL_MS > 60000) {
            fail_job(job, "the dispatcher has not answered for 60 s");
        }
        sleep_ms(CL_POLL_MS);
    }
    return NULL;
}

int cl_control_start(sluice_job_t *job)
{
    if (pthread_create(&job->control, NULL, control_main, job) != 0) {
        return -EAGAIN;
    }
    job->control_started = 1;
    return 0;
}

void cl_control_stop(sluice_job_t *job)
{
    pthread_join(job->control, NULL);
    pthread_mutex_lock(&job->mu);
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        job->fetchers[i].stop = 1;
    }
    pthread_mutex_unlock(&job->mu);
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        if (job->fetchers[i].started) {
            pthread_join(job->fetchers[i].thread, NULL);
            job->fetchers[i].started = 0;
        }
    }
    /* Flush final acks, then free the job on the dispatcher. */
    send_acks(job, NULL, 0);
    Sluice__CloseJobRequest req = SLUICE__CLOSE_JOB_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job->job_id;
    ProtobufCMessage *resp = NULL;
    sl_rpc_status_t st;
    if (sl_rpc_unary(job->disp, "/sluice.Dispatcher/CloseJob", &req.base,
                     &sluice__close_job_response__descriptor, 2000, 0, &resp, &st) == 0) {
        protobuf_c_message_free_unpacked(resp, NULL);
    }
}
