#include "common/base/err.h"

#include <stdarg.h>
#include <stdio.h>

void sl_err_scrub(char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) {
            *s = '?';
        }
    }
}

int sl_err(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        sl_err_scrub(err);
    }
    return code;
}

int sl_err_prefix(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err == NULL || errlen == 0) {
        return code;
    }
    char was[1024];
    snprintf(was, sizeof(was), "%s", err);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < errlen) {
        snprintf(err + n, errlen - (size_t)n, ": %s", was);
    }
    sl_err_scrub(err);
    return code;
}
