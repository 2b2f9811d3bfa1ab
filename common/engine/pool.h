/* pool: a bounded thread pool. A fixed number of threads take tasks from
 * two bounded FIFOs, the urgent one first; submit blocks while its queue is
 * full, which is how callers get back-pressure. Tasks learn which pool
 * thread runs them so callers can keep per-thread scratch buffers without
 * locks. */
#ifndef SL_POOL_H
#define SL_POOL_H

#include <stddef.h>

typedef struct sl_pool_s sl_pool_t;
typedef void (*sl_pool_fn)(void *arg, unsigned thread_idx);

#define SL_POOL_MAX_THREADS 256

/* Returns NULL on bad arguments (0 threads, > SL_POOL_MAX_THREADS, 0 capacity)
 * or when threads cannot be started. */
sl_pool_t *sl_pool_new(unsigned nthreads, size_t queue_cap);
/* Blocks while the queue is full. Returns -ESHUTDOWN after sl_pool_free began. */
int sl_pool_submit(sl_pool_t *p, sl_pool_fn fn, void *arg);
/* The same into the urgent queue (queue_cap long too): its tasks start
 * before any task of the other queue that has not started yet. */
int sl_pool_submit_urgent(sl_pool_t *p, sl_pool_fn fn, void *arg);
/* CPU seconds the pool's threads have used so far (their thread CPU clocks,
 * pthread_getcpuclockid), summed: what a caller that must tell its own CPU
 * from the rest of the process counts them by. Any thread may call. */
double sl_pool_cpu_sec(const sl_pool_t *p);
/* Runs every queued task, joins the threads, frees. NULL ok. */
void sl_pool_free(sl_pool_t *p);

#endif
