/* err: the error-buffer convention shared by every module.
 * Functions that can fail return 0 or a negative errno-style code and, when
 * the caller passed a buffer, write one human-readable line into it. */
#ifndef SL_ERR_H
#define SL_ERR_H

#include <stddef.h>

/* Formats into err (if non-NULL) and returns code, so callers can write
 * `return sl_err(err, errlen, -EINVAL, "bad %s", x);`. Control characters
 * (from file names, tar members, peers' strings) become '?': the message
 * stays one line of text in logs and status details. */
int sl_err(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Puts "PREFIX: " (formatted) before the message already in err, for a
 * caller that adds where a callee failed ("image 2: not a JPEG"). Returns
 * code. */
int sl_err_prefix(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Replaces C0 control characters and DEL in s with '?' (what sl_err does). */
void sl_err_scrub(char *s);

#endif
