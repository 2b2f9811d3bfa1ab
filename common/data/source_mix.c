/* source_mix: a mixed spec's sources as one source (source.h,
 * sl_source_open_spec; docs/mixing.md). Its samples are the children's,
 * back to back: global index = the child's offset (the sizes of the
 * children before it) + the child's own index, so splits, workers, ranks
 * and batching address them like any source's. Names ("NAME:child name"),
 * sizes and labels are copied into the composite's own index at open;
 * reads, heads and record features go to the child. The blend that orders
 * an epoch is common/order/blend.h. Opened once, then read-only: reads are
 * thread-safe like the children's. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"
#include "common/spec/mix.h"

struct sl_src_mix_s {
    sl_src_kind_t row; /* the composite's kind row (its children's type) */
    uint32_t n;
    sl_source_t *child[SL_MIX_MAX_SOURCES];
    uint64_t off[SL_MIX_MAX_SOURCES + 1]; /* off[j]: child j's first global index */
    sl_mix_t mix;                         /* the spec's, resolved against the children */
};

void sl_src_mix_free(sl_src_mix_t *m)
{
    if (m == NULL) {
        return;
    }
    for (uint32_t j = 0; j < m->n; j++) {
        sl_source_free(m->child[j]);
    }
    free(m);
}

/* The child holding global index and its own index there. */
static const sl_source_t *child_of(const sl_source_t *src, uint64_t index, uint64_t *ret_idx)
{
    const sl_src_mix_t *m = src->mix;
    uint32_t j = 0;
    while (j + 1 < m->n && index >= m->off[j + 1]) {
        j++;
    }
    *ret_idx = index - m->off[j];
    return m->child[j];
}

static int mix_read(const sl_source_t *src, uint64_t index, sl_tensor_t *out, sl_url_vers_t *vers,
                    char *err, size_t errlen)
{
    uint64_t i;
    const sl_source_t *c = child_of(src, index, &i);
    return sl_source_read_v(c, i, out, vers, err, errlen);
}

static int mix_read_head(const sl_source_t *src, uint64_t index, uint64_t max, sl_tensor_t *out,
                         char *err, size_t errlen)
{
    uint64_t i;
    const sl_source_t *c = child_of(src, index, &i);
    return sl_source_read_head(c, i, (size_t)max, out, err, errlen);
}

static void mix_features(const sl_source_t *src, uint64_t index, sl_src_features_t *ret)
{
    uint64_t i;
    const sl_source_t *c = child_of(src, index, &i);
    (void)sl_source_record_features(c, i, ret);
}

/* Copies child j's index (names prefixed with its mix name) into src. */
static int adopt(sl_source_t *src, const sl_mix_source_t *ms, const sl_source_t *c)
{
    for (uint64_t i = 0; i < c->count; i++) {
        uint64_t off;
        int rc = sl_src_arena_add2(src, ms->name, ':', sl_source_name(c, i), &off);
        if (rc == 0) {
            rc = sl_src_add_sample(src, off, sl_source_size(c, i), sl_source_label(c, i));
        }
        if (rc < 0) {
            return rc;
        }
    }
    uint32_t nc = sl_source_num_classes(c);
    src->nclasses = nc > src->nclasses ? nc : src->nclasses;
    return 0;
}

/* Over the children's fingerprints, in order, with their names and sizes. */
static uint64_t fingerprint(const sl_source_t *src, const sl_mix_t *mix)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint32_t j = 0; j < src->mix->n; j++) {
        unsigned char num[16];
        uint64_t fp = sl_source_fingerprint(src->mix->child[j]), n = mix->src[j].count;
        for (int k = 0; k < 8; k++) {
            num[k] = (unsigned char)(fp >> (8 * k));
            num[8 + k] = (unsigned char)(n >> (8 * k));
        }
        h = sl_src_fnv1a(h, mix->src[j].name, strlen(mix->src[j].name) + 1);
        h = sl_src_fnv1a(h, num, sizeof(num));
    }
    return h;
}

/* Opens every child; the counts go to counts. -EINVAL for a child that does
 * not open (err names it and says why), -ENOMEM. */
static int open_children(const char *data_root, const sl_remote_t *remote, const sl_mix_t *mix,
                         sl_src_mix_t *m, uint64_t *counts, char *err, size_t errlen)
{
    for (uint32_t j = 0; j < mix->nsources; j++) {
        const sl_mix_source_t *ms = &mix->src[j];
        char why[512];
        int rc = sl_source_open_at(data_root, remote, ms->type, ms->path, &m->child[j], why,
                                   sizeof(why));
        if (rc < 0) {
            /* A source of the spec that does not open is a spec error
             * naming it (-EINVAL), like an empty one. */
            return sl_err(err, errlen, rc == -ENOMEM ? rc : -EINVAL, "mix.sources[%u] (\"%s\"): %s",
                          j, ms->name, why);
        }
        m->n = j + 1;
        counts[j] = sl_source_count(m->child[j]);
        m->off[j + 1] = m->off[j] + counts[j];
    }
    return 0;
}

static int build(sl_source_t *src, const uint64_t *counts, char *err, size_t errlen)
{
    sl_mix_t *mix = &src->mix->mix;
    int rc = sl_mix_resolve(mix, counts, err, errlen);
    for (uint32_t j = 0; rc == 0 && j < mix->nsources; j++) {
        rc = adopt(src, &mix->src[j], src->mix->child[j]);
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "mix.sources[%u] (\"%s\"): %s", j, mix->src[j].name,
                        rc == -E2BIG ? "the mix holds more samples than a source may"
                                     : "out of memory");
        }
    }
    if (rc == 0) {
        const sl_source_t *c0 = src->mix->child[0];
        src->root_real = strdup(c0->root_real);
        src->root_len = c0->root_len;
        src->root_fd = fcntl(c0->root_fd, F_DUPFD_CLOEXEC, 0);
        if (src->root_real == NULL || src->root_fd < 0) {
            rc = sl_err(err, errlen, -ENOMEM, "mix: out of memory or fds");
        }
    }
    if (rc == 0) {
        src->fingerprint = fingerprint(src, mix);
    }
    return rc;
}

int sl_source_open_mix(const char *data_root, const sl_remote_t *remote, const sl_mix_t *mix,
                       sl_source_t **ret_src, char *err, size_t errlen)
{
    if (mix == NULL || mix->nsources == 0) {
        return sl_err(err, errlen, -EINVAL, "mix: no sources");
    }
    sl_source_t *src = calloc(1, sizeof(*src));
    sl_src_mix_t *m = calloc(1, sizeof(*m));
    if (src == NULL || m == NULL) {
        free(src);
        free(m);
        return sl_err(err, errlen, -ENOMEM, "mix: out of memory");
    }
    src->root_fd = -1;
    src->mix = m;
    m->mix = *mix;
    uint64_t counts[SL_MIX_MAX_SOURCES];
    int rc = open_children(data_root, remote, mix, m, counts, err, errlen);
    if (rc == 0) {
        m->row = *m->child[0]->kind;
        m->row.keep = 0;
        m->row.index = NULL;
        m->row.read = mix_read;
        m->row.read_head = mix_read_head;
        m->row.features = mix_features;
        src->kind = &m->row;
        rc = build(src, counts, err, errlen);
    }
    if (rc < 0) {
        sl_source_free(src);
        return rc;
    }
    *ret_src = src;
    return 0;
}

int sl_source_open_spec(const char *data_root, const sl_remote_t *remote, const sl_spec_t *spec,
                        sl_source_t **ret_src, char *err, size_t errlen)
{
    if (spec->mix != NULL) {
        return sl_source_open_mix(data_root, remote, spec->mix, ret_src, err, errlen);
    }
    if (spec->source_type == SL_SRC_FILELIST && sl_spec_is_record(spec)) {
        /* Its stages decode video: the list's files are records' clips. */
        return sl_src_open_kind(data_root, remote, &sl_src_kind_filelist_clips, spec->source_path,
                                ret_src, err, errlen);
    }
    return sl_source_open_at(data_root, remote, spec->source_type, spec->source_path, ret_src, err,
                             errlen);
}

int sl_source_mix_child(const sl_source_t *src, uint64_t index, uint32_t *ret_child)
{
    if (src == NULL || src->mix == NULL || index >= src->count) {
        return -EINVAL;
    }
    uint32_t j = 0;
    while (j + 1 < src->mix->n && index >= src->mix->off[j + 1]) {
        j++;
    }
    *ret_child = j;
    return 0;
}

const sl_mix_t *sl_source_mix(const sl_source_t *src)
{
    return src != NULL && src->mix != NULL ? &src->mix->mix : NULL;
}

int sl_source_mix_apply(const sl_source_t *src, sl_spec_t *spec)
{
    const sl_mix_t *m = sl_source_mix(src);
    if (spec->mix == NULL) {
        return 0;
    }
    if (m == NULL || m->nsources != spec->mix->nsources) {
        return -EINVAL;
    }
    for (uint32_t j = 0; j < m->nsources; j++) {
        spec->mix->src[j].count = m->src[j].count;
    }
    spec->mix->samples_per_epoch = m->samples_per_epoch;
    return 0;
}
