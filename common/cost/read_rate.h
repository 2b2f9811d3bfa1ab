/* read_rate: how many samples/s one host reads from a remote source, from
 * what it measured (common/remote/rstats.h): each sample costs its encoded
 * bytes at the host's bytes/s, plus its requests' latency (HEAD / first-
 * byte time) spread over the reads the host runs at once:
 *   seconds per sample = bytes / rate + requests x latency / concurrent
 * The planner's bound (dispatcher/planner/planner_read.c) and `sluice plan
 * --explain` (client/cli/cli_plan_read.c) use this one formula. */
#ifndef SL_COST_READ_RATE_H
#define SL_COST_READ_RATE_H

/* A remote sample read is one request: a range GET of the sample's
 * coalesced members of a tar shard, or one object (a jsonl image, a
 * filelist line). */
#define SL_READ_REQUESTS_PER_SAMPLE 1.0

/* Samples/s; 0 when rate is not measured (<= 0: no bound, the caller's
 * rule) or bytes unknown. Latency, requests or concurrent not finite or
 * <= 0 count as 0, 0 and 1. */
double sl_read_samples_per_sec(double bytes, double rate, double latency_sec, double requests,
                               double concurrent);

#endif
