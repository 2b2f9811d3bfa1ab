/* fuzz_spec: the pipeline spec parser (common/spec/) on arbitrary bytes --
 * the text a client sends in SubmitJob -- and the canonical JSON round trip:
 *   - parse returns 0, -EINVAL, -E2BIG or -ENOMEM, with a printable message;
 *   - an accepted spec has a canonical JSON that parses again, to a spec
 *     whose canonical JSON is the same string and whose fields are equal
 *     (spec.h: sl_spec_parse(sl_spec_to_json(s)) yields a spec equal to s). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/spec/spec.h"
#include "tests/fuzz/fuzz.h"

/* Field by field: the struct has padding, and NaN never compares equal
 * (the parser must not accept one). */
static void fz_spec_same(const sl_spec_t *a, const sl_spec_t *b, const char *json)
{
    FZ_CHECK(a->source_type == b->source_type && a->shuffle == b->shuffle &&
                 a->seed == b->seed && strcmp(a->source_path, b->source_path) == 0,
             "source differs after round trip: %s", json);
    FZ_CHECK(a->nstages == b->nstages && a->batch_size == b->batch_size &&
                 a->epochs == b->epochs && a->drop_last == b->drop_last &&
                 a->deterministic == b->deterministic && a->offload == b->offload &&
                 a->split == b->split && a->local_share == b->local_share &&
                 a->on_error == b->on_error && a->max_pixels == b->max_pixels &&
                 strcmp(a->name, b->name) == 0,
             "top-level field differs after round trip: %s", json);
    for (uint32_t i = 0; i < a->nstages; i++) {
        /* Only the fields of the stage's own op (the parameters are a
         * union), the owned strings by value. */
        const sl_stage_spec_t *x = &a->stages[i], *y = &b->stages[i];
        int same = x->op == y->op;
        unsigned flags = sl_op_flags(x->op);
        if (same && (flags & SL_OPF_GEOMETRY)) {
            same = x->size_h == y->size_h && x->size_w == y->size_w &&
                   x->resize_shorter == y->resize_shorter && x->resize_interp == y->resize_interp;
            for (int k = 0; k < 2; k++) {
                same = same && x->scale[k] == y->scale[k] && x->ratio[k] == y->ratio[k];
            }
        } else if (same && (x->op == SL_OP_FLIP || x->op == SL_OP_VERTICAL_FLIP)) {
            same = x->p == y->p;
        } else if (same && x->op == SL_OP_NORMALIZE) {
            same = x->on_device == y->on_device;
            for (int k = 0; k < 3; k++) {
                same = same && x->mean[k] == y->mean[k] && x->std[k] == y->std[k];
            }
        } else if (same && x->op == SL_OP_TOKENIZE) {
            same = strcmp(x->vocab, y->vocab) == 0;
        } else if (same && x->op == SL_OP_PLUGIN) {
            same = strcmp(x->plugin_params, y->plugin_params) == 0;
        }
        FZ_CHECK(same, "stages[%u] differs after round trip: %s", i, json);
    }
}

int fuzz_spec_one(const uint8_t *data, size_t size)
{
    sl_spec_t *a = calloc(1, sizeof(*a)); /* zeroed: clearing owns nothing */
    sl_spec_t *b = calloc(1, sizeof(*b));
    char err[512];
    char *j1 = NULL;
    char *j2 = NULL;
    FZ_CHECK(a != NULL && b != NULL, "out of memory");
    int rc = sl_spec_parse("fuzz.json", (const char *)data, size, a, err, sizeof(err));
    FZ_CHECK(rc == 0 || rc == -EINVAL || rc == -E2BIG || rc == -ENOMEM, "parse returned %d",
             rc);
    if (rc != 0) {
        /* Every error found, one a line, each naming the spec. */
        FZ_CHECK(fz_err_lines_ok(err, sizeof(err), "fuzz.json"),
                 "unprintable error message, or a line not naming the spec: %s", err);
        goto out;
    }
    FZ_CHECK(a->nstages <= SL_SPEC_MAX_STAGES, "%u stages", a->nstages);
    j1 = sl_spec_to_json(a);
    FZ_CHECK(j1 != NULL, "an accepted spec has no canonical JSON");
    rc = sl_spec_parse("canonical", j1, strlen(j1), b, err, sizeof(err));
    FZ_CHECK(rc == 0, "canonical JSON refused (%s): %s", err, j1);
    j2 = sl_spec_to_json(b);
    FZ_CHECK(j2 != NULL && strcmp(j1, j2) == 0, "canonical JSON not stable:\n%s\n%s", j1,
             j2 != NULL ? j2 : "(null)");
    fz_spec_same(a, b, j1);
out:
    free(j1);
    free(j2);
    sl_spec_clear(a);
    sl_spec_clear(b);
    free(a);
    free(b);
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_spec_one)
