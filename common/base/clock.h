/* clock: the two clocks every module times with -- monotonic wall time and
 * the calling thread's CPU time -- in seconds as doubles. */
#ifndef SL_CLOCK_H
#define SL_CLOCK_H

#include <time.h>

static inline double sl_mono_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double sl_thread_cpu_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
