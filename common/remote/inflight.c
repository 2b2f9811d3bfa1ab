/* inflight: reading a download's bytes before it lands (inflight.h). */
#include "common/remote/inflight.h"

#include <errno.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

/* How often a waiting reader looks at the progress again. */
#define INFLIGHT_POLL_MS 5

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sl_progress_init(sl_fetch_progress_t *p)
{
    pthread_mutex_init(&p->mu, NULL);
    p->fd = -1;
    p->written = 0;
    p->gen = 0;
    p->start_ms = 0;
}

void sl_progress_destroy(sl_fetch_progress_t *p) { pthread_mutex_destroy(&p->mu); }

void sl_progress_begin(sl_fetch_progress_t *p, int fd)
{
    pthread_mutex_lock(&p->mu);
    p->fd = fd;
    p->written = 0;
    p->gen++;
    p->start_ms = now_ms();
    pthread_mutex_unlock(&p->mu);
}

void sl_progress_set(sl_fetch_progress_t *p, uint64_t written)
{
    pthread_mutex_lock(&p->mu);
    p->written = written;
    pthread_mutex_unlock(&p->mu);
}

void sl_progress_end(sl_fetch_progress_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->fd = -1; /* gen stays: bytes copied from this attempt were the object's */
    pthread_mutex_unlock(&p->mu);
}

/* Copies [off, off + len) from in to out at the same offsets. */
static int copy_range(int in, int out, uint64_t off, uint64_t len)
{
    if (ftruncate(out, (off_t)off) < 0) {
        return -errno;
    }
    char buf[65536];
    while (len > 0) {
        size_t want = len < sizeof(buf) ? (size_t)len : sizeof(buf);
        ssize_t n = pread(in, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n < 0 ? -errno : -EIO;
        }
        for (ssize_t done = 0; done < n;) {
            ssize_t w = pwrite(out, buf + done, (size_t)(n - done), (off_t)off + done);
            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w < 0) {
                return -errno;
            }
            done += w;
        }
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return 0;
}

int sl_progress_current(sl_fetch_progress_t *p, uint32_t *ret_gen)
{
    pthread_mutex_lock(&p->mu);
    int rc = p->fd >= 0 ? 0 : -ENOENT;
    *ret_gen = p->gen;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int sl_progress_copy(sl_fetch_progress_t *p, uint32_t gen0, uint64_t off, uint64_t len, int out_fd,
                     long budget_ms)
{
    int64_t t0 = now_ms();
    int in = -1;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        if (p->fd < 0 || p->gen != gen0) {
            pthread_mutex_unlock(&p->mu);
            return -ENOENT;
        }
        uint64_t written = p->written;
        if (written >= off + len) {
            in = dup(p->fd); /* under mu: the filler closes it only after end() */
            pthread_mutex_unlock(&p->mu);
            if (in < 0) {
                return -errno;
            }
            break;
        }
        int64_t t = now_ms(), ran = t - p->start_ms;
        pthread_mutex_unlock(&p->mu);
        /* When the last byte wanted arrives at the rate so far; no rate
         * yet (nothing written): the first bytes are awaited as long as a
         * range GET's would be. */
        double eta_ms = written > 0 && ran > 0
                            ? (double)(off + len - written) * (double)ran / (double)written
                            : 0;
        if ((double)(t - t0) + eta_ms > (double)budget_ms) {
            return -EAGAIN;
        }
        struct timespec nap = {.tv_nsec = INFLIGHT_POLL_MS * 1000000L};
        nanosleep(&nap, NULL);
    }
    int rc = copy_range(in, out_fd, off, len);
    close(in);
    if (rc < 0) {
        return rc;
    }
    pthread_mutex_lock(&p->mu);
    bool same = p->gen == gen0;
    pthread_mutex_unlock(&p->mu);
    return same ? 0 : -ENOENT;
}
