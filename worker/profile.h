/* profile: the Worker service's planner methods (docs/planner.md).
 *
 *  - Profile (unary): runs a job's pipeline units on the given sample
 *    indices of this worker's own copy of the data, on the handler thread,
 *    bounded by max_ms, and answers per-unit CPU and bytes per sample plus
 *    what this worker is (class key: CPU model, threads, CPU budget). With
 *    no indices it answers the identity only (cheap: the client groups
 *    workers into speed classes with it). One opened source is kept, so a
 *    second profile of the same data does not index it again.
 *  - Probe (stream): sends the number of bytes asked (<= 64 MiB) in chunks;
 *    the client times them for the link bandwidth and its receive cost.
 *
 * Both are stateless towards the dispatcher and never touch running jobs. */
#ifndef WK_PROFILE_H
#define WK_PROFILE_H

#include "common/rpc/rpc.h"

#define WK_PROFILE_METHOD "/sluice.Worker/Profile"
#define WK_PROBE_METHOD "/sluice.Worker/Probe"
#define WK_PROFILE_MAX_MS 10000
#define WK_PROBE_MAX_BYTES (64u << 20)
#define WK_PROBE_MAX_CHUNK (4u << 20)

typedef struct wk_profile_s wk_profile_t;

/* threads: the pool size a job gets here (reported with the identity). */
struct sl_plugins_s;
wk_profile_t *wk_profile_new(const char *data_root, unsigned threads,
                             const struct sl_plugins_s *plugins);
void wk_profile_free(wk_profile_t *p); /* after the rpc server is gone; NULL ok */
/* The host's URL-source settings (sl_source_open_at); NULL: URLs refused.
 * Before the server starts; remote outlives p. */
struct sl_remote_s;
void wk_profile_set_remote(wk_profile_t *p, const struct sl_remote_s *remote);

/* Registers Profile and Probe on srv (before it starts). Returns 0 or the
 * rpc layer's error. */
int wk_profile_register(wk_profile_t *p, sl_rpc_server_t *srv);

#endif
