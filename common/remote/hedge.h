/* hedge: a range GET that is sent a second time when the first has not
 * produced a byte after a delay, the first complete answer winning (as
 * LitData's hedge_delay). The delay is the p95 of the host's recent
 * first-byte latencies, within [SL_HEDGE_MIN_MS, SL_HEDGE_MAX_MS]
 * (SL_HEDGE_DEFAULT_MS before SL_HEDGE_MIN_SAMPLES were measured). */
#ifndef SL_REMOTE_HEDGE_H
#define SL_REMOTE_HEDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/remote/fetch.h"

#define SL_HEDGE_MIN_MS 50
#define SL_HEDGE_MAX_MS 2000
#define SL_HEDGE_DEFAULT_MS 500
#define SL_HEDGE_MIN_SAMPLES 8
#define SL_HEDGE_WINDOW 64 /* latencies kept */

/* Recent first-byte latencies of a host's requests; thread-safe. */
typedef struct sl_hedge_lat_s sl_hedge_lat_t;
int sl_hedge_lat_new(sl_hedge_lat_t **ret);
void sl_hedge_lat_free(sl_hedge_lat_t *l);
void sl_hedge_lat_add(sl_hedge_lat_t *l, long ms);
/* The hedge delay now. */
long sl_hedge_delay_ms(sl_hedge_lat_t *l);
/* Requests hedged and hedges that won, so far. */
void sl_hedge_counts(sl_hedge_lat_t *l, uint64_t *ret_hedged, uint64_t *ret_won);

/* sl_fetch of a GET (the body to out_fd), hedged after delay_ms; records
 * the winner's first-byte latency (and the hedge) in lat. Same returns as
 * sl_fetch. */
int sl_fetch_hedged(const char *url, const char *const *hdrs, int out_fd, const sl_fetch_opts_t *o,
                    sl_hedge_lat_t *lat, sl_fetch_resp_t *ret, char *err, size_t errlen);

#endif
