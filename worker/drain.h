/* drain: the worker's way out after SIGTERM (docs/protocol.md "Leaving"):
 * no new splits, the Fetch streams carry out what is queued, running or
 * buffered for at most drain_ms, then the last heartbeat. Main thread only:
 * it waits on sigs (blocked in every thread) so that a second SIGTERM or
 * SIGINT cuts the wait short. */
#ifndef WK_DRAIN_H
#define WK_DRAIN_H

#include <signal.h>

#include "worker/control.h"
#include "worker/tasks.h"

void wk_drain(wk_control_t *ctl, wk_tasks_t *tasks, const sigset_t *sigs, long long drain_ms);

#endif
