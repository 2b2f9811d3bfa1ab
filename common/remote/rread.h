/* rread: reading parts of a remote object by HTTP range requests, for the
 * indexers of tar shards (common/data/tar_walk.c): a shard's member index
 * comes from its tar headers, so a job opens without downloading shards.
 *
 * sl_rread_open checks the URL against remote_roots and makes one HEAD
 * (the validator, as sl_remote_open). Then, first that applies:
 *  - the whole object is in the host's cache: reads are local;
 *  - the cache holds an index entry of (URL, validator): the bytes the
 *    indexer read last time (its headers, its small labels) are served
 *    from it, no request at all;
 *  - reads are range GETs (If-Match the HEAD's ETag) of a window of at
 *    least SL_RREAD_WINDOW bytes, so the headers of small members cost one
 *    request per window and a member larger than the window is jumped over
 *    (the next read starts a new window past it);
 *  - a server that ignores Range (200 instead of 206) is read in one
 *    streamed pass into the cache (sl_remote_open), locally from then on.
 * Every byte a caller read from range GETs is logged; sl_rread_finish
 * stores the log as the index entry "<key>.idx" in the cache (an entry
 * like the others: LRU, crash-safe, shared). A damaged index entry is
 * ignored (read again from the server).
 *
 * Not thread-safe: one sl_rread_t per indexing thread. */
#ifndef SL_REMOTE_RREAD_H
#define SL_REMOTE_RREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/remote/remote.h"

typedef struct sl_rread_s sl_rread_t;

/* Smallest range one request asks for. */
#define SL_RREAD_WINDOW ((uint64_t)256 << 10)
/* Largest index entry kept (a log over it is not stored). */
#define SL_RREAD_INDEX_MAX ((uint64_t)64 << 20)

/* How the bytes were read, for tests and logs. */
typedef enum {
    SL_RREAD_RANGES = 0, /* range GETs */
    SL_RREAD_INDEX = 1,  /* the cached index entry (range GETs for a miss) */
    SL_RREAD_WHOLE = 2,  /* the whole object from the cache */
} sl_rread_mode_e;

/* Opens url for range reads: checks, HEAD, cache look-ups (above).
 * expect_tag != 0: -ESTALE when the object's validator differs. Fills
 * *ret_obj. Returns 0 or the errors of sl_remote_open; err names the URL. */
int sl_rread_open(const sl_remote_t *r, const char *url, uint64_t expect_tag, sl_rread_t **ret,
                  sl_remote_obj_t *ret_obj, char *err, size_t errlen);

/* Reads up to n bytes at off (fewer only at the object's end): the count,
 * or -errno with sl_rread_error saying why (the URL, never a header). */
ssize_t sl_rread_pread(sl_rread_t *rr, void *buf, size_t n, uint64_t off);

/* The message of the last failed read. */
const char *sl_rread_error(const sl_rread_t *rr);

sl_rread_mode_e sl_rread_mode(const sl_rread_t *rr);
/* Range requests made so far. */
uint64_t sl_rread_requests(const sl_rread_t *rr);

/* Stores the read log as the cache's index entry of the object (when the
 * reads were range GETs). Call after a complete walk only. Returns 0 or
 * -errno (the index is then just not cached). */
int sl_rread_finish(sl_rread_t *rr);

void sl_rread_close(sl_rread_t *rr);

/* Bytes [off, off + len) of url, whose validator the caller knows (tag,
 * from an earlier open), by one range GET without a HEAD, written into fd
 * at their own offsets (fd is truncated to off first: call in ascending
 * order; a memfd then holds them with holes between, read like the
 * object). The answer's ETag, Last-Modified and Content-Range total must
 * give tag: -ESTALE otherwise (the object changed: its bytes are never
 * mixed in). -ENOTSUP: the server ignored Range (200); read the object
 * whole instead. Other errors as sl_remote_open; err names the URL. */
int sl_remote_read_range(const sl_remote_t *r, const char *url, uint64_t tag, uint64_t off,
                         uint64_t len, int fd, char *err, size_t errlen);

/* Parses an index entry of an object of size bytes and validator tag (for
 * the tests: a damaged one is -EINVAL). */
int sl_rread_index_check(const void *buf, size_t n, uint64_t size, uint64_t tag);

#endif
