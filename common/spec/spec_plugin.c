/* spec_plugin: the "plugin" op's keys and canonical JSON. The spec names a
 * stage and the SHA-256 of the file that must provide it; the file itself
 * is found in each host's own plugin_dir (common/plugin/plugin.h). Parsing
 * thread only. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"

#include "common/spec/spec_impl.h"

static int parse_plugin(sl_spec_pctx_t *c, json_t *st, sl_stage_spec_t *out)
{
    char got[SPEC_SHOWN_MAX + 8];
    json_t *name = json_object_get(st, "name");
    size_t n = json_is_string(name) ? json_string_length(name) : 0;
    const char *s = json_string_value(name);
    int ok = n > 0 && n < SL_SPEC_PLUGIN_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_';
    }
    if (!ok) {
        return sl_spec_ferr(c, "name", "must be the plugin stage's name ([a-z0-9_], 1..63), got %s",
                            name ? sl_spec_describe(name, got, sizeof(got)) : "nothing");
    }
    memcpy(out->plugin, s, n + 1);
    json_t *sha = json_object_get(st, "sha256");
    s = json_string_value(sha);
    ok = json_is_string(sha) && json_string_length(sha) == 64;
    for (size_t i = 0; ok && i < 64; i++) {
        ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    }
    if (!ok) {
        return sl_spec_ferr(c, "sha256",
                            "must be the plugin file's SHA-256 (64 lowercase hex digits: "
                            "sha256sum FILE), got %s",
                            sha ? sl_spec_describe(sha, got, sizeof(got)) : "nothing");
    }
    memcpy(out->plugin_sha256, s, 65);
    json_t *params = json_object_get(st, "params");
    if (params != NULL && !json_is_object(params)) {
        return sl_spec_ferr(c, "params", "must be an object (the plugin's parameters), got %s",
                            sl_spec_describe(params, got, sizeof(got)));
    }
    char *txt = params != NULL ? json_dumps(params, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    const char *p = params != NULL ? txt : "{}";
    if (p == NULL || strlen(p) >= SL_SPEC_PLUGIN_PARAMS_MAX) {
        free(txt);
        return sl_spec_ferr(c, "params", "more than %d bytes of JSON",
                            SL_SPEC_PLUGIN_PARAMS_MAX - 1);
    }
    out->plugin_params = strdup(p);
    free(txt);
    if (out->plugin_params == NULL) {
        return sl_err(c->err, c->errlen, -ENOMEM, "%s: out of memory", c->name);
    }
    return 0;
}

static json_t *plugin_json(const sl_stage_spec_t *st)
{
    json_t *params = st->plugin_params != NULL ? json_loads(st->plugin_params, 0, NULL) : NULL;
    return json_pack("{s:s, s:s, s:s, s:o}", "op", "plugin", "name", st->plugin, "sha256",
                     st->plugin_sha256, "params", params != NULL ? params : json_object());
}

static void plugin_clear(sl_stage_spec_t *st)
{
    free(st->plugin_params);
    st->plugin_params = NULL;
}

static int plugin_copy(sl_stage_spec_t *dst, const sl_stage_spec_t *src)
{
    dst->plugin_params = src->plugin_params != NULL ? strdup(src->plugin_params) : NULL;
    return dst->plugin_params != NULL || src->plugin_params == NULL ? 0 : -ENOMEM;
}

/* A plugin's unit is named for its stage: profiles and plans show it. */
static const char *plugin_unit_name(const sl_stage_spec_t *st) { return st->plugin; }

/* A plugin stage works on whole uint8 HWC images and may draw randomness
 * (the unit hands it a key from the sample's stream). */
const sl_op_def_t sl_op_def_plugin = {.name = "plugin",
                                      .keys = (const char *const[]){"op", "name", "sha256",
                                                                    "params", NULL},
                                      .parse = parse_plugin,
                                      .to_json = plugin_json,
                                      .flags = SL_OPF_ON_PIXELS | SL_OPF_WHOLE | SL_OPF_RANDOM,
                                      .unit_name = plugin_unit_name,
                                      .clear = plugin_clear,
                                      .copy = plugin_copy,
                                      .before = SL_ORD_BIT(SL_ORD_NORMALIZE) |
                                                SL_ORD_BIT(SL_ORD_TO_CHW) |
                                                SL_ORD_BIT(SL_ORD_TILES)};
