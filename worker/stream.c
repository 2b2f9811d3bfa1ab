/* stream: see stream.h. Every way a Fetch stream ends is a negative errno
 * in wk_fetch_t.rc (0: a normal end); the status the client sees comes from
 * it at the one return of wk_stream_fetch. */
#include "worker/stream.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/base/log.h"
#include "proto/sluice.pb-c.h"

/* How long the stream thread waits for output or credits before it looks at
 * the peer and the job again. */
#define WK_POLL_MS 20
/* One send waits this long for the previous one before re-checking state. */
#define WK_SEND_WAIT_MS 500

typedef enum {
    WK_FS_RUN = 0,  /* serving */
    WK_FS_DONE,     /* ends with `rc` normally */
    WK_FS_BROKEN,   /* peer gone or bad message: drop the job's work */
} wk_fs_state_e;

typedef struct wk_fetch_s {
    sl_rpc_stream_t *st;
    wk_job_t *job;
    uint64_t credits;
    int half_closed;
    wk_fs_state_e state;
    int rc; /* 0 or a negative errno: the stream's final status */
    char why[512];
} wk_fetch_t;

static void add_credits(wk_fetch_t *f, uint32_t n)
{
    f->credits += n;
    if (f->credits > WK_MAX_CREDITS) {
        f->credits = WK_MAX_CREDITS;
    }
}

/* Takes every FetchRequest already received; waits up to wait_ms for the first. */
static void drain_requests(wk_fetch_t *f, int wait_ms)
{
    while (f->state == WK_FS_RUN && !f->half_closed) {
        ProtobufCMessage *m = NULL;
        int rc = sl_rpc_stream_recv(f->st, &m, wait_ms);
        wait_ms = 0;
        if (rc == 0) {
            add_credits(f, ((Sluice__FetchRequest *)m)->credits);
            protobuf_c_message_free_unpacked(m, NULL);
        } else if (rc == 1) {
            f->half_closed = 1;
        } else if (rc == -ETIMEDOUT) {
            return;
        } else {
            f->state = WK_FS_BROKEN;
            f->rc = rc; /* -EBADMSG or -ECANCELED */
            snprintf(f->why, sizeof(f->why), "%s",
                     rc == -EBADMSG ? "malformed FetchRequest" : "client went away");
        }
    }
}

static void end_for_state(wk_fetch_t *f, wk_next_e s)
{
    f->state = WK_FS_DONE;
    switch (s) {
    case WK_NEXT_STOPPING:
        f->rc = -ESHUTDOWN;
        snprintf(f->why, sizeof(f->why), "worker is shutting down");
        break;
    case WK_NEXT_LEFT:
        /* Everything of the job this worker took on went out before it
         * left: nothing for the client to retry. */
        f->rc = 0;
        snprintf(f->why, sizeof(f->why), "worker left after delivering its splits of job %" PRIu64,
                 wk_job_id(f->job));
        break;
    case WK_NEXT_FAILED: {
        char reason[1024];
        wk_job_reason(f->job, reason, sizeof(reason));
        f->rc = -ESTALE; /* the job the client asks for is no longer servable here */
        snprintf(f->why, sizeof(f->why), "job %" PRIu64 " failed on this worker: %.200s",
                 wk_job_id(f->job), reason);
        break;
    }
    case WK_NEXT_CLOSED:
    default:
        f->rc = 0;
        snprintf(f->why, sizeof(f->why), "job %" PRIu64 " closed", wk_job_id(f->job));
        break;
    }
}

/* Sends one message, retrying while the previous send is slow (client not
 * reading: transport flow control). Owns m. */
static void send_msg(wk_fetch_t *f, wk_msg_t *m)
{
    for (;;) {
        int rc = sl_rpc_stream_send(f->st, &m->batch.base, WK_SEND_WAIT_MS);
        if (rc == 0) {
            f->credits--;
            wk_job_note_sent(f->job, m);
            if (sl_log_get_level() >= LOG_DEBUG) {
                size_t skipped = 0;
                for (size_t i = 0; i < m->batch.n_samples; i++) {
                    skipped += m->batch.samples[i]->skip_reason[0] != '\0';
                }
                SL_DEBUG("job %" PRIu64 ": sent split %" PRIu64 ": %zu samples (%zu skipped)%s, "
                         "%" PRIu64 " credits left",
                         m->batch.job_id, m->batch.split_id, m->batch.n_samples, skipped,
                         m->batch.split_done ? ", split done" : "", f->credits);
            }
            break;
        }
        if (rc == -ETIMEDOUT) {
            wk_next_e s = wk_job_poll_state(f->job);
            if (s != WK_NEXT_TIMEOUT) {
                end_for_state(f, s);
                break;
            }
            continue;
        }
        f->state = WK_FS_BROKEN;
        f->rc = rc; /* -ECANCELED, or -ENOMEM packing */
        snprintf(f->why, sizeof(f->why), "send failed: %s", strerror(-rc));
        break;
    }
    wk_msg_free(m);
}

static void serve(wk_fetch_t *f)
{
    while (f->state == WK_FS_RUN) {
        drain_requests(f, 0);
        if (f->state != WK_FS_RUN) {
            break;
        }
        if (f->credits == 0) {
            if (f->half_closed) {
                f->state = WK_FS_DONE;
                f->rc = 0;
                snprintf(f->why, sizeof(f->why), "client half-closed with no credits left");
                break;
            }
            wk_next_e s = wk_job_poll_state(f->job);
            if (s != WK_NEXT_TIMEOUT) {
                end_for_state(f, s);
                break;
            }
            drain_requests(f, WK_POLL_MS); /* wait for credits */
            continue;
        }
        wk_msg_t *m = NULL;
        wk_next_e s = wk_job_next_msg(f->job, WK_POLL_MS, &m);
        if (s == WK_NEXT_MSG) {
            send_msg(f, m);
        } else if (s != WK_NEXT_TIMEOUT) {
            end_for_state(f, s);
        } else if (sl_rpc_stream_cancelled(f->st)) {
            f->state = WK_FS_BROKEN;
            f->rc = -ECANCELED;
            snprintf(f->why, sizeof(f->why), "client went away");
        }
    }
}

/* Attaches f to the job (waiting for it); a negative errno with f->why
 * when the stream cannot serve it. */
static int attach(wk_tasks_t *tasks, uint64_t job_id, const char *secret, wk_fetch_t *f)
{
    switch (wk_tasks_attach(tasks, job_id, secret, WK_FETCH_WAIT_MS, &f->job, f->why,
                            sizeof(f->why))) {
    case WK_ATTACH_OK:
        f->why[0] = '\0';
        return 0;
    case WK_ATTACH_NOT_FOUND:
        return -ENOENT;
    case WK_ATTACH_FAILED:
        return -ESTALE; /* as when it fails while streaming (end_for_state) */
    case WK_ATTACH_BUSY:
        return -EEXIST; /* another stream serves the job */
    case WK_ATTACH_DENIED:
        return -EACCES; /* PERMISSION_DENIED */
    case WK_ATTACH_SHUTTING_DOWN:
    default:
        return -ESHUTDOWN;
    }
}

int wk_stream_fetch(void *ctx, sl_rpc_stream_t *st, const ProtobufCMessage *first_req)
{
    const Sluice__FetchRequest *req = (const Sluice__FetchRequest *)first_req;
    const char *peer = sl_rpc_stream_peer(st);
    wk_fetch_t f = {.st = st, .state = WK_FS_RUN};
    if (req->job_id == 0) {
        f.rc = -EINVAL;
        snprintf(f.why, sizeof(f.why), "FetchRequest.job_id must be set");
        goto out;
    }
    f.rc = attach(ctx, req->job_id, req->job_secret, &f);
    if (f.rc != 0) {
        SL_INFO("Fetch from %s for job %" PRIu64 " refused: %s: %s", peer, req->job_id,
                sl_rpc_code_name(sl_rpc_status_from_errno(f.rc)), f.why);
        goto out;
    }
    SL_INFO("job %" PRIu64 ": Fetch stream from %s opened with %u credits", req->job_id, peer,
            req->credits);
    add_credits(&f, req->credits);
    serve(&f);
    wk_job_detach(f.job, f.state == WK_FS_BROKEN, f.why);
    SL_INFO("job %" PRIu64 ": Fetch stream from %s ended: %s (%s)", req->job_id, peer,
            sl_rpc_code_name(sl_rpc_status_from_errno(f.rc)), f.why);
out:
    if (f.why[0] != '\0') {
        sl_rpc_stream_set_details(st, "%s", f.why); /* an OK end says why too */
    }
    return sl_rpc_status_from_errno(f.rc);
}
