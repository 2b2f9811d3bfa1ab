#include "common/base/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SL_METRICS_FIRST_CAP 4096

struct sl_metrics_s {
    char *buf;
    size_t len, cap, max;
    const sl_metric_t *family; /* the last one declared: its samples may follow */
    int err;                   /* sticky: 0 or the first failure */
};

sl_metrics_t *sl_metrics_new(size_t max_bytes)
{
    sl_metrics_t *m = calloc(1, sizeof(*m));
    if (m != NULL) {
        m->max = max_bytes;
    }
    return m;
}

void sl_metrics_free(sl_metrics_t *m)
{
    if (m != NULL) {
        free(m->buf);
        free(m);
    }
}

/* Room for n more bytes and a NUL, within the bound. */
static int reserve(sl_metrics_t *m, size_t n)
{
    if (m->err != 0) {
        return m->err;
    }
    if (n > m->max || m->len > m->max - n) {
        m->err = -EMSGSIZE;
        return m->err;
    }
    if (m->len + n < m->cap) {
        return 0;
    }
    size_t cap = m->cap > 0 ? m->cap : SL_METRICS_FIRST_CAP;
    while (cap <= m->len + n) {
        cap *= 2;
    }
    char *nb = realloc(m->buf, cap);
    if (nb == NULL) {
        m->err = -ENOMEM;
        return m->err;
    }
    m->buf = nb;
    m->cap = cap;
    return 0;
}

/* The appenders do nothing once an error stuck; callers check m->err once,
 * at the end of what they write. */
static void put(sl_metrics_t *m, const char *s, size_t n)
{
    if (reserve(m, n) == 0) {
        memcpy(m->buf + m->len, s, n);
        m->len += n;
        m->buf[m->len] = '\0';
    }
}

static void put_str(sl_metrics_t *m, const char *s) { put(m, s, strlen(s)); }

/* Label values escape the quote too; HELP text only backslash and newline. */
static void put_escaped(sl_metrics_t *m, const char *s, int quote)
{
    for (const char *p = s; m->err == 0 && *p != '\0'; p++) {
        if (*p == '\\') {
            put(m, "\\\\", 2);
        } else if (*p == '\n') {
            put(m, "\\n", 2);
        } else if (*p == '"' && quote) {
            put(m, "\\\"", 2);
        } else {
            put(m, p, 1);
        }
    }
}

static int name_ok(const char *s, int colon)
{
    if (s == NULL || *s == '\0' || (*s >= '0' && *s <= '9')) {
        return 0;
    }
    for (; *s != '\0'; s++) {
        int alpha = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_';
        if (!alpha && !(*s >= '0' && *s <= '9') && !(colon && *s == ':')) {
            return 0;
        }
    }
    return 1;
}

int sl_metrics_family(sl_metrics_t *m, const sl_metric_t *f)
{
    if (m->err != 0) {
        return m->err;
    }
    int ok = name_ok(f->name, 1);
    for (size_t i = 0; ok && i < SL_METRIC_LABELS_MAX && f->labels[i] != NULL; i++) {
        ok = name_ok(f->labels[i], 0);
    }
    if (!ok) {
        m->err = -EINVAL;
        return m->err;
    }
    put_str(m, "# HELP ");
    put_str(m, f->name);
    put_str(m, " ");
    put_escaped(m, f->help != NULL ? f->help : "", 0);
    put_str(m, "\n# TYPE ");
    put_str(m, f->name);
    put_str(m, f->type == SL_METRIC_COUNTER ? " counter\n" : " gauge\n");
    m->family = f;
    return m->err;
}

/* The value as the format spells it: Go's ParseFloat reads NaN and +Inf,
 * not printf's "nan" and "inf". */
static void format_value(char *dst, size_t len, double v, int prec)
{
    if (isnan(v)) {
        snprintf(dst, len, "NaN");
    } else if (isinf(v)) {
        snprintf(dst, len, "%cInf", v > 0 ? '+' : '-');
    } else if (prec < 0) {
        snprintf(dst, len, "%g", v);
    } else {
        snprintf(dst, len, "%.*f", prec > 17 ? 17 : prec, v);
    }
}

int sl_metrics_sample(sl_metrics_t *m, const sl_metric_t *f, const char *const *values, double v)
{
    if (m->err != 0) {
        return m->err;
    }
    if (f != m->family) {
        m->err = -EINVAL;
        return m->err;
    }
    put_str(m, f->name);
    for (size_t i = 0; i < SL_METRIC_LABELS_MAX && f->labels[i] != NULL; i++) {
        put_str(m, i == 0 ? "{" : ",");
        put_str(m, f->labels[i]);
        put_str(m, "=\"");
        put_escaped(m, values != NULL && values[i] != NULL ? values[i] : "", 1);
        put_str(m, "\"");
    }
    if (f->labels[0] != NULL) {
        put_str(m, "}");
    }
    char num[400]; /* %.17f of DBL_MAX: 309 digits, the point and 17 more */
    format_value(num, sizeof(num), v, f->prec);
    put_str(m, " ");
    put_str(m, num);
    put_str(m, "\n");
    return m->err;
}

int sl_metrics_take(sl_metrics_t *m, char **ret_text, size_t *ret_len)
{
    if (m->err != 0) {
        return m->err;
    }
    if (m->buf == NULL) {
        put(m, "", 0); /* an empty exposition is still a string */
        if (m->err != 0) {
            return m->err;
        }
    }
    *ret_text = m->buf;
    if (ret_len != NULL) {
        *ret_len = m->len;
    }
    m->buf = NULL;
    m->len = 0;
    m->cap = 0;
    m->family = NULL;
    return 0;
}
