#include "dispatcher/journal/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/file.h"
#include "common/base/err.h"

#define MAGIC 0x314a4c53u /* "SLJ1" little endian */
#define HDR 16

struct disp_journal_s {
    char dir[PATH_MAX];
    char log_path[PATH_MAX];
    char snap_path[PATH_MAX];
    int log_fd;
    uint64_t log_bytes; /* the caller's lock, like every append */

    /* Group commit. Records are numbered 1, 2, ... as they are appended;
     * `synced` is the last one a finished sync (or compaction) covered.
     * One sync runs at a time, on the thread of a waiter, without any lock.
     * [bad_lo, bad_hi]: records a failed sync covered (bad_hi = UINT64_MAX
     * while the journal is broken: from the failure to the next compaction);
     * an empty range has bad_lo > bad_hi. A later failure widens the range
     * instead of replacing it, so a waiter that arrives late still learns
     * that its record failed (and perhaps, wrongly, that one between the two
     * failures did: the safe side). */
    pthread_mutex_t mu; /* the fields below */
    pthread_cond_t cv;  /* a sync finished */
    uint64_t appended;
    uint64_t synced;
    int syncing;
    uint64_t bad_lo, bad_hi;
    disp_journal_sync_fn sync_fn;
    void *sync_ctx;
};

/* CRC-32C (Castagnoli), bitwise: journal records are small and rare. */
static uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++) {
            crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
        }
    }
    return ~crc;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t record_crc(uint32_t type, const uint8_t *payload, size_t len)
{
    uint8_t t[4];
    put32(t, type);
    return crc32c(crc32c(0, t, 4), payload, len);
}

static int write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int write_record(int fd, uint32_t type, const void *payload, size_t len)
{
    if (len > DISP_JOURNAL_MAX_RECORD) {
        return -E2BIG;
    }
    uint8_t hdr[HDR];
    put32(hdr, MAGIC);
    put32(hdr + 4, (uint32_t)len);
    put32(hdr + 8, type);
    put32(hdr + 12, record_crc(type, payload, len));
    int rc = write_all(fd, hdr, HDR);
    if (rc == 0 && len > 0) {
        rc = write_all(fd, payload, len);
    }
    return rc;
}

static int sync_fd(void *ctx, int fd, uint64_t upto)
{
    (void)ctx;
    (void)upto;
    return fdatasync(fd) == 0 ? 0 : -errno;
}

int disp_journal_open(const char *dir, disp_journal_t **ret, char *err, size_t errlen)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        return sl_err(err, errlen, -errno, "journal: cannot create '%s': %s", dir,
                      strerror(errno));
    }
    disp_journal_t *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int n1 = snprintf(j->dir, sizeof(j->dir), "%s", dir);
    int n2 = snprintf(j->log_path, sizeof(j->log_path), "%s/journal.log", dir);
    int n3 = snprintf(j->snap_path, sizeof(j->snap_path), "%s/snapshot", dir);
    if (n1 >= (int)sizeof(j->dir) || n2 >= (int)sizeof(j->log_path) ||
        n3 >= (int)sizeof(j->snap_path)) {
        free(j);
        return sl_err(err, errlen, -ENAMETOOLONG, "journal: path '%s' too long", dir);
    }
    j->log_fd = open(j->log_path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (j->log_fd < 0) {
        int e = errno;
        free(j);
        return sl_err(err, errlen, -e, "journal: cannot open '%s/journal.log': %s", dir,
                      strerror(e));
    }
    /* One dispatcher per journal: with a per-user default directory, two
     * started by hand would otherwise interleave their records. The lock
     * goes with the process (a SIGKILLed one frees it). */
    if (flock(j->log_fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(j->log_fd);
        free(j);
        if (e == EWOULDBLOCK) {
            return sl_err(err, errlen, -EBUSY,
                          "journal: '%s' is in use by another sluice-dispatcher (give each "
                          "its own --journal DIR, or --journal none)",
                          dir);
        }
        return sl_err(err, errlen, -e, "journal: cannot lock '%s/journal.log': %s", dir,
                      strerror(e));
    }
    struct stat st;
    if (fstat(j->log_fd, &st) == 0) {
        j->log_bytes = (uint64_t)st.st_size;
    }
    int rc = pthread_mutex_init(&j->mu, NULL);
    if (rc == 0 && (rc = pthread_cond_init(&j->cv, NULL)) != 0) {
        pthread_mutex_destroy(&j->mu);
    }
    if (rc != 0) {
        close(j->log_fd);
        free(j);
        return sl_err(err, errlen, -rc, "journal: %s", strerror(rc));
    }
    j->bad_lo = UINT64_MAX;
    j->sync_fn = sync_fd;
    *ret = j;
    return 0;
}

void disp_journal_close(disp_journal_t *j)
{
    if (j == NULL) {
        return;
    }
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    close(j->log_fd);
    free(j);
}

void disp_journal_set_sync(disp_journal_t *j, disp_journal_sync_fn fn, void *ctx)
{
    j->sync_fn = fn != NULL ? fn : sync_fd;
    j->sync_ctx = fn != NULL ? ctx : NULL;
}

/* A journal is compacted into a snapshot as it grows; this bound only keeps
 * a wrong path (a device, a huge unrelated file) from exhausting memory. */
#define JOURNAL_MAX_BYTES ((size_t)1 << 36)

static int read_file(const char *path, uint8_t **ret, size_t *ret_len, char *err, size_t errlen)
{
    char *buf = NULL;
    int rc = sl_file_read(path, JOURNAL_MAX_BYTES, &buf, ret_len, err, errlen);
    *ret = (uint8_t *)buf;
    return rc;
}

/* Is there a valid record anywhere at or after off? (Distinguishes a
 * corrupt middle from a torn tail.) */
static int valid_record_after(const uint8_t *buf, size_t n, size_t off)
{
    for (size_t o = off; o + HDR <= n; o++) {
        if (get32(buf + o) != MAGIC) {
            continue;
        }
        uint32_t len = get32(buf + o + 4);
        if (len > DISP_JOURNAL_MAX_RECORD || o + HDR + len > n) {
            continue;
        }
        if (record_crc(get32(buf + o + 8), buf + o + HDR, len) == get32(buf + o + 12)) {
            return 1;
        }
    }
    return 0;
}

/* Walks one file. Returns 0 and *ret_good = bytes of valid records, or the
 * callback's code, or -EBADMSG for a corrupt middle. */
static int replay_buf(const char *path, const uint8_t *buf, size_t n, disp_journal_fn fn,
                      void *ctx, size_t *ret_good, char *err, size_t errlen)
{
    size_t off = 0;
    while (off < n) {
        int ok = off + HDR <= n && get32(buf + off) == MAGIC;
        uint32_t len = ok ? get32(buf + off + 4) : 0;
        ok = ok && len <= DISP_JOURNAL_MAX_RECORD && off + HDR + len <= n;
        ok = ok && record_crc(get32(buf + off + 8), buf + off + HDR, len) == get32(buf + off + 12);
        if (!ok) {
            if (valid_record_after(buf, n, off + 1)) {
                return sl_err(err, errlen, -EBADMSG,
                              "journal '%s' is corrupt at byte %zu with valid records after "
                              "it: refusing to start (move the file away to start empty)",
                              path, off);
            }
            break; /* torn tail */
        }
        int rc = fn(ctx, get32(buf + off + 8), buf + off + HDR, len);
        if (rc != 0) {
            return sl_err(err, errlen, rc < 0 ? rc : -EINVAL,
                          "journal '%s': record at byte %zu was refused", path, off);
        }
        off += HDR + len;
    }
    *ret_good = off;
    return 0;
}

int disp_journal_replay(disp_journal_t *j, disp_journal_fn fn, void *ctx, size_t *ret_truncated,
                        char *err, size_t errlen)
{
    *ret_truncated = 0;
    uint8_t *buf = NULL;
    size_t n = 0, good = 0;
    char why[512];
    int rc = read_file(j->snap_path, &buf, &n, why, sizeof(why));
    if (rc == 0) {
        rc = replay_buf(j->snap_path, buf, n, fn, ctx, &good, err, errlen);
        free(buf);
        if (rc < 0) {
            return rc;
        }
        if (good != n) {
            /* Snapshots are renamed into place whole: a bad one is not a torn write. */
            return sl_err(err, errlen, -EBADMSG, "snapshot '%s' is corrupt at byte %zu",
                          j->snap_path, good);
        }
    } else if (rc != -ENOENT) {
        return sl_err(err, errlen, rc, "journal: %s", why);
    }
    rc = read_file(j->log_path, &buf, &n, why, sizeof(why));
    if (rc < 0) {
        return sl_err(err, errlen, rc, "journal: %s", why);
    }
    rc = replay_buf(j->log_path, buf, n, fn, ctx, &good, err, errlen);
    free(buf);
    if (rc < 0) {
        return rc;
    }
    if (good < n) {
        if (ftruncate(j->log_fd, (off_t)good) < 0 || fdatasync(j->log_fd) < 0) {
            return sl_err(err, errlen, -errno, "cannot truncate the torn tail of '%s': %s",
                          j->log_path, strerror(errno));
        }
        *ret_truncated = n - good;
    }
    j->log_bytes = good;
    return 0;
}

/* A sync failed, or the log may hold a torn record: every record not yet
 * known durable fails, and so does every later one until a compaction
 * rewrites the state (j->mu held). */
static void mark_broken(disp_journal_t *j)
{
    if (j->bad_lo > j->bad_hi) {
        j->bad_lo = j->synced + 1;
    }
    j->bad_hi = UINT64_MAX;
}

int disp_journal_append(disp_journal_t *j, uint32_t type, const void *payload, size_t len,
                        uint64_t *ret_seq)
{
    int rc = write_record(j->log_fd, type, payload, len);
    if (rc != 0) {
        /* Cut what part of it went out, or records appended after it would
         * sit behind a bad one (a corrupt middle: no restart). */
        if (ftruncate(j->log_fd, (off_t)j->log_bytes) != 0) {
            pthread_mutex_lock(&j->mu);
            mark_broken(j);
            pthread_mutex_unlock(&j->mu);
        }
        return rc;
    }
    j->log_bytes += HDR + len;
    pthread_mutex_lock(&j->mu);
    uint64_t seq = ++j->appended;
    pthread_mutex_unlock(&j->mu);
    if (ret_seq != NULL) {
        *ret_seq = seq;
    }
    return 0;
}

uint64_t disp_journal_last(disp_journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    uint64_t seq = j->appended;
    pthread_mutex_unlock(&j->mu);
    return seq;
}

int disp_journal_wait(disp_journal_t *j, uint64_t seq)
{
    int rc = 0;
    pthread_mutex_lock(&j->mu);
    seq = seq < j->appended ? seq : j->appended; /* no waiting for records never made */
    for (;;) {
        if (seq >= j->bad_lo && seq <= j->bad_hi) {
            rc = -EIO;
            break;
        }
        if (seq <= j->synced) {
            break;
        }
        if (j->syncing) {
            pthread_cond_wait(&j->cv, &j->mu);
            continue;
        }
        /* Nobody is syncing: this thread does, for everything appended
         * so far (every record <= upto has been written). */
        uint64_t upto = j->appended;
        j->syncing = 1;
        pthread_mutex_unlock(&j->mu);
        int src = j->sync_fn(j->sync_ctx, j->log_fd, upto);
        pthread_mutex_lock(&j->mu);
        j->syncing = 0;
        if (src != 0) {
            mark_broken(j);
        } else if (upto > j->synced) {
            j->synced = upto;
        }
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int disp_journal_broken(disp_journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    int broken = j->bad_hi == UINT64_MAX;
    pthread_mutex_unlock(&j->mu);
    return broken;
}

static int emit_to_fd(void *emit_ctx, uint32_t type, const void *payload, size_t len)
{
    return write_record(*(int *)emit_ctx, type, payload, len);
}

int disp_journal_compact(disp_journal_t *j, disp_journal_writer_fn writer, void *ctx, char *err,
                         size_t errlen)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", j->snap_path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return sl_err(err, errlen, -errno, "cannot write '%s': %s", tmp, strerror(errno));
    }
    int rc = writer(ctx, emit_to_fd, &fd);
    if (rc == 0 && fsync(fd) < 0) {
        rc = -errno;
    }
    close(fd);
    if (rc == 0 && rename(tmp, j->snap_path) < 0) {
        rc = -errno;
    }
    if (rc < 0) {
        unlink(tmp);
        return sl_err(err, errlen, rc, "compaction failed: %s", strerror(-rc));
    }
    /* The directory entry must be durable before the log is emptied. */
    int dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    if (ftruncate(j->log_fd, 0) < 0 || fdatasync(j->log_fd) < 0) {
        return sl_err(err, errlen, -errno, "cannot empty '%s': %s", j->log_path,
                      strerror(errno));
    }
    j->log_bytes = 0;
    /* The snapshot holds the effect of every record appended so far (the
     * caller's lock keeps appends out): all of them are durable now, and a
     * broken journal is whole again. The snapshot takes a number of its
     * own, so a reply that appended nothing and waits for the last number
     * (a retried ack) is not taken for one of the records that failed. */
    pthread_mutex_lock(&j->mu);
    if (j->bad_hi == UINT64_MAX) {
        j->bad_hi = j->appended;
    }
    j->synced = ++j->appended;
    pthread_mutex_unlock(&j->mu);
    return 0;
}

uint64_t disp_journal_log_bytes(const disp_journal_t *j) { return j->log_bytes; }
