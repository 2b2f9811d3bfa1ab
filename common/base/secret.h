/* secret: reads a shared secret (an RPC or HTTP bearer token) from a file,
 * so it never appears in argv (ps) or in a world-readable config. */
#ifndef SL_SECRET_H
#define SL_SECRET_H

#include <stddef.h>

#define SL_SECRET_MAX 512

/* Reads path into buf (NUL-terminated), dropping trailing whitespace. The
 * token must be 1..buflen-1 printable non-space ASCII bytes (it travels in an
 * HTTP/2 header). Returns 0, or a negative errno with err naming the file. */
int sl_secret_read(const char *path, char *buf, size_t buflen, char *err, size_t errlen);

#endif
