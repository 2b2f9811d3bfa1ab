/* inflight: the bytes of a whole-object download still in progress, read
 * by others before it lands in the cache. A sample read of a shard whose
 * prefetch (prefetch.h) is running takes its members from the download's
 * temporary file once they are written there, instead of asking the server
 * for them a second time by a range GET -- when they are written already or
 * expected within the time a range GET takes (the hedge delay, hedge.h: the
 * p95 of the host's first-byte latencies), at the download's rate so far.
 *
 * The fetch updates the progress as the body arrives (fetch.c); a retry
 * truncates the file and bumps gen, so a reader checks gen after copying
 * and drops bytes of an attempt that was started over. Bytes below
 * `written` of one gen are the object's (the GET has If-Match the
 * validator). */
#ifndef SL_REMOTE_INFLIGHT_H
#define SL_REMOTE_INFLIGHT_H

#include <pthread.h>
#include <stdint.h>

typedef struct sl_fetch_progress_s {
    pthread_mutex_t mu;
    int fd;           /* the body's file (offset 0 = the object's), -1: none */
    uint64_t written; /* bytes of the body in fd so far */
    uint32_t gen;     /* bumped by each attempt (which truncates fd) */
    int64_t start_ms; /* when this attempt began (monotonic) */
} sl_fetch_progress_t;

void sl_progress_init(sl_fetch_progress_t *p);
void sl_progress_destroy(sl_fetch_progress_t *p);
/* An attempt writing into fd from offset 0 begins. */
void sl_progress_begin(sl_fetch_progress_t *p, int fd);
/* written bytes of the body are in fd. */
void sl_progress_set(sl_fetch_progress_t *p, uint64_t written);
/* The download ended (its file is about to be renamed or dropped). */
void sl_progress_end(sl_fetch_progress_t *p);

/* The attempt running now: its gen, or -ENOENT (no file). Call it while
 * the download is known to be the object wanted (prefetch.c: under the
 * fetcher's lock, while its slot names the object). */
int sl_progress_current(sl_fetch_progress_t *p, uint32_t *ret_gen);

/* Bytes [off, off + len) of attempt gen of the download p reports into
 * out_fd at offset off (out_fd truncated to off first, as
 * sl_remote_read_range does), once written, waiting for them at most
 * budget_ms and only while the download's rate says they arrive in time.
 * Before the first byte (no rate yet) it waits up to budget_ms for one.
 * Returns 0; -EAGAIN not there in time (read them another way); -ENOENT
 * the download ended or started over (look in the cache, then read
 * another way); -errno of a copy. */
int sl_progress_copy(sl_fetch_progress_t *p, uint32_t gen, uint64_t off, uint64_t len, int out_fd,
                     long budget_ms);

#endif
