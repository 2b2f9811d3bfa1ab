/* spec_prefix: the cacheable prefix of a spec and its hash (spec_prefix.h).
 * Which op draws is the op table's SL_OPF_RANDOM column. */
#include "common/spec/spec_prefix.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/sha256.h"
#include "common/spec/spec_impl.h"

/* Bumped when the hashed form changes, so old entries are never matched. */
#define PREFIX_FORM "sluice-prefix-v1\n"

uint32_t sl_spec_cache_prefix(const sl_spec_t *spec, const sl_layout_t *l)
{
    for (uint32_t u = 0; u < l->nunits; u++) {
        const sl_layout_unit_t *un = &l->units[u];
        for (uint32_t k = 0; k < un->nstages; k++) {
            uint32_t st = un->first_stage + k;
            if (st >= spec->nstages || sl_op_draws_random(spec->stages[st].op)) {
                return u;
            }
        }
    }
    return l->nunits;
}

/* The source part: the order of an epoch changes no sample's bytes. */
static int add_source(json_t *form, json_t *full)
{
    json_t *src = json_object_get(full, "source");
    if (src != NULL) {
        json_t *s = json_deep_copy(src);
        if (s == NULL) {
            return -ENOMEM;
        }
        json_object_del(s, "shuffle");
        json_object_del(s, "seed");
        json_object_del(s, "shuffle_block");
        if (json_object_set_new(form, "source", s) < 0) {
            return -ENOMEM;
        }
    }
    json_t *mix = json_object_get(full, "mix");
    if (mix != NULL && json_object_set(form, "mix", mix) < 0) {
        return -ENOMEM;
    }
    return 0;
}

/* The members of the canonical JSON that name what a prefix computes. */
static json_t *prefix_form(json_t *full, uint32_t nstages)
{
    json_t *form = json_object();
    json_t *stages = json_array();
    json_t *all = json_object_get(full, "stages");
    json_t *mp = json_object_get(full, "max_pixels");
    int bad = form == NULL || stages == NULL || !json_is_array(all) || mp == NULL ||
              json_array_size(all) < nstages;
    for (uint32_t i = 0; !bad && i < nstages; i++) {
        bad = json_array_append(stages, json_array_get(all, i)) < 0;
    }
    bad = bad || add_source(form, full) < 0 || json_object_set(form, "max_pixels", mp) < 0;
    if (bad || json_object_set_new(form, "stages", stages) < 0) {
        json_decref(form);
        return NULL;
    }
    return form;
}

int sl_spec_prefix_hash(const sl_spec_t *spec, const sl_layout_t *l, uint32_t nunits,
                        uint8_t out[SL_PREFIX_HASH_LEN])
{
    if (nunits > l->nunits) {
        return -EINVAL;
    }
    uint32_t nstages = 0;
    if (nunits > 0) {
        nstages = l->units[nunits - 1].first_stage + l->units[nunits - 1].nstages;
    }
    if (nstages > spec->nstages) {
        return -EINVAL;
    }
    char *text = sl_spec_to_json(spec);
    json_t *full = text != NULL ? json_loads(text, 0, NULL) : NULL;
    free(text);
    json_t *form = full != NULL ? prefix_form(full, nstages) : NULL;
    json_decref(full);
    char *ftext = form != NULL
                      ? json_dumps(form, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17))
                      : NULL;
    json_decref(form);
    if (ftext == NULL) {
        return -ENOMEM;
    }
    sl_sha256_t h;
    sl_sha256_init(&h);
    sl_sha256_update(&h, PREFIX_FORM, strlen(PREFIX_FORM));
    sl_sha256_update(&h, ftext, strlen(ftext));
    sl_sha256_final(&h, out);
    free(ftext);
    return 0;
}
