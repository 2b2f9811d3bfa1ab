/* A fetcher: one thread per worker, one Fetch stream. It queues every
 * received Batch for the consumer and returns credits as the consumer
 * finishes messages, so a slow training loop slows the worker down instead
 * of filling memory (at most CL_CREDITS messages per worker in flight).
 * Messages are not unpacked: the fetcher keeps the received slices and
 * indexes them (client/lib/rx.h), and the consumer copies each sample once,
 * from the slices into its batch. A message that does not parse breaks the
 * stream (its splits are retried elsewhere).
 *
 * Wake-ups (issue 39: under a CPU quota they cost more than the bytes): the
 * thread blocks in gRPC's receive while the worker may send, and on its
 * own condition variable while the worker holds no credit -- no receive
 * poll; the consumer is woken once per empty-to-non-empty queue, not per
 * message. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/rx.h"
#include "common/base/clock.h"

/* The fetch thread's safety net: however it waits, it looks at its stop
 * flag and its stream at least this often (a lost wake-up or a credit the
 * worker dropped costs a second, not a stall). Waits are otherwise woken:
 * by a message, the stream's end, cl_fetch_owe or cl_fetch_stop. */
#define CL_FETCH_WAIT_MS 1000

static void finish(cl_fetcher_t *f, cl_fetch_state_e state, const char *why)
{
    sluice_job_t *job = f->job;
    pthread_mutex_lock(&job->mu);
    f->state = state;
    f->cs = NULL;
    f->waiting = 0;
    snprintf(f->error, sizeof(f->error), "%s", why);
    pthread_cond_broadcast(&job->cv);
    cl_control_due(job); /* reap it, and retry its worker's splits if it broke */
    pthread_mutex_unlock(&job->mu);
}

void cl_fetch_stop(cl_fetcher_t *f)
{
    f->stop = 1;
    if (f->waiting) {
        pthread_cond_signal(&f->cv);
    }
    sl_rpc_cstream_cancel(f->cs); /* a blocked receive returns; NULL ok */
}

void cl_fetch_owe(cl_fetcher_t *f)
{
    f->credits_owed++;
    if (f->waiting) {
        pthread_cond_signal(&f->cv);
    }
}

/* The stream's state on the fetch thread. The worker sends one message per
 * credit, so held = credits granted - messages received is what it may
 * still send: while held > 0 the thread blocks in the receive; at 0 nothing
 * can arrive but the stream's end, so it sleeps until the consumer owes a
 * credit (and then looks at the stream without waiting). */
typedef struct fetch_run_s {
    cl_fetcher_t *f;
    sl_rpc_cstream_t *cs;
    sl_codec_t *codec; /* this stream's decompressor, made on first use */
    unsigned held;
    cl_fetch_state_e end;
    char why[512];
} fetch_run_t;

/* Waits for a reason to act, then returns the credits now owed (0 if
 * none), or -1 to stop. */
static int wait_turn(fetch_run_t *r, unsigned *owed)
{
    sluice_job_t *job = r->f->job;
    pthread_mutex_lock(&job->mu);
    if (r->held == 0 && r->f->credits_owed == 0 && !r->f->stop && !job->closing) {
        r->f->waiting = 1;
        (void)sl_cond_wait_ms(&r->f->cv, &job->mu, CL_FETCH_WAIT_MS);
        r->f->waiting = 0;
    }
    int stop = r->f->stop || job->closing;
    *owed = r->f->credits_owed;
    r->f->credits_owed = 0;
    pthread_mutex_unlock(&job->mu);
    return stop ? -1 : 0;
}

static int stopping(cl_fetcher_t *f)
{
    pthread_mutex_lock(&f->job->mu);
    int stop = f->stop || f->job->closing;
    pthread_mutex_unlock(&f->job->mu);
    return stop;
}

/* One received message onto the consumer's queue. Only the first message
 * into an empty queue wakes the consumer: it waits only on an empty queue,
 * and takes everything queued before it waits again. 0, or -1 (r->why). */
static int queue_msg(fetch_run_t *r, sl_rpc_raw_t *raw)
{
    sluice_job_t *job = r->f->job;
    cl_rx_t *rx = NULL;
    char perr[256];
    int rc = cl_rx_from_raw(raw, &r->codec, &rx, perr, sizeof(perr)); /* takes raw */
    cl_msg_t *msg = rc == 0 ? calloc(1, sizeof(*msg)) : NULL;
    if (msg == NULL) {
        cl_rx_free(rx);
        snprintf(r->why, sizeof(r->why), "%s", rc < 0 ? perr : "out of memory");
        return -1;
    }
    msg->rx = rx;
    msg->worker_id = r->f->worker_id;
    pthread_mutex_lock(&job->mu);
    r->f->delivered = 1;
    if (job->fetch.in_tail != NULL) {
        job->fetch.in_tail->next = msg;
    } else {
        job->fetch.in_head = msg;
        pthread_cond_broadcast(&job->cv);
    }
    job->fetch.in_tail = msg;
    pthread_mutex_unlock(&job->mu);
    return 0;
}

/* Sends owed credits, then receives one message if one may come. 0 to go
 * on, 1 when the stream is over (r->end, r->why). */
static int step(fetch_run_t *r, unsigned owed)
{
    sl_rpc_status_t st;
    if (owed > 0) {
        Sluice__FetchRequest more = SLUICE__FETCH_REQUEST__INIT;
        more.version = SL_PROTOCOL_VERSION;
        more.job_id = r->f->job->job_id;
        more.credits = owed;
        if (sl_rpc_cstream_send(r->cs, &more.base, 5000) < 0) {
            snprintf(r->why, sizeof(r->why), "sending credits failed");
            return 1;
        }
        r->held += owed;
    }
    sl_rpc_raw_t *raw = NULL;
    int rc = sl_rpc_cstream_recv_raw(r->cs, &raw, r->held > 0 ? CL_FETCH_WAIT_MS : 0, &st);
    if (rc == -ETIMEDOUT) {
        return 0;
    }
    if (rc != 0 && stopping(r->f)) {
        r->end = CL_FETCH_ENDED; /* cancelled by cl_fetch_stop */
        return 1;
    }
    if (rc == 1) {
        /* The worker ended the stream: a clean end means the job is
         * closed there; anything else means its work is gone. */
        r->end = st.code == SL_RPC_OK ? CL_FETCH_ENDED : CL_FETCH_BROKEN;
        snprintf(r->why, sizeof(r->why), "%s", st.details);
        return 1;
    }
    if (rc < 0) {
        snprintf(r->why, sizeof(r->why), "%s", rc == -ECOMM ? st.details : "bad message");
        return 1;
    }
    r->held -= r->held > 0;
    return queue_msg(r, raw) < 0 ? 1 : 0;
}

void *cl_fetch_main(void *arg)
{
    cl_fetcher_t *f = arg;
    sluice_job_t *job = f->job;
    char err[256];
    sl_rpc_status_t st;
    (void)pthread_setname_np(pthread_self(), "sl-fetch"); /* as control.c's */
    if (sl_cond_init_mono(&f->cv) != 0) {
        finish(f, CL_FETCH_BROKEN, "cannot make a condition variable");
        return NULL;
    }
    sl_rpc_channel_t *ch = sl_rpc_channel_new(f->address, SL_RPC_DEFAULT_MAX_MSG, &job->sec, 1,
                                              err, sizeof(err));
    if (ch == NULL) {
        finish(f, CL_FETCH_BROKEN, err);
        pthread_cond_destroy(&f->cv);
        return NULL;
    }
    Sluice__FetchRequest req = SLUICE__FETCH_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job->job_id;
    req.job_secret = job->job_secret; /* the worker checks it before serving */
    req.credits = CL_CREDITS;
    fetch_run_t r = {.f = f, .held = CL_CREDITS, .end = CL_FETCH_BROKEN};
    if (sl_rpc_cstream_open(ch, "/sluice.Worker/Fetch", &req.base, &sluice__batch__descriptor, 0,
                            &r.cs, &st) < 0) {
        sl_rpc_channel_free(ch);
        finish(f, CL_FETCH_BROKEN, st.details);
        pthread_cond_destroy(&f->cv);
        return NULL;
    }
    pthread_mutex_lock(&job->mu);
    f->cs = r.cs;
    pthread_mutex_unlock(&job->mu);
    for (;;) {
        unsigned owed;
        if (wait_turn(&r, &owed) < 0) {
            r.end = CL_FETCH_ENDED;
            break;
        }
        if (step(&r, owed) != 0) {
            break;
        }
    }
    pthread_mutex_lock(&job->mu);
    f->cs = NULL; /* no cancel may reach it once freed */
    pthread_mutex_unlock(&job->mu);
    sl_codec_free(r.codec);
    sl_rpc_cstream_free(r.cs);
    sl_rpc_channel_free(ch);
    finish(f, r.end, r.why);
    pthread_cond_destroy(&f->cv);
    return NULL;
}

void cl_msg_free(cl_msg_t *m)
{
    if (m == NULL) {
        return;
    }
    if (m->batch != NULL) {
        protobuf_c_message_free_unpacked(&m->batch->base, NULL);
    }
    cl_rx_free(m->rx);
    free(m);
}
