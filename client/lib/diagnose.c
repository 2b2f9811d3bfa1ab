/* diagnose: see diagnose.h. */
#include "client/lib/diagnose.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "client/lib/client_impl.h"
#include "common/base/clock.h"

/* Appends to buf at *off, never past len (a full buffer just stops). */
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
    if (*off + 1 >= len) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *off, len - *off, fmt, ap);
    va_end(ap);
    if (n > 0) {
        *off = (size_t)n < len - *off ? *off + (size_t)n : len - 1;
    }
}

static const char *state_name(cl_split_state_e s)
{
    switch (s) {
    case CL_SPLIT_HEARD:
        return "heard";
    case CL_SPLIT_OPEN:
        return "open";
    case CL_SPLIT_RECEIVING:
        return "receiving";
    case CL_SPLIT_RECEIVED:
        return "received";
    case CL_SPLIT_ACKED:
        return "acked";
    case CL_SPLIT_FREE:
        break;
    }
    return "free";
}

static const char *fetch_name(cl_fetch_state_e s)
{
    return s == CL_FETCH_RUNNING ? "running" : s == CL_FETCH_BROKEN ? "broken" : "ended";
}

static void put_split(char *buf, size_t len, size_t *off, const cl_split_t *s)
{
    put(buf, len, off, " %" PRIu64 ": epoch %" PRIu64 " [%" PRIu64 ", %" PRIu64 ")", s->id,
        s->epoch, s->begin, s->end);
    if (s->owner == 0) {
        put(buf, len, off, " next %" PRIu64, s->next);
    }
    put(buf, len, off, " done %" PRIu64 " %s;", s->done, state_name(s->state));
}

/* The split table (job->mu held): counts by owner and state, then up to
 * CL_DIAGNOSE_SPLITS unacknowledged splits, the client's own first. */
static void put_splits(const sluice_job_t *job, char *buf, size_t len, size_t *off)
{
    size_t client = 0, worker = 0, unknown = 0, acked = 0;
    for (size_t k = 0; k < CL_MAX_SPLITS; k++) {
        const cl_split_t *s = &job->splits[k];
        if (s->state == CL_SPLIT_FREE) {
            continue;
        }
        acked += s->state == CL_SPLIT_ACKED;
        if (s->state != CL_SPLIT_ACKED) {
            client += s->owner == 0;
            worker += s->owner != 0 && s->owner != UINT64_MAX;
            unknown += s->owner == UINT64_MAX;
        }
    }
    put(buf, len, off,
        " Splits not yet acknowledged: %zu the client's, %zu workers', %zu owner unknown; "
        "%zu acknowledgements queued (%zu ids).",
        client, worker, unknown, acked, job->acks.n);
    size_t listed = 0;
    for (int pass = 0; pass < 2; pass++) { /* the client's own, then the workers' */
        for (size_t k = 0; k < CL_MAX_SPLITS && listed < CL_DIAGNOSE_SPLITS; k++) {
            const cl_split_t *s = &job->splits[k];
            if (s->state == CL_SPLIT_FREE || s->state == CL_SPLIT_ACKED ||
                (s->owner == 0) != (pass == 0)) {
                continue;
            }
            if (listed == 0) {
                put(buf, len, off, " Of them:");
            }
            if (s->owner != 0) {
                put(buf, len, off, " worker %" PRIu64 "'s", s->owner);
            }
            put_split(buf, len, off, s);
            listed++;
        }
    }
}

int cl_job_diagnose(sluice_job_t *job, char *buf, size_t len)
{
    size_t off = 0;
    if (len == 0) {
        return 0;
    }
    buf[0] = '\0';
    if (sl_mutex_lock_until(&job->mu, sl_mono_sec() + CL_DIAGNOSE_LOCK_MS / 1000.0) != 0) {
        put(buf, len, &off,
            "the job's lock has been held for over %d ms: a thread of the library is "
            "stuck holding it",
            CL_DIAGNOSE_LOCK_MS);
        return -ETIMEDOUT;
    }
    double now = sl_mono_sec();
    put(buf, len, &off,
        "consumer: %" PRIu64 " pumps, the last %.1f s ago with %u of %u "
        "executor places in use;",
        job->pumps, job->pump_at > 0 ? now - job->pump_at : 0.0, job->pump_inflight,
        job->pump_capacity);
    if (job->disp == NULL) {
        put(buf, len, &off, " local mode.");
        pthread_mutex_unlock(&job->mu);
        return 0;
    }
    size_t msgs = 0; /* not their samples: a message's cursor is the consumer's alone */
    for (const cl_msg_t *m = job->fetch.in_head; m != NULL; m = m->next) {
        msgs++;
    }
    put(buf, len, &off,
        " %zu received messages queued; %zu local splits waiting to start; client idle %d, "
        "CPU busy %d.",
        msgs, sl_ring_len(&job->local_pending), job->idle, job->cpu_busy);
    put_splits(job, buf, len, &off);
    put(buf, len, &off, " Fetch streams:");
    int nfetch = 0;
    for (int i = 0; i < CL_MAX_FETCHERS; i++) {
        const cl_fetcher_t *f = &job->fetch.fetchers[i];
        if (!f->started) {
            continue;
        }
        put(buf, len, &off, " worker %" PRIu64 " %s (%u credits owed%s%s);", f->worker_id,
            fetch_name(f->state), f->credits_owed, f->error[0] ? ": " : "", f->error);
        nfetch++;
    }
    if (nfetch == 0) {
        put(buf, len, &off, " none;");
    }
    put(buf, len, &off, " %zu workers to retry.", job->control.nretry_workers);
    if (job->fallback[0] != '\0') {
        put(buf, len, &off, " Dispatcher: %s.", job->fallback);
    }
    if (job->failure[0] != '\0') {
        put(buf, len, &off, " Failed: %s.", job->failure);
    }
    pthread_mutex_unlock(&job->mu);
    return 0;
}
