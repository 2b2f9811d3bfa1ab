/* service_impl: what the RPC handlers (service.c, service_workers.c,
 * service_jobs.c) share and nobody else sees. Called with d->mu held where
 * they take a disp_t or a job. */
#ifndef DISP_SERVICE_IMPL_H
#define DISP_SERVICE_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatcher/service/service.h"

/* Peers send doubles; /status must stay valid JSON (no NaN/Inf). */
static inline double disp_svc_finite(double v) { return isfinite(v) ? v : 0.0; }

/* At most DISP_STAGE_STATS_MAX of a peer's stage stats, names copied and
 * numbers made finite, into dst; their count in *ret_n. */
void disp_svc_copy_stages(disp_stage_stat_t *dst, uint32_t *ret_n, Sluice__StageStat *const *src,
                          size_t n);
/* The open (not closed) job id, when tenant owns it and secret is its
 * capability; else -EACCES, or -ENOENT with err naming why not. */
int disp_svc_find_open_job(disp_t *d, uint64_t id, const char *tenant, const char *secret,
                           disp_job_t **ret, char *err, size_t errlen);
/* Split split_id of job, handed to owner (0 = the client), as a message in
 * the arena; NULL on ENOMEM or when the split is not live. */
Sluice__SplitAssignment *disp_svc_assign_msg(disp_arena_t *a, disp_job_t *job, uint64_t split_id,
                                             uint64_t owner);
/* -ENOMEM, with err saying so. */
int disp_svc_oom(char *err, size_t errlen);

#endif
