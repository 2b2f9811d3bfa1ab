/* plugins: workers' plugins and how far they reach into a job
 * (dispatcher/planner/plugins.h). */
#include "dispatcher/planner/plugins.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spec/spec_layout.h"
#include "dispatcher/core/registry.h"

static int well_formed(const Sluice__PluginInfo *p)
{
    size_t n = p->name != NULL ? strlen(p->name) : 0;
    if (n == 0 || n >= SL_SPEC_PLUGIN_NAME_MAX || p->sha256 == NULL || strlen(p->sha256) != 64) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = p->name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
            return 0;
        }
    }
    for (size_t i = 0; i < 64; i++) {
        char c = p->sha256[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return 0;
        }
    }
    return 1;
}

size_t disp_worker_note_plugins(disp_worker_t *w, Sluice__PluginInfo **v, size_t n)
{
    size_t dropped = 0;
    w->nplugins = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == NULL || !well_formed(v[i]) || w->nplugins == DISP_WORKER_PLUGINS_MAX) {
            dropped++;
            continue;
        }
        disp_plugin_t *p = &w->plugins[w->nplugins++];
        snprintf(p->name, sizeof(p->name), "%s", v[i]->name);
        snprintf(p->sha256, sizeof(p->sha256), "%s", v[i]->sha256);
        /* Printable only: it goes into /status as text. */
        size_t k = 0;
        for (const char *s = v[i]->version ? v[i]->version : ""; *s && k + 1 < sizeof(p->version);
             s++) {
            p->version[k++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
        }
        p->version[k] = '\0';
    }
    return dropped;
}

int disp_job_plugins_new(const sl_spec_t *spec, disp_job_plugins_t **ret)
{
    *ret = NULL;
    if (!sl_spec_has_plugins(spec)) {
        return 0;
    }
    sl_layout_t l;
    int rc = sl_spec_layout(spec, 0, &l);
    if (rc < 0) {
        return rc;
    }
    disp_job_plugins_t *jp = calloc(1, sizeof(*jp));
    if (jp == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < spec->nstages; i++) {
        if (spec->stages[i].op == SL_OP_PLUGIN) {
            jp->unit[jp->n] = sl_layout_unit_for_split(&l, i);
            jp->st[jp->n++] = &spec->stages[i];
        }
    }
    *ret = jp;
    return 0;
}

uint32_t disp_plugin_reach(const disp_job_plugins_t *jp, const disp_worker_t *w, uint32_t split)
{
    for (uint32_t k = 0; jp != NULL && k < jp->n && jp->unit[k] < split; k++) {
        int has = 0;
        for (uint32_t i = 0; w != NULL && i < w->nplugins && !has; i++) {
            has = strcmp(w->plugins[i].name, jp->st[k]->plugin) == 0 &&
                  strcmp(w->plugins[i].sha256, jp->st[k]->plugin_sha256) == 0;
        }
        if (!has) {
            return jp->unit[k]; /* units are in order: the first it lacks */
        }
    }
    return split;
}
