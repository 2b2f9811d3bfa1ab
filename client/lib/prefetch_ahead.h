/* prefetch_ahead: the client's own share of a job over URL shards handed to
 * the host's background fetcher (common/remote/remote.h sl_source_prefetch)
 * ahead of its reads, as workers do for their queued splits
 * (worker/prefetch.c): a shard the client will read soon is downloaded
 * while it works on the one before, instead of starting at its first read.
 *
 *  - with a dispatcher: the shards of the next CL_AHEAD_SPLITS splits the
 *    dispatcher gave the client itself (its local splits, in the order it
 *    runs them), each split once;
 *  - local (--local): the shards of the next CL_AHEAD_POSITIONS positions
 *    of its walk over the epochs, looked at again every half window.
 * Bounded by the prefetcher's queue (SL_RPF_QUEUE shards); nothing when the
 * source has no URL shards. Consumer thread. */
#ifndef CL_PREFETCH_AHEAD_H
#define CL_PREFETCH_AHEAD_H

#define CL_AHEAD_SPLITS 4
#define CL_AHEAD_POSITIONS 256

struct sluice_job;

void cl_prefetch_ahead(struct sluice_job *job);

#endif
