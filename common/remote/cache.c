/* cache: the bounded, crash-safe, shared shard cache (cache.h). */
#include "common/remote/cache.h"

#include <dirent.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/base/err.h"
#include "common/base/sha256.h"

/* Most entries one eviction pass looks at; beyond it the oldest found so
 * far are still evicted, the pass just sees fewer. */
#define CACHE_SCAN_MAX 100000u
/* A temporary older than this belongs to a crashed filler. */
#define CACHE_STALE_TMP_SECS 3600

/* A sample-namespace eviction pass is due after this part of the budget
 * was committed since the last one (cache.h). */
#define CACHE_PASS_FRACTION 64
/* The mtime of a new sample entry until its first hit (cache.h): one fixed
 * old time, so unread entries tie and go by name, and a pass over more
 * data than the budget keeps a stable part (a clock would make it LRU). */
#define CACHE_INSERT_STAMP_SECS 86400

struct sl_cache_s {
    int dir_fd; /* <dir>/<namespace>, O_DIRECTORY */
    uint64_t max_bytes;
    sl_cache_ns_e ns;
    /* The sample namespace: <dir>/shards, whose bytes come off its budget;
     * -1 for the shard namespace. */
    int shards_fd;
    _Atomic uint64_t since_pass; /* sample bytes committed since the last pass */
    _Atomic uint64_t evictions;
    _Atomic uint64_t evicted_bytes;
};

static const char *const ns_dirs[SL_CACHE_NS__COUNT] = {"shards", "samples"};

static int mkdir_p(char *path)
{
    for (char *p = path + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            int rc = mkdir(path, 0755);
            *p = '/';
            if (rc < 0 && errno != EEXIST) {
                return -errno;
            }
        }
    }
    return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

int sl_cache_new(const char *dir, uint64_t max_bytes, sl_cache_t **ret, char *err, size_t errlen)
{
    return sl_cache_open(dir, SL_CACHE_NS_SHARDS, max_bytes, ret, err, errlen);
}

int sl_cache_open(const char *dir, sl_cache_ns_e ns, uint64_t max_bytes, sl_cache_t **ret,
                  char *err, size_t errlen)
{
    if (max_bytes == 0) {
        return sl_err(err, errlen, -EINVAL, "cache_bytes: must be > 0");
    }
    if ((int)ns < 0 || ns >= SL_CACHE_NS__COUNT) {
        return sl_err(err, errlen, -EINVAL, "cache namespace %d: unknown", (int)ns);
    }
    char path[4096];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, ns_dirs[ns]);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        return sl_err(err, errlen, -ENAMETOOLONG, "cache_dir: too long");
    }
    int rc = mkdir_p(path);
    if (rc < 0) {
        return sl_err(err, errlen, rc, "cache_dir '%s': %s", dir, strerror(-rc));
    }
    sl_cache_t *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    c->max_bytes = max_bytes;
    c->ns = ns;
    c->shards_fd = -1;
    c->dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->dir_fd < 0) {
        rc = sl_err(err, errlen, -errno, "cache_dir '%s': %s", path, strerror(errno));
        free(c);
        return rc;
    }
    if (ns == SL_CACHE_NS_SAMPLES) {
        /* The shards' directory may not exist yet (no URL source so far):
         * made here so their bytes are always countable. */
        snprintf(path, sizeof(path), "%s/%s", dir, ns_dirs[SL_CACHE_NS_SHARDS]);
        rc = mkdir_p(path);
        c->shards_fd = rc == 0 ? open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (c->shards_fd < 0) {
            rc = sl_err(err, errlen, rc < 0 ? rc : -errno, "cache_dir '%s': %s", path,
                        strerror(rc < 0 ? -rc : errno));
            close(c->dir_fd);
            free(c);
            return rc;
        }
    }
    *ret = c;
    return 0;
}

void sl_cache_free(sl_cache_t *c)
{
    if (c != NULL) {
        close(c->dir_fd);
        if (c->shards_fd >= 0) {
            close(c->shards_fd);
        }
        free(c);
    }
}

uint64_t sl_cache_max_bytes(const sl_cache_t *c) { return c->max_bytes; }

void sl_cache_key(const char *url, uint64_t tag, char out[SL_CACHE_KEY_MAX])
{
    char hex[65];
    sl_sha256_hex(url, strlen(url), hex);
    snprintf(out, SL_CACHE_KEY_MAX, "%.32s-%016llx", hex, (unsigned long long)tag);
}

int sl_cache_lookup(const sl_cache_t *c, const char *key)
{
    int fd = openat(c->dir_fd, key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return -errno;
    }
    /* mtime is the LRU clock: a hit is a use. */
    futimens(fd, NULL);
    return fd;
}

/* The lock file still names fd's inode: a remover (sl_cache_remove) or an
 * eviction unlinks it, so a lock taken on an unlinked one is taken again. */
static int lock_current(const sl_cache_t *c, const char *name, int fd)
{
    struct stat a, b;
    if (fstat(fd, &a) < 0) {
        return -errno;
    }
    if (fstatat(c->dir_fd, name, &b, AT_SYMLINK_NOFOLLOW) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static int lock_entry(const sl_cache_t *c, const char *key)
{
    char name[SL_CACHE_KEY_MAX + 8];
    snprintf(name, sizeof(name), ".%s.lock", key);
    for (;;) {
        int fd = openat(c->dir_fd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) {
            return -errno;
        }
        int rc = 0;
        while (flock(fd, LOCK_EX) < 0) {
            if (errno != EINTR) {
                rc = -errno;
                break;
            }
        }
        rc = rc < 0 ? rc : lock_current(c, name, fd);
        if (rc > 0) {
            return fd;
        }
        close(fd);
        if (rc < 0) {
            return rc;
        }
    }
}

int sl_cache_fill_begin(const sl_cache_t *c, const char *key, sl_cache_fill_t *fill, bool *ret_hit)
{
    *ret_hit = false;
    memset(fill, 0, sizeof(*fill));
    fill->tmp_fd = -1;
    fill->lock_fd = -1;
    /* Sample entries: one key, one content; no lock (cache.h). */
    fill->lock_fd = c->ns == SL_CACHE_NS_SAMPLES ? -1 : lock_entry(c, key);
    if (fill->lock_fd < 0 && c->ns != SL_CACHE_NS_SAMPLES) {
        return fill->lock_fd;
    }
    int fd = c->ns == SL_CACHE_NS_SAMPLES ? -ENOENT : sl_cache_lookup(c, key);
    if (fd >= 0) {
        /* Another filler finished while we waited. */
        close(fill->lock_fd);
        fill->lock_fd = -1;
        *ret_hit = true;
        return fd;
    }
    snprintf(fill->key, sizeof(fill->key), "%s", key);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(fill->tmp, sizeof(fill->tmp), ".tmp-%.40s-%d-%ld", key, (int)getpid(),
             (long)(ts.tv_nsec & 0xffffff));
    fill->tmp_fd = openat(c->dir_fd, fill->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fill->tmp_fd < 0) {
        int rc = -errno;
        if (fill->lock_fd >= 0) {
            close(fill->lock_fd);
        }
        fill->lock_fd = -1;
        return rc;
    }
    return 0;
}

void sl_cache_fill_abort(const sl_cache_t *c, sl_cache_fill_t *fill)
{
    if (fill->tmp_fd >= 0) {
        close(fill->tmp_fd);
        unlinkat(c->dir_fd, fill->tmp, 0);
        fill->tmp_fd = -1;
    }
    if (fill->lock_fd >= 0) {
        close(fill->lock_fd);
        fill->lock_fd = -1;
    }
}

int sl_cache_fill_commit(const sl_cache_t *c, sl_cache_fill_t *fill)
{
    int rc = 0;
    if (fdatasync(fill->tmp_fd) < 0 || renameat(c->dir_fd, fill->tmp, c->dir_fd, fill->key) < 0) {
        rc = -errno;
        sl_cache_fill_abort(c, fill);
        return rc;
    }
    close(fill->tmp_fd);
    fill->tmp_fd = -1;
    int fd = sl_cache_lookup(c, fill->key);
    close(fill->lock_fd);
    fill->lock_fd = -1;
    if (fd >= 0) {
        sl_cache_evict(c, fill->key);
    }
    return fd;
}

typedef struct ent_s {
    char name[SL_CACHE_KEY_MAX];
    uint64_t size;
    struct timespec mtime;
} ent_t;

static int cmp_age(const void *a, const void *b)
{
    const ent_t *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) {
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    }
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) {
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    }
    return strcmp(x->name, y->name);
}

/* What an entry takes from the budget: its size; a partial entry
 * (partial.h: a sparse file) what it holds, its allocated blocks. */
static uint64_t entry_bytes(const char *name, const struct stat *st)
{
    size_t n = strlen(name);
    uint64_t blocks = (uint64_t)st->st_blocks * 512;
    if (n > 5 && strcmp(name + n - 5, ".part") == 0 && blocks < (uint64_t)st->st_size) {
        return blocks;
    }
    return (uint64_t)st->st_size;
}

/* Lists complete entries of directory dir_fd into *ret (malloc'd; NULL:
 * only the total); removes stale temporaries. */
static int scan_dir(int dir_fd, ent_t **ret, size_t *ret_n, uint64_t *ret_total)
{
    int dfd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d == NULL) {
        int rc = -errno;
        if (dfd >= 0) {
            close(dfd);
        }
        return rc;
    }
    ent_t *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < CACHE_SCAN_MAX) {
        struct stat st;
        if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
            continue;
        }
        if (strncmp(de->d_name, ".tmp-", 5) == 0) {
            if (now - st.st_mtime > CACHE_STALE_TMP_SECS) {
                unlinkat(dir_fd, de->d_name, 0);
            }
            continue;
        }
        if (de->d_name[0] == '.' || strlen(de->d_name) >= SL_CACHE_KEY_MAX) {
            continue;
        }
        uint64_t bytes = entry_bytes(de->d_name, &st);
        if (ret == NULL) {
            total += bytes;
            continue;
        }
        if (n == cap) {
            size_t ncap = cap == 0 ? 64 : cap * 2;
            ent_t *g = realloc(v, ncap * sizeof(*g));
            if (g == NULL) {
                free(v);
                closedir(d);
                return -ENOMEM;
            }
            v = g;
            cap = ncap;
        }
        memcpy(v[n].name, de->d_name, strlen(de->d_name) + 1); /* length checked above */
        v[n].size = bytes;
        v[n].mtime = st.st_mtim;
        total += v[n].size;
        n++;
    }
    closedir(d);
    if (ret != NULL) {
        *ret = v;
        *ret_n = n;
    }
    *ret_total = total;
    return 0;
}

static int scan(const sl_cache_t *c, ent_t **ret, size_t *ret_n, uint64_t *ret_total)
{
    return scan_dir(c->dir_fd, ret, ret_n, ret_total);
}

/* One eviction pass (sl_cache_evict); *ret_n gets the entries removed. The
 * sample namespace's budget is what the shards leave (cache.h). */
static int evict_pass(const sl_cache_t *c, const char *keep, uint64_t room, uint64_t *ret_n,
                      uint64_t *ret_bytes)
{
    *ret_n = 0;
    *ret_bytes = 0;
    int lfd = openat(c->dir_fd, ".lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (lfd < 0) {
        return -errno;
    }
    while (flock(lfd, LOCK_EX) < 0 && errno == EINTR) {
    }
    ent_t *v = NULL;
    size_t n = 0;
    uint64_t total = 0;
    int rc = scan(c, &v, &n, &total);
    uint64_t shards = 0;
    if (rc == 0 && c->shards_fd >= 0 && scan_dir(c->shards_fd, NULL, NULL, &shards) < 0) {
        shards = 0; /* unreadable: the samples alone are bounded */
    }
    uint64_t budget = shards < c->max_bytes ? c->max_bytes - shards : 0;
    budget = room < budget ? budget - room : 0;
    if (rc == 0) {
        qsort(v, n, sizeof(*v), cmp_age);
        for (size_t i = 0; i < n && total > budget; i++) {
            if (keep != NULL && strcmp(v[i].name, keep) == 0) {
                continue;
            }
            if (unlinkat(c->dir_fd, v[i].name, 0) == 0) {
                char lock[SL_CACHE_KEY_MAX + 8];
                snprintf(lock, sizeof(lock), ".%s.lock", v[i].name);
                unlinkat(c->dir_fd, lock, 0);
                total -= v[i].size;
                *ret_bytes += v[i].size;
                (*ret_n)++;
            }
        }
        free(v);
    }
    close(lfd);
    atomic_fetch_add(&((sl_cache_t *)c)->evictions, *ret_n);
    atomic_fetch_add(&((sl_cache_t *)c)->evicted_bytes, *ret_bytes);
    return rc;
}

int sl_cache_evict(const sl_cache_t *c, const char *keep)
{
    return sl_cache_evict_room(c, keep, 0);
}

int sl_cache_evict_room(const sl_cache_t *c, const char *keep, uint64_t room)
{
    uint64_t n, bytes;
    return evict_pass(c, keep, room, &n, &bytes);
}

uint64_t sl_cache_usage(const sl_cache_t *c)
{
    ent_t *v = NULL;
    size_t n = 0;
    uint64_t total = 0;
    if (scan(c, &v, &n, &total) < 0) {
        return 0;
    }
    free(v);
    return total;
}

int sl_cache_dir_fd(const sl_cache_t *c) { return c->dir_fd; }

uint64_t sl_cache_evictions(const sl_cache_t *c)
{
    return atomic_load(&((sl_cache_t *)c)->evictions);
}

uint64_t sl_cache_evicted_bytes(const sl_cache_t *c)
{
    return atomic_load(&((sl_cache_t *)c)->evicted_bytes);
}

int sl_cache_remove(const sl_cache_t *c, const char *key)
{
    if (c->ns == SL_CACHE_NS_SAMPLES) {
        /* Sample entries have no fill lock (sl_cache_put). */
        return unlinkat(c->dir_fd, key, 0) < 0 ? -errno : 0;
    }
    int lfd = lock_entry(c, key);
    if (lfd < 0) {
        return lfd;
    }
    int rc = unlinkat(c->dir_fd, key, 0) < 0 ? -errno : 0;
    /* The lock file goes with its entry, still held: a filler waiting on it
     * sees it unlinked and locks a new one (lock_entry). */
    char lock[SL_CACHE_KEY_MAX + 8];
    snprintf(lock, sizeof(lock), ".%s.lock", key);
    (void)unlinkat(c->dir_fd, lock, 0);
    close(lfd);
    return rc;
}

static int write_all(int fd, const struct iovec *iov, int niov)
{
    for (int i = 0; i < niov; i++) {
        const uint8_t *p = iov[i].iov_base;
        size_t left = iov[i].iov_len;
        while (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w <= 0) {
                return w < 0 ? -errno : -EIO;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    return 0;
}

/* A sample entry is renamed into place without a sync: its reader checks
 * the checksum in its header (common/pcache), so a file a power cut left
 * torn is refused, not served; a crash before the rename leaves only a
 * temporary. A sync per sample would cost more than most samples. */
static int commit_sample(const sl_cache_t *c, sl_cache_fill_t *fill, uint64_t size,
                         uint64_t *ret_evicted, uint64_t *ret_evicted_bytes)
{
    if (renameat(c->dir_fd, fill->tmp, c->dir_fd, fill->key) < 0) {
        int rc = -errno;
        sl_cache_fill_abort(c, fill);
        return rc;
    }
    /* After the rename: a stale-looking temporary would be a crashed
     * filler's to a concurrent pass. */
    struct timespec old[2] = {{.tv_sec = CACHE_INSERT_STAMP_SECS},
                              {.tv_sec = CACHE_INSERT_STAMP_SECS}};
    (void)futimens(fill->tmp_fd, old);
    close(fill->tmp_fd);
    fill->tmp_fd = -1;
    uint64_t due = c->max_bytes / CACHE_PASS_FRACTION;
    sl_cache_t *m = (sl_cache_t *)c; /* the counters are the only mutable state */
    if (atomic_fetch_add(&m->since_pass, size) + size >= due) {
        atomic_store(&m->since_pass, 0);
        /* The entry is in place: a failed pass is retried by the next. */
        (void)evict_pass(c, fill->key, 0, ret_evicted, ret_evicted_bytes);
    }
    return 0;
}

int sl_cache_put(const sl_cache_t *c, const char *key, const struct iovec *iov, int niov,
                 uint64_t *ret_evicted)
{
    return sl_cache_put_ex(c, key, iov, niov, ret_evicted, NULL);
}

int sl_cache_put_ex(const sl_cache_t *c, const char *key, const struct iovec *iov, int niov,
                    uint64_t *ret_evicted, uint64_t *ret_evicted_bytes)
{
    uint64_t evicted = 0, before = sl_cache_evictions(c);
    uint64_t evicted_bytes = 0, before_bytes = sl_cache_evicted_bytes(c);
    sl_cache_fill_t fill;
    bool hit = false;
    int rc = sl_cache_fill_begin(c, key, &fill, &hit);
    if (rc < 0 || hit) {
        if (hit) {
            close(rc);
        }
        return hit ? 0 : rc;
    }
    uint64_t size = 0;
    for (int i = 0; i < niov; i++) {
        size += iov[i].iov_len;
    }
    rc = write_all(fill.tmp_fd, iov, niov);
    if (rc < 0) {
        sl_cache_fill_abort(c, &fill);
        return rc;
    }
    if (c->ns == SL_CACHE_NS_SAMPLES) {
        rc = commit_sample(c, &fill, size, &evicted, &evicted_bytes);
    } else {
        rc = sl_cache_fill_commit(c, &fill);
        if (rc >= 0) {
            close(rc);
            rc = 0;
        }
        evicted = sl_cache_evictions(c) - before;
        evicted_bytes = sl_cache_evicted_bytes(c) - before_bytes;
    }
    if (ret_evicted != NULL) {
        *ret_evicted = evicted;
    }
    if (ret_evicted_bytes != NULL) {
        *ret_evicted_bytes = evicted_bytes;
    }
    return rc;
}
