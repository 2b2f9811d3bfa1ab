/* costs: see costs.h. */
#include "client/lib/costs.h"

#include "common/base/clock.h"
#include "common/profile/features.h"
#include "common/sample/tensor.h"

static void size_costs(const sl_source_t *src, float *out, uint64_t n)
{
    double total = 0;
    for (uint64_t i = 0; i < n; i++) {
        total += (double)sl_source_size(src, i);
    }
    double mean = n > 0 ? total / (double)n : 0;
    for (uint64_t i = 0; i < n; i++) {
        out[i] = (float)sl_cost_size_proxy((double)sl_source_size(src, i), mean);
    }
}

/* 1 when every header was read in time, 0 when the budget ran out. */
static int model_costs(const sl_source_t *src, const sl_costmodel_t *model, int budget_ms,
                       float *out, uint64_t n, sl_tensor_t *t)
{
    double deadline = sl_mono_sec() + budget_ms / 1000.0;
    for (uint64_t i = 0; i < n; i++) {
        if ((i & 63) == 0 && sl_mono_sec() > deadline) {
            return 0;
        }
        char err[256];
        sl_cost_features_t f;
        uint64_t size = sl_source_size(src, i);
        int ok = sl_source_read_head(src, i, SL_COST_HEAD_BYTES, t, err, sizeof(err)) == 0;
        sl_src_features_t rf;
        if (sl_source_record_features(src, i, &rf) == 0) {
            /* A record: its images' headers, the index's byte counts. */
            sl_cost_features_heads(ok ? t->data : NULL, ok ? t->nbytes : 0, rf.image_bytes,
                                   rf.text_bytes, &f);
        } else {
            /* Unreadable: skipped later; any cost will do. */
            sl_cost_features_head(ok ? t->data : NULL, ok ? t->nbytes : 0, size, &f);
        }
        /* Seconds are tiny floats; microseconds keep them well inside
         * float range and away from the dispatcher's "all zero". */
        out[i] = (float)(sl_costmodel_predict(model, &f) * 1e6);
    }
    return 1;
}

int cl_sample_costs(const sl_source_t *src, const sl_costmodel_t *model, int budget_ms,
                    float *out, uint64_t n, cl_costs_from_e *ret_from)
{
    *ret_from = CL_COSTS_SIZE;
    /* Records: webdataset's images' headers are read like a JPEG's (a
     * filelist of clips' too); a jsonl manifest's images are files of their
     * own, not opened here: sizes. */
    int heads = !sl_source_is_record(src) || sl_source_type(src) != SL_SRC_JSONL;
    if (model != NULL && model->fitted && budget_ms > 0 && heads) {
        sl_tensor_t t;
        sl_tensor_init(&t);
        int done = model_costs(src, model, budget_ms, out, n, &t);
        sl_tensor_free(&t);
        if (done) {
            *ret_from = CL_COSTS_MODEL;
            return 0;
        }
    }
    size_costs(src, out, n);
    return 0;
}

const char *cl_costs_from_name(cl_costs_from_e from)
{
    return from == CL_COSTS_MODEL ? "header model" : "file size";
}
