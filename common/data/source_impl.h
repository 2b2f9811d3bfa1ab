/* source_impl: what the files of common/data share; not a public API.
 *
 * Kinds: one row (sl_src_kind_t) per sl_source_type_e, listed in source.c's
 * table, defined with its functions in the kind's own file
 * (source_imagefolder.c, source_tar.c, source_filelist.c, source_wds.c,
 * source_jsonl.c). A row says how the kind indexes, which optional
 * per-sample arrays it keeps, whether it yields records, and how it reads a
 * sample (whole, and its head). Adding a kind is adding a row and its file.
 *
 * Index layout (built once by sl_source_open, read-only afterwards, so any
 * number of threads may read it without locks): one string arena holding
 * every sample name (and every shard path), plus parallel arrays indexed by
 * sample: name offset, encoded size, label; tar sources add the member's data
 * offset and its shard number. About 20 bytes per sample plus the name
 * (32 for tar), so tens of millions of samples fit comfortably.
 *
 * Record sources: webdataset keeps, per sample, the index of its first
 * member (4 bytes) and, per kept member, one 16-byte sl_src_member_t in a
 * flat array: 24 bytes per sample + 16 per member + the name, so a typical
 * LLaVA sample (txt, json, jpg) costs about 72 bytes plus "shard.tar:KEY".
 * jsonl keeps the line's offset (data_off), its line number (shard) and the
 * number of images it names (1 byte): 33 bytes per sample plus the name.
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

#include <jansson.h>

#include "common/data/source.h"
#include "common/remote/remote.h"
#include "common/remote/rread.h"

/* Longest relative path (and tar member name) we accept. */
#define SL_SRC_PATH_MAX 4096
/* Most tar shards whose fd stays open after indexing; the rest are opened per
 * read. Further capped at runtime by a quarter of RLIMIT_NOFILE. */
#define SL_SRC_MAX_OPEN_SHARDS 1024u
/* Room for the one-line warning summary. */
#define SL_SRC_WARN_MAX 1024

/* Most shards one webdataset source may name (a brace pattern expands to at
 * most this many; a directory holds at most this many .tar files). */
#define SL_SRC_MAX_SHARDS 100000u

/* sl_src_open_beneath() flag: skip openat2 and use the /proc fallback
 * (lets the tests exercise the fallback on kernels that have openat2). */
#define SL_SRC_BENEATH_NO_OPENAT2 1u

typedef struct sl_src_shard_s {
    uint64_t path_off;   /* shard path relative to the root (or its URL), in the arena */
    int fd;              /* open read-only fd, or -1: open per read */
    uint64_t remote_tag; /* a URL shard's validator when indexed (remote.h); 0: a file */
    uint64_t remote_size; /* a URL shard's size when indexed */
} sl_src_shard_t;

/* A byte range of a shard a read needs. */
typedef struct sl_src_span_s {
    uint64_t off, len;
} sl_src_span_t;
/* Most ranges one read asks for; members further apart than
 * SL_SRC_SPAN_GAP bytes are separate ranges, nearer ones one. */
#define SL_SRC_MAX_SPANS 8u
#define SL_SRC_SPAN_GAP ((uint64_t)64 << 10)

/* URL sources (source_remote.c): the host's remote settings and what
 * indexing learned of the URLs it opened. Reached through a pointer so the
 * const sl_source_t the openers get can still record, while indexing (one
 * thread, inside sl_source_open), each URL's validator; read-only after. */
typedef struct sl_src_remote_s {
    const sl_remote_t *remote; /* the host's, not owned; NULL: every URL refused */
    bool indexing;             /* true inside sl_source_open only */
    uint64_t fp;               /* FNV-1a over (URL, tag) of the URLs opened indexing */
    uint64_t nurls;
    uint64_t last_tag; /* the validator of the URL opened last while indexing:
                                * sl_src_add_shard records it for the shard it adds */
    uint64_t last_size; /* and its size */
    struct sl_src_pins_s *pins; /* versions pinned by sample reads (source_pins.c) */
} sl_src_remote_t;

/* source_pins.c: the validator each URL read whole at sample time had at
 * its first read (0: not read yet). new: -ENOMEM; put keeps the first. */
int sl_src_pins_new(sl_src_remote_t *rs);
void sl_src_pins_free(sl_src_remote_t *rs);
uint64_t sl_src_pin_get(const sl_src_remote_t *rs, const char *url);
void sl_src_pin_put(const sl_src_remote_t *rs, const char *url, uint64_t tag);
/* A sample read of a URL read whole (jsonl image, filelist entry): the
 * version its first read pinned, or pins the one it gets (source_pins.c
 * header); the version it read is added to vers (NULL: not wanted). Returns
 * the fd, or sl_src_open_url's errors (-ESTALE: changed). */
int sl_src_open_url_pinned(const sl_source_t *src, const char *url, sl_url_vers_t *vers, char *err,
                           size_t errlen);

/* What a webdataset member is to its sample (.cls is read at indexing and
 * kept as the label, not as a member). */
typedef enum {
    SL_SRC_ROLE_TEXT = 1,  /* KEY.txt */
    SL_SRC_ROLE_META = 2,  /* KEY.json */
    SL_SRC_ROLE_IMAGE = 3, /* KEY.jpg/.jpeg/.png/.webp, KEY.N.jpg/... */
    SL_SRC_ROLE_VIDEO = 4, /* KEY.mp4/.webm/.mkv/.mov, KEY.N.mp4/...: a clip */
} sl_src_role_e;

/* Image and video extensions, for naming a member in messages. */
typedef enum {
    SL_SRC_EXT_JPG = 0,
    SL_SRC_EXT_JPEG,
    SL_SRC_EXT_PNG,
    SL_SRC_EXT_WEBP,
    SL_SRC_EXT_MP4, /* from here on: clips (SL_SRC_ROLE_VIDEO) */
    SL_SRC_EXT_WEBM,
    SL_SRC_EXT_MKV,
    SL_SRC_EXT_MOV,
    SL_SRC_EXT__COUNT
} sl_src_ext_e;

/* Their text ("jpg", ...), by sl_src_ext_e (source_wds.c): what an image
 * or clip member's extension is matched against (any case) and named with;
 * images and clips are numbered and ordered together. */
extern const char *const sl_src_img_ext[SL_SRC_EXT__COUNT];

/* One member of a webdataset sample: 16 bytes. Tar payloads start on 512-byte
 * blocks, so the block number fits 32 bits for shards up to 2 TiB (larger
 * shards are refused at open). A size above UINT32_MAX is stored as
 * UINT32_MAX: it is over SL_SOURCE_MAX_FILE_BYTES either way. */
typedef struct sl_src_member_s {
    uint32_t block; /* payload offset / 512 in its shard */
    uint32_t size;
    uint32_t shard; /* index into shards */
    uint16_t num;   /* N of KEY.N.ext; UINT16_MAX: none (or past 65534) */
    uint8_t role;   /* sl_src_role_e */
    uint8_t ext;    /* sl_src_ext_e, images only */
} sl_src_member_t;

/* jsonl: nimages value of a line that did not parse at indexing. */
#define SL_SRC_LINE_BAD UINT8_MAX

/* Indexes the normalized path into src; err is filled on failure. */
typedef int (*sl_src_index_fn)(sl_source_t *src, const char *path, char *err, size_t errlen);
/* Reads sample index (checked by the caller) whole into out (source.h,
 * sl_source_read_v); the URLs it read whole at sample time and their
 * validators into vers (NULL: not wanted). */
typedef int (*sl_src_read_fn)(const sl_source_t *src, uint64_t index, sl_tensor_t *out,
                              sl_url_vers_t *vers, char *err, size_t errlen);
/* The same for at most the first max (> 0) bytes (sl_source_read_head). */
typedef int (*sl_src_read_head_fn)(const sl_source_t *src, uint64_t index, uint64_t max,
                                   sl_tensor_t *out, char *err, size_t errlen);
/* What the index knows of record sample index (checked by the caller); *ret
 * arrives zeroed. */
typedef void (*sl_src_features_fn)(const sl_source_t *src, uint64_t index,
                                   sl_src_features_t *ret);

/* sl_src_kind_t.keep: the optional per-sample arrays sl_src_add_sample
 * grows (and zeroes) for a kind. */
#define SL_SRC_KEEP_OFFSETS 1u /* data_off and shard */
#define SL_SRC_KEEP_FIRST 2u   /* first, with its sentinel entry */
#define SL_SRC_KEEP_NIMAGES 4u /* nimages */

/* One source kind: everything that differs between kinds. */
typedef struct sl_src_kind_s {
    sl_source_type_e type;
    unsigned keep;                 /* SL_SRC_KEEP_* */
    bool own_classes;              /* the indexer sets nclasses; otherwise it is
                                    * the largest label + 1 */
    bool record;                   /* reads give records (sl_source_is_record);
                                    * rec_fp is folded into the fingerprint */
    sl_src_index_fn index;
    sl_src_read_fn read;
    sl_src_read_head_fn read_head; /* NULL: heads are -ENOTSUP */
    sl_src_features_fn features;   /* record kinds only */
} sl_src_kind_t;

/* The rows, each in its kind's file. */
extern const sl_src_kind_t sl_src_kind_imagefolder;
extern const sl_src_kind_t sl_src_kind_tar;
extern const sl_src_kind_t sl_src_kind_filelist;
/* A filelist read as records (a spec that decodes video): source_filelist.c. */
extern const sl_src_kind_t sl_src_kind_filelist_clips;
extern const sl_src_kind_t sl_src_kind_webdataset;
extern const sl_src_kind_t sl_src_kind_jsonl;

struct sl_source_s {
    const sl_src_kind_t *kind; /* its row, static */
    char *root_real;  /* realpath of the data root (malloc'd) */
    size_t root_len;
    int root_fd;      /* O_PATH | O_DIRECTORY fd of root_real */

    char *arena;      /* NUL-terminated names, back to back */
    size_t arena_len, arena_cap;

    uint64_t count, cap;
    uint64_t *name_off;
    uint64_t *size;
    int32_t *label;
    uint64_t *data_off; /* tar: member data offset in its shard; jsonl: line offset */
    uint32_t *shard;    /* tar: index into shards; jsonl: 1-based line number */

    /* Record sources (see the top of this file). */
    uint32_t *first;            /* webdataset: count + 1 entries; sample i's members
                                 * are members[first[i] .. first[i + 1]) */
    sl_src_member_t *members;   /* webdataset */
    size_t nmembers, members_cap;
    uint8_t *nimages;           /* jsonl: images the line names (capped at
                                 * SL_REC_MAX_IMAGES + 1), or SL_SRC_LINE_BAD */
    uint64_t rec_fp;            /* what names/sizes do not show: member names and
                                 * sizes, manifest lines; folded into fingerprint */

    sl_src_shard_t *shards;
    uint32_t nshards, shards_cap;

    uint32_t nclasses;
    uint64_t *class_off; /* imagefolder: nclasses names in the arena (the class
                          * directories', label order); NULL for other kinds */
    size_t class_cap;
    uint64_t fingerprint;
    sl_src_remote_t *rs; /* never NULL once open */

    /* A mixed spec's composite (source_mix.c): its children, NULL otherwise. */
    struct sl_src_mix_s *mix;

    char warnings[SL_SRC_WARN_MAX];
    size_t warn_len;
    uint32_t warn_dropped; /* warnings that did not fit in the buffer */
};

/* source_mix.c: frees a composite's children (NULL ok). */
typedef struct sl_src_mix_s sl_src_mix_t;
void sl_src_mix_free(sl_src_mix_t *m);

/* sl_source_open_at with the kind's row given (sl_source_open_spec: a
 * filelist of clips). */
int sl_src_open_kind(const char *data_root, const sl_remote_t *remote, const sl_src_kind_t *kind,
                     const char *path, sl_source_t **ret_src, char *err, size_t errlen);

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

/* imagefolder helpers (source_imagefolder.c): torchvision's IMG_EXTENSIONS
 * test (any case), and naming class label in the arena. */
bool sl_src_is_image_name(const char *name);
int sl_src_add_class_name(sl_source_t *src, const char *name, uint32_t label, char *err,
                          size_t errlen);
/* An imagefolder at an s3:// URL, indexed from its listing as torchvision
 * indexes the same tree on disk (source_imagefolder_url.c). */
int sl_src_imagefolder_index_url(sl_source_t *src, const char *url, char *err, size_t errlen);

/* A URL (http://, https://, s3://) as a file: the checks against
 * remote_roots, then an fd of its bytes in the host's shard cache (remote.h).
 * expect_tag != 0: the validator indexing saw, -ESTALE when the object
 * changed since. While indexing, the URL and its validator go into the
 * fingerprint. err names the URL. */
int sl_src_open_url(const sl_source_t *src, const char *url, uint64_t expect_tag, char *err,
                    size_t errlen);

/* A URL tar shard for indexing by range reads (common/remote/rread.h):
 * the same checks and fingerprint as sl_src_open_url, the reader in *ret
 * (the caller closes it) and the object's size. */
int sl_src_open_url_ranged(const sl_source_t *src, const char *url, sl_rread_t **ret,
                           uint64_t *ret_size, char *err, size_t errlen);

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

/* The fd of a shard for a read: its kept fd, or one opened (and re-verified
 * beneath the root) now, which the caller closes when *ret_close is set.
 * Returns an fd or -errno with err naming name. */
int sl_src_shard_fd(const sl_source_t *src, uint32_t shard, const char *name, bool *ret_close,
                    char *err, size_t errlen);

/* sl_src_shard_fd for a read of the n byte ranges sp of the shard (n 0:
 * all of it). A URL shard the cache does not hold is read by range GETs of
 * sp into a memfd (adjacent ranges coalesced) while the whole shard is
 * fetched into the cache in the background (sl_remote_prefetch), so later
 * reads are local. sp is sorted in place. */
int sl_src_shard_fd_spans(const sl_source_t *src, uint32_t shard, sl_src_span_t *sp, size_t n,
                          const char *name, bool *ret_close, char *err, size_t errlen);

/* A sample read's URL error rc (its message in err): a server that could
 * not be reached after every retry (connect, timeout, cut body, 5xx:
 * -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -ECONNRESET, -EHOSTDOWN)
 * becomes -ENOLINK, err prefixed "data server unreachable" (skip.h
 * SL_SKIP_SOURCE_DOWN: the split is retried elsewhere, not skipped); any
 * other rc is returned as it is. */
int sl_src_url_read_error(int rc, char *err, size_t errlen);

/* A URL shard's fd for those spans (source_remote.c). */
int sl_src_url_shard_fd(const sl_source_t *src, uint32_t shard, sl_src_span_t *sp, size_t n,
                        char *err, size_t errlen);

/* Reads exactly n bytes at off into buf; EOF first is -ENOMSG ("truncated"),
 * errors name name. */
int sl_src_pread_exact(int fd, uint64_t off, void *buf, size_t n, const char *name, char *err,
                       size_t errlen);

/* Calls fn for every "*.tar" entry of the directory dfd (path: its path
 * under the root, "" for the root) with "path/name", in strcmp order; kind
 * ("tar", "webdataset") names the source in errors. Stops at fn's first
 * error and returns it. */
typedef int (*sl_src_tar_fn)(void *ctx, const char *rel, size_t len, char *err, size_t errlen);
int sl_src_each_tar(int dfd, const char *path, const char *kind, sl_src_tar_fn fn, void *ctx,
                    char *err, size_t errlen);

/* Opens rel beneath the root as a regular, non-empty file within
 * SL_SOURCE_MAX_FILE_BYTES (its size now into *ret_size): an fd, or the
 * read error a sample of that file is skipped with (err names it by name).
 * A URL's version read is added to vers (NULL: not wanted). */
int sl_src_open_regular(const sl_source_t *src, const char *rel, const char *name,
                        sl_url_vers_t *vers, uint64_t *ret_size, char *err, size_t errlen);

/* FNV-1a over n bytes, continuing from h: the index fingerprints. */
uint64_t sl_src_fnv1a(uint64_t h, const void *p, size_t n);

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

/* Record helpers shared by source_wds_read.c and source_jsonl.c
 * (source_record.c). */
/* Text from "conversations": the turns' "value"s (or "content"s) joined with
 * '\n', and each turn's role ("from" or "role": system, human/user,
 * gpt/assistant) and span in that text as *ret_nturns rows of a TURNS field
 * (common/sample/record.h; token ends 0). Returns 0 with *ret (malloc'd,
 * NUL-terminated) and *ret_turns (malloc'd), -ENOSTR (no "conversations", or
 * no turn in it), -EPROTO (wrong shape, a turn without a value or a role, an
 * unknown role: *why says what), -ENOMEM. */
int sl_src_conversations_text(const json_t *obj, char **ret, size_t *ret_len, uint32_t **ret_turns,
                              uint32_t *ret_nturns, const char **why);
/* Adds the TURNS field (nothing for n = 0); errors name name. */
int sl_src_add_turns(sl_tensor_t *out, const uint32_t *turns, uint32_t n, const char *name,
                     char *err, size_t errlen);
/* Checks text is UTF-8 (-EDOM naming name and the byte) and adds it as TEXT. */
int sl_src_add_text(sl_tensor_t *out, const char *text, size_t n, const char *name, char *err,
                    size_t errlen);

/* ---- source_read.c: the byte reads kinds' readers are built from ----- */

/* Resizes out to size bytes (SL_DT_BYTES) and reads them at off; fewer (EOF)
 * is -ENOMSG. */
int sl_src_read_exact(int fd, uint64_t off, uint64_t size, sl_tensor_t *out, const char *name,
                      char *err, size_t errlen);
/* -ENODATA for 0 bytes, -EFBIG over SL_SOURCE_MAX_FILE_BYTES, else 0. */
int sl_src_check_size(uint64_t size, const char *name, char *err, size_t errlen);
/* The message of a failed open of name: "resolves outside the data root"
 * for -EPERM, else strerror. Returns rc. */
int sl_src_open_error(int rc, const char *name, char *err, size_t errlen);
/* A sample that is one file under the root, named by its sample name
 * (imagefolder, filelist): whole, or its first max bytes. */
int sl_src_read_file(const sl_source_t *src, uint64_t index, sl_tensor_t *out, sl_url_vers_t *vers,
                     char *err, size_t errlen);
int sl_src_read_file_head(const sl_source_t *src, uint64_t index, uint64_t max, sl_tensor_t *out,
                          char *err, size_t errlen);

/* ---- webdataset: shard listing (source_wds_shards.c), reader
 * (source_wds_read.c) ------------------------------------------------- */

/* Strings back to back (buf), the i-th at off[i]. */
typedef struct sl_src_pathlist_s {
    char *buf;
    size_t len, cap;
    size_t *off;
    size_t n, ncap;
} sl_src_pathlist_t;

void sl_src_pathlist_free(sl_src_pathlist_t *l);

/* The shard paths path names (a .tar, a directory of them or a brace
 * pattern), in order, appended to *out (zeroed by the caller, freed by it
 * also on failure). Returns 0 or -errno with err naming path. */
int sl_src_wds_shards(sl_source_t *src, const char *path, sl_src_pathlist_t *out, char *err,
                      size_t errlen);

/* The webdataset row's reader: a whole record; a record of the first max
 * bytes of each image member (the cost model's headers), nothing else; the
 * features from the members' roles and sizes. */
int sl_src_wds_read(const sl_source_t *src, uint64_t index, sl_tensor_t *out, sl_url_vers_t *vers,
                    char *err, size_t errlen);
int sl_src_wds_read_heads(const sl_source_t *src, uint64_t index, uint64_t max,
                          sl_tensor_t *out, char *err, size_t errlen);
void sl_src_wds_features(const sl_source_t *src, uint64_t index, sl_src_features_t *ret);

#endif
