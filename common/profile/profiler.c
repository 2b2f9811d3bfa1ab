/* profiler: per-unit CPU time and bytes over a few samples, on the calling
 * thread (common/profile/profiler.h). */
#include "common/profile/profiler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/err.h"
#include "common/profile/features.h"
#include "common/sample/codec.h"
#include "common/spec/resume.h"

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
    char detail[256];
    /* One untimed sample first: the scratch buffers' first allocation and
     * page faults would otherwise be charged to whichever sample came first. */
    if (n > 0 && sl_source_read(src, indices[0], &t, detail, sizeof(detail)) == 0) {
        (void)sl_pipeline_run(p, 0, pr.nunits, 0, indices[0], &t, &scratch, NULL, detail,
                              sizeof(detail));
    }
    /* The budget starts after the warm-up and stops only after a first timed
     * sample: on a loaded host or a costly spec the warm-up alone could spend
     * it, and a profile of no sample tells the caller nothing. */
    double t0 = sl_mono_sec();
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && (sl_mono_sec() - t0) * 1000.0 >= (double)max_ms) {
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

/* One boundary of the codec pass: compresses t as a worker would and
 * decompresses it again, adding bytes and thread CPU to pr at k. */
static int codec_boundary(sl_codec_t *z, const sl_tensor_t *t, uint32_t k, sl_profile_t *pr,
                          char *err, size_t errlen)
{
    uint32_t row, step;
    sl_codec_e codec = k == 0 ? SL_CODEC_NONE : sl_codec_for_tensor(t, &row, &step);
    pr->codec_raw[k] += t->nbytes;
    if (codec == SL_CODEC_NONE || t->nbytes == 0) {
        pr->codec_packed[k] += t->nbytes;
        return 0;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    double c0 = sl_thread_cpu_sec();
    int rc = sl_codec_compress(z, codec, t->data, t->nbytes, row, step, &buf, &len);
    pr->codec_compress_sec[k] += sl_thread_cpu_sec() - c0;
    if (rc == -ENOSPC) {
        pr->codec_packed[k] += t->nbytes; /* the worker sends it raw */
        return 0;
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "profile: compress at boundary %u failed", k);
    }
    uint8_t *dst = malloc(t->nbytes);
    if (dst == NULL) {
        free(buf);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    struct iovec iov = {buf, len};
    c0 = sl_thread_cpu_sec();
    rc = sl_codec_decompress(z, codec, &iov, 1, dst, t->nbytes, row, step, err, errlen);
    pr->codec_decompress_sec[k] += sl_thread_cpu_sec() - c0;
    pr->codec_packed[k] += len;
    free(dst);
    free(buf);
    return rc;
}

/* One sample through every unit, one at a time, measuring the codec at
 * every boundary. 1 when the sample failed to read or run (skipped). */
static int codec_sample(const sl_pipeline_t *p, const sl_source_t *src, uint64_t index,
                        sl_codec_t *z, sl_tensor_t *t, sl_pipe_scratch_t *scratch,
                        sl_profile_t *pr, char *err, size_t errlen)
{
    char detail[256];
    if (sl_source_read(src, index, t, detail, sizeof(detail)) != 0) {
        return 1;
    }
    /* Boundaries are summed into a copy first: a sample a unit refuses
     * must not count at the boundaries it reached. */
    sl_profile_t row = *pr;
    for (uint32_t k = 0; k <= pr->nunits; k++) {
        if (k > 0 && sl_pipeline_run(p, k - 1, k, 0, index, t, scratch, NULL, detail,
                                     sizeof(detail)) != 0) {
            return 1;
        }
        int rc = codec_boundary(z, t, k, &row, err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    *pr = row;
    pr->codec_samples++;
    return 0;
}

int sl_profile_codec(const sl_pipeline_t *p, const sl_source_t *src, const uint64_t *indices,
                     size_t n, sl_profile_t *pr, char *err, size_t errlen)
{
    if (p == NULL || src == NULL || pr == NULL || (n > 0 && indices == NULL) ||
        pr->nunits != sl_pipeline_nunits(p)) {
        return sl_err(err, errlen, -EINVAL, "profile: bad arguments");
    }
    sl_codec_t *z = sl_codec_new();
    if (z == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    sl_pipe_scratch_t scratch;
    sl_pipe_scratch_init(&scratch);
    sl_tensor_t t;
    sl_tensor_init(&t);
    int rc = 0;
    for (size_t i = 0; i < n && pr->codec_samples < SL_PROFILE_CODEC_SAMPLES && rc >= 0; i++) {
        rc = codec_sample(p, src, indices[i], z, &t, &scratch, pr, err, errlen);
    }
    sl_tensor_free(&t);
    sl_pipe_scratch_free(&scratch);
    sl_codec_free(z);
    return rc < 0 ? rc : 0;
}

double sl_profile_codec_ratio(const sl_profile_t *pr, uint32_t k)
{
    if (k > pr->nunits || pr->codec_packed[k] == 0 || pr->codec_raw[k] == 0) {
        return 1.0;
    }
    return (double)pr->codec_raw[k] / (double)pr->codec_packed[k];
}

uint64_t sl_spec_cost_hash(const sl_spec_t *spec, uint64_t fingerprint)
{
    sl_spec_t *s = malloc(sizeof(*s)); /* KBs: off the caller's stack */
    char *json = NULL;
    if (s != NULL && sl_spec_copy(s, spec) == 0) {
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
        sl_resume_free(s->resume); /* so does a resumed one */
        s->resume = NULL;
        json = sl_spec_to_json(s);
        sl_spec_clear(s);
    }
    free(s);
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
