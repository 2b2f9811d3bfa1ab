/* url_pins: the job's first validator per URL (client/lib/url_pins.h). */
#include "client/lib/url_pins.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"

/* Open addressing over the URL hashes (never 0: an empty slot), kept at
 * most half full. */
typedef struct slot_s {
    uint64_t url, tag;
    bool saved; /* from a resumed state */
} slot_t;

struct cl_upins_s {
    pthread_mutex_t mu;
    slot_t *s;
    size_t cap, n;
    uint32_t max;
    uint64_t unpinned;
};

int cl_upins_new(uint32_t max, cl_upins_t **ret)
{
    cl_upins_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return -ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    p->max = max > 0 ? max : CL_UPINS_MAX;
    *ret = p;
    return 0;
}

void cl_upins_free(cl_upins_t *p)
{
    if (p == NULL) {
        return;
    }
    pthread_mutex_destroy(&p->mu);
    free(p->s);
    free(p);
}

/* The slot of url (cap > 0): its own, or the empty one it would take. */
static slot_t *slot_of(slot_t *s, size_t cap, uint64_t url)
{
    size_t i = (size_t)(url % cap);
    while (s[i].url != 0 && s[i].url != url) {
        i = (i + 1) % cap;
    }
    return &s[i];
}

static const slot_t *find(const cl_upins_t *p, uint64_t url)
{
    if (p->cap == 0) {
        return NULL;
    }
    const slot_t *s = slot_of(p->s, p->cap, url);
    return s->url == url ? s : NULL;
}

/* Room for k more pins (mu held). 0 or -ENOMEM. */
static int reserve(cl_upins_t *p, size_t k)
{
    if ((p->n + k) * 2 <= p->cap) {
        return 0;
    }
    size_t cap = p->cap > 0 ? p->cap : 1024;
    while ((p->n + k) * 2 > cap) {
        cap *= 2;
    }
    slot_t *s = calloc(cap, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < p->cap; i++) {
        if (p->s[i].url != 0) {
            *slot_of(s, cap, p->s[i].url) = p->s[i];
        }
    }
    free(p->s);
    p->s = s;
    p->cap = cap;
    return 0;
}

/* Pins url at tag (mu held; not pinned yet). */
static void pin(cl_upins_t *p, uint64_t url, uint64_t tag, bool saved)
{
    if (p->n >= p->max || reserve(p, 1) < 0) {
        p->unpinned++;
        return;
    }
    *slot_of(p->s, p->cap, url) = (slot_t){url, tag, saved};
    p->n++;
}

cl_upins_verdict_e cl_upins_check(cl_upins_t *p, const sl_url_vers_t *v, uint32_t *ret_at,
                                  uint64_t *ret_pinned)
{
    cl_upins_verdict_e verdict = CL_UPINS_OK;
    pthread_mutex_lock(&p->mu);
    for (uint32_t i = 0; i < v->n && verdict == CL_UPINS_OK; i++) {
        const slot_t *s = find(p, v->v[i].url);
        if (s != NULL && s->tag != v->v[i].tag) {
            verdict = s->saved ? CL_UPINS_SAVED : CL_UPINS_CHANGED;
            *ret_at = i;
            *ret_pinned = s->tag;
        }
    }
    for (uint32_t i = 0; i < v->n && verdict == CL_UPINS_OK; i++) {
        if (find(p, v->v[i].url) == NULL) {
            pin(p, v->v[i].url, v->v[i].tag, false);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return verdict;
}

uint64_t cl_upins_count(const cl_upins_t *p)
{
    pthread_mutex_lock((pthread_mutex_t *)&p->mu);
    uint64_t n = p->n;
    pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
    return n;
}

uint64_t cl_upins_unpinned(const cl_upins_t *p)
{
    pthread_mutex_lock((pthread_mutex_t *)&p->mu);
    uint64_t n = p->unpinned;
    pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
    return n;
}

int cl_upins_save(const cl_upins_t *p, char **ret, size_t *ret_len)
{
    pthread_mutex_lock((pthread_mutex_t *)&p->mu);
    size_t len = p->n * CL_UPINS_HEX;
    char *out = malloc(len + 1);
    size_t k = 0;
    for (size_t i = 0; out != NULL && i < p->cap; i++) {
        if (p->s[i].url != 0) {
            snprintf(out + k, CL_UPINS_HEX + 1, "%016" PRIx64 "%016" PRIx64, p->s[i].url,
                     p->s[i].tag);
            k += CL_UPINS_HEX;
        }
    }
    pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
    if (out == NULL) {
        return -ENOMEM;
    }
    out[len] = '\0';
    *ret = out;
    *ret_len = len;
    return 0;
}

/* 16 lowercase hex digits at h into *ret: 0, or -EINVAL. */
static int hex64(const char *h, uint64_t *ret)
{
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = h[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) {
            return -EINVAL;
        }
        v = v << 4 | (uint64_t)d;
    }
    *ret = v;
    return 0;
}

/* Pin k of hex into *ret, checked: 0 or -EINVAL with err saying why. */
static int parse_pin(const char *hex, size_t k, slot_t *ret, char *err, size_t errlen)
{
    const char *h = hex + k * CL_UPINS_HEX;
    if (hex64(h, &ret->url) < 0 || hex64(h + 16, &ret->tag) < 0) {
        return sl_err(err, errlen, -EINVAL,
                      "url_pins: pin %zu has a character that is not a lowercase hex digit", k);
    }
    if (ret->url == 0 || ret->tag == 0) {
        return sl_err(err, errlen, -EINVAL, "url_pins: pin %zu has a zero URL hash or validator",
                      k);
    }
    ret->saved = true;
    return 0;
}

/* Checks the n pins of hex against the table and each other (mu held). */
static int check_all(cl_upins_t *p, const char *hex, size_t n, char *err, size_t errlen)
{
    cl_upins_t seen = {.max = p->max};
    int rc = reserve(&seen, n);
    for (size_t k = 0; rc == 0 && k < n; k++) {
        slot_t e;
        rc = parse_pin(hex, k, &e, err, errlen);
        const slot_t *old = rc == 0 ? find(p, e.url) : NULL;
        slot_t *dup = rc == 0 ? slot_of(seen.s, seen.cap, e.url) : NULL;
        if (rc == 0 &&
            ((old != NULL && old->tag != e.tag) || (dup->url != 0 && dup->tag != e.tag))) {
            rc = sl_err(err, errlen, -ESTALE,
                        "URL %016" PRIx64 " is pinned to two versions (ranks read it before "
                        "and after it changed: the data set changed under the job)",
                        e.url);
        } else if (rc == 0 && old == NULL && dup->url == 0) {
            *dup = e;
            seen.n++;
        }
    }
    free(seen.s);
    return rc == -ENOMEM ? sl_err(err, errlen, rc, "url_pins: out of memory") : rc;
}

int cl_upins_load(cl_upins_t *p, const char *hex, size_t len, char *err, size_t errlen)
{
    if (len % CL_UPINS_HEX != 0) {
        return sl_err(err, errlen, -EINVAL,
                      "url_pins: %zu characters, not a whole number of %d-digit pins "
                      "(truncated?)",
                      len, CL_UPINS_HEX);
    }
    size_t n = len / CL_UPINS_HEX;
    if (n > p->max) {
        return sl_err(err, errlen, -EINVAL, "url_pins: %zu pins, more than %" PRIu32, n, p->max);
    }
    pthread_mutex_lock(&p->mu);
    int rc = check_all(p, hex, n, err, errlen);
    size_t room = p->max - p->n;
    if (rc == 0 && reserve(p, n < room ? n : room) < 0) {
        rc = sl_err(err, errlen, -ENOMEM, "url_pins: out of memory");
    }
    for (size_t k = 0; rc == 0 && k < n; k++) {
        slot_t e;
        (void)parse_pin(hex, k, &e, NULL, 0);
        slot_t *s = slot_of(p->s, p->cap, e.url);
        if (s->url == 0 && p->n < p->max) {
            *s = e;
            p->n++;
        } else if (s->url == 0) {
            p->unpinned++; /* several ranks' states over the bound: as at run time */
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}
