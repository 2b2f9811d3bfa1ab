/* hedge: two transfers of one request in a libcurl multi handle; the
 * second starts when the first has produced no byte after the delay, the
 * first to finish with a response wins and the other is cut (hedge.h). */
#include "common/remote/hedge.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/remote/fetch_impl.h"

struct sl_hedge_lat_s {
    pthread_mutex_t mu;
    long ms[SL_HEDGE_WINDOW];
    unsigned n, next;
    uint64_t hedged, won;
};

int sl_hedge_lat_new(sl_hedge_lat_t **ret)
{
    sl_hedge_lat_t *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return -ENOMEM;
    }
    pthread_mutex_init(&l->mu, NULL);
    *ret = l;
    return 0;
}

void sl_hedge_lat_free(sl_hedge_lat_t *l)
{
    if (l != NULL) {
        pthread_mutex_destroy(&l->mu);
        free(l);
    }
}

void sl_hedge_lat_add(sl_hedge_lat_t *l, long ms)
{
    pthread_mutex_lock(&l->mu);
    l->ms[l->next] = ms;
    l->next = (l->next + 1) % SL_HEDGE_WINDOW;
    if (l->n < SL_HEDGE_WINDOW) {
        l->n++;
    }
    pthread_mutex_unlock(&l->mu);
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

long sl_hedge_delay_ms(sl_hedge_lat_t *l)
{
    long v[SL_HEDGE_WINDOW];
    pthread_mutex_lock(&l->mu);
    unsigned n = l->n;
    memcpy(v, l->ms, sizeof(v));
    pthread_mutex_unlock(&l->mu);
    if (n < SL_HEDGE_MIN_SAMPLES) {
        return SL_HEDGE_DEFAULT_MS;
    }
    qsort(v, n, sizeof(v[0]), cmp_long);
    long p95 = v[(n * 95) / 100 < n ? (n * 95) / 100 : n - 1];
    return p95 < SL_HEDGE_MIN_MS ? SL_HEDGE_MIN_MS : p95 > SL_HEDGE_MAX_MS ? SL_HEDGE_MAX_MS : p95;
}

void sl_hedge_counts(sl_hedge_lat_t *l, uint64_t *ret_hedged, uint64_t *ret_won)
{
    pthread_mutex_lock(&l->mu);
    *ret_hedged = l->hedged;
    *ret_won = l->won;
    pthread_mutex_unlock(&l->mu);
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One of the two transfers. */
typedef struct leg_s {
    CURL *h;
    xfer_t x;
    sl_fetch_resp_t resp;
    bool done;
    CURLcode rc;
} leg_t;

static int leg_start(CURLM *m, leg_t *g, const char *url, struct curl_slist *sl,
                     const sl_fetch_opts_t *o)
{
    g->h = curl_easy_init();
    if (g->h == NULL) {
        return -ENOMEM;
    }
    g->x = (xfer_t){.fd = -1, .mem_sink = true, .max = o->max_bytes, .h = g->h, .resp = &g->resp};
    if (sl_fetch_set_opts(g->h, url, sl, false, o, &g->x) < 0 ||
        curl_multi_add_handle(m, g->h) != CURLM_OK) {
        return -EIO;
    }
    return 0;
}

static void leg_end(CURLM *m, leg_t *g)
{
    if (g->h != NULL) {
        curl_multi_remove_handle(m, g->h); /* a running transfer is cut here */
        curl_easy_cleanup(g->h);
    }
    free(g->x.mem);
}

/* Runs the legs until one finishes with a response (or both fail);
 * returns the winner. */
static leg_t *race(CURLM *m, leg_t *legs, const char *url, struct curl_slist *sl,
                   const sl_fetch_opts_t *o, long delay_ms, bool *ret_hedged)
{
    long start = now_ms();
    leg_t *win = NULL;
    while (win == NULL) {
        int running = 0;
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE) {
                continue;
            }
            leg_t *g = msg->easy_handle == legs[0].h ? &legs[0] : &legs[1];
            g->done = true;
            g->rc = msg->data.result;
        }
        for (int i = 0; i < 2 && win == NULL; i++) {
            if (legs[i].done && (legs[i].rc == CURLE_OK || !*ret_hedged || legs[1 - i].done)) {
                win = &legs[i]; /* a response, or the last one standing failed */
            }
        }
        if (win != NULL) {
            break;
        }
        long waited = now_ms() - start;
        if (!*ret_hedged && !legs[0].x.got_bytes && waited >= delay_ms) {
            *ret_hedged = true;
            if (leg_start(m, &legs[1], url, sl, o) < 0) {
                legs[1].done = true;
                legs[1].rc = CURLE_FAILED_INIT;
            }
        }
        long wait = *ret_hedged || legs[0].x.got_bytes ? 100 : delay_ms - waited;
        curl_multi_poll(m, NULL, 0, (int)(wait > 0 ? wait : 1), NULL);
    }
    return win;
}

static int write_body(int fd, const unsigned char *p, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, p + off, n - off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0) {
            return -errno;
        }
        off += (size_t)w;
    }
    return 0;
}

int sl_fetch_hedged(const char *url, const char *const *hdrs, int out_fd, const sl_fetch_opts_t *o,
                    sl_hedge_lat_t *lat, sl_fetch_resp_t *ret, char *err, size_t errlen)
{
    if (sl_fetch_global_init() < 0) {
        return sl_err(err, errlen, -EIO, "libcurl: global init failed");
    }
    memset(ret, 0, sizeof(*ret));
    struct curl_slist *sl = NULL;
    for (size_t i = 0; hdrs != NULL && hdrs[i] != NULL; i++) {
        struct curl_slist *next = curl_slist_append(sl, hdrs[i]);
        if (next == NULL) {
            curl_slist_free_all(sl);
            return sl_err(err, errlen, -ENOMEM, "libcurl: out of memory");
        }
        sl = next;
    }
    leg_t *legs = calloc(2, sizeof(*legs));
    CURLM *m = curl_multi_init();
    int rc = 0;
    if (legs == NULL || m == NULL || leg_start(m, &legs[0], url, sl, o) < 0) {
        rc = sl_err(err, errlen, -ENOMEM, "%s: cannot start the request", url);
        goto out;
    }
    long t0 = now_ms();
    bool hedged = false;
    leg_t *win = race(m, legs, url, sl, o, sl_hedge_delay_ms(lat), &hedged);
    *ret = win->resp; /* its headers (ETag, Last-Modified, Content-Range) */
    sl_fetch_finish_resp(win->h, false, &win->x, ret);
    if (win->x.write_rc < 0) {
        rc = sl_err(err, errlen, win->x.write_rc, "%s: body: %s", url, strerror(-win->x.write_rc));
    } else if (win->rc != CURLE_OK) {
        rc = sl_fetch_transport_error((int)win->rc, url, err, errlen);
    } else if (ret->status >= 200 && ret->status <= 299 && out_fd >= 0) {
        rc = write_body(out_fd, win->x.mem, win->x.mem_len);
        if (rc < 0) {
            sl_err(err, errlen, rc, "%s: writing the body: %s", url, strerror(-rc));
        }
    }
    curl_off_t fb = 0;
    if (rc == 0 && curl_easy_getinfo(win->h, CURLINFO_STARTTRANSFER_TIME_T, &fb) == CURLE_OK) {
        sl_hedge_lat_add(lat, win == &legs[0] ? (long)(fb / 1000) : now_ms() - t0);
    }
    pthread_mutex_lock(&lat->mu);
    lat->hedged += hedged;
    lat->won += hedged && win == &legs[1];
    pthread_mutex_unlock(&lat->mu);
out:
    if (legs != NULL) {
        leg_end(m, &legs[0]);
        leg_end(m, &legs[1]);
    }
    if (m != NULL) {
        curl_multi_cleanup(m);
    }
    free(legs);
    curl_slist_free_all(sl);
    return rc;
}
