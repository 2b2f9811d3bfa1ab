/* source_record: what both record sources (source_wds.c, source_jsonl.c)
 * need to turn their bytes into a record's text: the text of a LLaVA-style
 * "conversations" array, and the UTF-8 check before a TEXT field is added. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/utf8.h"
#include "common/data/source_impl.h"
#include "common/sample/record.h"

int sl_src_conversations_text(const json_t *obj, char **ret, size_t *ret_len, const char **why)
{
    const json_t *conv = json_object_get(obj, "conversations");
    if (conv == NULL) {
        *why = "no text and no \"conversations\"";
        return -ENOSTR;
    }
    if (!json_is_array(conv)) {
        *why = "\"conversations\" is not an array";
        return -EPROTO;
    }
    size_t n = json_array_size(conv), len = 0;
    if (n == 0) {
        *why = "\"conversations\" is empty";
        return -ENOSTR;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(json_array_get(conv, i), "value");
        if (!json_is_string(v)) {
            *why = "a turn of \"conversations\" has no string \"value\"";
            return -EPROTO;
        }
        len += json_string_length(v) + (i > 0);
    }
    char *buf = malloc(len + 1);
    if (buf == NULL) {
        return -ENOMEM;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(json_array_get(conv, i), "value");
        if (i > 0) {
            buf[o++] = '\n';
        }
        memcpy(buf + o, json_string_value(v), json_string_length(v));
        o += json_string_length(v);
    }
    buf[o] = '\0';
    *ret = buf;
    *ret_len = o;
    return 0;
}

int sl_src_add_text(sl_tensor_t *out, const char *text, size_t n, const char *name, char *err,
                    size_t errlen)
{
    size_t bad;
    if (sl_utf8_check(text, n, &bad) < 0) {
        return sl_err(err, errlen, -EDOM, "%s: text is not UTF-8 (byte %zu)", name, bad);
    }
    int rc = sl_rec_add_bytes(out, SL_RF_TEXT, text, n);
    return rc < 0 ? sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc, "%s: record: %s", name,
                           strerror(-rc))
                  : 0;
}
