/* diagnose: where a remote job stands, in one paragraph, for a job that
 * has stopped delivering: `sluice bench`'s watchdog prints it before it
 * gives up, so a stall says whether the job waits on the dispatcher, on a
 * worker's stream, on the client's own splits or on its consumer.
 *
 * Any thread, while the job's caller may be blocked inside the library: it
 * reads only what job->mu guards (the split table, the local splits waiting
 * to start, the received messages, the fetchers, the consumer's note of its
 * last pump) and waits at most CL_DIAGNOSE_LOCK_MS for that lock; a thread
 * stuck holding it is then what it reports. Not exported from libsluice.so
 * (the CLI links the static library). */
#ifndef CL_DIAGNOSE_H
#define CL_DIAGNOSE_H

#include <stddef.h>

#include "client/lib/sluice.h"

#define CL_DIAGNOSE_LOCK_MS 1000
/* At most this many splits are listed one by one (the client's own first). */
#define CL_DIAGNOSE_SPLITS 8

/* Writes the account into buf (NUL-terminated, truncated to len - 1).
 * Returns 0, or -ETIMEDOUT when the lock stayed held (buf says so). */
int cl_job_diagnose(sluice_job_t *job, char *buf, size_t len);

#endif
