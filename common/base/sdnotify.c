/* sdnotify: see sdnotify.h. The protocol is documented in sd_notify(3) and
 * systemd's docs/NOTIFY_SOCKET.md: one datagram, no reply expected. */
#include "common/base/sdnotify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/base/err.h"

int sl_sdnotify(const char *state, char *err, size_t errlen)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || path[0] == '\0') {
        return 0;
    }
    size_t plen = strlen(path);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    /* Only absolute paths and abstract names: a relative path would depend
     * on our working directory, which systemd does not promise. */
    if ((path[0] != '/' && path[0] != '@') || plen >= sizeof(sa.sun_path) || plen < 2) {
        return sl_err(err, errlen, -EINVAL, "NOTIFY_SOCKET '%s' is not a socket address", path);
    }
    memcpy(sa.sun_path, path, plen);
    if (path[0] == '@') {
        sa.sun_path[0] = '\0'; /* abstract namespace: no terminating NUL counted */
    }
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen +
                                  (path[0] == '@' ? 0 : 1));
    size_t len = strlen(state);
    if (len > SL_SDNOTIFY_MAX) {
        return sl_err(err, errlen, -EMSGSIZE, "notify message of %zu bytes is too long", len);
    }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return sl_err(err, errlen, -errno, "notify socket: %s", strerror(errno));
    }
    int rc = 1;
    /* MSG_NOSIGNAL: a vanished receiver must not kill the daemon. */
    ssize_t n = sendto(fd, state, len, MSG_NOSIGNAL, (const struct sockaddr *)&sa, salen);
    if (n < 0) {
        rc = sl_err(err, errlen, -errno, "notify '%s': %s", path, strerror(errno));
    } else if ((size_t)n != len) {
        rc = sl_err(err, errlen, -EIO, "notify '%s': short datagram", path);
    }
    close(fd);
    return rc;
}

int sl_sdnotifyf(char *err, size_t errlen, const char *fmt, ...)
{
    char buf[SL_SDNOTIFY_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return sl_err(err, errlen, -EINVAL, "notify: bad format");
    }
    if ((size_t)n >= sizeof(buf)) {
        return sl_err(err, errlen, -EMSGSIZE, "notify message of %d bytes is too long", n);
    }
    return sl_sdnotify(buf, err, errlen);
}
