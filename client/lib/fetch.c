/* A fetcher: one thread per worker, one Fetch stream. It queues every
 * received Batch for the consumer and returns credits as the consumer
 * finishes messages, so a slow training loop slows the worker down instead
 * of filling memory (at most CL_CREDITS messages per worker in flight).
 * Messages are not unpacked: the fetcher keeps the received slices and
 * indexes them (client/lib/rx.h), and the consumer copies each sample once,
 * from the slices into its batch. A message that does not parse breaks the
 * stream (its splits are retried elsewhere). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/lib/client_impl.h"
#include "client/lib/rx.h"

static void finish(cl_fetcher_t *f, cl_fetch_state_e state, const char *why)
{
    sluice_job_t *job = f->job;
    pthread_mutex_lock(&job->mu);
    f->state = state;
    snprintf(f->error, sizeof(f->error), "%s", why);
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
}

void *cl_fetch_main(void *arg)
{
    cl_fetcher_t *f = arg;
    sluice_job_t *job = f->job;
    char err[256];
    sl_rpc_status_t st;
    sl_rpc_channel_t *ch = sl_rpc_channel_new(f->address, SL_RPC_DEFAULT_MAX_MSG, &job->sec, 1,
                                              err, sizeof(err));
    if (ch == NULL) {
        finish(f, CL_FETCH_BROKEN, err);
        return NULL;
    }
    Sluice__FetchRequest req = SLUICE__FETCH_REQUEST__INIT;
    req.version = SL_PROTOCOL_VERSION;
    req.job_id = job->job_id;
    req.job_secret = job->job_secret; /* the worker checks it before serving */
    req.credits = CL_CREDITS;
    sl_rpc_cstream_t *cs = NULL;
    if (sl_rpc_cstream_open(ch, "/sluice.Worker/Fetch", &req.base, &sluice__batch__descriptor, 0,
                            &cs, &st) < 0) {
        sl_rpc_channel_free(ch);
        finish(f, CL_FETCH_BROKEN, st.details);
        return NULL;
    }
    cl_fetch_state_e end = CL_FETCH_ENDED;
    char why[512] = "";
    sl_codec_t *codec = NULL; /* this stream's decompressor, made on first use */
    for (;;) {
        pthread_mutex_lock(&job->mu);
        int stop = f->stop || job->closing;
        unsigned owed = f->credits_owed;
        f->credits_owed = 0;
        pthread_mutex_unlock(&job->mu);
        if (stop) {
            break;
        }
        if (owed > 0) {
            Sluice__FetchRequest more = SLUICE__FETCH_REQUEST__INIT;
            more.version = SL_PROTOCOL_VERSION;
            more.job_id = job->job_id;
            more.credits = owed;
            if (sl_rpc_cstream_send(cs, &more.base, 5000) < 0) {
                end = CL_FETCH_BROKEN;
                snprintf(why, sizeof(why), "sending credits failed");
                break;
            }
        }
        sl_rpc_raw_t *raw = NULL;
        int rc = sl_rpc_cstream_recv_raw(cs, &raw, 50, &st);
        if (rc == -ETIMEDOUT) {
            continue;
        }
        if (rc == 1) {
            /* The worker ended the stream: a clean end means the job is
             * closed there; anything else means its work is gone. */
            end = st.code == SL_RPC_OK ? CL_FETCH_ENDED : CL_FETCH_BROKEN;
            snprintf(why, sizeof(why), "%s", st.details);
            break;
        }
        if (rc < 0) {
            end = CL_FETCH_BROKEN;
            snprintf(why, sizeof(why), "%s", rc == -ECOMM ? st.details : "bad message");
            break;
        }
        cl_rx_t *rx = NULL;
        char perr[256];
        rc = cl_rx_from_raw(raw, &codec, &rx, perr, sizeof(perr)); /* takes raw */
        cl_msg_t *msg = rc == 0 ? calloc(1, sizeof(*msg)) : NULL;
        if (msg == NULL) {
            cl_rx_free(rx);
            end = CL_FETCH_BROKEN;
            snprintf(why, sizeof(why), "%s", rc < 0 ? perr : "out of memory");
            break;
        }
        msg->rx = rx;
        msg->worker_id = f->worker_id;
        pthread_mutex_lock(&job->mu);
        f->delivered = 1;
        if (job->fetch.in_tail != NULL) {
            job->fetch.in_tail->next = msg;
        } else {
            job->fetch.in_head = msg;
        }
        job->fetch.in_tail = msg;
        pthread_cond_broadcast(&job->cv);
        pthread_mutex_unlock(&job->mu);
    }
    sl_codec_free(codec);
    sl_rpc_cstream_free(cs);
    sl_rpc_channel_free(ch);
    finish(f, end, why);
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
