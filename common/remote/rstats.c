/* rstats: measured cost of a host's remote reads (rstats.h). */
#include "common/remote/rstats.h"

#include <time.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sl_rstats_init(sl_rstats_t *s)
{
    *s = (sl_rstats_t){0};
    pthread_mutex_init(&s->mu, NULL);
}

void sl_rstats_destroy(sl_rstats_t *s) { pthread_mutex_destroy(&s->mu); }

int64_t sl_rstats_begin(sl_rstats_t *s)
{
    int64_t t = now_ns();
    pthread_mutex_lock(&s->mu);
    if (s->inflight++ == 0) {
        s->busy_start_ns = t;
    }
    pthread_mutex_unlock(&s->mu);
    return t;
}

void sl_rstats_end(sl_rstats_t *s, int64_t started_ns, bool head, uint64_t body_bytes)
{
    int64_t t = now_ns();
    pthread_mutex_lock(&s->mu);
    s->bytes += body_bytes;
    if (head) {
        s->heads++;
        s->head_ns += t - started_ns;
    }
    if (s->inflight > 0 && --s->inflight == 0) {
        s->busy_ns += t - s->busy_start_ns;
    }
    pthread_mutex_unlock(&s->mu);
}

void sl_rstats_get(sl_rstats_t *s, double *ret_bytes_per_sec, double *ret_latency_sec)
{
    int64_t t = now_ns();
    pthread_mutex_lock(&s->mu);
    int64_t busy = s->busy_ns + (s->inflight > 0 ? t - s->busy_start_ns : 0);
    *ret_bytes_per_sec = s->bytes >= SL_RSTATS_MIN_BYTES && busy > 0
                             ? (double)s->bytes * 1e9 / (double)busy
                             : 0.0;
    *ret_latency_sec = s->heads > 0 ? (double)s->head_ns / 1e9 / (double)s->heads : 0.0;
    pthread_mutex_unlock(&s->mu);
}
