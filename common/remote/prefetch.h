/* prefetch: a host's bounded background fetcher of whole objects into its
 * shard cache (remote.h: sl_remote_prefetch). Owned by the sl_remote_t;
 * threads start at the first request and are joined by sl_remote_free. */
#ifndef SL_REMOTE_PREFETCH_H
#define SL_REMOTE_PREFETCH_H

#include <stdint.h>

typedef struct sl_rpf_s sl_rpf_t;
struct sl_remote_s;

/* Fetcher threads (objects in flight at once) and queued objects. */
#define SL_RPF_THREADS 2u
#define SL_RPF_QUEUE 64u

int sl_rpf_new(struct sl_remote_s *r, sl_rpf_t **ret);
/* Stops the threads (a fetch in progress finishes) and frees. */
void sl_rpf_free(sl_rpf_t *p);
/* Queues url (validator tag, size bytes; pfill.h fetches it through its
 * partial entry, so ranges read meanwhile are not fetched again); 0 queued, 1 already queued or in flight,
 * -EAGAIN the queue is full, -ENOMEM, -EAGAIN no thread could start. */
int sl_rpf_add(sl_rpf_t *p, const char *url, uint64_t tag, uint64_t size);
/* Objects fetched (or found cached) and failed so far. */
void sl_rpf_counts(sl_rpf_t *p, uint64_t *ret_done, uint64_t *ret_failed);

#endif
