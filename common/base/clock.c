#include "common/base/clock.h"

#include <errno.h>

int sl_cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    int r = pthread_condattr_init(&a);
    if (r != 0) {
        return -r;
    }
    r = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    if (r == 0) {
        r = pthread_cond_init(cv, &a);
    }
    pthread_condattr_destroy(&a);
    return -r;
}

/* deadline (sl_mono_sec() units) as an absolute CLOCK_MONOTONIC time. */
static struct timespec mono_abs(double deadline)
{
    if (deadline < 0) {
        deadline = 0;
    }
    struct timespec abs;
    abs.tv_sec = (time_t)deadline;
    abs.tv_nsec = (long)((deadline - (double)abs.tv_sec) * 1e9);
    if (abs.tv_nsec >= 1000000000L) {
        abs.tv_sec++;
        abs.tv_nsec -= 1000000000L;
    }
    return abs;
}

int sl_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double deadline)
{
    struct timespec abs = mono_abs(deadline);
    int r = pthread_cond_timedwait(cv, mu, &abs);
    return r == ETIMEDOUT ? ETIMEDOUT : 0;
}

int sl_mutex_lock_until(pthread_mutex_t *mu, double deadline)
{
    struct timespec abs = mono_abs(deadline);
    int r = pthread_mutex_clocklock(mu, CLOCK_MONOTONIC, &abs);
    return r == 0 ? 0 : ETIMEDOUT;
}

int sl_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms)
{
    return sl_cond_wait_until(cv, mu, sl_mono_sec() + (double)(ms < 0 ? 0 : ms) / 1000.0);
}
