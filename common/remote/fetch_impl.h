/* fetch_impl: what fetch.c and hedge.c share; not a public API. */
#ifndef SL_REMOTE_FETCH_IMPL_H
#define SL_REMOTE_FETCH_IMPL_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/remote/fetch.h"

/* One transfer: its body into fd, or into memory (mem_sink). */
typedef struct xfer_s {
    int fd;
    bool mem_sink;
    unsigned char *mem; /* mem_sink: the body so far (malloc'd) */
    size_t mem_len, mem_cap;
    uint64_t written, max;
    int write_rc; /* 0, -EFBIG, -ENOMEM or -errno of a failed write */
    bool got_bytes;
    CURL *h;
    sl_fetch_resp_t *resp;
} xfer_t;

size_t sl_fetch_on_body(char *p, size_t size, size_t nmemb, void *ud);
size_t sl_fetch_on_header(char *p, size_t size, size_t nmemb, void *ud);
/* The options of every request (h is a CURL *). Returns 0 or -EIO. */
int sl_fetch_set_opts(void *h, const char *url, struct curl_slist *sl, bool head,
                      const sl_fetch_opts_t *o, xfer_t *x);
/* Status, Location and length of a finished transfer into r. */
void sl_fetch_finish_resp(void *h, bool head, const xfer_t *x, sl_fetch_resp_t *r);
/* A CURLcode as -errno, described in err. */
int sl_fetch_transport_error(int c, const char *url, char *err, size_t errlen);

#endif
