/* planner_cache_cost: the prefix cache's read-back cost and hit rate as
 * measured (docs/cache.md "Read-back cost"; issue #36).
 *
 * Workers and the client time each hit (thread CPU from the lookup to the
 * tensor decoded) and send sums (CacheStats: hits, bytes_read, read_ns,
 * read_bytes_sq, read_bytes_ns). Here they are cut into windows of
 * DISP_PC_COST_WINDOW hits and each window fitted to
 *     t = entry_sec + byte_sec * b      (b: an entry's stored bytes)
 * by least squares. Entries of one job are often all one size, when the
 * two terms cannot be told apart: the window's mean time is then split in
 * the proportion of the assumed model (DISP_PC_ENTRY_SEC,
 * DISP_PC_SEC_PER_BYTE) at the window's mean size, which keeps the
 * measured cost exact at that size and scales the assumed shape to it.
 * The last complete window's fit is the figure: bounded, and it follows a
 * cache that moves from the page cache to the disk.
 *
 * The client's hit rate uses the same windows as the workers' (disp_pc_note
 * in planner_cache.h, DISP_PC_WINDOW lookups).
 *
 * Pure: no clock, no I/O, no allocation. */
#ifndef DISP_PLANNER_CACHE_COST_H
#define DISP_PLANNER_CACHE_COST_H

#include <stdint.h>

/* Hits a read-cost window spans. */
#define DISP_PC_COST_WINDOW 256
/* Below this coefficient of variation of the entry sizes in a window, the
 * per-entry and per-byte terms are not fitted apart (see above). */
#define DISP_PC_COST_MIN_CV 0.1

/* Cumulative sums of timed hits (CacheStats' fields, in ns and bytes). */
typedef struct disp_pc_sums_s {
    double n;  /* hits */
    double b;  /* sum of stored bytes */
    double t;  /* sum of ns */
    double bb; /* sum of bytes^2 */
    double bt; /* sum of bytes * ns */
} disp_pc_sums_t;

/* A fitted read-back cost. */
typedef struct disp_pc_cost_s {
    int have;         /* a window was complete */
    double entry_sec; /* per entry */
    double byte_sec;  /* per stored byte */
    double hits;      /* the hits it was fitted from (the window's) */
} disp_pc_cost_t;

/* A source's windows: the cumulative sums so far and at the window's
 * start, and the last complete window's fit. */
typedef struct disp_pc_costwin_s {
    disp_pc_sums_t cum, start;
    disp_pc_cost_t cost;
} disp_pc_costwin_t;

/* Fits t = a + k b to the sums s (s->n > 0); 0, or -1 with no hit or a
 * time that is not positive (nothing measured: *ret unchanged). */
int disp_pc_cost_fit(const disp_pc_sums_t *s, disp_pc_cost_t *ret);

/* Adds a source's growth d to the cumulative sums and closes a window
 * once it spans DISP_PC_COST_WINDOW hits (its fit becomes w->cost).
 * Returns 1 when a window closed. */
int disp_pc_costwin_add(disp_pc_costwin_t *w, const disp_pc_sums_t *d);

/* Sets the cumulative sums to cum (a source that sends its totals); sums
 * that went backwards (a restarted source) restart the window. Returns 1
 * when a window closed. */
int disp_pc_costwin_set(disp_pc_costwin_t *w, const disp_pc_sums_t *cum);

/* A hit rate over windows of DISP_PC_WINDOW lookups (planner_cache.h),
 * from cumulative counters: the totals at the window's start, the latest,
 * the last complete window's rate. */
typedef struct disp_pc_hitwin_s {
    uint64_t win_hits, win_misses;
    uint64_t hits, misses;
    int have_rate;
    double hit_rate;
} disp_pc_hitwin_t;

/* The counters so far; counters that went backwards restart the window.
 * Returns 1 when a window closed. */
int disp_pc_hitwin_note(disp_pc_hitwin_t *w, uint64_t hits, uint64_t misses);

/* Seconds to read one entry of stored bytes back at cost c. */
double disp_pc_cost_sec(const disp_pc_cost_t *c, double stored_bytes);

/* The mean of n fitted costs (those with have), weighted by their hits;
 * ret->have 0 when none has one. */
void disp_pc_cost_mean(const disp_pc_cost_t *const *v, uint32_t n, disp_pc_cost_t *ret);

#endif
