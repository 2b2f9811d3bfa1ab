#include "common/base/secret.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/file.h"

int sl_secret_read(const char *path, char *buf, size_t buflen, char *err, size_t errlen)
{
    if (path == NULL || buf == NULL || buflen < 2) {
        return sl_err(err, errlen, -EINVAL, "token file: no path or no room");
    }
    char *text = NULL;
    size_t n = 0;
    char why[400];
    int rc = sl_file_read(path, buflen - 1, &text, &n, why, sizeof(why));
    if (rc == -E2BIG) {
        return sl_err(err, errlen, rc, "token file \"%s\": longer than %zu bytes", path,
                      buflen - 1);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "token file %s", why);
    }
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' ' ||
                     text[n - 1] == '\t')) {
        n--;
    }
    if (n == 0) {
        free(text);
        return sl_err(err, errlen, -EINVAL, "token file \"%s\": empty", path);
    }
    for (size_t i = 0; i < n; i++) {
        if (text[i] <= ' ' || text[i] > '~') {
            free(text);
            return sl_err(err, errlen, -EINVAL,
                          "token file \"%s\": not one line of printable ASCII", path);
        }
    }
    memcpy(buf, text, n);
    buf[n] = '\0';
    free(text);
    return 0;
}
