/* pipe_mix: per-source stages of a mix (pipeline_impl.h, docs/mixing.md
 * "Per-source stages"): a source's stages are the job's with some left
 * out, so the job has one unit layout and a sample of that source skips the
 * units its stages leave out -- on the client and on a worker alike, on
 * either side of any split. */
#include <errno.h>
#include <inttypes.h>

#include "common/base/err.h"
#include "common/engine/pipeline_impl.h"

int sl_pipe_mix_init(sl_pipeline_t *p, char *err, size_t errlen)
{
    const sl_mix_t *m = p->spec.mix;
    p->mix_any = false;
    for (uint32_t j = 0; m != NULL && j < m->nsources; j++) {
        p->mix_skip[j] = 0;
        if (!m->src[j].own_stages) {
            continue;
        }
        for (uint32_t u = 0; u < p->layout.nunits; u++) {
            const sl_layout_unit_t *lu = &p->layout.units[u];
            uint32_t kept = 0;
            for (uint32_t s = lu->first_stage; s < lu->first_stage + lu->nstages; s++) {
                kept += s < 32 && (m->src[j].keep & (1u << s)) != 0;
            }
            if (kept != 0 && kept != lu->nstages) {
                return sl_err(err, errlen, -EINVAL,
                              "mix.sources[%u] (\"%s\"): keeps only part of the unit %s (its "
                              "stages run as one): keep both or neither",
                              j, m->src[j].name, lu->name);
            }
            if (kept == 0) {
                p->mix_skip[j] |= 1u << u;
                p->mix_any = true;
            }
        }
    }
    return 0;
}

/* Does record io carry images or clips? */
static bool has_pixels(const sl_tensor_t *io)
{
    sl_rec_t r;
    if (io->dtype != SL_DT_RECORD || sl_rec_parse(io->data, io->nbytes, &r, NULL, 0) < 0) {
        return false;
    }
    return sl_rec_count(&r, SL_RF_IMAGE_ENC) + sl_rec_count(&r, SL_RF_IMAGE) +
               sl_rec_count(&r, SL_RF_VIDEO_ENC) >
           0;
}

int sl_pipe_mix_skip(const sl_pipeline_t *p, uint64_t index, const sl_tensor_t *io, uint32_t from,
                     uint32_t to, uint32_t *ret_skip, char *err, size_t errlen)
{
    *ret_skip = 0;
    const sl_mix_t *m = p->spec.mix;
    if (!p->mix_any) {
        return 0;
    }
    uint64_t off = 0;
    uint32_t j = 0;
    while (j < m->nsources && index >= off + m->src[j].count) {
        off += m->src[j].count;
        j++;
    }
    uint32_t below_to = to >= 32 ? UINT32_MAX : (1u << to) - 1;
    uint32_t below_from = from >= 32 ? UINT32_MAX : (1u << from) - 1;
    uint32_t range = below_to & ~below_from;
    uint32_t skip = j < m->nsources ? p->mix_skip[j] & range : 0;
    if (skip != 0 && has_pixels(io)) {
        /* Left out, the image stages would pass undecoded images on: another
         * sample kind. The data contradicts the spec: this sample fails. */
        return sl_err(err, errlen, -EINVAL,
                      "mix source \"%s\" leaves out image stages, but its sample %" PRIu64
                      " has images or clips: give that source the image stages",
                      m->src[j].name, index - off);
    }
    *ret_skip = skip;
    return 0;
}
