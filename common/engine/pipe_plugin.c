/* pipe_plugin: plugin units (common/plugin/plugin.h): bound to this host's
 * plugin_dir by name and SHA-256, run in a host process per (thread, unit)
 * so a plugin that crashes takes neither this process nor its other jobs
 * down. */
#include <errno.h>
#include <string.h>

#include "common/base/err.h"
#include "common/engine/pipeline_impl.h"
#include "common/plugin/plugin.h"

int sl_pipeline_bind_plugins(sl_pipeline_t *p, const sl_plugins_t *plugins, char *err,
                             size_t errlen)
{
    int missing = 0;
    p->plugins = plugins;
    for (uint32_t i = 0; i < p->nunits; i++) {
        unit_t *u = &p->units[i];
        if (u->kind != UNIT_PLUGIN) {
            continue;
        }
        const sl_plugin_info_t *pi = sl_plugins_find(plugins, u->st->plugin,
                                                     u->st->plugin_sha256);
        if (pi == NULL) {
            if (!missing) { /* the first one's story */
                char why[1400];
                sl_plugins_why_missing(plugins, u->st->plugin, why, sizeof(why));
                sl_err(err, errlen, -ENOENT, "plugin %s (sha256 %.16s...): %s", u->st->plugin,
                       u->st->plugin_sha256, why);
            }
            missing = 1;
            continue;
        }
        /* The plugin's own check of its parameters, once, here: a bad spec
         * is refused at open rather than as a skip per sample. */
        sl_plugin_conn_t *c = NULL;
        int rc = sl_plugin_conn_open(plugins, pi, u->st->plugin_params, &c, err, errlen);
        sl_plugin_conn_close(c);
        if (rc < 0) {
            return rc;
        }
        u->plugin = pi;
    }
    return missing ? -ENOENT : 0;
}

int sl_pipe_plugin_unit(const sl_pipeline_t *p, const unit_t *u, sl_rng_t *rng, sl_tensor_t *io,
                        sl_pipe_scratch_t *sc, char *err, size_t errlen)
{
    if (u->plugin == NULL) {
        return sl_err(err, errlen, -ECHILD, "plugin %s: not bound to a plugin_dir here",
                      u->st->plugin);
    }
    uint32_t k = (uint32_t)(u - p->units);
    if (sc->plugin_dead[k]) {
        return sl_err(err, errlen, -ECHILD, "plugin %s failed twice in a row earlier",
                      u->st->plugin);
    }
    if (sc->plugin[k] == NULL) {
        int rc = sl_plugin_conn_open(p->plugins, u->plugin, u->st->plugin_params, &sc->plugin[k],
                                     err, errlen);
        if (rc < 0) {
            return rc == -EINVAL ? -EBADMSG : -ECHILD;
        }
    }
    uint64_t key[4];
    for (int i = 0; i < 4; i++) {
        key[i] = sl_rng_u64(rng);
    }
    key[0] |= 1; /* xoshiro needs a state other than all zeros */
    int rc = sl_plugin_conn_process(sc->plugin[k], key, io, &sc->a, err, errlen);
    if (rc == -ECHILD) {
        /* Once more in a fresh host (the same key: the same bytes): a
         * transient fault costs a process, not the job. */
        rc = sl_plugin_conn_process(sc->plugin[k], key, io, &sc->a, err, errlen);
        sc->plugin_dead[k] = rc == -ECHILD;
    }
    if (rc < 0) {
        return rc;
    }
    sl_tensor_swap(io, &sc->a);
    return 0;
}

void sl_pipe_plugin_scratch_free(sl_pipe_scratch_t *sc)
{
    for (int i = 0; i < SL_PIPE_MAX_UNITS; i++) {
        sl_plugin_conn_close(sc->plugin[i]);
        sc->plugin[i] = NULL;
    }
}
