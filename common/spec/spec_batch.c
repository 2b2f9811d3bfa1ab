/* spec_batch: the "batch_transforms" section and "num_classes": MixUp and
 * CutMix over whole batches, applied by the client where a batch is handed
 * to the loop (client/lib/mix.c; docs/reference/spec.md "Torchvision
 * recipes"). Parsing thread only; sl_spec_batch_tfs_json any thread. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/spec/spec_impl.h"

static const char *const tf_keys[] = {"op", "alpha", "p", NULL};
/* Indexed by sl_batch_tf_e. */
static const char *const tf_names[SL_BATCH_TF__COUNT] =
    {[SL_BATCH_TF_MIXUP] = "mixup", [SL_BATCH_TF_CUTMIX] = "cutmix"};

#define NUM_CLASSES_MAX 1000000

/* A finite number in (lo, hi] (open_lo) or [lo, hi]. */
static int get_real(sl_spec_pctx_t *c, json_t *obj, const char *key, double lo, double hi,
                    bool open_lo, const char *want, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        return 0;
    }
    double x;
    if (!sl_spec_as_number(v, &x) || !isfinite(x) || (open_lo ? x <= lo : x < lo) || x > hi) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_ferr(c, key, "must be %s, got %s", want,
                            sl_spec_describe(v, got, sizeof(got)));
    }
    *out = x;
    return 0;
}

static int parse_one(sl_spec_pctx_t *c, json_t *v, sl_spec_t *spec)
{
    if (!json_is_object(v)) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_perr(c, "must be an object like {\"op\": \"mixup\", \"alpha\": 0.2}, got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    int rc = sl_spec_check_keys(c, v, tf_keys, "a batch transform");
    int op = 0;
    if (rc == 0) {
        rc = sl_spec_get_enum(c, v, "op", true, tf_names, SL_BATCH_TF__COUNT, &op);
    }
    for (uint32_t i = 0; rc == 0 && i < spec->nbatch_tfs; i++) {
        if ((int)spec->batch_tfs[i].op == op) {
            return sl_spec_ferr(c, "op", "\"%s\" is already in batch_transforms", tf_names[op]);
        }
    }
    /* torchvision's reference defaults: alpha 1.0, p 1.0. */
    sl_batch_tf_t tf = {.op = (sl_batch_tf_e)op, .alpha = 1.0, .p = 1.0};
    if (rc == 0) {
        rc = get_real(c, v, "alpha", 0.0, 1e6, true, "a number > 0", &tf.alpha);
    }
    if (rc == 0) {
        rc = get_real(c, v, "p", 0.0, 1.0, false, "a number from 0 to 1", &tf.p);
    }
    if (rc == 0) {
        spec->batch_tfs[spec->nbatch_tfs++] = tf;
    }
    return rc;
}

/* The batch must be float32 images the consumer trains on: a CPU normalize. */
static int check_images(sl_spec_pctx_t *c, const sl_spec_t *spec)
{
    if (sl_spec_is_record(spec)) {
        return sl_spec_perr(c, "needs an image source: the samples of a multimodal source "
                               "(webdataset, jsonl) are records, not one image each");
    }
    if (sl_spec_device_norm(spec, NULL, NULL)) {
        return sl_spec_perr(c, "needs float32 images, but normalize has \"on\": \"device\" "
                               "(uint8 batches): use \"on\": \"cpu\", or mix on the device");
    }
    for (uint32_t i = 0; i < spec->nstages && i < SL_SPEC_MAX_STAGES; i++) {
        if (spec->stages[i].op == SL_OP_NORMALIZE) {
            return 0;
        }
    }
    return sl_spec_perr(c, "needs float32 images: add a \"normalize\" stage (mixing uint8 "
                           "pixels would round the blend)");
}

int sl_spec_parse_batch_transforms(sl_spec_pctx_t *c, json_t *root, sl_spec_t *spec)
{
    spec->nbatch_tfs = 0;
    spec->num_classes = 0;
    json_t *v = json_object_get(root, "batch_transforms");
    json_t *nc = json_object_get(root, "num_classes");
    int rc = sl_spec_get_u32(c, root, "num_classes", false, 2, NUM_CLASSES_MAX, &spec->num_classes);
    if (rc < 0 || v == NULL) {
        return rc;
    }
    sl_spec_push(c, "batch_transforms");
    if (!json_is_array(v) || json_array_size(v) == 0 ||
        json_array_size(v) > SL_SPEC_MAX_BATCH_TFS) {
        char got[SPEC_SHOWN_MAX + 8];
        return sl_spec_perr(c,
                            "must be a list of one or two of {\"op\": \"mixup\" | "
                            "\"cutmix\", \"alpha\": .., \"p\": ..}, got %s",
                            sl_spec_describe(v, got, sizeof(got)));
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        sl_spec_push_index(c, i);
        rc = parse_one(c, json_array_get(v, i), spec);
        if (rc < 0) {
            return rc;
        }
        sl_spec_pop(c);
    }
    rc = check_images(c, spec);
    if (rc < 0) {
        return rc;
    }
    sl_spec_pop(c);
    if (nc == NULL) {
        return sl_spec_ferr(c, "num_classes",
                            "is required with batch_transforms (the soft labels' width)");
    }
    return 0;
}

int sl_spec_batch_tfs_json(const sl_spec_t *spec, json_t *root)
{
    /* Specs without them keep their canonical form (and hash). */
    if (spec->num_classes > 0 &&
        json_object_set_new(root, "num_classes", json_integer(spec->num_classes)) < 0) {
        return -1;
    }
    if (spec->nbatch_tfs == 0) {
        return 0;
    }
    json_t *arr = json_array();
    if (arr == NULL || json_object_set_new(root, "batch_transforms", arr) < 0) {
        return -1;
    }
    for (uint32_t i = 0; i < spec->nbatch_tfs && i < SL_SPEC_MAX_BATCH_TFS; i++) {
        const sl_batch_tf_t *tf = &spec->batch_tfs[i];
        if ((size_t)tf->op >= SL_BATCH_TF__COUNT ||
            json_array_append_new(arr, json_pack("{s:s, s:f, s:f}", "op", tf_names[tf->op], "alpha",
                                                 tf->alpha, "p", tf->p)) < 0) {
            return -1;
        }
    }
    return 0;
}

const char *sl_batch_tf_name(sl_batch_tf_e op)
{
    return (size_t)op < SL_BATCH_TF__COUNT ? tf_names[op] : "unknown";
}
