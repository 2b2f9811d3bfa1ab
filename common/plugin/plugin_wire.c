/* plugin_wire: frames to and from plugin hosts (common/plugin/plugin_wire.h). */
#include "common/plugin/plugin_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/base/clock.h"

int sl_pw_write(int fd, uint32_t type, const void *a, size_t alen, const void *b, size_t blen)
{
    if (alen + blen > SL_PW_MAX) {
        return -EMSGSIZE;
    }
    uint32_t hdr[2] = {type, (uint32_t)(alen + blen)};
    struct iovec iov[3] = {{hdr, sizeof(hdr)}, {(void *)a, alen}, {(void *)b, blen}};
    int k = 0;
    while (k < 3) {
        ssize_t w = writev(fd, &iov[k], 3 - k);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EPIPE ? -EPIPE : -errno;
        }
        size_t left = (size_t)w;
        while (k < 3 && left >= iov[k].iov_len) {
            left -= iov[k].iov_len;
            k++;
        }
        if (k < 3) {
            iov[k].iov_base = (uint8_t *)iov[k].iov_base + left;
            iov[k].iov_len -= left;
        }
    }
    return 0;
}

/* Reads exactly n bytes by the deadline (monotonic ms; < 0: none). */
static int read_full(int fd, void *dst, size_t n, double deadline_ms)
{
    uint8_t *p = dst;
    while (n > 0) {
        if (deadline_ms >= 0) {
            double left = deadline_ms - sl_mono_sec() * 1000.0;
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int pr = left > 0 ? poll(&pfd, 1, (int)left + 1) : 0;
            if (pr < 0 && errno == EINTR) {
                continue;
            }
            if (pr == 0) {
                return -ETIMEDOUT;
            }
        }
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return r == 0 ? -EPIPE : -errno;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int sl_pw_read(int fd, int timeout_ms, uint32_t *ret_type, uint8_t **buf, size_t *cap,
               size_t *ret_len)
{
    double deadline = timeout_ms >= 0 ? sl_mono_sec() * 1000.0 + timeout_ms : -1;
    uint32_t hdr[2];
    int rc = read_full(fd, hdr, sizeof(hdr), deadline);
    if (rc < 0) {
        return rc;
    }
    if (hdr[1] > SL_PW_MAX) {
        return -EPROTO;
    }
    if (hdr[1] + 1 > *cap) {
        uint8_t *p = realloc(*buf, (size_t)hdr[1] + 1);
        if (p == NULL) {
            return -ENOMEM;
        }
        *buf = p;
        *cap = (size_t)hdr[1] + 1;
    }
    rc = read_full(fd, *buf, hdr[1], deadline);
    if (rc < 0) {
        return rc;
    }
    (*buf)[hdr[1]] = '\0'; /* text replies end here */
    *ret_type = hdr[0];
    *ret_len = hdr[1];
    return 0;
}

extern char **environ;

int sl_pw_spawn(const char *host, const char *path, pid_t *ret_pid, int *ret_to, int *ret_from)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0) {
        return -errno;
    }
    if (pipe2(out, O_CLOEXEC) < 0) {
        int e = errno;
        close(in[0]);
        close(in[1]);
        return -e;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    char *argv[] = {(char *)host, (char *)path, NULL};
    int rc = posix_spawnp(ret_pid, host, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        close(in[1]);
        close(out[0]);
        return -rc;
    }
    *ret_to = in[1];
    *ret_from = out[0];
    return 0;
}
