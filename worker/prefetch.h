/* prefetch: a worker fetches ahead the URL shards its queued splits will
 * read (docs/sources.md "Remote sources"). */
#ifndef WK_PREFETCH_H
#define WK_PREFETCH_H

struct wk_job_s;

/* Queued splits looked at ahead of the one running. */
#define WK_PREFETCH_SPLITS 4u

/* Hands the shards of the job's next WK_PREFETCH_SPLITS splits with
 * positions left (each split once, when its epoch's order is known) to the
 * host's prefetcher (sl_source_prefetch: bounded threads and queue, shards
 * it cannot hold left to range reads). job->mu held; no network I/O here. */
void wk_prefetch_queued_locked(struct wk_job_s *job);

#endif
