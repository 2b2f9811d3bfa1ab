/* source_record: what both record sources (source_wds.c, source_jsonl.c)
 * need to turn their bytes into a record's text: the text and turns of a
 * LLaVA-style "conversations" array (or chat messages), and the UTF-8 check
 * before a TEXT field is added. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"
#include "common/base/utf8.h"
#include "common/data/source_impl.h"
#include "common/sample/record.h"

/* A turn's text and role: LLaVA's {"from", "value"} or a chat message's
 * {"role", "content"}. */
static int turn_of(const json_t *turn, const json_t **ret_value, int *ret_role, const char **why)
{
    const json_t *v = json_object_get(turn, "value");
    if (v == NULL) {
        v = json_object_get(turn, "content");
    }
    if (!json_is_string(v)) {
        *why = "a turn of \"conversations\" has no string \"value\" (or \"content\")";
        return -EPROTO;
    }
    const json_t *r = json_object_get(turn, "from");
    if (r == NULL) {
        r = json_object_get(turn, "role");
    }
    if (!json_is_string(r)) {
        *why = "a turn of \"conversations\" has no string \"from\" (or \"role\")";
        return -EPROTO;
    }
    int role = sl_role_parse(json_string_value(r));
    if (role < 0) {
        *why = "a turn of \"conversations\" has an unknown \"from\"/\"role\" (known: system, "
               "human/user, gpt/assistant)";
        return -EPROTO;
    }
    *ret_value = v;
    *ret_role = role;
    return 0;
}

int sl_src_conversations_text(const json_t *obj, char **ret, size_t *ret_len, uint32_t **ret_turns,
                              uint32_t *ret_nturns, const char **why)
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
    if (n > UINT32_MAX / SL_RF_TURN_WORDS) {
        *why = "\"conversations\" has too many turns";
        return -EPROTO;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *v;
        int role;
        int rc = turn_of(json_array_get(conv, i), &v, &role, why);
        if (rc < 0) {
            return rc;
        }
        len += json_string_length(v) + (i > 0);
    }
    if (len > UINT32_MAX) { /* turn offsets are uint32 */
        *why = "\"conversations\" text is over 4 GiB";
        return -EPROTO;
    }
    char *buf = malloc(len + 1);
    uint32_t *turns = calloc(n * SL_RF_TURN_WORDS, sizeof(uint32_t));
    if (buf == NULL || turns == NULL) {
        free(buf);
        free(turns);
        return -ENOMEM;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *v;
        int role;
        (void)turn_of(json_array_get(conv, i), &v, &role, why);
        if (i > 0) {
            buf[o++] = '\n';
        }
        uint32_t *t = turns + i * SL_RF_TURN_WORDS;
        t[SL_RF_TURN_ROLE] = (uint32_t)role;
        t[SL_RF_TURN_OFF] = (uint32_t)o;
        t[SL_RF_TURN_LEN] = (uint32_t)json_string_length(v);
        memcpy(buf + o, json_string_value(v), json_string_length(v));
        o += json_string_length(v);
    }
    buf[o] = '\0';
    *ret = buf;
    *ret_len = o;
    *ret_turns = turns;
    *ret_nturns = (uint32_t)n;
    return 0;
}

int sl_src_add_turns(sl_tensor_t *out, const uint32_t *turns, uint32_t n, const char *name,
                     char *err, size_t errlen)
{
    if (n == 0) {
        return 0;
    }
    sl_rfield_t f = {.kind = SL_RF_TURNS,
                     .dtype = SL_DT_U32,
                     .count = 1,
                     .h = n,
                     .w = SL_RF_TURN_WORDS,
                     .c = 1,
                     .nbytes = (size_t)n * SL_RF_TURN_WORDS * 4,
                     .data = (const uint8_t *)turns};
    int rc = sl_rec_add_copy(out, &f); /* little-endian hosts: the words are the bytes */
    return rc < 0 ? sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc, "%s: record: %s", name,
                           strerror(-rc))
                  : 0;
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
