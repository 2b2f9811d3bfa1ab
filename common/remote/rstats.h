/* rstats: what a host's remote reads cost, measured: bytes/s while any
 * request is in flight (so parallel reads count as the aggregate they
 * reach, idle time not at all) and the mean time of a HEAD (a round trip
 * plus the server's answer: the latency every object's first read pays).
 * The planner's per-host read cost (docs/planner.md "Remote reads").
 * Thread-safe. */
#ifndef SL_REMOTE_RSTATS_H
#define SL_REMOTE_RSTATS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct sl_rstats_s {
    pthread_mutex_t mu;
    unsigned inflight;
    int64_t busy_start_ns; /* when inflight last went from 0 to 1 */
    int64_t busy_ns;       /* wall time with a request in flight, before that */
    uint64_t bytes;        /* body bytes received */
    uint64_t heads;
    int64_t head_ns; /* summed HEAD times */
} sl_rstats_t;

void sl_rstats_init(sl_rstats_t *s);
void sl_rstats_destroy(sl_rstats_t *s);
/* A request starts; returns its start time for sl_rstats_end. */
int64_t sl_rstats_begin(sl_rstats_t *s);
void sl_rstats_end(sl_rstats_t *s, int64_t started_ns, bool head, uint64_t body_bytes);
/* Bytes/s while busy (0: nothing measured) and the mean HEAD time in
 * seconds (0: none). Reads of at least SL_RSTATS_MIN_BYTES only: a handful
 * of header windows says little about a link. */
#define SL_RSTATS_MIN_BYTES ((uint64_t)1 << 20)
void sl_rstats_get(sl_rstats_t *s, double *ret_bytes_per_sec, double *ret_latency_sec);

#endif
