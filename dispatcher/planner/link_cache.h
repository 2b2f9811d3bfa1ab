/* link_cache: the link probes clients measured, so the next job from the
 * same client reuses them instead of streaming probes again. A probe costs
 * little on a fast network but 0.3-0.6 s on a 100 Mbit/s one, most of a
 * short job's start (docs/planner.md "Cache"). Links change rarely, and a
 * wrong figure is corrected by the live re-plan; entries live
 * DISP_LINK_TTL_MS. Keyed by (client host key, worker class key); the class
 * key "" is the client's ingress, valid only for the same number of
 * streams. Fixed size, least recently stored evicted. Under the
 * dispatcher mutex. */
#ifndef DISP_LINK_CACHE_H
#define DISP_LINK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define DISP_LINK_MAX 256
#define DISP_LINK_TTL_MS (10 * 60 * 1000)
#define DISP_LINK_KEY_MAX 256

typedef struct disp_link_s {
    char client[DISP_LINK_KEY_MAX];
    char class_key[DISP_LINK_KEY_MAX]; /* "" = the client's ingress */
    double bandwidth;                  /* bytes/s */
    double recv_cpu_per_byte;
    uint32_t streams;                  /* ingress: measured with this many */
    int64_t stored_ms;
} disp_link_t;

typedef struct disp_lcache_s {
    disp_link_t e[DISP_LINK_MAX];
} disp_lcache_t;

/* Stores (replaces) one link. Nothing is stored for empty or over-long
 * keys or a bandwidth that is not finite and > 0; recv and streams are
 * cleaned (finite, >= 0). */
void disp_lcache_put(disp_lcache_t *c, const char *client, const char *class_key,
                     double bandwidth, double recv_cpu_per_byte, uint32_t streams,
                     int64_t now_ms);
/* A job of client measured its receive cost per byte (planner_job.h
 * recv_fitted): it replaces the probe's in the client's fresh class entries,
 * whose age is kept (the bandwidth is still the probe's). Not finite or
 * <= 0: nothing changes. */
void disp_lcache_note_recv(disp_lcache_t *c, const char *client, double recv_cpu_per_byte,
                           int64_t now_ms);
/* Up to max fresh links of client; returns how many. */
size_t disp_lcache_list(const disp_lcache_t *c, const char *client, int64_t now_ms,
                        const disp_link_t **ret, size_t max);

#endif
