/* profiler: per-unit CPU time and bytes over a few samples, on the calling
 * thread (common/cost/profiler.h). */
#include "common/cost/profiler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/err.h"

size_t sl_profile_pick(uint64_t total, size_t n, uint64_t *ret_indices)
{
    if (total == 0) {
        return 0;
    }
    if ((uint64_t)n > total) {
        n = (size_t)total;
    }
    /* Centres of n equal strides: spread over every class of a sorted
     * imagefolder, the same indices on every host. */
    for (size_t i = 0; i < n; i++) {
        ret_indices[i] = (uint64_t)(((double)i + 0.5) * (double)total / (double)n);
        if (ret_indices[i] >= total) {
            ret_indices[i] = total - 1;
        }
    }
    return n;
}

typedef struct rec_s {
    sl_cost_features_t f;
    double sec;
} rec_t;

/* sl_profile_t.size_error of n measured samples. */
static double size_proxy_error(const rec_t *recs, uint64_t n)
{
    double kb = 0.0, sec = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        kb += recs[i].f.kb;
        sec += recs[i].sec;
    }
    if (n < 2 || !(kb > 0.0) || !(sec > 0.0)) {
        return -1.0;
    }
    double mean = kb / (double)n;
    double proxy_sum = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        proxy_sum += sl_cost_size_proxy(recs[i].f.kb, mean);
    }
    double scale = sec / proxy_sum;
    double abs_err = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        abs_err += fabs(sl_cost_size_proxy(recs[i].f.kb, mean) * scale - recs[i].sec);
    }
    return abs_err / sec;
}

int sl_profile_run(const sl_pipeline_t *p, const sl_source_t *src, const uint64_t *indices,
                   size_t n, int max_ms, sl_profile_t *ret, char *err, size_t errlen)
{
    if (p == NULL || src == NULL || (n > 0 && indices == NULL) || n > SL_PROFILE_MAX_SAMPLES) {
        return sl_err(err, errlen, -EINVAL, "profile: bad arguments");
    }
    if (max_ms <= 0) {
        max_ms = SL_PROFILE_DEFAULT_MS;
    }
    sl_profile_t pr;
    memset(&pr, 0, sizeof(pr));
    pr.nunits = sl_pipeline_nunits(p);
    pr.model_error = -1.0;
    pr.size_error = -1.0;
    sl_costmodel_init(&pr.model);
    rec_t *recs = calloc(n > 0 ? n : 1, sizeof(*recs));
    if (recs == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    sl_pipe_scratch_t scratch;
    sl_pipe_scratch_init(&scratch);
    sl_tensor_t t;
    sl_tensor_init(&t);
    double t0 = sl_mono_sec();
    char detail[256];
    /* One untimed sample first: the scratch buffers' first allocation and
     * page faults would otherwise be charged to whichever sample came first. */
    if (n > 0 && sl_source_read(src, indices[0], &t, detail, sizeof(detail)) == 0) {
        (void)sl_pipeline_run(p, 0, pr.nunits, 0, indices[0], &t, &scratch, NULL, detail,
                              sizeof(detail));
    }
    for (size_t i = 0; i < n; i++) {
        if ((sl_mono_sec() - t0) * 1000.0 >= (double)max_ms) {
            break;
        }
        double c0 = sl_thread_cpu_sec();
        int rc = sl_source_read(src, indices[i], &t, detail, sizeof(detail));
        double read_sec = sl_thread_cpu_sec() - c0;
        if (rc != 0) {
            pr.failed++;
            continue;
        }
        sl_cost_features_t f;
        sl_cost_features(t.data, t.nbytes, &f);
        uint64_t encoded = t.nbytes;
        /* Into a private row first: a sample a unit refuses must not count. */
        sl_unit_stat_t row[SL_PIPE_MAX_UNITS];
        memset(row, 0, sizeof(row));
        rc = sl_pipeline_run(p, 0, pr.nunits, 0, indices[i], &t, &scratch, row, detail,
                             sizeof(detail));
        if (rc != 0) {
            pr.failed++;
            continue;
        }
        double sec = 0.0;
        for (uint32_t u = 0; u < pr.nunits; u++) {
            pr.units[u].cpu_sec += row[u].cpu_sec;
            pr.units[u].out_bytes += row[u].out_bytes;
            pr.units[u].samples += row[u].samples;
            sec += row[u].cpu_sec;
        }
        pr.read_cpu_sec += read_sec;
        pr.encoded_bytes += encoded;
        recs[pr.samples].f = f;
        recs[pr.samples].sec = sec;
        sl_costmodel_add(&pr.model, &f, sec);
        pr.samples++;
    }
    pr.seconds = sl_mono_sec() - t0;
    if (sl_costmodel_fit(&pr.model) == 0) {
        double abs_err = 0.0;
        double sum = 0.0;
        for (uint64_t i = 0; i < pr.samples; i++) {
            abs_err += fabs(sl_costmodel_predict(&pr.model, &recs[i].f) - recs[i].sec);
            sum += recs[i].sec;
        }
        pr.model_error = sum > 0.0 ? abs_err / sum : -1.0;
    }
    pr.size_error = size_proxy_error(recs, pr.samples);
    sl_tensor_free(&t);
    sl_pipe_scratch_free(&scratch);
    free(recs);
    *ret = pr;
    return 0;
}

uint64_t sl_spec_cost_hash(const sl_spec_t *spec, uint64_t fingerprint)
{
    sl_spec_t *s = malloc(sizeof(*s)); /* tens of KB: off the caller's stack */
    char *json = NULL;
    if (s != NULL) {
        *s = *spec;
        s->epochs = 1;
        s->offload = SL_OFFLOAD_AUTO;
        s->split = 0;
        s->local_share = 0.0;
        s->batch_size = 1;
        s->drop_last = false;
        s->deterministic = false;
        s->shuffle = false;
        s->seed = 0;
        s->on_error = SL_ON_ERROR_SKIP;
        s->name[0] = '\0'; /* a renamed spec costs the same */
        s->resume = NULL;   /* so does a resumed one */
        json = sl_spec_to_json(s);
        free(s);
    }
    /* FNV-1a 64 over the JSON, then the fingerprint's bytes. */
    uint64_t h = 0xcbf29ce484222325ULL;
    if (json != NULL) {
        for (const char *c = json; *c != '\0'; c++) {
            h = (h ^ (uint8_t)*c) * 0x100000001b3ULL;
        }
        free(json);
    }
    for (int i = 0; i < 8; i++) {
        h = (h ^ ((fingerprint >> (8 * i)) & 0xff)) * 0x100000001b3ULL;
    }
    return h & 0x1fffffffffffffULL; /* below 2^53: exact in JSON readers */
}
