/* cache: downloaded objects under <cache_dir>/shards/, bounded by
 * cache_bytes, least recently used evicted first.
 *
 * An entry is named by (URL, validator): SHA-256(url) and the 64-bit tag of
 * the object's ETag/Last-Modified/size (remote.h), so a changed object is a
 * new entry and never mixes bytes with the old one. Crash safety: a fill
 * writes a temporary ".tmp-" file and renames it into place only when
 * complete and synced, so a partial file is never served; temporaries a
 * crash left behind are removed by a later eviction pass. Sharing: jobs and
 * processes on the host use the same directory; a fill holds an exclusive
 * flock on the entry's lock file (a second filler of the same entry waits
 * and then finds it), eviction holds the directory's lock. An entry in use
 * stays readable through its open fd after eviction unlinks it (Linux
 * semantics), so eviction never breaks a reader; the space it holds is
 * freed when the last fd closes. Use is recorded in the entry's mtime.
 * Thread-safe: no mutable state in sl_cache_t after sl_cache_new but
 * atomic counters.
 *
 * Namespaces (docs/cache.md "Budget"): the same cache_dir also holds the
 * prefix cache's sample entries under <cache_dir>/samples/ (sl_cache_open
 * with SL_CACHE_NS_SAMPLES). One budget, cache_bytes, shards first: the
 * shard namespace evicts only shards and keeps them within cache_bytes
 * exactly as before; the sample namespace gets what the shards leave
 * (an eviction pass there counts both directories and removes only sample
 * entries). Sample entries are deterministic (one key, one content), so
 * their fills take no per-entry lock (two fillers of one key each rename a
 * complete file; the last wins with the same bytes), and their eviction
 * runs in passes, once the bytes committed since the last pass exceed
 * 1/64 of the budget (a scan per sample would cost more than the sample):
 * the namespace may overshoot by that much until the next pass. A new
 * sample entry enters at the old end of the order (one fixed old mtime
 * until its first hit: unread entries tie and go by name), so a pass over more samples
 * than the budget holds keeps a stable part of them for the next pass
 * instead of evicting each one before its reuse (plain LRU's 0 %). */
#ifndef SL_REMOTE_CACHE_H
#define SL_REMOTE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl_cache_s sl_cache_t;

/* "<32 hex>-<16 hex>" and its NUL. */
#define SL_CACHE_KEY_MAX 64

/* A fill in progress (sl_cache_fill_begin .. commit/abort). */
typedef struct sl_cache_fill_s {
    int lock_fd;
    int tmp_fd;
    char key[SL_CACHE_KEY_MAX];
    char tmp[80];
} sl_cache_fill_t;

/* The directories under cache_dir. */
typedef enum {
    SL_CACHE_NS_SHARDS = 0, /* downloaded objects (sl_cache_new) */
    SL_CACHE_NS_SAMPLES,    /* the prefix cache's entries (common/pcache) */
    SL_CACHE_NS__COUNT
} sl_cache_ns_e;

/* Creates <dir>/shards (and dir) if missing. Returns 0, -errno (err names
 * the directory), -EINVAL (max_bytes 0). */
int sl_cache_new(const char *dir, uint64_t max_bytes, sl_cache_t **ret, char *err, size_t errlen);
void sl_cache_free(sl_cache_t *c);

uint64_t sl_cache_max_bytes(const sl_cache_t *c);

/* The entry name of (url, tag). */
void sl_cache_key(const char *url, uint64_t tag, char out[SL_CACHE_KEY_MAX]);

/* Opens an entry read-only and marks it used: an fd, or -ENOENT. */
int sl_cache_lookup(const sl_cache_t *c, const char *key);

/* Starts filling key: waits for another filler of it, then returns the
 * entry's fd when it appeared meanwhile (*ret_hit true, fill released), or
 * 0 with fill->tmp_fd open for writing. Returns -errno on failure. */
int sl_cache_fill_begin(const sl_cache_t *c, const char *key, sl_cache_fill_t *fill, bool *ret_hit);
/* Syncs, renames into place, evicts down to the budget (never this entry)
 * and returns the entry's read-only fd, or -errno. Releases the fill. */
int sl_cache_fill_commit(const sl_cache_t *c, sl_cache_fill_t *fill);
/* Drops the temporary file and releases the fill. */
void sl_cache_fill_abort(const sl_cache_t *c, sl_cache_fill_t *fill);

/* Evicts least recently used entries until at most max_bytes remain,
 * sparing keep (may be NULL). Returns 0 or -errno. */
int sl_cache_evict(const sl_cache_t *c, const char *keep);
/* The same, down to max_bytes - room: room for bytes about to be written
 * (partial entries, partial.c), so the directory stays within max_bytes
 * while they are. */
int sl_cache_evict_room(const sl_cache_t *c, const char *keep, uint64_t room);

/* Removes an entry (one found damaged), under its fill lock so no filler
 * is cut short (sample entries have none); readers holding it open keep
 * reading it. Returns 0 or -errno (-ENOENT: not there). */
int sl_cache_remove(const sl_cache_t *c, const char *key);

/* Total bytes of complete entries now (for tests and status). */
uint64_t sl_cache_usage(const sl_cache_t *c);

/* Opens namespace ns of dir (created if missing) under the budget
 * max_bytes shared as the top of this file says. sl_cache_new is
 * sl_cache_open(dir, SL_CACHE_NS_SHARDS, ...). Returns as sl_cache_new. */
int sl_cache_open(const char *dir, sl_cache_ns_e ns, uint64_t max_bytes, sl_cache_t **ret,
                  char *err, size_t errlen);

/* Writes a whole entry from iov[0, niov) and commits it (a fill; for the
 * sample namespace, an eviction pass when one is due). *ret_evicted (may be
 * NULL) gets the entries this call evicted. Returns 0, -errno of the
 * write, sync or rename (-ENOSPC, -EDQUOT: nothing is left behind). */
struct iovec;
int sl_cache_put(const sl_cache_t *c, const char *key, const struct iovec *iov, int niov,
                 uint64_t *ret_evicted);

/* sl_cache_put, and *ret_evicted_bytes (may be NULL) gets the bytes of the
 * entries this call evicted. */
int sl_cache_put_ex(const sl_cache_t *c, const char *key, const struct iovec *iov, int niov,
                    uint64_t *ret_evicted, uint64_t *ret_evicted_bytes);

/* Entries this handle evicted so far. */
uint64_t sl_cache_evictions(const sl_cache_t *c);
/* Their bytes. */
uint64_t sl_cache_evicted_bytes(const sl_cache_t *c);

/* The namespace's directory (O_DIRECTORY, owned by c): for files kept
 * beside the entries -- partial shards (common/remote/partial.h), counted
 * like entries; under names starting with '.', which eviction and usage
 * skip, the prefix cache's claims (common/remote/pclaim.h). */
int sl_cache_dir_fd(const sl_cache_t *c);

#endif
