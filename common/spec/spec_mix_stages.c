/* spec_mix_stages: a mix source's own "stages" (mix.h, docs/mixing.md
 * "Per-source stages"): which of the job's stages run on its samples. A
 * subsequence of the job's list, so the job keeps one unit layout (one
 * split point, one plan) and a sample simply skips the units its source
 * leaves out. */
#include <errno.h>
#include <string.h>

#include "common/spec/mix.h"
#include "common/spec/spec_impl.h"

/* What a record source may leave out: the stages that work on images (a
 * record without images has nothing for them to do, so the sample keeps
 * its kind). */
#define IMAGE_OPF                                                                                  \
    (SL_OPF_DECODE | SL_OPF_GEOMETRY | SL_OPF_AUGMENT | SL_OPF_ON_PIXELS | SL_OPF_WHOLE)

static bool is_records(sl_source_type_e t) { return t == SL_SRC_WEBDATASET || t == SL_SRC_JSONL; }

/* The op named by a stage's "op" (SL_OP__COUNT when none). */
static sl_op_e op_of(const json_t *stage)
{
    const char *name = json_string_value(json_object_get(stage, "op"));
    for (int op = 0; name != NULL && op < SL_OP__COUNT; op++) {
        if (strcmp(sl_op_name((sl_op_e)op), name) == 0) {
            return (sl_op_e)op;
        }
    }
    return SL_OP__COUNT;
}

/* Source ms's kept stages against the job's (jobs) into ms->keep. */
static int parse_one(sl_spec_pctx_t *c, const json_t *own, const json_t *jobs, sl_mix_source_t *ms)
{
    char got[SPEC_SHOWN_MAX + 8];
    if (!json_is_array(own)) {
        return sl_spec_perr(c, "must be an array of the job's stages, got %s",
                            sl_spec_describe(own, got, sizeof(got)));
    }
    size_t nj = json_is_array(jobs) ? json_array_size(jobs) : 0, at = 0;
    ms->keep = 0;
    for (size_t i = 0; i < json_array_size(own); i++) {
        const json_t *st = json_array_get(own, i);
        while (at < nj && !json_equal(json_array_get(jobs, at), st)) {
            at++;
        }
        if (at >= nj) {
            sl_spec_push_index(c, i);
            const char *op = json_string_value(json_object_get(st, "op"));
            return sl_spec_perr(c,
                                "this %s%s%s is not one of the job's \"stages\" after the ones "
                                "before it: a source's stages are the job's, some left out, in "
                                "the job's order (the same JSON)",
                                op != NULL ? "\"" : "",
                                op != NULL ? op : sl_spec_describe(st, got, sizeof(got)),
                                op != NULL ? "\" stage" : "");
        }
        ms->keep |= 1u << at++;
    }
    for (size_t k = 0; k < nj && k < SL_SPEC_MAX_STAGES; k++) {
        if (ms->keep & (1u << k)) {
            continue;
        }
        sl_op_e op = op_of(json_array_get(jobs, k));
        unsigned f = op < SL_OP__COUNT ? sl_op_flags(op) : 0;
        if (!is_records(ms->type) || (f & IMAGE_OPF) == 0) {
            return sl_spec_perr(c,
                                "leaves out the job's stage %zu (\"%s\"): the sources must make "
                                "one sample kind, so %s",
                                k, op < SL_OP__COUNT ? sl_op_name(op) : "?",
                                is_records(ms->type)
                                    ? "a record source may leave out only image stages"
                                    : "an image source may leave out none");
        }
    }
    /* Pixel stages after a decode it leaves out would get encoded bytes. */
    bool undecoded = false;
    for (size_t k = 0; k < nj && k < SL_SPEC_MAX_STAGES; k++) {
        sl_op_e op = op_of(json_array_get(jobs, k));
        unsigned f = op < SL_OP__COUNT ? sl_op_flags(op) : 0;
        bool kept = (ms->keep & (1u << k)) != 0;
        if (undecoded && kept && (f & IMAGE_OPF) != 0) {
            return sl_spec_perr(c,
                                "keeps the job's stage %zu (\"%s\") but leaves out the decode "
                                "before it: leave out the image stages after a decode with it",
                                k, sl_op_name(op));
        }
        undecoded = undecoded || (!kept && (f & SL_OPF_DECODE) != 0);
    }
    ms->own_stages = true;
    return 0;
}

int sl_spec_parse_mix_stages(sl_spec_pctx_t *c, json_t *root, sl_mix_t *mix)
{
    const json_t *srcs = json_object_get(json_object_get(root, "mix"), "sources");
    const json_t *jobs = json_object_get(root, "stages");
    for (uint32_t i = 0; i < mix->nsources; i++) {
        mix->src[i].keep = UINT32_MAX;
        mix->src[i].own_stages = false;
        const json_t *own = json_object_get(json_array_get(srcs, i), "stages");
        if (own == NULL) {
            continue;
        }
        sl_spec_push(c, "mix");
        sl_spec_push(c, "sources");
        sl_spec_push_index(c, i);
        sl_spec_push(c, "stages");
        int rc = parse_one(c, own, jobs, &mix->src[i]);
        if (rc < 0) {
            return rc;
        }
        for (int k = 0; k < 4; k++) {
            sl_spec_pop(c);
        }
    }
    return 0;
}

int sl_mix_stages_to_json(const sl_mix_t *mix, json_t *root)
{
    const json_t *jobs = json_object_get(root, "stages");
    json_t *srcs = json_object_get(json_object_get(root, "mix"), "sources");
    for (uint32_t i = 0; i < mix->nsources; i++) {
        if (!mix->src[i].own_stages) {
            continue;
        }
        json_t *own = json_array();
        for (size_t k = 0; own != NULL && k < json_array_size(jobs); k++) {
            if ((mix->src[i].keep & (1u << k)) &&
                json_array_append(own, json_array_get(jobs, k)) < 0) {
                json_decref(own);
                own = NULL;
            }
        }
        if (own == NULL || json_object_set_new(json_array_get(srcs, i), "stages", own) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}
