/* probe: is a data server answering again? One HEAD of a URL (checked
 * against remote_roots first, redirects inside them followed), with the
 * usual retries. A worker that gave a job back because the server was
 * unreachable asks this before it takes the job again (worker/job_revive.c). */
#ifndef SL_REMOTE_PROBE_H
#define SL_REMOTE_PROBE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/remote/remote.h"

/* 0: the server answered the HEAD with 2xx; else the error sl_remote_open
 * would give (-EPERM outside remote_roots, -ECONNREFUSED, -ETIMEDOUT,
 * -EHOSTDOWN, -ENOENT, ...), err naming the URL. cancel (NULL: none): set
 * (atomic) by another thread, the request is cut, -ECANCELED -- a probe
 * of a blackholed server does not hold up the job's close. */
int sl_remote_probe(const sl_remote_t *r, const char *url, const int *cancel, char *err,
                    size_t errlen);

/* True for the error of a request whose server could not be reached after
 * the retries (connect, timeout, cut body, 5xx/429: -ECONNREFUSED,
 * -ETIMEDOUT, -EHOSTUNREACH, -ECONNRESET, -EHOSTDOWN): the server may come
 * back, unlike a refusal (-EPERM), a missing object or a changed one. */
bool sl_remote_err_unreachable(int rc);

#endif
