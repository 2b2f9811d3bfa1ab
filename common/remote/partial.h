/* partial: the bytes of a remote object read by range, kept in the shard
 * cache as a partial entry, so no byte comes over the link twice: a later
 * read of them is local, and the whole-object fill (prefetch) fetches only
 * the extents still missing (pfill.h).
 *
 * An entry is one file "<key>.part" in the cache's shard directory:
 *   [0, 64)                       header: magic, object size, its hash
 *   [PART_DATA, PART_DATA + size) the object's bytes at their own offsets
 *                                 (a sparse file: holes where not held)
 *   then 40-byte record slots     (off, len, hash of those bytes, magic,
 *                                 hash of the record)
 * A writer writes the bytes first, then appends their record under an
 * exclusive flock of the file (slot-aligned), so the record never comes
 * before its bytes in one process's order. Crash safety: a reader takes
 * a range as held only from a record that is whole (its own hash) and
 * whose bytes hash to the record's hash when first loaded; a crash between
 * the bytes and the record leaves bytes no record names (never served),
 * a torn record fails its hash (its slot is skipped), and a power cut that
 * kept a record but not its bytes fails the data hash (the range is not
 * served, it is read again). Bytes of one (URL, validator) are the same
 * whoever writes them, so two processes filling one entry need no lock
 * beyond the record append; a hole is fetched under a claim of
 * (entry, offset) (pclaim.h), so a second process fetching the same hole
 * at once waits for the first's bytes instead (sl_part_read_through).
 *
 * The cache counts a partial entry by its allocated blocks (what it holds)
 * and evicts it like any entry (LRU); a handle whose file was evicted is
 * dropped and a new entry started. The object must be at most half of
 * cache_bytes (sl_parts_get: -EFBIG), so partial entries never take over
 * the budget.
 *
 * Thread-safe: one table per sl_remote_t; its handles are reference
 * counted and data I/O runs outside the table's lock. */
#ifndef SL_REMOTE_PARTIAL_H
#define SL_REMOTE_PARTIAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/remote/cache.h"

typedef struct sl_parts_s sl_parts_t;
typedef struct sl_part_s sl_part_t;

/* Where the object's bytes start in the file (a page: the header apart). */
#define SL_PART_DATA ((uint64_t)4096)
/* Ranges of one entry in flight at once (more are fetched unmarked). */
#define SL_PART_FLYING 16u
/* Entries open at once in one table (beyond: the least recently used one
 * not in use is closed). */
#define SL_PARTS_OPEN 128u

int sl_parts_new(const sl_cache_t *cache, sl_parts_t **ret);
void sl_parts_free(sl_parts_t *t);

/* The entry of key (an object of size bytes): opened from the cache, or
 * created when create. Returns 0 (*ret: release it), -ENOENT (none and
 * !create), -EFBIG (over half of cache_bytes), -EAGAIN (every open entry
 * in use), -errno. */
int sl_parts_get(sl_parts_t *t, const char *key, uint64_t size, bool create, sl_part_t **ret);
void sl_parts_release(sl_parts_t *t, sl_part_t *p);

/* Copies bytes [off, off + len) into out_fd at offset off when the entry
 * holds them all (records other processes appended are read first).
 * While another thread fetches them (sl_part_read_through), waits for them
 * up to wait_ms. Returns 0, -ENOENT (not held), -errno of the copy. */
int sl_part_read(sl_parts_t *t, sl_part_t *p, uint64_t off, uint64_t len, int out_fd, long wait_ms);
/* sl_part_read, the bytes written into out_fd at out_off. */
int sl_part_read_at(sl_parts_t *t, sl_part_t *p, uint64_t off, uint64_t len, int out_fd,
                    uint64_t out_off, long wait_ms);

/* Keeps bytes [off, off + len) of the object, read from src_fd at src_off.
 * Returns 1 when the entry now holds the whole object, 0, -EINVAL (outside
 * the object), -ESTALE (the file was evicted: nothing kept), -errno. */
int sl_part_write(sl_parts_t *t, sl_part_t *p, int src_fd, uint64_t src_off, uint64_t off,
                  uint64_t len);

/* The first range not held at or after from, at most max bytes: true and
 * *ret_off, *ret_len; false when everything from there is held. */
bool sl_part_missing(sl_parts_t *t, sl_part_t *p, uint64_t from, uint64_t max, uint64_t *ret_off,
                     uint64_t *ret_len);

/* Bytes held (for tests and logs). */
uint64_t sl_part_held(sl_parts_t *t, sl_part_t *p);

/* Fetches [off, off + len) of the object into fd at offset off (fd may
 * be truncated to off first): 0 or -errno. */
typedef int (*sl_part_fetch_fn)(void *ctx, uint64_t off, uint64_t len, int fd);

/* Bytes [off, off + len) through the entry: what it holds is copied into
 * out_fd (at offset off; out_fd -1: not copied), a range another thread
 * of this table fetches now is waited for (up to wait_ms in all, then
 * fetched here too), as is a hole another process fetches from the same
 * offset (its claim), and each remaining hole is fetched once by fetch
 * (into out_fd when given) and kept. Ascending, so fetch may truncate
 * out_fd. *ret_whole: the entry now holds the whole object. Returns 0, or
 * the first error of fetch or of a copy (a keep that fails only loses the
 * keeping, unless out_fd is -1). */
int sl_part_read_through(sl_parts_t *t, sl_part_t *p, uint64_t off, uint64_t len, int out_fd,
                         long wait_ms, sl_part_fetch_fn fetch, void *ctx, bool *ret_whole);

/* Copies the whole object (every byte held) into fd from offset 0.
 * Returns 0, -ENOENT (not all held), -errno. */
int sl_part_copy_out(sl_parts_t *t, sl_part_t *p, int fd);

/* Removes the entry's file (it became a whole entry) and releases p. */
void sl_part_remove(sl_parts_t *t, sl_part_t *p);

/* The file name of key's partial entry. */
void sl_part_name(const char *key, char out[SL_CACHE_KEY_MAX]);

#endif
