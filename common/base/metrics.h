/* metrics: the one writer of Prometheus text exposition (format 0.0.4), for
 * the dispatcher's and the worker's /metrics.
 *
 * A family is a row of the caller's table (sl_metric_t: name, type, help,
 * label names, precision). sl_metrics_family writes its HELP and TYPE lines;
 * sl_metrics_sample then writes one sample of it, label values escaped as
 * the format wants (backslash, double quote, newline). A sample of any other
 * family than the last one declared is refused: the format wants a family's
 * samples together, after its HELP and TYPE.
 *
 * The text grows up to the caller's bound. Past it, or on ENOMEM, the error
 * sticks: every later call returns it and sl_metrics_take gives no text, so
 * a scrape gets an error, never a silently cut exposition.
 *
 * Which labels make a series is the caller's choice; the caller gives each
 * label set at most one sample per family (the exposition format refuses a
 * scrape with two).
 *
 * Not thread-safe: a writer belongs to the one rendering that made it. Never
 * logs. */
#ifndef SL_METRICS_H
#define SL_METRICS_H

#include <stddef.h>

#define SL_METRIC_LABELS_MAX 4
#define SL_METRIC_G (-1) /* prec: printf's %g (shortest) */

typedef enum {
    SL_METRIC_GAUGE = 0,
    SL_METRIC_COUNTER,
} sl_metric_type_e;

typedef struct sl_metric_s {
    const char *name; /* [a-zA-Z_:][a-zA-Z0-9_:]*, counters end in _total */
    sl_metric_type_e type;
    const char *help; /* one line of text (backslashes and newlines are escaped) */
    const char *labels[SL_METRIC_LABELS_MAX]; /* label names; the first NULL ends them */
    int prec; /* digits after the point (0 for counts), or SL_METRIC_G */
} sl_metric_t;

typedef struct sl_metrics_s sl_metrics_t;

/* A writer whose text may grow to max_bytes. NULL on ENOMEM. */
sl_metrics_t *sl_metrics_new(size_t max_bytes);
void sl_metrics_free(sl_metrics_t *m); /* NULL ok */

/* "# HELP" and "# TYPE" of f; f's samples follow. Returns 0, -EINVAL (a name
 * the format refuses), -EMSGSIZE (over the bound) or -ENOMEM. */
int sl_metrics_family(sl_metrics_t *m, const sl_metric_t *f);

/* One sample of f (the family last declared): values[i] is the value of
 * label f->labels[i] (values may be NULL when f has no labels). NaN and
 * infinities are written as the format spells them. Returns 0, -EINVAL (f is
 * not the current family), -EMSGSIZE or -ENOMEM. */
int sl_metrics_sample(sl_metrics_t *m, const sl_metric_t *f, const char *const *values, double v);

/* The text so far (malloc'd, NUL-terminated, the caller's to free) in
 * *ret_text and its length in *ret_len (may be NULL); the writer is left
 * empty. Returns 0 or the error that stuck (outputs untouched). */
int sl_metrics_take(sl_metrics_t *m, char **ret_text, size_t *ret_len);

#endif
