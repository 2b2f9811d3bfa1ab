/* spec_lines: where a field of a JSON document begins, for error messages.
 * jansson keeps no positions for values, so spec errors found after parsing
 * ("stages[1].size: must be ...") would otherwise not name a line. This is a
 * small scanner over the raw text that follows a path of object keys and
 * array indexes and reports the line it ends on. It never allocates, never
 * recurses and never reads past len, whatever the input. */
#ifndef SL_SPEC_LINES_H
#define SL_SPEC_LINES_H

#include <stddef.h>

/* One step of a path: an object key (key != NULL, keylen bytes, decoded, may
 * hold any byte but NUL) or an array index (key == NULL). */
typedef struct sl_spec_pathc_s {
    const char *key;
    size_t keylen;
    size_t index;
} sl_spec_pathc_t;

/* 1-based line where the value at path begins in buf: the line of its key
 * for an object member, of its first byte for an array element, of the root
 * value for n == 0. When the path does not exist (a missing field), the line
 * of the deepest value on the path that does (the enclosing object). Meant
 * for text jansson accepted; on anything else it still returns a line >= 1. */
unsigned sl_spec_line(const char *buf, size_t len, const sl_spec_pathc_t *path, size_t n);

/* The same for a path written as text: keys separated by '.', indexes as
 * "[N]", e.g. "stages[1].size" or "offload.split" (keys must not contain '.'
 * or '['). An unparsable path gives the root's line. */
unsigned sl_spec_line_str(const char *buf, size_t len, const char *path);

/* Formats path for a message: "stages[1].size"; bytes of keys that are not
 * printable are written as \xNN, and long keys are cut with "...". out is
 * always NUL-terminated (when outlen > 0); returns out. */
char *sl_spec_path_format(const sl_spec_pathc_t *path, size_t n, char *out, size_t outlen);

/* Writes the n bytes of s for a message, with the same escaping and cut as
 * keys get (so a hostile value cannot put control bytes on a terminal).
 * out is always NUL-terminated (when outlen > 0); returns out. */
char *sl_spec_quote(const char *s, size_t n, char *out, size_t outlen);

#endif
