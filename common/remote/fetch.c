/* fetch: one libcurl request (fetch.h): a body into a file descriptor, the
 * validators (ETag, Last-Modified, Content-Length) from the headers, a
 * redirect's target handed back instead of followed. */
#include "common/remote/fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/remote/fetch_impl.h"

void sl_fetch_opts_default(sl_fetch_opts_t *o)
{
    *o = (sl_fetch_opts_t){.connect_timeout_ms = 5000,
                           .low_speed_bytes = 1024,
                           .low_speed_secs = 15,
                           .max_bytes = (uint64_t)64 << 30};
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_init_rc;

static void global_init(void)
{
    g_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

int sl_fetch_global_init(void)
{
    pthread_once(&g_once, global_init);
    return g_init_rc;
}

size_t sl_fetch_on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    xfer_t *x = ud;
    size_t n = size * nmemb;
    long status = 0;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
    /* The body of an error response (an S3 XML error, a 404 page) is not
     * the object: drop it. */
    if ((x->fd < 0 && !x->mem_sink) || status < 200 || status > 299) {
        return n;
    }
    if (x->written + n > x->max) {
        x->write_rc = -EFBIG;
        return 0;
    }
    x->got_bytes = true;
    if (x->mem_sink) { /* a hedged request's body: kept until it wins */
        if (x->mem_len + n > x->mem_cap) {
            size_t cap = x->mem_cap ? x->mem_cap : 65536;
            while (cap < x->mem_len + n) {
                cap *= 2;
            }
            unsigned char *g = realloc(x->mem, cap);
            if (g == NULL) {
                x->write_rc = -ENOMEM;
                return 0;
            }
            x->mem = g;
            x->mem_cap = cap;
        }
        memcpy(x->mem + x->mem_len, p, n);
        x->mem_len += n;
        x->written += n;
        return n;
    }
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(x->fd, p + off, n - off);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            x->write_rc = -errno;
            return 0;
        }
        off += (size_t)w;
    }
    x->written += n;
    return n;
}

/* Copies a header's value (trimmed) when line is "name: value". */
static bool header_value(const char *line, size_t n, const char *name, char *out, size_t outlen)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':') {
        return false;
    }
    const char *v = line + k + 1;
    const char *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t')) {
        v++;
    }
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) {
        end--;
    }
    size_t vn = (size_t)(end - v);
    if (vn >= outlen) {
        vn = outlen - 1;
    }
    memcpy(out, v, vn);
    out[vn] = '\0';
    return true;
}

size_t sl_fetch_on_header(char *p, size_t size, size_t nmemb, void *ud)
{
    xfer_t *x = ud;
    size_t n = size * nmemb;
    if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        /* A new response (after a 100 Continue): forget the last one's. */
        x->resp->etag[0] = '\0';
        x->resp->last_modified[0] = '\0';
        x->resp->range_total = 0;
        return n;
    }
    char cr[96];
    if (header_value(p, n, "content-range", cr, sizeof(cr))) {
        const char *slash = strchr(cr, '/');
        char *end = NULL;
        unsigned long long t = slash != NULL ? strtoull(slash + 1, &end, 10) : 0;
        x->resp->range_total = end != NULL && end != slash + 1 && *end == '\0' ? t : 0;
    }
    header_value(p, n, "etag", x->resp->etag, sizeof(x->resp->etag));
    header_value(p, n, "last-modified", x->resp->last_modified, sizeof(x->resp->last_modified));
    return n;
}

int sl_fetch_transport_error(int c, const char *url, char *err, size_t errlen)
{
    int rc;
    switch ((CURLcode)c) {
    case CURLE_OPERATION_TIMEDOUT:
        rc = -ETIMEDOUT;
        break;
    case CURLE_COULDNT_CONNECT:
        rc = -ECONNREFUSED;
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
        rc = -EHOSTUNREACH;
        break;
    case CURLE_ABORTED_BY_CALLBACK:
        rc = -ECANCELED;
        break;
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
        rc = -ECONNRESET;
        break;
    default:
        rc = -EIO;
        break;
    }
    return sl_err(err, errlen, rc, "%s: %s", url, curl_easy_strerror((CURLcode)c));
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    return __atomic_load_n((const int *)ud, __ATOMIC_RELAXED) != 0;
}

int sl_fetch_set_opts(void *hv, const char *url, struct curl_slist *sl, bool head,
                      const sl_fetch_opts_t *o, xfer_t *x)
{
    CURL *h = hv;
    CURLcode c = CURLE_OK;
    c |= curl_easy_setopt(h, CURLOPT_URL, url);
    c |= curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    c |= curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    c |= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    c |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
    c |= curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, o->low_speed_bytes);
    c |= curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, o->low_speed_secs);
    c |= curl_easy_setopt(h, CURLOPT_HTTPHEADER, sl);
    c |= curl_easy_setopt(h, CURLOPT_NOBODY, head ? 1L : 0L);
    c |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sl_fetch_on_body);
    c |= curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    c |= curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, sl_fetch_on_header);
    c |= curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    c |= curl_easy_setopt(h, CURLOPT_USERAGENT, "sluice");
    /* Never let libcurl read ~/.netrc or proxies' credentials into a
     * request a spec caused. */
    c |= curl_easy_setopt(h, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
    if (o->cancel != NULL) {
        c |= curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        c |= curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        c |= curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)o->cancel);
    }
    return c == CURLE_OK ? 0 : -EIO;
}

/* A redirect's target, an error body skipped, the length known. */
void sl_fetch_finish_resp(void *hv, bool head, const xfer_t *x, sl_fetch_resp_t *r)
{
    CURL *h = hv;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    char *loc = NULL;
    if (r->status >= 300 && r->status < 400 &&
        curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK && loc != NULL) {
        snprintf(r->location, sizeof(r->location), "%s", loc);
    }
    curl_off_t cl = -1;
    if (head) {
        if (curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) == CURLE_OK && cl >= 0) {
            r->length = (uint64_t)cl;
            r->have_length = true;
        }
    } else {
        r->length = x->written;
        r->have_length = true;
    }
}

int sl_fetch(const char *url, const char *const *hdrs, bool head, int out_fd,
             const sl_fetch_opts_t *o, sl_fetch_resp_t *ret, char *err, size_t errlen)
{
    if (sl_fetch_global_init() < 0) {
        return sl_err(err, errlen, -EIO, "libcurl: global init failed");
    }
    memset(ret, 0, sizeof(*ret));
    CURL *h = curl_easy_init();
    if (h == NULL) {
        return sl_err(err, errlen, -ENOMEM, "libcurl: out of memory");
    }
    struct curl_slist *sl = NULL;
    int rc = 0;
    for (size_t i = 0; hdrs != NULL && hdrs[i] != NULL; i++) {
        struct curl_slist *next = curl_slist_append(sl, hdrs[i]);
        if (next == NULL) {
            rc = sl_err(err, errlen, -ENOMEM, "libcurl: out of memory");
            goto out;
        }
        sl = next;
    }
    xfer_t x = {.fd = head ? -1 : out_fd, .max = o->max_bytes, .h = h, .resp = ret};
    if (sl_fetch_set_opts(h, url, sl, head, o, &x) < 0) {
        rc = sl_err(err, errlen, -EIO, "%s: libcurl refused an option", url);
        goto out;
    }
    CURLcode c = curl_easy_perform(h);
    sl_fetch_finish_resp(h, head, &x, ret);
    if (x.write_rc < 0) {
        rc = x.write_rc == -EFBIG ? sl_err(err, errlen, -EFBIG, "%s: larger than %llu bytes", url,
                                           (unsigned long long)o->max_bytes)
                                  : sl_err(err, errlen, x.write_rc, "%s: writing the body: %s", url,
                                           strerror(-x.write_rc));
    } else if (c != CURLE_OK) {
        rc = sl_fetch_transport_error((int)c, url, err, errlen);
    }
out:
    curl_slist_free_all(sl);
    curl_easy_cleanup(h);
    return rc;
}
