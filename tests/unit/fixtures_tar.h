/* A small tar writer for the source suites (test_source.c,
 * test_source_records.c, test_client_costs.c): headers written here,
 * checksums and all (ustar, GNU long names, base-256 sizes, pax). Every
 * helper asserts. */
#ifndef TESTS_UNIT_FIXTURES_TAR_H
#define TESTS_UNIT_FIXTURES_TAR_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/fixtures_source.h"


typedef struct tbuf_s {
    unsigned char *p;
    size_t len, cap;
} tbuf_t;

static inline void tb_put(tbuf_t *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) {
            cap *= 2;
        }
        b->p = realloc(b->p, cap);
        ck_assert_ptr_nonnull(b->p);
        b->cap = cap;
    }
    if (d != NULL) {
        memcpy(b->p + b->len, d, n);
    } else {
        memset(b->p + b->len, 0, n);
    }
    b->len += n;
}

typedef struct hdr_opts_s {
    const char *prefix; /* ustar prefix field */
    bool gnu;           /* GNU magic "ustar  \0" instead of POSIX "ustar\0" "00" */
    bool base256;       /* size in GNU base-256 */
} hdr_opts_t;

static inline void tb_header(tbuf_t *b, const char *name, char type, uint64_t size,
                      const hdr_opts_t *o)
{
    unsigned char h[512];
    memset(h, 0, sizeof(h));
    size_t nlen = strlen(name);
    memcpy(h, name, nlen > 100 ? 100 : nlen);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0001750", 8);
    memcpy(h + 116, "0001750", 8);
    if (o != NULL && o->base256) {
        h[124] = 0x80;
        for (int i = 0; i < 8; i++) {
            h[135 - i] = (unsigned char)(size >> (8 * i));
        }
    } else {
        /* 11 octal digits; larger sizes use base256 */
        snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)(size & 077777777777ULL));
    }
    memcpy(h + 136, "14712345670", 12);
    h[156] = (unsigned char)type;
    if (o != NULL && o->gnu) {
        memcpy(h + 257, "ustar  ", 8);
    } else {
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
    }
    if (o != NULL && o->prefix != NULL) {
        memcpy(h + 345, o->prefix, strlen(o->prefix));
    }
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) {
        sum += h[i];
    }
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    tb_put(b, h, sizeof(h));
}

static inline void tb_data(tbuf_t *b, const void *d, size_t n)
{
    tb_put(b, d, n);
    size_t pad = (512 - n % 512) % 512;
    tb_put(b, NULL, pad);
}

static inline void tb_file(tbuf_t *b, const char *name, const void *d, size_t n)
{
    tb_header(b, name, '0', n, NULL);
    tb_data(b, d, n);
}

static inline void tb_text(tbuf_t *b, const char *name, const char *text)
{
    tb_file(b, name, text, strlen(text));
}

static inline void tb_fake(tbuf_t *b, const char *name, unsigned seed)
{
    unsigned char buf[400];
    fake_fill(seed, buf);
    tb_file(b, name, buf, fake_len(seed));
}

/* GNU long name: an 'L' member whose data is the name, then the member. */
static inline void tb_longname(tbuf_t *b, const char *name, unsigned seed)
{
    hdr_opts_t gnu = {.gnu = true};
    tb_header(b, "././@LongLink", 'L', strlen(name) + 1, &gnu);
    tb_data(b, name, strlen(name) + 1);
    unsigned char buf[400];
    fake_fill(seed, buf);
    tb_header(b, name, '0', fake_len(seed), &gnu); /* name field truncated to 100 */
    tb_data(b, buf, fake_len(seed));
}

/* pax 'x' header with path (and size, with a 0 size field) before the member. */
static inline void tb_pax(tbuf_t *b, const char *path, unsigned seed)
{
    char rec[2][1024];
    unsigned char buf[400];
    fake_fill(seed, buf);
    size_t n = fake_len(seed);
    char body[2048];
    int len = 0;
    const char *keys[2] = {"path", "size"};
    char sizestr[32];
    snprintf(sizestr, sizeof(sizestr), "%zu", n);
    const char *vals[2] = {path, sizestr};
    for (int k = 0; k < 2; k++) {
        /* The length counts its own digits: iterate to a fixed point. */
        int l = (int)(strlen(keys[k]) + strlen(vals[k]) + 3);
        for (;;) {
            int l2 = snprintf(rec[k], sizeof(rec[k]), "%d %s=%s\n", l, keys[k], vals[k]);
            if (l2 == l) {
                break;
            }
            l = l2;
        }
        len += snprintf(body + len, sizeof(body) - (size_t)len, "%s", rec[k]);
    }
    tb_header(b, "PaxHeaders/x", 'x', (uint64_t)len, NULL);
    tb_data(b, body, (size_t)len);
    tb_header(b, "short-name.jpg", '0', 0, NULL); /* the real size is the pax one */
    tb_data(b, buf, n);
}

static inline void tb_end(tbuf_t *b) { tb_put(b, NULL, 1024); }

static inline void tb_save(tbuf_t *b, const char *rel)
{
    t_write(rel, b->p, b->len);
    free(b->p);
    memset(b, 0, sizeof(*b));
}

#endif
