/* pclaim: in-progress markers of the prefix cache (pclaim.h). */
#include "common/remote/pclaim.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Retries when the file locked was unlinked meanwhile (its holder released
 * between our open and our lock): each one means a release happened, so a
 * few suffice; beyond them the caller treats the key as busy and looks
 * again after a pause. */
#define PCLAIM_RELINK_TRIES 4

static int64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sl_pclaim_init(sl_pclaim_t *c)
{
    c->fd = -1;
    c->name[0] = '\0';
}

static void read_holder(int fd, sl_pclaim_holder_t *h)
{
    char buf[96];
    *h = (sl_pclaim_holder_t){0};
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) {
        return; /* not written yet: no deadline known */
    }
    buf[n] = '\0';
    long long pid = 0, dl = 0;
    if (sscanf(buf, "pid %lld deadline_ms %lld", &pid, &dl) == 2 && pid > 0 && dl > 0) {
        h->pid = pid;
        h->deadline_ms = dl;
    }
}

/* Whether fd is still the file named name in dir_fd (a release unlinks
 * before it unlocks: a lock on an unlinked file claims nothing). */
static int still_named(int dir_fd, const char *name, int fd)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && fstatat(dir_fd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int sl_pclaim_try(int dir_fd, const char *key, int64_t ttl_ms, sl_pclaim_t *c,
                  sl_pclaim_holder_t *ret_holder)
{
    char name[sizeof(c->name)];
    int n = snprintf(name, sizeof(name), ".claim-%s", key);
    if (n < 0 || (size_t)n >= sizeof(name) || c->fd >= 0) {
        return -EINVAL;
    }
    for (int i = 0; i < PCLAIM_RELINK_TRIES; i++) {
        int fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) {
            return -errno;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            int rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
            if (rc == -EBUSY && ret_holder != NULL) {
                read_holder(fd, ret_holder);
            }
            close(fd);
            return rc;
        }
        if (!still_named(dir_fd, name, fd)) {
            close(fd);
            continue;
        }
        /* Ours. A file left by a dead holder says its pid: overwritten.
         * Informative only (the lock is the claim): a failed write leaves
         * waiters without a deadline, bounded by their own. */
        char line[96];
        int len = snprintf(line, sizeof(line), "pid %lld deadline_ms %" PRId64 "\n",
                           (long long)getpid(), realtime_ms() + ttl_ms);
        if (ftruncate(fd, 0) == 0 && pwrite(fd, line, (size_t)len, 0) < 0) {
            (void)ftruncate(fd, 0);
        }
        c->fd = fd;
        memcpy(c->name, name, (size_t)n + 1);
        return 0;
    }
    if (ret_holder != NULL) {
        *ret_holder = (sl_pclaim_holder_t){0};
    }
    return -EBUSY;
}

void sl_pclaim_release(int dir_fd, sl_pclaim_t *c)
{
    if (c->fd < 0) {
        return;
    }
    (void)unlinkat(dir_fd, c->name, 0); /* before the unlock: see still_named */
    close(c->fd);
    sl_pclaim_init(c);
}

int sl_pclaim_expired(const sl_pclaim_holder_t *h)
{
    return h->deadline_ms > 0 && realtime_ms() >= h->deadline_ms;
}

int64_t sl_pclaim_backoff_us(int64_t waited_us)
{
    int64_t us = waited_us / 4;
    return us < 50 ? 50 : us > 2000 ? 2000 : us;
}
