/* source: the part every source kind shares -- open dispatch, index storage,
 * confinement under the data root, reads and the fingerprint. The kind
 * specific indexers live in source_{imagefolder,tar,filelist,wds,jsonl}.c
 * (the last two also read their records); the layout
 * and the confinement method are described in source_impl.h. */
#include "common/data/source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/data/source_impl.h"

/* ---- paths and confinement ------------------------------------------- */

int sl_src_normalize(const char *rel, char *out, size_t outlen)
{
    if (outlen == 0) {
        return -ENAMETOOLONG;
    }
    if (rel[0] == '/') {
        return -EPERM;
    }
    size_t o = 0;
    const char *p = rel;
    while (*p != '\0') {
        const char *end = strchr(p, '/');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        bool dot = n == 1 && p[0] == '.';
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            return -EPERM;
        }
        if (n > 0 && !dot) {
            /* component, a '/' before it unless first, and the final NUL */
            size_t need = n + (o > 0 ? 1 : 0) + 1;
            if (need > outlen - o) {
                return -ENAMETOOLONG;
            }
            if (o > 0) {
                out[o++] = '/';
            }
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
        if (*p == '/') {
            p++;
        }
    }
    out[o] = '\0';
    return 0;
}

static bool under_root(const sl_source_t *src, const char *p)
{
    if (src->root_len == 1) { /* the root is "/" itself */
        return p[0] == '/';
    }
    return strncmp(p, src->root_real, src->root_len) == 0 &&
           (p[src->root_len] == '\0' || p[src->root_len] == '/');
}

/* Fast path: the kernel refuses any resolution that leaves root_fd. */
static int beneath_openat2(int root_fd, const char *rel, int flags)
{
#ifdef SYS_openat2
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)(unsigned int)flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd;
    do {
        fd = syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
    } while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : (int)fd;
#else
    (void)root_fd;
    (void)rel;
    (void)flags;
    return -ENOSYS;
#endif
}

/* Fallback: resolve without side effects (O_PATH), check where the opened
 * inode really is, then re-open that same inode. The check is on the object
 * we hold, not on a path, so a concurrent symlink swap cannot slip past. */
static int beneath_proc(const sl_source_t *src, const char *rel, int flags)
{
    int pfd = openat(src->root_fd, rel, O_PATH | O_CLOEXEC | (flags & O_DIRECTORY));
    if (pfd < 0) {
        return -errno;
    }
    char link[64];
    char real[PATH_MAX + 1];
    int rc;
    snprintf(link, sizeof(link), "/proc/self/fd/%d", pfd);
    ssize_t n = readlink(link, real, sizeof(real));
    if (n < 0) {
        /* Without /proc the location cannot be verified: refuse. */
        rc = -EPERM;
        goto out;
    }
    if ((size_t)n >= sizeof(real)) {
        rc = -ENAMETOOLONG;
        goto out;
    }
    real[n] = '\0';
    if (!under_root(src, real)) {
        rc = -EPERM;
        goto out;
    }
    if (flags & O_PATH) {
        return pfd;
    }
    rc = open(link, flags);
    if (rc < 0) {
        rc = -errno;
    }
out:
    close(pfd);
    return rc;
}

int sl_src_open_beneath(const sl_source_t *src, const char *rel, int flags, unsigned how)
{
    const char *p = rel[0] != '\0' ? rel : ".";
    flags |= O_CLOEXEC;
    if (!(flags & O_PATH)) {
        /* Never become a controlling tty, never block opening a FIFO. */
        flags |= O_NOCTTY | O_NONBLOCK;
    }
    if (!(how & SL_SRC_BENEATH_NO_OPENAT2)) {
        int fd = beneath_openat2(src->root_fd, p, flags);
        if (fd >= 0) {
            return fd;
        }
        /* EXDEV is also what an absolute symlink that points back inside the
         * root gets, so let the fallback decide; ENOSYS/EPERM: no openat2
         * (old kernel, seccomp); EAGAIN: a rename race was detected. */
        if (fd != -ENOSYS && fd != -EPERM && fd != -EXDEV && fd != -EAGAIN && fd != -E2BIG) {
            return fd;
        }
    }
    return beneath_proc(src, p, flags);
}

int sl_src_open_path(const sl_source_t *src, const char *kind, const char *path, int flags,
                     char *err, size_t errlen)
{
    const char *shown = path[0] != '\0' ? path : ".";
    int fd = sl_src_open_beneath(src, path, flags, 0);
    if (fd == -EPERM) {
        return sl_err(err, errlen, fd, "%s '%s' resolves outside the data root", kind, shown);
    }
    if (fd < 0) {
        return sl_err(err, errlen, fd, "%s '%s': %s", kind, shown, strerror(-fd));
    }
    return fd;
}

/* ---- index storage --------------------------------------------------- */

/* Makes room for n more bytes in the arena. */
static int arena_reserve(sl_source_t *src, size_t n)
{
    if (n > SIZE_MAX / 4 - src->arena_len) {
        return -E2BIG;
    }
    size_t need = src->arena_len + n;
    if (need <= src->arena_cap) {
        return 0;
    }
    size_t cap = src->arena_cap ? src->arena_cap : 65536;
    while (cap < need) {
        cap *= 2;
    }
    char *p = realloc(src->arena, cap);
    if (p == NULL) {
        return -ENOMEM;
    }
    src->arena = p;
    src->arena_cap = cap;
    return 0;
}

int sl_src_arena_add(sl_source_t *src, const char *s, size_t len, uint64_t *ret_off)
{
    int rc = arena_reserve(src, len + 1);
    if (rc < 0) {
        return rc;
    }
    memcpy(src->arena + src->arena_len, s, len);
    src->arena[src->arena_len + len] = '\0';
    *ret_off = src->arena_len;
    src->arena_len += len + 1;
    return 0;
}

int sl_src_arena_add2(sl_source_t *src, const char *a, char sep, const char *b,
                      uint64_t *ret_off)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t ls = sep != '\0' && la > 0 ? 1 : 0; /* no separator after an empty prefix */
    if (la > SIZE_MAX / 8 || lb > SIZE_MAX / 8) {
        return -E2BIG;
    }
    int rc = arena_reserve(src, la + ls + lb + 1);
    if (rc < 0) {
        return rc;
    }
    char *p = src->arena + src->arena_len;
    memcpy(p, a, la);
    if (ls) {
        p[la] = sep;
    }
    memcpy(p + la + ls, b, lb);
    p[la + ls + lb] = '\0';
    *ret_off = src->arena_len;
    src->arena_len += la + ls + lb + 1;
    return 0;
}

int sl_src_reserve(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) {
        return 0;
    }
    size_t n = *cap > 0 ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem) {
            return -ENOMEM;
        }
        n *= 2;
    }
    void *q = realloc(*p, n * elem);
    if (q == NULL) {
        return -ENOMEM;
    }
    *p = q;
    *cap = n;
    return 0;
}

static int grow_array(void **p, size_t elem, uint64_t cap)
{
    void *q = realloc(*p, (size_t)cap * elem);
    if (q == NULL) {
        return -ENOMEM;
    }
    *p = q;
    return 0;
}

int sl_src_add_sample(sl_source_t *src, uint64_t name_off, uint64_t size, int32_t label)
{
    if (src->count >= SL_SOURCE_MAX_SAMPLES) {
        return -E2BIG;
    }
    if (src->count == src->cap) {
        uint64_t cap = src->cap ? src->cap * 2 : 1024;
        if (cap > SL_SOURCE_MAX_SAMPLES) {
            cap = SL_SOURCE_MAX_SAMPLES;
        }
        /* Each array grows on its own; one failing leaves the others merely
         * larger than needed, which is harmless since cap is not updated. */
        if (grow_array((void **)&src->name_off, sizeof(*src->name_off), cap) < 0 ||
            grow_array((void **)&src->size, sizeof(*src->size), cap) < 0 ||
            grow_array((void **)&src->label, sizeof(*src->label), cap) < 0) {
            return -ENOMEM;
        }
        bool offsets = src->type == SL_SRC_TAR || src->type == SL_SRC_JSONL;
        if (offsets &&
            (grow_array((void **)&src->data_off, sizeof(*src->data_off), cap) < 0 ||
             grow_array((void **)&src->shard, sizeof(*src->shard), cap) < 0)) {
            return -ENOMEM;
        }
        /* first[] has a sentinel entry past the last sample. */
        if (src->type == SL_SRC_WEBDATASET &&
            grow_array((void **)&src->first, sizeof(*src->first), cap + 1) < 0) {
            return -ENOMEM;
        }
        if (src->type == SL_SRC_JSONL &&
            grow_array((void **)&src->nimages, sizeof(*src->nimages), cap) < 0) {
            return -ENOMEM;
        }
        src->cap = cap;
    }
    src->name_off[src->count] = name_off;
    src->size[src->count] = size;
    src->label[src->count] = label;
    if (src->type == SL_SRC_TAR || src->type == SL_SRC_JSONL) {
        src->data_off[src->count] = 0;
        src->shard[src->count] = 0;
    }
    if (src->type == SL_SRC_JSONL) {
        src->nimages[src->count] = 0;
    }
    src->count++;
    return 0;
}

int sl_src_add_shard(sl_source_t *src, uint64_t path_off, int fd, uint32_t *ret_idx)
{
    if (src->nshards == src->shards_cap) {
        if (src->shards_cap >= UINT32_MAX / 2) {
            return -E2BIG;
        }
        uint32_t cap = src->shards_cap ? src->shards_cap * 2 : 16;
        sl_src_shard_t *p = realloc(src->shards, (size_t)cap * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        src->shards = p;
        src->shards_cap = cap;
    }
    src->shards[src->nshards].path_off = path_off;
    src->shards[src->nshards].fd = fd;
    *ret_idx = src->nshards++;
    return 0;
}

/* Keeps room for the " (+N more)" suffix appended when the source is done. */
#define WARN_SUFFIX_ROOM 32

void sl_src_warn(sl_source_t *src, const char *fmt, ...)
{
    char one[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(one, sizeof(one), fmt, ap);
    va_end(ap);
    if (n < 0) {
        src->warn_dropped++;
        return;
    }
    sl_err_scrub(one); /* names from the data set: one line of text */
    size_t len = strlen(one);
    size_t sep = src->warn_len > 0 ? 2 : 0;
    if (src->warn_len + sep + len + 1 > sizeof(src->warnings) - WARN_SUFFIX_ROOM) {
        src->warn_dropped++;
        return;
    }
    if (sep) {
        memcpy(src->warnings + src->warn_len, "; ", 2);
    }
    memcpy(src->warnings + src->warn_len + sep, one, len + 1);
    src->warn_len += sep + len;
}

/* ---- directory listing ----------------------------------------------- */

static int dirent_cmp(const void *a, const void *b, void *ctx)
{
    const char *buf = ctx;
    const sl_src_dirent_t *x = a, *y = b;
    return strcmp(buf + x->off, buf + y->off);
}

int sl_src_dirlist_read(int dirfd, unsigned flags, sl_src_dirlist_t *ret_list)
{
    sl_src_dirlist_t l;
    memset(&l, 0, sizeof(l));
    /* fdopendir takes the fd; give it a duplicate so the caller keeps dirfd. */
    int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    rewinddir(d); /* a dup shares the offset with dirfd */
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (de == NULL) {
            rc = errno != 0 ? -errno : 0;
            break;
        }
        const char *nm = de->d_name;
        bool dots = nm[0] == '.' && (nm[1] == '\0' || (nm[1] == '.' && nm[2] == '\0'));
        if (dots || (nm[0] == '.' && !(flags & SL_SRC_DIRLIST_HIDDEN))) {
            continue;
        }
        if (l.n >= SL_SOURCE_MAX_SAMPLES) {
            rc = -E2BIG;
            break;
        }
        size_t len = strlen(de->d_name) + 1;
        rc = sl_src_reserve((void **)&l.buf, &l.cap, l.len + len, 1);
        if (rc == 0) {
            rc = sl_src_reserve((void **)&l.ents, &l.ncap, l.n + 1, sizeof(*l.ents));
        }
        if (rc < 0) {
            break;
        }
        memcpy(l.buf + l.len, de->d_name, len);
        l.ents[l.n].off = l.len;
        l.ents[l.n].type = de->d_type;
        l.n++;
        l.len += len;
    }
    closedir(d);
    if (rc < 0) {
        sl_src_dirlist_free(&l);
        return rc;
    }
    if (l.n > 1) {
        qsort_r(l.ents, l.n, sizeof(*l.ents), dirent_cmp, l.buf);
    }
    *ret_list = l;
    return 0;
}

void sl_src_dirlist_free(sl_src_dirlist_t *list)
{
    if (list == NULL) {
        return;
    }
    free(list->buf);
    free(list->ents);
    memset(list, 0, sizeof(*list));
}

/* ---- open / free ----------------------------------------------------- */

uint64_t sl_src_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static uint64_t compute_fingerprint(const sl_source_t *src)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint64_t i = 0; i < src->count; i++) {
        const char *name = src->arena + src->name_off[i];
        unsigned char num[12];
        uint64_t size = src->size[i];
        uint32_t label = (uint32_t)src->label[i];
        /* Fixed little-endian encoding: equal on every host. */
        for (int k = 0; k < 8; k++) {
            num[k] = (unsigned char)(size >> (8 * k));
        }
        for (int k = 0; k < 4; k++) {
            num[8 + k] = (unsigned char)(label >> (8 * k));
        }
        h = sl_src_fnv1a(h, name, strlen(name) + 1);
        h = sl_src_fnv1a(h, num, sizeof(num));
    }
    if (sl_source_is_record(src)) {
        unsigned char fp[8];
        for (int k = 0; k < 8; k++) {
            fp[k] = (unsigned char)(src->rec_fp >> (8 * k));
        }
        h = sl_src_fnv1a(h, fp, sizeof(fp));
    }
    return h;
}

void sl_source_free(sl_source_t *src)
{
    if (src == NULL) {
        return;
    }
    for (uint32_t i = 0; i < src->nshards; i++) {
        if (src->shards[i].fd >= 0) {
            close(src->shards[i].fd);
        }
    }
    if (src->root_fd >= 0) {
        close(src->root_fd);
    }
    free(src->shards);
    free(src->root_real);
    free(src->arena);
    free(src->name_off);
    free(src->size);
    free(src->label);
    free(src->data_off);
    free(src->shard);
    free(src->first);
    free(src->members);
    free(src->nimages);
    free(src);
}

int sl_source_open(const char *data_root, sl_source_type_e type, const char *path,
                   sl_source_t **ret_src, char *err, size_t errlen)
{
    if (data_root == NULL || path == NULL || ret_src == NULL) {
        return sl_err(err, errlen, -EINVAL, "source: missing data root or path");
    }
    if (type != SL_SRC_IMAGEFOLDER && type != SL_SRC_TAR && type != SL_SRC_FILELIST &&
        type != SL_SRC_WEBDATASET && type != SL_SRC_JSONL) {
        return sl_err(err, errlen, -EINVAL, "source: unknown source type %d", (int)type);
    }
    char norm[SL_SRC_PATH_MAX];
    int rc = sl_src_normalize(path, norm, sizeof(norm));
    if (rc == -EPERM) {
        return sl_err(err, errlen, rc, "source path '%s' escapes the data root", path);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "source path '%.64s...' is too long", path);
    }
    sl_source_t *src = calloc(1, sizeof(*src));
    if (src == NULL) {
        return sl_err(err, errlen, -ENOMEM, "source: out of memory");
    }
    src->type = type;
    src->root_fd = -1;
    src->root_real = realpath(data_root, NULL);
    if (src->root_real == NULL) {
        rc = sl_err(err, errlen, -errno, "data root '%s': %s", data_root, strerror(errno));
        goto fail;
    }
    src->root_len = strlen(src->root_real);
    src->root_fd = open(src->root_real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (src->root_fd < 0) {
        rc = sl_err(err, errlen, -errno, "data root '%s': %s", data_root, strerror(errno));
        goto fail;
    }
    switch (type) {
    case SL_SRC_IMAGEFOLDER:
        rc = sl_src_index_imagefolder(src, norm, err, errlen);
        break;
    case SL_SRC_TAR:
        rc = sl_src_index_tar(src, norm, err, errlen);
        break;
    case SL_SRC_FILELIST:
        rc = sl_src_index_filelist(src, norm, err, errlen);
        break;
    case SL_SRC_WEBDATASET:
        rc = sl_src_index_wds(src, norm, err, errlen);
        break;
    case SL_SRC_JSONL:
        rc = sl_src_index_jsonl(src, norm, err, errlen);
        break;
    }
    if (rc < 0) {
        goto fail;
    }
    if (type != SL_SRC_IMAGEFOLDER) {
        int32_t max = -1;
        for (uint64_t i = 0; i < src->count; i++) {
            if (src->label[i] > max) {
                max = src->label[i];
            }
        }
        src->nclasses = (uint32_t)((int64_t)max + 1);
    }
    src->fingerprint = compute_fingerprint(src);
    if (src->warn_dropped > 0) {
        snprintf(src->warnings + src->warn_len, sizeof(src->warnings) - src->warn_len,
                 " (+%" PRIu32 " more)", src->warn_dropped);
    }
    *ret_src = src;
    return 0;
fail:
    sl_source_free(src);
    return rc;
}

/* ---- accessors ------------------------------------------------------- */

uint64_t sl_source_count(const sl_source_t *src) { return src != NULL ? src->count : 0; }

sl_source_type_e sl_source_type(const sl_source_t *src) { return src->type; }

uint32_t sl_source_num_classes(const sl_source_t *src)
{
    return src != NULL ? src->nclasses : 0;
}

int32_t sl_source_label(const sl_source_t *src, uint64_t index)
{
    return src != NULL && index < src->count ? src->label[index] : -1;
}

uint64_t sl_source_size(const sl_source_t *src, uint64_t index)
{
    return src != NULL && index < src->count ? src->size[index] : 0;
}

const char *sl_source_name(const sl_source_t *src, uint64_t index)
{
    if (src == NULL || index >= src->count) {
        return "?";
    }
    return src->arena + src->name_off[index];
}

bool sl_source_is_record(const sl_source_t *src)
{
    return src != NULL && (src->type == SL_SRC_WEBDATASET || src->type == SL_SRC_JSONL);
}

int sl_source_record_features(const sl_source_t *src, uint64_t index, sl_src_features_t *ret)
{
    if (!sl_source_is_record(src) || ret == NULL) {
        return -EINVAL;
    }
    if (index >= src->count) {
        return -ERANGE;
    }
    sl_src_features_t f = {0};
    if (src->type == SL_SRC_JSONL) {
        uint8_t n = src->nimages[index];
        f.nimages = n == SL_SRC_LINE_BAD ? 0 : n;
        f.text_bytes = src->size[index];
        f.text_bytes_exact = false; /* the whole line: an upper bound */
        f.image_bytes_known = false;
    } else {
        bool has_text = false;
        uint64_t meta = 0;
        for (uint32_t m = src->first[index]; m < src->first[index + 1]; m++) {
            const sl_src_member_t *mb = &src->members[m];
            if (mb->role == SL_SRC_ROLE_IMAGE) {
                f.nimages++;
                f.image_bytes += mb->size;
            } else if (mb->role == SL_SRC_ROLE_TEXT) {
                f.text_bytes = mb->size;
                has_text = true;
            } else if (mb->role == SL_SRC_ROLE_META) {
                meta = mb->size;
            }
        }
        /* Without .txt the text comes from the .json's conversations. */
        f.text_bytes_exact = has_text;
        if (!has_text) {
            f.text_bytes = meta;
        }
        f.image_bytes_known = true;
    }
    *ret = f;
    return 0;
}

uint64_t sl_source_fingerprint(const sl_source_t *src)
{
    return src != NULL ? src->fingerprint : 0;
}

const char *sl_source_open_warnings(const sl_source_t *src)
{
    return src != NULL ? src->warnings : "";
}

/* ---- reads ----------------------------------------------------------- */

int sl_src_pread_exact(int fd, uint64_t off, void *buf, size_t size, const char *name, char *err,
                       size_t errlen)
{
    uint64_t got = 0;
    while (got < size) {
        if (off > (uint64_t)INT64_MAX - got) {
            return sl_err(err, errlen, -EOVERFLOW, "%s: offset out of range", name);
        }
        ssize_t n = pread(fd, (char *)buf + got, (size_t)(size - got), (off_t)(off + got));
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return sl_err(err, errlen, -errno, "%s: read: %s", name, strerror(errno));
        }
        if (n == 0) {
            return sl_err(err, errlen, -ENOMSG,
                          "%s: truncated: got %" PRIu64 " of %zu bytes", name, got, size);
        }
        got += (uint64_t)n;
    }
    return 0;
}

/* Reads exactly size bytes at off into out; fewer (EOF) is -ENOMSG. */
static int read_exact(int fd, uint64_t off, uint64_t size, sl_tensor_t *out, const char *name,
                      char *err, size_t errlen)
{
    int rc = sl_tensor_reshape(out, SL_DT_BYTES, SL_LAYOUT_HWC, (uint32_t)size, 1, 1);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s: cannot hold %" PRIu64 " bytes", name, size);
    }
    return sl_src_pread_exact(fd, off, out->data, (size_t)size, name, err, errlen);
}

static int check_size(uint64_t size, const char *name, char *err, size_t errlen)
{
    if (size == 0) {
        return sl_err(err, errlen, -ENODATA, "%s: empty (0 bytes)", name);
    }
    if (size > SL_SOURCE_MAX_FILE_BYTES) {
        return sl_err(err, errlen, -EFBIG, "%s: %" PRIu64 " bytes is over the %" PRIu64
                      " byte limit", name, size, SL_SOURCE_MAX_FILE_BYTES);
    }
    return 0;
}

static int open_error(int rc, const char *name, char *err, size_t errlen)
{
    if (rc == -EPERM) {
        return sl_err(err, errlen, rc, "%s: resolves outside the data root", name);
    }
    return sl_err(err, errlen, rc, "%s: %s", name, strerror(-rc));
}

int sl_src_shard_fd(const sl_source_t *src, uint32_t shard, const char *name, bool *ret_close,
                    char *err, size_t errlen)
{
    const sl_src_shard_t *sh = &src->shards[shard];
    *ret_close = false;
    if (sh->fd >= 0) {
        return sh->fd;
    }
    /* Shard beyond the open-fd budget: open (and re-verify) per read. */
    int fd = sl_src_open_beneath(src, src->arena + sh->path_off, O_RDONLY, 0);
    if (fd < 0) {
        return open_error(fd, name, err, errlen);
    }
    *ret_close = true;
    return fd;
}

/* Reads the first min(size, max) bytes of a member (max 0: all of it). */
static int read_tar_member(const sl_source_t *src, uint64_t index, uint64_t max,
                           sl_tensor_t *out, const char *name, char *err, size_t errlen)
{
    uint64_t size = src->size[index];
    int rc = check_size(size, name, err, errlen);
    if (rc < 0) {
        return rc;
    }
    uint64_t want = max > 0 && max < size ? max : size;
    bool close_fd;
    int fd = sl_src_shard_fd(src, src->shard[index], name, &close_fd, err, errlen);
    if (fd < 0) {
        return fd;
    }
    /* A member that runs past the end of the shard fails here, before the
     * buffer is sized: a 1 KiB shard must not make us reserve 256 MiB. */
    struct stat st;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size < src->data_off[index] + size) {
        rc = sl_err(err, errlen, -ENOMSG,
                    "%s: truncated: %" PRIu64 " bytes declared, %" PRIu64 " in the shard", name,
                    size,
                    (uint64_t)st.st_size > src->data_off[index]
                        ? (uint64_t)st.st_size - src->data_off[index]
                        : 0);
    } else {
        rc = read_exact(fd, src->data_off[index], want, out, name, err, errlen);
    }
    if (close_fd) {
        close(fd);
    }
    return rc;
}

int sl_src_each_tar(int dfd, const char *path, const char *kind, sl_src_tar_fn fn, void *ctx,
                    char *err, size_t errlen)
{
    const char *shown = path[0] != '\0' ? path : ".";
    sl_src_dirlist_t list;
    char rel[SL_SRC_PATH_MAX];
    int rc = sl_src_dirlist_read(dfd, 0, &list);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s '%s': %s", kind, shown, strerror(-rc));
    }
    for (size_t i = 0; rc == 0 && i < list.n; i++) {
        const char *name = list.buf + list.ents[i].off;
        size_t len = strlen(name);
        if (len <= 4 || strcmp(name + len - 4, ".tar") != 0) {
            continue;
        }
        int n = snprintf(rel, sizeof(rel), "%s%s%s", path, path[0] != '\0' ? "/" : "", name);
        if (n < 0 || (size_t)n >= sizeof(rel)) {
            rc = sl_err(err, errlen, -ENAMETOOLONG, "%s '%s/%s': path too long", kind, shown,
                        name);
        } else {
            rc = fn(ctx, rel, (size_t)n, err, errlen);
        }
    }
    sl_src_dirlist_free(&list);
    return rc;
}

int sl_src_open_regular(const sl_source_t *src, const char *rel, const char *name,
                        uint64_t *ret_size, char *err, size_t errlen)
{
    /* Re-resolved on every read: a symlink swapped in since indexing is
     * checked again here. */
    int fd = sl_src_open_beneath(src, rel, O_RDONLY, 0);
    if (fd < 0) {
        return open_error(fd, name, err, errlen);
    }
    struct stat st;
    int rc;
    if (fstat(fd, &st) < 0) {
        rc = sl_err(err, errlen, -errno, "%s: stat: %s", name, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = sl_err(err, errlen, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
                    "%s: not a regular file", name);
    } else {
        /* The size now, not the one indexed: the bytes we return are the file's. */
        rc = check_size((uint64_t)st.st_size, name, err, errlen);
    }
    if (rc < 0) {
        close(fd);
        return rc;
    }
    *ret_size = (uint64_t)st.st_size;
    return fd;
}

/* Reads the first min(size, max) bytes of a file (max 0: all of it). */
static int read_file(const sl_source_t *src, uint64_t max, sl_tensor_t *out, const char *name,
                     char *err, size_t errlen)
{
    uint64_t size;
    int fd = sl_src_open_regular(src, name, name, &size, err, errlen);
    if (fd < 0) {
        return fd;
    }
    int rc = read_exact(fd, 0, max > 0 && max < size ? max : size, out, name, err, errlen);
    close(fd);
    return rc;
}

static int read_sample(const sl_source_t *src, uint64_t index, uint64_t max, sl_tensor_t *out,
                       char *err, size_t errlen)
{
    if (src == NULL || out == NULL) {
        return sl_err(err, errlen, -EINVAL, "source read: missing source or tensor");
    }
    if (index >= src->count) {
        return sl_err(err, errlen, -ERANGE, "sample %" PRIu64 " out of range (%" PRIu64
                      " samples)", index, src->count);
    }
    const char *name = src->arena + src->name_off[index];
    if (sl_source_is_record(src)) {
        if (max > 0 && src->type == SL_SRC_WEBDATASET) {
            return sl_src_read_wds_heads(src, index, max, out, err, errlen);
        }
        if (max > 0) {
            return sl_err(err, errlen, -ENOTSUP, "%s: a %s source reads whole records, not "
                          "heads (use sl_source_record_features)", name,
                          sl_source_type_name(src->type));
        }
        return src->type == SL_SRC_WEBDATASET ? sl_src_read_wds(src, index, out, err, errlen)
                                              : sl_src_read_jsonl(src, index, out, err, errlen);
    }
    if (src->type == SL_SRC_TAR) {
        return read_tar_member(src, index, max, out, name, err, errlen);
    }
    return read_file(src, max, out, name, err, errlen);
}

int sl_source_read(const sl_source_t *src, uint64_t index, sl_tensor_t *out, char *err,
                   size_t errlen)
{
    return read_sample(src, index, 0, out, err, errlen);
}

int sl_source_read_head(const sl_source_t *src, uint64_t index, size_t max, sl_tensor_t *out,
                        char *err, size_t errlen)
{
    if (max == 0) {
        return sl_err(err, errlen, -EINVAL, "source read: a head of 0 bytes");
    }
    return read_sample(src, index, max, out, err, errlen);
}
