/* sluice_plugin.h: the ABI of a Sluice stage plugin (version 1).
 *
 * A plugin is a shared object in a host's plugin_dir (the worker's
 * `plugin_dir` / --plugin-dir, the client's --plugin-dir or
 * SLUICE_PLUGIN_DIR). It exports one function, sluice_plugin_stages(), that
 * lists the stages it provides. A pipeline spec uses one as
 *     {"op": "plugin", "name": "cutout", "sha256": "<the .so's SHA-256>",
 *      "params": {...}}
 * Hosts never load a path a peer sends: only the files of their own
 * plugin_dir, and a stage runs only when its file's SHA-256 is the spec's,
 * so every host runs the same build.
 *
 * A stage works on one decoded image: uint8, HWC, c = 1..4 channels (v1:
 * "reads" and "writes" are both "image"). It must be a pure function of its
 * parameters, the input and the random stream it is given -- no global
 * state, no clock, no thread-local caches that change results -- so a
 * sample gets the same bytes on every host (the stream is Sluice's
 * counter-based one, keyed by seed, epoch, sample index and the stage's
 * position). Called from many threads at once on one state (thread-safe by
 * contract: state is read-only after create).
 *
 * Sluice runs plugins in a separate process (sluice-plugin-host), so a
 * plugin that crashes, hangs or leaks takes only that process down: the
 * split is retried, and the job fails naming the plugin. */
#ifndef SLUICE_PLUGIN_H
#define SLUICE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_PLUGIN_ABI 1

typedef struct sluice_plugin_image {
    uint8_t *data; /* h * w * c bytes, HWC */
    uint32_t h, w, c;
} sluice_plugin_image_t;

/* The sample's random stream (xoshiro256** over a key Sluice derives):
 * draw with sluice_plugin_u64 / sluice_plugin_uniform below. */
typedef struct sluice_plugin_rng {
    uint64_t s[4];
} sluice_plugin_rng_t;

typedef struct sluice_plugin_stage {
    uint32_t abi;           /* SLUICE_PLUGIN_ABI */
    const char *name;       /* [a-z0-9_]{1,63}: what specs call it */
    const char *version;    /* free text, shown in /status */
    const char *reads;      /* "image" (v1) */
    const char *writes;     /* "image" (v1) */
    double cost_hint;       /* CPU seconds per megapixel on one core, 0 = unknown (profiled) */
    /* Parses params (a JSON object's text, "{}" when the spec has none) into
     * a state; 0 or a negative errno with err saying why (the spec is then
     * refused with it). May be NULL: no parameters. */
    int (*create)(const char *params, size_t len, void **ret_state, char *err, size_t errlen);
    void (*destroy)(void *state);
    /* The output's shape for an input of h x w x c; may be NULL: the same. */
    int (*out_shape)(const void *state, uint32_t h, uint32_t w, uint32_t c, uint32_t *ret_h,
                     uint32_t *ret_w, uint32_t *ret_c, char *err, size_t errlen);
    /* in -> out (out->data has out_shape's bytes, allocated by Sluice; it
     * does not alias in). 0, or a negative errno with err: the sample is
     * then skipped as corrupt, with err as its reason. */
    int (*process)(const void *state, const sluice_plugin_image_t *in, sluice_plugin_image_t *out,
                   sluice_plugin_rng_t *rng, char *err, size_t errlen);
} sluice_plugin_stage_t;

/* The one symbol a plugin exports. */
typedef const sluice_plugin_stage_t *const *(*sluice_plugin_stages_fn)(uint32_t *ret_n);
#define SLUICE_PLUGIN_ENTRY "sluice_plugin_stages"

static inline uint64_t sluice_plugin_u64(sluice_plugin_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t out = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double sluice_plugin_uniform(sluice_plugin_rng_t *r)
{
    return (double)(sluice_plugin_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

#ifdef __cplusplus
}
#endif

#endif
