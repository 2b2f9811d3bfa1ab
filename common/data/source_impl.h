/* source_impl: what source.c shares with the three indexers
 * (source_imagefolder.c, source_tar.c, source_filelist.c). Not a public API.
 *
 * Index layout (built once by sl_source_open, read-only afterwards, so any
 * number of threads may read it without locks): one string arena holding
 * every sample name (and every shard path), plus parallel arrays indexed by
 * sample: name offset, encoded size, label; tar sources add the member's data
 * offset and its shard number. About 20 bytes per sample plus the name
 * (32 for tar), so tens of millions of samples fit comfortably.
 *
 * Confinement (sl_src_open_beneath): every path is first checked lexically
 * (no absolute path, no ".." component), then opened relative to a directory
 * fd of the realpath'd data root with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS), which the kernel enforces atomically. Where openat2
 * is missing or refuses (ENOSYS, seccomp EPERM, EXDEV for an absolute symlink
 * that may still point inside the root, EAGAIN on a rename race) we fall back
 * to: openat(O_PATH) following symlinks (no side effects on FIFOs or
 * devices), readlink("/proc/self/fd/N") and a prefix check against the real
 * root on a '/' boundary, then a re-open of that very inode through
 * /proc/self/fd/N. Both paths verify the object actually opened, so a
 * symlink swapped in after indexing cannot escape at read time. */
#ifndef SL_SOURCE_IMPL_H
#define SL_SOURCE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/data/source.h"

/* Longest relative path (and tar member name) we accept. */
#define SL_SRC_PATH_MAX 4096
/* Most tar shards whose fd stays open after indexing; the rest are opened per
 * read. Further capped at runtime by a quarter of RLIMIT_NOFILE. */
#define SL_SRC_MAX_OPEN_SHARDS 1024u
/* Room for the one-line warning summary. */
#define SL_SRC_WARN_MAX 1024

/* sl_src_open_beneath() flag: skip openat2 and use the /proc fallback
 * (lets the tests exercise the fallback on kernels that have openat2). */
#define SL_SRC_BENEATH_NO_OPENAT2 1u

typedef struct sl_src_shard_s {
    uint64_t path_off; /* shard path relative to the root, in the name arena */
    int fd;            /* open read-only fd, or -1: open per read */
} sl_src_shard_t;

struct sl_source_s {
    sl_source_type_e type;
    char *root_real;  /* realpath of the data root (malloc'd) */
    size_t root_len;
    int root_fd;      /* O_PATH | O_DIRECTORY fd of root_real */

    char *arena;      /* NUL-terminated names, back to back */
    size_t arena_len, arena_cap;

    uint64_t count, cap;
    uint64_t *name_off;
    uint64_t *size;
    int32_t *label;
    uint64_t *data_off; /* tar only: member data offset in its shard */
    uint32_t *shard;    /* tar only: index into shards */

    sl_src_shard_t *shards;
    uint32_t nshards, shards_cap;

    uint32_t nclasses;
    uint64_t fingerprint;

    char warnings[SL_SRC_WARN_MAX];
    size_t warn_len;
    uint32_t warn_dropped; /* warnings that did not fit in the buffer */
};

/* Checks a relative path lexically and writes its canonical form into out
 * ("." and empty components dropped, no trailing '/'; "" for the root
 * itself). Returns 0, -EPERM (absolute or a ".." component), -ENAMETOOLONG. */
int sl_src_normalize(const char *rel, char *out, size_t outlen);

/* Opens rel (already normalized; "" means the root) beneath the data root.
 * flags are open(2) flags; O_CLOEXEC is added. Returns an fd, or -EPERM when
 * the resolved object lies outside the root, or another -errno. */
int sl_src_open_beneath(const sl_source_t *src, const char *rel, int flags, unsigned how);

/* An indexer's own path (already normalized): sl_src_open_beneath with the
 * error an indexer reports, "KIND 'PATH' resolves outside the data root" or
 * "KIND 'PATH': why" ("." for the root itself). Returns an fd or -errno. */
int sl_src_open_path(const sl_source_t *src, const char *kind, const char *path, int flags,
                     char *err, size_t errlen);

/* Appends a string to the arena; *ret_off receives its offset.
 * Returns 0, -ENOMEM, -E2BIG (arena beyond addressable size). */
int sl_src_arena_add(sl_source_t *src, const char *s, size_t len, uint64_t *ret_off);
/* Appends "a" + sep + "b"; sep is left out when it is '\0' or a is "" (the
 * root itself has the empty relative path). */
int sl_src_arena_add2(sl_source_t *src, const char *a, char sep, const char *b,
                      uint64_t *ret_off);

/* Makes room for need elements of elem bytes in the malloc'd array *p of
 * *cap elements (capacity doubles from 16). Returns 0 or -ENOMEM. */
int sl_src_reserve(void **p, size_t *cap, size_t need, size_t elem);

/* Appends one sample whose name is already in the arena. Returns 0, -ENOMEM,
 * -E2BIG beyond SL_SOURCE_MAX_SAMPLES. */
int sl_src_add_sample(sl_source_t *src, uint64_t name_off, uint64_t size, int32_t label);

/* Appends a shard (tar); the fd is owned by the source from then on. */
int sl_src_add_shard(sl_source_t *src, uint64_t path_off, int fd, uint32_t *ret_idx);

/* Records one warning for sl_source_open_warnings (bounded). */
void sl_src_warn(sl_source_t *src, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A directory listing: names sorted by strcmp, "." and ".." left out. */
typedef struct sl_src_dirent_s {
    size_t off;         /* name offset in buf */
    unsigned char type; /* d_type (DT_UNKNOWN on some file systems) */
} sl_src_dirent_t;

typedef struct sl_src_dirlist_s {
    char *buf;
    size_t len, cap;
    sl_src_dirent_t *ents;
    size_t n, ncap;
} sl_src_dirlist_t;

/* sl_src_dirlist_read() flag: keep hidden (dot) names; without it they are
 * left out. */
#define SL_SRC_DIRLIST_HIDDEN 1u

/* Lists dirfd (the fd stays the caller's). Returns 0, -E2BIG beyond
 * SL_SOURCE_MAX_SAMPLES entries, or -errno. */
int sl_src_dirlist_read(int dirfd, unsigned flags, sl_src_dirlist_t *ret_list);
void sl_src_dirlist_free(sl_src_dirlist_t *list);

/* Indexers: fill src from the normalized path. err is filled on failure. */
int sl_src_index_imagefolder(sl_source_t *src, const char *path, char *err, size_t errlen);
int sl_src_index_tar(sl_source_t *src, const char *path, char *err, size_t errlen);
int sl_src_index_filelist(sl_source_t *src, const char *path, char *err, size_t errlen);

#endif
