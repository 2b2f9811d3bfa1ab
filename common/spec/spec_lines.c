#include "common/spec/spec_lines.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Keys longer than this are cut in messages: enough for any real key, short
 * enough that a 1 MiB key cannot fill a log line. */
#define SPEC_LINES_KEY_SHOWN 64
/* sl_spec_line_str: paths we look up are a few steps deep. */
#define SPEC_LINES_MAX_STEPS 16

typedef struct {
    const char *buf;
    size_t len;
    size_t pos;
    unsigned line;
} scan_t;

static int scan_peek(const scan_t *s)
{
    return s->pos < s->len ? (unsigned char)s->buf[s->pos] : -1;
}

/* jansson counts lines by '\n' alone; do the same so syntax errors and
 * semantic errors agree. */
static void scan_advance(scan_t *s)
{
    if (s->pos < s->len) {
        if (s->buf[s->pos] == '\n' && s->line < UINT32_MAX) {
            s->line++;
        }
        s->pos++;
    }
}

static void scan_ws(scan_t *s)
{
    for (;;) {
        int c = scan_peek(s);
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            return;
        }
        scan_advance(s);
    }
}

static bool is_delim(int c)
{
    switch (c) {
    case ' ':
    case '\t':
    case '\n':
    case '\r':
    case ',':
    case ':':
    case '[':
    case ']':
    case '{':
    case '}':
    case '"':
        return true;
    default:
        return false;
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Reads the 4 hex digits after "\u"; -1 if they are not there. */
static long scan_hex4(scan_t *s)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(scan_peek(s));
        if (h < 0) {
            return -1;
        }
        v = v * 16 + h;
        scan_advance(s);
    }
    return v;
}

/* Streaming comparison of a decoded string against a key. */
typedef struct {
    const char *key;
    size_t keylen;
    size_t matched;
    bool ok;
} keycmp_t;

static void keycmp_byte(keycmp_t *k, unsigned char b)
{
    if (k->ok && k->matched < k->keylen && (unsigned char)k->key[k->matched] == b) {
        k->matched++;
    } else {
        k->ok = false;
    }
}

static void keycmp_codepoint(keycmp_t *k, long cp)
{
    if (cp < 0x80) {
        keycmp_byte(k, (unsigned char)cp);
    } else if (cp < 0x800) {
        keycmp_byte(k, (unsigned char)(0xC0 | (cp >> 6)));
        keycmp_byte(k, (unsigned char)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        keycmp_byte(k, (unsigned char)(0xE0 | (cp >> 12)));
        keycmp_byte(k, (unsigned char)(0x80 | ((cp >> 6) & 0x3F)));
        keycmp_byte(k, (unsigned char)(0x80 | (cp & 0x3F)));
    } else {
        keycmp_byte(k, (unsigned char)(0xF0 | (cp >> 18)));
        keycmp_byte(k, (unsigned char)(0x80 | ((cp >> 12) & 0x3F)));
        keycmp_byte(k, (unsigned char)(0x80 | ((cp >> 6) & 0x3F)));
        keycmp_byte(k, (unsigned char)(0x80 | (cp & 0x3F)));
    }
}

/* Consumes the string at s->pos (which is '"') and, if cmp is not NULL,
 * compares its decoded bytes with cmp's key. Keys may be written with escapes
 * ("\u0073ize" is "size"), so the raw bytes are not enough. */
static void scan_string(scan_t *s, keycmp_t *cmp)
{
    keycmp_t ignore = {.key = "", .keylen = 0, .matched = 0, .ok = false};
    if (cmp == NULL) {
        cmp = &ignore;
    }
    scan_advance(s); /* the opening quote */
    for (;;) {
        int c = scan_peek(s);
        if (c < 0) {
            cmp->ok = false;
            return;
        }
        scan_advance(s);
        if (c == '"') {
            return;
        }
        if (c != '\\') {
            keycmp_byte(cmp, (unsigned char)c);
            continue;
        }
        int e = scan_peek(s);
        if (e < 0) {
            cmp->ok = false;
            return;
        }
        scan_advance(s);
        switch (e) {
        case 'b':
            keycmp_byte(cmp, '\b');
            break;
        case 'f':
            keycmp_byte(cmp, '\f');
            break;
        case 'n':
            keycmp_byte(cmp, '\n');
            break;
        case 'r':
            keycmp_byte(cmp, '\r');
            break;
        case 't':
            keycmp_byte(cmp, '\t');
            break;
        case 'u': {
            long cp = scan_hex4(s);
            if (cp < 0) {
                cmp->ok = false;
                break;
            }
            /* A high surrogate followed by "\uDC00".."\uDFFF" is one code point. */
            if (cp >= 0xD800 && cp <= 0xDBFF && s->pos + 1 < s->len && s->buf[s->pos] == '\\' &&
                s->buf[s->pos + 1] == 'u') {
                scan_advance(s);
                scan_advance(s);
                long lo = scan_hex4(s);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else {
                    cmp->ok = false;
                    break;
                }
            }
            keycmp_codepoint(cmp, cp);
            break;
        }
        default: /* '"', '\\', '/' stand for themselves */
            keycmp_byte(cmp, (unsigned char)e);
            break;
        }
    }
}

/* Skips one value of any depth without recursion: brackets in valid JSON are
 * balanced, so a counter is enough. Stops early (without consuming) at a
 * ',' ':' '}' ']' that belongs to the enclosing container. */
static void scan_skip_value(scan_t *s)
{
    size_t depth = 0;
    do {
        scan_ws(s);
        int c = scan_peek(s);
        if (c < 0) {
            return;
        }
        if (c == '"') {
            scan_string(s, NULL);
        } else if (c == '{' || c == '[') {
            depth++;
            scan_advance(s);
        } else if (c == '}' || c == ']') {
            if (depth == 0) {
                return;
            }
            depth--;
            scan_advance(s);
        } else if (c == ',' || c == ':') {
            if (depth == 0) {
                return;
            }
            scan_advance(s);
        } else {
            /* number or literal: at least one byte, since c is no delimiter */
            while (scan_peek(s) >= 0 && !is_delim(scan_peek(s))) {
                scan_advance(s);
            }
        }
    } while (depth > 0);
}

/* At an object's '{': finds member key. On success s is at the member's
 * value and *ret_line is the key's line. Every loop turn consumes input or
 * returns, so malformed text cannot make it spin. */
static bool scan_find_key(scan_t *s, const char *key, size_t keylen, unsigned *ret_line)
{
    scan_advance(s); /* '{' */
    for (;;) {
        scan_ws(s);
        if (scan_peek(s) != '"') {
            return false; /* '}' (not there) or malformed */
        }
        unsigned key_line = s->line;
        keycmp_t cmp = {.key = key, .keylen = keylen, .matched = 0, .ok = true};
        scan_string(s, &cmp);
        bool match = cmp.ok && cmp.matched == keylen;
        scan_ws(s);
        if (scan_peek(s) != ':') {
            return false;
        }
        scan_advance(s);
        scan_ws(s);
        if (match) {
            *ret_line = key_line;
            return true;
        }
        scan_skip_value(s);
        scan_ws(s);
        if (scan_peek(s) != ',') {
            return false;
        }
        scan_advance(s);
    }
}

/* At an array's '[': finds element index; s is left at its first byte. */
static bool scan_find_index(scan_t *s, size_t index, unsigned *ret_line)
{
    scan_advance(s); /* '[' */
    for (size_t i = 0;; i++) {
        scan_ws(s);
        int c = scan_peek(s);
        if (c < 0 || c == ']') {
            return false;
        }
        if (i == index) {
            *ret_line = s->line;
            return true;
        }
        scan_skip_value(s);
        scan_ws(s);
        if (scan_peek(s) != ',') {
            return false;
        }
        scan_advance(s);
    }
}

unsigned sl_spec_line(const char *buf, size_t len, const sl_spec_pathc_t *path, size_t n)
{
    scan_t s = {.buf = buf, .len = buf != NULL ? len : 0, .pos = 0, .line = 1};
    scan_ws(&s);
    unsigned line = s.line;
    for (size_t i = 0; i < n; i++) {
        int c = scan_peek(&s);
        unsigned found_line = line;
        bool found;
        if (path[i].key != NULL) {
            found = c == '{' && scan_find_key(&s, path[i].key, path[i].keylen, &found_line);
        } else {
            found = c == '[' && scan_find_index(&s, path[i].index, &found_line);
        }
        if (!found) {
            return line; /* the deepest step that exists: the enclosing value */
        }
        line = found_line;
    }
    return line;
}

unsigned sl_spec_line_str(const char *buf, size_t len, const char *path)
{
    sl_spec_pathc_t steps[SPEC_LINES_MAX_STEPS];
    size_t n = 0;
    const char *p = path != NULL ? path : "";
    while (*p != '\0') {
        if (n == SPEC_LINES_MAX_STEPS) {
            return sl_spec_line(buf, len, NULL, 0);
        }
        if (*p == '[') {
            size_t idx = 0;
            p++;
            if (*p < '0' || *p > '9') {
                return sl_spec_line(buf, len, NULL, 0);
            }
            while (*p >= '0' && *p <= '9') {
                if (idx > (SIZE_MAX - 9) / 10) {
                    return sl_spec_line(buf, len, NULL, 0);
                }
                idx = idx * 10 + (size_t)(*p - '0');
                p++;
            }
            if (*p != ']') {
                return sl_spec_line(buf, len, NULL, 0);
            }
            p++;
            steps[n++] = (sl_spec_pathc_t){.key = NULL, .keylen = 0, .index = idx};
            continue;
        }
        if (*p == '.') {
            if (n == 0) {
                return sl_spec_line(buf, len, NULL, 0);
            }
            p++;
        }
        size_t klen = strcspn(p, ".[");
        if (klen == 0) {
            return sl_spec_line(buf, len, NULL, 0);
        }
        steps[n++] = (sl_spec_pathc_t){.key = p, .keylen = klen, .index = 0};
        p += klen;
    }
    return sl_spec_line(buf, len, steps, n);
}

/* A bounded writer: the result always ends in NUL, and once something did
 * not fit nothing more is written, so a cut never splits a UTF-8 sequence or
 * leaves a gap in the middle. */
typedef struct {
    char *out;
    size_t cap;
    size_t used;
    bool full;
} outbuf_t;

static void out_bytes(outbuf_t *o, const char *s, size_t n)
{
    if (o->cap == 0 || o->full) {
        return;
    }
    size_t room = o->cap - 1 - o->used;
    if (n > room) {
        n = room;
        /* s[n] is the first byte dropped: back up to the start of its character */
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) {
            n--;
        }
        o->full = true;
    }
    memcpy(o->out + o->used, s, n);
    o->used += n;
    o->out[o->used] = '\0';
}

static void out_str(outbuf_t *o, const char *s)
{
    out_bytes(o, s, strlen(s));
}

static bool needs_escape(unsigned char c)
{
    return c < 0x20 || c == 0x7F || c == '\\';
}

static void out_escaped(outbuf_t *o, const char *s, size_t n)
{
    size_t shown = n;
    if (shown > SPEC_LINES_KEY_SHOWN) {
        shown = SPEC_LINES_KEY_SHOWN;
        while (shown > 0 && ((unsigned char)s[shown] & 0xC0) == 0x80) {
            shown--;
        }
    }
    size_t i = 0;
    while (i < shown) {
        size_t run = i;
        while (run < shown && !needs_escape((unsigned char)s[run])) {
            run++;
        }
        out_bytes(o, s + i, run - i);
        if (run == shown) {
            break;
        }
        char hex[8];
        snprintf(hex, sizeof(hex), "\\x%02X", (unsigned char)s[run]);
        out_str(o, hex);
        i = run + 1;
    }
    if (shown < n) {
        out_str(o, "...");
    }
}

char *sl_spec_path_format(const sl_spec_pathc_t *path, size_t n, char *out, size_t outlen)
{
    outbuf_t o = {.out = out, .cap = out != NULL ? outlen : 0, .used = 0, .full = false};
    if (o.cap > 0) {
        out[0] = '\0';
    }
    if (n == 0) {
        out_str(&o, "(top level)");
        return out;
    }
    for (size_t i = 0; i < n; i++) {
        if (path[i].key != NULL) {
            if (i > 0) {
                out_str(&o, ".");
            }
            out_escaped(&o, path[i].key, path[i].keylen);
        } else {
            char idx[32];
            snprintf(idx, sizeof(idx), "[%zu]", path[i].index);
            out_str(&o, idx);
        }
    }
    return out;
}

char *sl_spec_quote(const char *s, size_t n, char *out, size_t outlen)
{
    outbuf_t o = {.out = out, .cap = out != NULL ? outlen : 0, .used = 0, .full = false};
    if (o.cap > 0) {
        out[0] = '\0';
    }
    out_escaped(&o, s != NULL ? s : "", s != NULL ? n : 0);
    return out;
}
