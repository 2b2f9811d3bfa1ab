/* worker_reports: what a worker's reports do to its splits (the rules at
 * jobs.h disp_announce_e): heartbeat progress and sent reports, refusal of
 * a job, a clean departure and loss. Caller holds the dispatcher mutex. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/base/log.h"
#include "dispatcher/core/jobs_impl.h"

/* ------------------------------------------------------------ heartbeats */

int disp_an_to_send(uint8_t state) { return state == DISP_AN_NEW; }

void disp_jobs_worker_sent(disp_jobs_t *js, disp_worker_t *w)
{
    for (size_t j = 0; j < js->n; j++) {
        disp_job_t *job = js->jobs[j];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, w->id);
        if (jw == NULL) {
            continue;
        }
        for (uint32_t k = 0; k < jw->n; k++) {
            if (disp_an_to_send(jw->sent[k])) {
                jw->sent[k] = DISP_AN_SENT;
                jw->sent_seq[k] = w->hb_seq;
            }
        }
        jw->nrevoked = 0;
    }
}

static int ref_cmp(const void *a, const void *b)
{
    const disp_split_ref_t *x = a;
    const disp_split_ref_t *y = b;
    if (x->job_id != y->job_id) {
        return x->job_id < y->job_id ? -1 : 1;
    }
    if (x->split_id != y->split_id) {
        return x->split_id < y->split_id ? -1 : 1;
    }
    return x->assignment < y->assignment ? -1 : x->assignment > y->assignment;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether sorted refs name hand-out aid of (job, split); a ref without an
 * assignment id (an older worker) names any. */
static int has_ref(const disp_split_ref_t *refs, size_t n, uint64_t job_id, uint64_t split_id,
                   uint64_t aid)
{
    size_t lo = 0, hi = n; /* first entry >= (job, split, 0) */
    disp_split_ref_t key = {.job_id = job_id, .split_id = split_id};
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ref_cmp(&refs[mid], &key) < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    for (size_t i = lo; i < n && refs[i].job_id == job_id && refs[i].split_id == split_id; i++) {
        if (refs[i].assignment == 0 || refs[i].assignment == aid) {
            return 1;
        }
    }
    return 0;
}

/* Whether the worker reports hand-out aid of (job, id) in progress. */
static int in_progress(const disp_progress_t *p, uint64_t job_id, uint64_t id, uint64_t aid)
{
    if (p->n_in_progress > 0 || p->n_legacy == 0) {
        return has_ref(p->in_progress, p->n_in_progress, job_id, id, aid);
    }
    return bsearch(&id, p->legacy_ids, p->n_legacy, sizeof(id), u64_cmp) != NULL;
}

size_t disp_jobs_worker_progress(disp_jobs_t *js, disp_worker_t *w, disp_progress_t *p,
                                 int64_t now_ms)
{
    if (p->n_in_progress > 1) {
        qsort(p->in_progress, p->n_in_progress, sizeof(*p->in_progress), ref_cmp);
    }
    if (p->n_legacy > 1) {
        qsort(p->legacy_ids, p->n_legacy, sizeof(*p->legacy_ids), u64_cmp);
    }
    if (p->n_sent > 1) {
        qsort(p->sent, p->n_sent, sizeof(*p->sent), ref_cmp);
    }
    size_t nback = 0;
    for (size_t j = 0; j < js->n; j++) {
        disp_job_t *job = js->jobs[j];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, w->id);
        if (jw == NULL) {
            continue;
        }
        int returned = 0;
        for (uint32_t k = 0; k < jw->n;) {
            uint64_t id = jw->ids[k];
            int back = 0;
            switch ((disp_announce_e)jw->sent[k]) {
            case DISP_AN_NEW:
                back = p->leaving; /* never told, and it takes nothing new now */
                break;
            case DISP_AN_SENT:
            case DISP_AN_SEEN:
                if (in_progress(p, job->id, id, jw->aid[k])) {
                    jw->sent[k] = DISP_AN_SEEN;
                } else if (has_ref(p->sent, p->n_sent, job->id, id, jw->aid[k])) {
                    jw->sent[k] = DISP_AN_DELIVERED;
                    jw->delivered++;
                    disp_jw_done(jw, disp_split_cost(job, id), now_ms);
                    SL_DEBUG("job %" PRIu64 ": split %" PRIu64 " sent by worker %" PRIu64,
                             job->id, id, w->id);
                    returned = 1; /* room for the next split in this reply */
                } else if (jw->sent[k] == DISP_AN_SEEN || p->leaving ||
                           w->hb_seq - jw->sent_seq[k] >= DISP_RESEND_AFTER_HB) {
                    back = 1; /* dropped, refused, or the reply never arrived */
                }
                break;
            case DISP_AN_DELIVERED:
                break;
            }
            if (!back) {
                k++;
                continue;
            }
            uint32_t idx = 0;
            disp_epoch_t *ep = disp_epoch_of(job, id, &idx);
            if (ep == NULL || ep->splits[idx].state != DISP_SPLIT_ASSIGNED) {
                k++; /* cannot happen while the invariants hold */
                continue;
            }
            disp_revoke_at_owner(job, &ep->splits[idx], id);
            if (disp_take_back(js, job, ep, idx) != 0) {
                k++; /* refused (logged): it stays at entry k */
                continue;
            }
            /* Entry k is gone: do not advance. */
            nback++;
            returned = 1;
        }
        disp_jw_clock(jw, now_ms);
        if (returned) {
            disp_jobs_assign(js, job, now_ms);
        }
    }
    w->hb_seq++;
    return nback;
}

/* ------------------------------------------------------------ refusal, departure, loss */

void disp_jobs_worker_lost(disp_jobs_t *js, uint64_t worker_id, int64_t now_ms)
{
    for (size_t i = 0; i < js->n; i++) {
        disp_job_t *job = js->jobs[i];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, worker_id);
        if (jw == NULL) {
            continue;
        }
        size_t n = disp_take_back_all(js, job, jw, 0);
        if (n > 0) {
            SL_NOTICE("job %" PRIu64 ": %zu split(s) of lost worker %" PRIu64 " re-queued",
                      job->id, n, worker_id);
        }
        disp_jw_remove(job, jw);
        disp_jobs_assign(js, job, now_ms);
    }
}

size_t disp_jobs_worker_left(disp_jobs_t *js, uint64_t worker_id, int64_t now_ms)
{
    size_t total = 0;
    for (size_t i = 0; i < js->n; i++) {
        disp_job_t *job = js->jobs[i];
        disp_jw_t *jw = job->state == DISP_JOB_CLOSED ? NULL : disp_job_jw(job, worker_id);
        if (jw == NULL) {
            continue;
        }
        size_t n = 0;
        for (uint32_t k = jw->n; k-- > 0;) {
            uint32_t idx = 0;
            disp_epoch_t *ep = disp_epoch_of(job, jw->ids[k], &idx);
            if (jw->sent[k] == DISP_AN_DELIVERED || ep == NULL ||
                ep->splits[idx].state != DISP_SPLIT_ASSIGNED) {
                continue;
            }
            if (disp_take_back(js, job, ep, idx) != 0) {
                continue; /* refused (logged) */
            }
            n++;
        }
        if (n > 0) {
            SL_NOTICE("job %" PRIu64 ": %zu split(s) of departed worker %" PRIu64 " re-queued",
                      job->id, n, worker_id);
            disp_jobs_assign(js, job, now_ms);
        }
        total += n;
    }
    return total;
}

int disp_jobs_worker_refused(disp_jobs_t *js, disp_job_t *job, uint64_t worker_id,
                             const char *reason, int64_t now_ms)
{
    if (job->state == DISP_JOB_CLOSED) {
        return 0;
    }
    disp_jw_t *jw = disp_jw_create(js, job, worker_id);
    if (jw == NULL) {
        return -ENOMEM;
    }
    if (!jw->banned) {
        char why[200];
        disp_text_copy(why, sizeof(why),
                       reason != NULL && reason[0] != '\0' ? reason : "(no reason given)");
        SL_WARN("job %" PRIu64 ": worker %" PRIu64 " cannot run it: \"%s\"; its splits go "
                "to other workers or the client",
                job->id, worker_id, why);
        snprintf(job->worker_failure, sizeof(job->worker_failure), "worker %" PRIu64 ": %s",
                 worker_id, why);
        /* A data server it could not reach may return (worker_back.c). */
        disp_text_copy(jw->why_out, sizeof(jw->why_out), why);
        jw->out_ms = now_ms;
        jw->down = disp_failure_is_data_server(reason, job->id);
        if (jw->down) {
            jw->nout++;
            jw->back_after_ms = now_ms + disp_back_delay_ms(jw->nout);
            if (jw->nout >= DISP_BACK_MAX_OUTS) {
                SL_WARN("job %" PRIu64 ": worker %" PRIu64 " gave the job back %" PRIu32
                        " times for its data server: it stays out of this job",
                        job->id, worker_id, jw->nout);
            } else {
                SL_NOTICE("job %" PRIu64 ": worker %" PRIu64 " may take the job again in "
                          "%.1f s if its data server answers",
                          job->id, worker_id, (double)disp_back_delay_ms(jw->nout) / 1000.0);
            }
        }
    }
    jw->banned = 1;
    jw->nrevoked = 0;
    (void)disp_take_back_all(js, job, jw, 0);
    disp_jobs_assign(js, job, now_ms);
    return 0;
}

