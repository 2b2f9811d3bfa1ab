/* plugins: which stage plugins each worker has (RegisterWorker), which
 * units of a job are plugin stages, and how far into a job's pipeline a
 * worker can go (docs/plugins.md). A split given to a worker runs only the
 * units before the first plugin it lacks; the client runs the rest, so a
 * plugin no worker has stays on the client. Under the dispatcher's lock. */
#ifndef DISP_PLUGINS_H
#define DISP_PLUGINS_H

#include <stddef.h>
#include <stdint.h>

#include "common/spec/spec.h"
#include "proto/sluice.pb-c.h"

#define DISP_WORKER_PLUGINS_MAX 16 /* kept per worker; more are ignored (their units stay home) */

typedef struct disp_plugin_s {
    char name[SL_SPEC_PLUGIN_NAME_MAX];
    char sha256[65];
    char version[32];
} disp_plugin_t;

/* A job's plugin units, from its spec. */
typedef struct disp_job_plugins_s {
    uint32_t n;
    uint32_t unit[SL_SPEC_MAX_STAGES];
    const sl_stage_spec_t *st[SL_SPEC_MAX_STAGES]; /* into the job's spec */
} disp_job_plugins_t;

struct disp_worker_s;
/* Copies what a worker reported, keeping well-formed entries only (a name
 * of [a-z0-9_], 64 hex digits); returns how many were dropped. */
size_t disp_worker_note_plugins(struct disp_worker_s *w, Sluice__PluginInfo **v, size_t n);
/* The spec's plugin units (*ret NULL when it has none). 0, -ENOMEM, or the
 * pipeline's -EINVAL. */
int disp_job_plugins_new(const sl_spec_t *spec, disp_job_plugins_t **ret);
/* The units a worker may run of a job planned to run [0, split) remotely:
 * split, or the first plugin unit it lacks. */
uint32_t disp_plugin_reach(const disp_job_plugins_t *jp, const struct disp_worker_s *w,
                           uint32_t split);

#endif
