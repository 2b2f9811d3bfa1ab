#include "common/base/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/base/err.h"

int sl_secret_read(const char *path, char *buf, size_t buflen, char *err, size_t errlen)
{
    if (path == NULL || buf == NULL || buflen < 2) {
        return sl_err(err, errlen, -EINVAL, "token file: no path or no room");
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return sl_err(err, errlen, -e, "token file \"%s\": %s", path, strerror(e));
    }
    /* One byte more than fits tells "too long" from "exactly full". */
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, buflen - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            int e = errno;
            close(fd);
            return sl_err(err, errlen, -e, "token file \"%s\": %s", path, strerror(e));
        }
        if (r == 0) {
            break;
        }
        n += (size_t)r;
        if (n == buflen) {
            close(fd);
            buf[0] = '\0';
            return sl_err(err, errlen, -E2BIG, "token file \"%s\": longer than %zu bytes",
                          path, buflen - 1);
        }
    }
    close(fd);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
                     buf[n - 1] == '\t')) {
        n--;
    }
    buf[n] = '\0';
    if (n == 0) {
        return sl_err(err, errlen, -EINVAL, "token file \"%s\": empty", path);
    }
    for (size_t i = 0; i < n; i++) {
        if (buf[i] <= ' ' || buf[i] > '~') {
            buf[0] = '\0';
            return sl_err(err, errlen, -EINVAL,
                          "token file \"%s\": not one line of printable ASCII", path);
        }
    }
    return 0;
}
