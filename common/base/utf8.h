/* utf8: strict UTF-8 validation (RFC 3629). Shared by the record sources
 * (common/data/source_wds.c, source_jsonl.c), which refuse a sample whose
 * text is not UTF-8, and by the tokenizer. Pure functions, any thread. */
#ifndef SL_UTF8_H
#define SL_UTF8_H

#include <stddef.h>

/* Checks that s[0..n) is well-formed UTF-8: no overlong forms, no UTF-16
 * surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no stray
 * continuation bytes, no sequence cut short by the end. NUL bytes are valid
 * (U+0000). Returns 0, or -EDOM with *ret_bad_offset (if not NULL) set to the
 * offset of the first byte of the first bad sequence; on success
 * *ret_bad_offset is left untouched. */
int sl_utf8_check(const char *s, size_t n, size_t *ret_bad_offset);

#endif
