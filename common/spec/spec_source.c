/* spec_source: the "source" section of a spec (type, path under the data
 * root, shuffle, seed). Called on the parsing thread only. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "common/spec/mix.h"
#include "common/spec/spec_impl.h"

static const char *const source_keys[] = {"type", "path", "shuffle", "seed", "shuffle_block",
                                           NULL};

#define WDS_SHUFFLE_BLOCK 64
#define SHUFFLE_BLOCK_MAX (1u << 20)

const char *const sl_spec_source_type_names[SL_SPEC_NSOURCE_TYPES] = {
    [SL_SRC_IMAGEFOLDER] = "imagefolder",
    [SL_SRC_TAR] = "tar",
    [SL_SRC_FILELIST] = "filelist",
    [SL_SRC_WEBDATASET] = "webdataset",
    [SL_SRC_JSONL] = "jsonl",
};

const char *sl_source_type_name(sl_source_type_e t)
{
    return (size_t)t < SL_SPEC_NSOURCE_TYPES ? sl_spec_source_type_names[t] : "?";
}

/* Paths are relative to each host's data root; one that escapes it is refused
 * here so the user hears about it before any worker is involved. */
static bool path_has_dotdot(const char *p)
{
    while (*p != '\0') {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            return true;
        }
        p += n;
        while (*p == '/') {
            p++;
        }
    }
    return false;
}

int sl_spec_get_relpath(sl_spec_pctx_t *c, json_t *obj, const char *key, char *out,
                        size_t outlen)
{
    json_t *path = json_object_get(obj, key);
    if (path == NULL) {
        return sl_spec_ferr(c, key, "missing (required): a path relative to the data root");
    }
    if (!json_is_string(path)) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, key, "must be a string (relative to the data root), got %s",
                            sl_spec_describe(path, got, sizeof(got)));
    }
    const char *p = json_string_value(path);
    size_t plen = json_string_length(path);
    if (plen == 0) {
        return sl_spec_ferr(c, key, "must not be empty");
    }
    if (plen >= outlen) {
        return sl_spec_ferr(c, key, "is %zu bytes, the limit is %zu", plen, outlen - 1);
    }
    if (strlen(p) != plen) { /* jansson refuses \u0000 already; keep it true here */
        return sl_spec_ferr(c, key, "must not contain NUL bytes");
    }
    if (p[0] == '/') {
        return sl_spec_ferr(c, key, "must be relative to the data root, not absolute");
    }
    if (path_has_dotdot(p)) {
        return sl_spec_ferr(c, key,
                            "must not contain a \"..\" component (it would escape the data "
                            "root)");
    }
    memcpy(out, p, plen + 1);
    return 0;
}

int sl_spec_parse_source(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    json_t *src = json_object_get(root, "source");
    if (json_object_get(root, "mix") != NULL) {
        return sl_spec_parse_mix(c, root, spec); /* several sources (spec_mix.c) */
    }
    if (src == NULL) {
        return sl_spec_ferr(c, "source",
                            "missing (required): an object like "
                            "{\"type\": \"imagefolder\", \"path\": \"train\"}");
    }
    sl_spec_push(c, "source");
    if (!json_is_object(src)) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_perr(c,
                            "must be an object like {\"type\": \"imagefolder\", \"path\": "
                            "\"train\"}, "
                            "got %s",
                            sl_spec_describe(src, got, sizeof(got)));
    }
    int rc = sl_spec_check_keys(c, src, source_keys, "");
    if (rc < 0) {
        return rc;
    }
    int type = 0;
    rc = sl_spec_get_enum(c, src, "type", true, sl_spec_source_type_names, SL_SPEC_NSOURCE_TYPES,
                          &type);
    if (rc < 0) {
        return rc;
    }
    spec->source_type = (sl_source_type_e)type;

    rc = sl_spec_get_relpath(c, src, "path", spec->source_path, sizeof(spec->source_path));
    if (rc < 0) {
        return rc;
    }

    rc = sl_spec_get_bool(c, src, "shuffle", &spec->shuffle);
    if (rc < 0) {
        return rc;
    }
    int64_t seed = (int64_t)spec->seed;
    rc = sl_spec_get_int(c, src, "seed", false, 0, INT64_MAX, &seed);
    if (rc < 0) {
        return rc;
    }
    spec->seed = (uint64_t)seed;
    /* Shards are read the way object stores serve them: in runs. */
    spec->shuffle_block = spec->source_type == SL_SRC_WEBDATASET ? WDS_SHUFFLE_BLOCK : 0;
    rc = sl_spec_get_u32(c, src, "shuffle_block", false, 0, SHUFFLE_BLOCK_MAX,
                         &spec->shuffle_block);
    if (rc < 0) {
        return rc;
    }
    sl_spec_pop(c);
    return 0;
}
