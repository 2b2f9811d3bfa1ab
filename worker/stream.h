/* stream: the Worker service's Fetch handler ("/sluice.Worker/Fetch").
 *
 * Semantics the client relies on (also in docs/protocol.md terms):
 *  - The first FetchRequest names the job and grants `credits`: how many
 *    Batch messages the worker may send. Each later FetchRequest adds its
 *    credits (job_id in later requests is ignored). The worker sends only
 *    while it has credits.
 *  - A job the worker does not know yet is waited for up to
 *    WK_FETCH_WAIT_MS (its spec travels on the next heartbeat); then the
 *    stream ends NOT_FOUND. A job that failed here (source mismatch, bad
 *    spec) ends the stream FAILED_PRECONDITION with the reason.
 *  - One stream per job: a second Fetch for the same job waits up to
 *    WK_FETCH_WAIT_MS for the first to end (a client that lost its stream
 *    reconnects; the worker notices the old one within ~20 ms) and otherwise
 *    ends ALREADY_EXISTS.
 *  - When the dispatcher closes the job the stream ends OK. When the worker
 *    shuts down (after its drain, tasks.h) it ends OK if it dropped nothing
 *    of the job (every split it took on went out whole; the rest were never
 *    started and the dispatcher re-assigns them), else UNAVAILABLE.
 *  - Every Batch carries the split's stage_to: the units already run on its
 *    samples.
 *  - If the client half-closes, the worker keeps sending while credits last
 *    and then ends the stream OK, keeping whatever is still buffered.
 *  - If the stream ends abnormally (cancelled, deadline, a message that does
 *    not unpack), the worker drops every buffered message and unfinished split
 *    of the job: the client tells the dispatcher (AckSplits.retry_worker_id
 *    plus the splits of this worker it has not acknowledged), which re-assigns
 *    every split of the job it still has at this worker. Splits the client
 *    has never heard of are not stranded either: the worker stops reporting
 *    them in its heartbeats and the dispatcher re-assigns them.
 * Runs on the rpc layer's per-stream thread. */
#ifndef WK_STREAM_H
#define WK_STREAM_H

#include "common/rpc/rpc.h"
#include "worker/tasks.h"

#define WK_FETCH_METHOD "/sluice.Worker/Fetch"
#define WK_FETCH_WAIT_MS 5000
/* Credits beyond this are not accumulated (a peer cannot overflow the count). */
#define WK_MAX_CREDITS (1u << 20)

/* ctx is the wk_tasks_t. */
int wk_stream_fetch(void *ctx, sl_rpc_stream_t *st, const ProtobufCMessage *first_req);

#endif
