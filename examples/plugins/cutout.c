/* cutout: a random square of the image set to a value (DeVries & Taylor,
 * "Improved Regularization of Convolutional Neural Networks with Cutout"),
 * as a Sluice stage plugin (common/plugin/sluice_plugin.h).
 *     {"op": "plugin", "name": "cutout", "sha256": "...",
 *      "params": {"size": 16, "p": 1.0, "value": 0}}
 * size: the square's side in pixels (1..4096), clipped at the borders like
 * the paper's (its centre anywhere in the image); p: the probability that a
 * sample gets one; value: 0..255 for every channel. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice_plugin.h>

typedef struct {
    uint32_t size;
    double p;
    uint8_t value;
} cutout_t;

/* The params through the header's helpers (sluice_plugin_param_*): no
 * JSON library needed. Unknown keys, a key twice, wrong types and
 * malformed text are refused, as jansson's strict unpacking did. */
static int create(const char *params, size_t len, void **ret, char *err, size_t errlen)
{
    static const char *const keys[] = {"size", "p", "value", NULL};
    int64_t size = 16, value = 0;
    double p = 1.0;
    if (sluice_plugin_params_check(params, len, keys, err, errlen) < 0) {
        return -EINVAL;
    }
    int rs = sluice_plugin_param_int(params, len, "size", &size);
    int rp = sluice_plugin_param_number(params, len, "p", &p);
    int rv = sluice_plugin_param_int(params, len, "value", &value);
    if ((rs < 0 && rs != -ENOENT) || (rp < 0 && rp != -ENOENT) || (rv < 0 && rv != -ENOENT) ||
        size < 1 || size > 4096 || !(p >= 0 && p <= 1) || value < 0 || value > 255) {
        snprintf(err, errlen, "params: need size 1..4096, p 0..1, value 0..255 (integers)");
        return -EINVAL;
    }
    cutout_t *s = malloc(sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->size = (uint32_t)size;
    s->p = p;
    s->value = (uint8_t)value;
    *ret = s;
    return 0;
}

static void destroy(void *state) { free(state); }

static int process(const void *state, const sluice_plugin_image_t *in,
                   sluice_plugin_image_t *out, sluice_plugin_rng_t *rng, char *err,
                   size_t errlen)
{
    (void)err;
    (void)errlen;
    const cutout_t *c = state;
    memcpy(out->data, in->data, (size_t)in->h * in->w * in->c);
    /* Always three draws, so the stream's use does not depend on p. */
    double u = sluice_plugin_uniform(rng);
    uint32_t cy = (uint32_t)(sluice_plugin_uniform(rng) * in->h);
    uint32_t cx = (uint32_t)(sluice_plugin_uniform(rng) * in->w);
    if (u >= c->p) {
        return 0;
    }
    uint32_t half = c->size / 2;
    uint32_t y0 = cy > half ? cy - half : 0, x0 = cx > half ? cx - half : 0;
    uint32_t y1 = cy + c->size - half < in->h ? cy + c->size - half : in->h;
    uint32_t x1 = cx + c->size - half < in->w ? cx + c->size - half : in->w;
    for (uint32_t y = y0; y < y1; y++) {
        memset(out->data + ((size_t)y * in->w + x0) * in->c, c->value, (size_t)(x1 - x0) * in->c);
    }
    return 0;
}

static const sluice_plugin_stage_t CUTOUT = {
    .abi = SLUICE_PLUGIN_ABI,
    .name = "cutout",
    .version = "1.0",
    .reads = "image",
    .writes = "image",
    .cost_hint = 0.0005,
    .create = create,
    .destroy = destroy,
    .process = process,
};

const sluice_plugin_stage_t *const *sluice_plugin_stages(uint32_t *ret_n)
{
    static const sluice_plugin_stage_t *const stages[] = {&CUTOUT};
    *ret_n = 1;
    return stages;
}
