/* clock: the clocks every module times with -- monotonic wall time and the
 * calling thread's CPU time -- and the one timed wait. Every timed wait runs
 * on CLOCK_MONOTONIC: a wall-clock jump (NTP step, an operator's `date`)
 * must neither stretch nor cut a heartbeat, a deadline or a poll. */
#ifndef SL_CLOCK_H
#define SL_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline double sl_mono_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int64_t sl_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline double sl_thread_cpu_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process (every thread, user + system). */
static inline double sl_process_cpu_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Initialises cv so that sl_cond_wait_until can time out on it. Every
 * condition variable that is ever waited on with a timeout is made here.
 * Returns 0 or a negative errno. */
int sl_cond_init_mono(pthread_cond_t *cv);

/* Waits on cv (made by sl_cond_init_mono, mu held) until signalled or the
 * monotonic time reaches deadline (sl_mono_sec() units). Returns 0 when
 * woken (perhaps spuriously: callers re-check their condition) or ETIMEDOUT. */
int sl_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double deadline);

/* The same, relative: waits at most ms milliseconds. */
int sl_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms);

/* Locks mu, waiting until the monotonic time reaches deadline at most (a
 * thread that looks at state another thread may be stuck holding). Returns
 * 0 with mu held, or ETIMEDOUT. */
int sl_mutex_lock_until(pthread_mutex_t *mu, double deadline);

#endif
