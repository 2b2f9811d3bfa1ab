/* pfill: reads of a remote object through its partial entry (partial.h),
 * so no byte of it comes over the link twice:
 *  - a sample read (sl_remote_read_part) copies what the entry holds,
 *    waits for a range another thread is fetching, and fetches only the
 *    holes by range GETs, keeping their bytes;
 *  - an indexer's range windows are kept too (sl_remote_keep, rread.c);
 *  - the prefetcher's whole-object fill (sl_remote_fill_ranged) walks the
 *    object in chunks of SL_PFILL_CHUNK the same way, fetching only the
 *    ranges nobody holds or fetches, then makes the whole entry from it;
 *  - an entry that readers completed by ranges alone is made whole by the
 *    prefetcher (queued when it completes), with no request.
 * Another process of the host fetching a hole from the same offset holds
 * its claim (pclaim.h): it is waited for and its bytes read from the
 * entry. Bytes are fetched twice only when a wait for another's fetch
 * exceeds SL_PFILL_WAIT_MS (or its holder's deadline), or by two processes
 * whose holes overlap but start at different offsets. */
#ifndef SL_REMOTE_PFILL_H
#define SL_REMOTE_PFILL_H

#include <stddef.h>
#include <stdint.h>

#include "common/remote/remote.h"

/* The part of the object one step of a whole-object fill covers (its
 * holes are one range GET each). */
#define SL_PFILL_CHUNK ((uint64_t)2 << 20)
/* Longest a reader waits for ranges another thread fetches. */
#define SL_PFILL_WAIT_MS 3000L

/* Bytes [off, off + len) of url (validator tag, size bytes) into fd at
 * offset off through its partial entry (top of this file; fd may be
 * truncated to off first: call in ascending order). Returns 0, -ENOENT
 * (no partial entry possible here: read another way), -EALREADY (the
 * cache holds the object whole: read it there), or the errors of
 * sl_remote_read_range (-ESTALE, -ENOTSUP, ...; err names the URL). */
int sl_remote_read_part(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t size,
                        uint64_t off, uint64_t len, int fd, char *err, size_t errlen);

/* Bytes [off, off + len) of url into fd at offset 0 when its partial
 * entry holds them all (an indexer's window kept by an earlier run: not
 * fetched again). 0, -ENOENT (not all held: fetch them), -errno. */
int sl_remote_read_held(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t size,
                        uint64_t off, uint64_t len, int fd);

/* Keeps bytes [off, off + len) of url, which src_fd holds at src_off
 * (an indexer's window read by range), in its partial entry; when the entry
 * then holds the whole object, queues its promotion to a whole entry. 0 or
 * -errno (then nothing was kept; the caller has its bytes anyway). */
int sl_remote_keep(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t size, int src_fd,
                   uint64_t src_off, uint64_t off, uint64_t len);

/* The whole object into the cache through its partial entry (top of this
 * file); stops between chunks when *cancel (may be NULL) is set. Returns 0
 * (a whole entry now), -ENOTSUP (use a whole GET: the server ignores
 * Range, or no partial entry is possible: too large, none free), -ECANCELED,
 * -errno of a request (err names the URL). */
int sl_remote_fill_ranged(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t size,
                          const int *cancel, char *err, size_t errlen);

#endif
