/* control: the worker's conversation with the dispatcher, on one thread.
 *
 * State machine: UNREGISTERED -> (RegisterWorker ok) REGISTERED -> Heartbeat
 * every heartbeat_ms; a failed RegisterWorker retries with capped exponential
 * backoff (100 ms doubling to 5 s) while the gRPC server keeps serving; a
 * heartbeat answered known=false goes back to UNREGISTERED (re-registers at
 * once, offering the old worker id); a failed heartbeat retries with the same
 * backoff, capped at heartbeat_ms. Heartbeat replies are applied to tasks. */
#ifndef WK_CONTROL_H
#define WK_CONTROL_H

#include <stdint.h>

#include "worker/tasks.h"

typedef struct wk_control_s wk_control_t;

typedef enum {
    WK_CTL_UNREGISTERED = 0,
    WK_CTL_REGISTERED,
    WK_CTL_STOPPED,
} wk_ctl_state_e;

typedef struct wk_control_opts_s {
    const char *dispatcher; /* HOST:PORT */
    const char *advertise;  /* HOST:PORT clients dial */
    unsigned threads;
    size_t max_message_bytes; /* channel receive limit */
} wk_control_opts_t;

typedef struct wk_control_status_s {
    wk_ctl_state_e state;
    uint64_t worker_id;
    uint32_t heartbeat_ms;
    uint64_t registrations; /* successful RegisterWorker calls */
    uint64_t heartbeats;    /* successful Heartbeat calls */
    uint64_t failures;      /* failed calls since the last success */
    double load;            /* last reported */
    char last_error[768];
} wk_control_status_t;

wk_control_t *wk_control_new(const wk_control_opts_t *o, wk_tasks_t *tasks, char *err,
                             size_t errlen);
int wk_control_start(wk_control_t *c); /* 0 or -errno (thread not started) */
/* Wakes and joins the thread (a call in progress ends within its deadline). */
void wk_control_stop(wk_control_t *c);
void wk_control_free(wk_control_t *c); /* stops first; NULL ok */
void wk_control_get_status(wk_control_t *c, wk_control_status_t *ret);
const char *wk_ctl_state_name(wk_ctl_state_e s);

/* Pure: the next retry delay after `cur` ms (100 ms doubling, capped at cap_ms). */
int wk_backoff_next(int cur, int cap_ms);

#endif
