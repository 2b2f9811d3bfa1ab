/* tar_walk: walks the members of one tar shard (ustar, GNU and pax), for the
 * indexers of tar-shard sources (source_tar.c, source_wds.c). Not a public
 * API. Runs on the thread that opens the source; keeps no state between
 * calls. Damage inside a shard is a warning on the source (sl_src_warn), not
 * an error: the members reported before it stay indexed. */
#ifndef SL_TAR_WALK_H
#define SL_TAR_WALK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/data/source_impl.h"
#include "common/remote/rread.h"

/* Called once per regular member, in shard order. name (SL_SRC_PATH_MAX
 * bytes, the caller may modify it) is the member's full path in the tar;
 * data and size place its payload. A member whose payload runs past the end
 * of the shard is still reported (it is the last one). A negative return
 * stops the walk and is returned by sl_tar_walk (err filled). */
typedef int (*sl_tar_member_fn)(void *ctx, char *name, uint64_t data, uint64_t size,
                                char *err, size_t errlen);

typedef struct sl_tar_walk_s {
    sl_source_t *src; /* warnings go here */
    const char *rel;  /* the shard's path relative to the root, for messages */
    int fd;           /* open read-only; stays the caller's */
    sl_rread_t *rr;   /* not NULL: a URL shard read by ranges through it (fd unused) */
    uint64_t fsize;   /* the shard's size */
    sl_tar_member_fn on_member;
    void *ctx;
} sl_tar_walk_t;

/* Walks the shard header by header. Returns 0 (also after damage, which is
 * warned about), a read error, -ENOMEM, or on_member's error. */
int sl_tar_walk(const sl_tar_walk_t *w, char *err, size_t errlen);

/* pread until n bytes or EOF; returns the count read or -errno. */
ssize_t sl_tar_pread_full(int fd, void *buf, size_t n, uint64_t off);
/* The same from rr when not NULL (a URL shard), else from fd. */
ssize_t sl_tar_read_at(int fd, sl_rread_t *rr, void *buf, size_t n, uint64_t off);

/* A .cls payload: decimal 0..INT32_MAX with surrounding whitespace. */
bool sl_tar_parse_cls(const char *buf, size_t n, int32_t *ret);
#define SL_TAR_CLS_MAX 64 /* largest .cls member we read */

/* Reads and parses the KEY.cls member at data (size bytes) of a shard of
 * fsize bytes (from rr when not NULL, else fd): 0 with *ret the label, 1
 * when it is malformed (too long, cut by the end of the shard, not a
 * decimal int32; *ret = -1), or the -errno of a failed read. */
int sl_tar_read_cls(int fd, sl_rread_t *rr, uint64_t fsize, uint64_t data, uint64_t size,
                    int32_t *ret);

/* How many shard fds a source keeps open: SL_SRC_MAX_OPEN_SHARDS, at most a
 * quarter of RLIMIT_NOFILE. */
uint32_t sl_tar_open_budget(void);

#endif
