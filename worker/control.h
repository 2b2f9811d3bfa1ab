/* control: the worker's conversation with the dispatcher, on one thread.
 *
 * State machine: UNREGISTERED -> (RegisterWorker ok) REGISTERED -> Heartbeat
 * every heartbeat_ms; a failed RegisterWorker retries with capped exponential
 * backoff (100 ms doubling to WK_BACKOFF_MAX_MS) while the gRPC server keeps
 * serving; a heartbeat answered known=false goes back to UNREGISTERED
 * (re-registers at once, offering the old worker id); a failed heartbeat
 * retries with the same backoff, capped at heartbeat_ms too. Every retry
 * sleeps a random part of its step (wk_backoff_jitter) drawn from a per-process
 * seed, so workers that lost the dispatcher together do not all call it in
 * the same millisecond when it is back. Heartbeat replies are applied to tasks.
 * News from the tasks (wk_tasks_on_news: a split sent, a Fetch for a job
 * not known yet) brings the next heartbeat forward, to 100 ms after the
 * previous at the soonest.
 *
 * Leaving (SIGTERM): wk_control_leave makes every heartbeat carry
 * leaving=true (the dispatcher hands out nothing new and re-queues what the
 * worker never started) and sends one at once; wk_control_finish sends the
 * last one, after wk_tasks_quiesce, reporting nothing in progress, so the
 * dispatcher forgets the worker at once instead of after worker_timeout. A
 * leaving worker answered known=false is LEFT and does not register again. */
#ifndef WK_CONTROL_H
#define WK_CONTROL_H

#include <stdint.h>

#include "common/rpc/rpc.h"

#include "worker/tasks.h"

typedef struct wk_control_s wk_control_t;

typedef enum {
    WK_CTL_UNREGISTERED = 0,
    WK_CTL_REGISTERED,
    WK_CTL_LEFT,    /* leaving, and the dispatcher has let us go */
    WK_CTL_STOPPED,
} wk_ctl_state_e;

typedef struct wk_control_opts_s {
    const char *dispatcher; /* HOST:PORT */
    const char *advertise;  /* HOST:PORT clients dial */
    unsigned threads;
    size_t max_message_bytes; /* channel receive limit */
    const sl_rpc_security_t *security; /* NULL = plaintext, no token; read at new */
    const struct sl_plugins_s *plugins; /* told to the dispatcher; NULL = none; outlives */
    uint64_t cache_bytes; /* the prefix cache's budget, told to the planner; 0 = no cache_dir */
} wk_control_opts_t;

typedef struct wk_control_status_s {
    wk_ctl_state_e state;
    uint64_t worker_id;
    uint32_t heartbeat_ms;
    uint64_t registrations; /* successful RegisterWorker calls */
    uint64_t heartbeats;    /* successful Heartbeat calls */
    uint64_t failures;      /* failed calls since the last success */
    int leaving;            /* wk_control_leave was called */
    double load;            /* last reported */
    char last_error[768];
} wk_control_status_t;

wk_control_t *wk_control_new(const wk_control_opts_t *o, wk_tasks_t *tasks, char *err,
                             size_t errlen);
int wk_control_start(wk_control_t *c); /* 0 or -errno (thread not started) */
/* Wakes and joins the thread (a call in progress ends within its deadline). */
void wk_control_stop(wk_control_t *c);
/* Any thread; see the top of this file. */
void wk_control_leave(wk_control_t *c);
/* Sends the final leaving heartbeat (if registered; its own short deadline),
 * then stops and joins like wk_control_stop. Returns 0 when the dispatcher
 * took it, -ENOTCONN when not registered, or the call's error. */
int wk_control_finish(wk_control_t *c);
void wk_control_free(wk_control_t *c); /* stops first; NULL ok */
void wk_control_get_status(wk_control_t *c, wk_control_status_t *ret);
const char *wk_ctl_state_name(wk_ctl_state_e s);

/* Retry pacing. The cap bounds how long a worker stays away from a dispatcher
 * that is back (docs/deploy.md "Deploying on a cluster": within ~2 s): at most the
 * cap here plus the channel's own reconnect step (common/rpc/rpc_client.c).
 * A dispatcher that is down costs nothing per retry: the channel fails the
 * call locally until its next connection attempt. */
#define WK_BACKOFF_MIN_MS 100
#define WK_BACKOFF_MAX_MS 1000

/* Pure: the next retry step after `cur` ms (WK_BACKOFF_MIN_MS doubling,
 * capped at cap_ms). */
int wk_backoff_next(int cur, int cap_ms);
/* Pure: the delay slept for a step of ms: uniform in [ms - ms/2, ms] by the
 * random draw r, so never longer than the step. */
int wk_backoff_jitter(int ms, uint64_t r);

#endif
