/* The deadline thread of cli_watchdog.h. */
#include "client/cli/cli_watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/cli/cli.h"
#include "common/base/clock.h"

struct sl_cli_watchdog_s {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* on CLOCK_MONOTONIC */
    double deadline;     /* under mu */
    uint64_t samples;    /* under mu */
    int stop;            /* under mu */
    sl_cli_watchdog_describe_fn describe; /* under mu */
    void *describe_arg;
    char what[256];
    char account[4096]; /* the watchdog thread's */
};

static void *watch(void *arg)
{
    sl_cli_watchdog_t *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        double now = sl_mono_sec();
        if (now >= w->deadline) {
            /* The main thread is inside the library (maybe holding its
             * locks): only describe() looks at the job, with bounded waits;
             * say what we know and leave. */
            fprintf(stderr, "\nsluice %s; %llu samples delivered; giving up\n", w->what,
                    (unsigned long long)w->samples);
            if (w->describe != NULL) {
                (void)w->describe(w->describe_arg, w->account, sizeof(w->account));
                fprintf(stderr, "sluice: where the job stood: %s\n", w->account);
            }
            fflush(NULL);
            _exit(SL_EXIT_RUNTIME);
        }
        (void)sl_cond_wait_until(&w->cond, &w->mu, w->deadline);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

sl_cli_watchdog_t *sl_cli_watchdog_new(const char *what, double deadline_sec)
{
    sl_cli_watchdog_t *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return NULL;
    }
    snprintf(w->what, sizeof(w->what), "%s", what);
    w->deadline = deadline_sec;
    int rc = sl_cond_init_mono(&w->cond);
    if (rc != 0) {
        free(w);
        errno = -rc;
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    rc = pthread_create(&w->thread, NULL, watch, w);
    if (rc != 0) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->mu);
        free(w);
        errno = rc;
        return NULL;
    }
    return w;
}

void sl_cli_watchdog_set(sl_cli_watchdog_t *w, double deadline_sec)
{
    pthread_mutex_lock(&w->mu);
    w->deadline = deadline_sec;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
}

void sl_cli_watchdog_progress(sl_cli_watchdog_t *w, uint64_t samples)
{
    pthread_mutex_lock(&w->mu);
    w->samples = samples;
    pthread_mutex_unlock(&w->mu);
}

void sl_cli_watchdog_describe(sl_cli_watchdog_t *w, sl_cli_watchdog_describe_fn fn, void *arg)
{
    pthread_mutex_lock(&w->mu);
    w->describe = fn;
    w->describe_arg = arg;
    pthread_mutex_unlock(&w->mu);
}

void sl_cli_watchdog_free(sl_cli_watchdog_t *w)
{
    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
