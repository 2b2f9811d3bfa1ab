/* partial: range-read bytes kept in the cache as partial entries
 * (partial.h has the format and why it is crash-safe). */
#include "common/remote/partial.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/remote/part_io.h"
#include "common/remote/pclaim.h"

#define PART_MAGIC "SLPART1\n"
#define REC_MAGIC 0x31434552545241ULL /* "ARTREC1" */
#define REC_SIZE 40u
/* An eviction pass after this part of the budget was kept since the last
 * one (a pass per sample would scan the directory per sample); the pass
 * leaves that much room, so the kept bytes never take the directory over
 * the budget (reserve_locked). */
#define PART_EVICT_FRACTION 64
/* What a write of len bytes may add to the file's blocks beyond len: a
 * partly filled block at each end and its record's block. */
#define PART_WRITE_SLACK ((uint64_t)3 * 4096)

typedef struct span_s {
    uint64_t off, end;
} span_t;

struct sl_part_s {
    char key[SL_CACHE_KEY_MAX];
    char name[SL_CACHE_KEY_MAX];
    uint64_t size;
    int fd;
    int refs;
    bool dead;         /* evicted under us: dropped at its last release */
    uint64_t log_seen; /* record slots read so far */
    span_t *held;      /* sorted, disjoint, not touching */
    size_t nheld, cap;
    span_t fly[SL_PART_FLYING]; /* ranges being fetched now (end 0: free) */
    uint64_t used;              /* the table's clock at the last get */
};

struct sl_parts_s {
    const sl_cache_t *cache;
    int dir_fd;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a range landed or a fill's range ended */
    sl_part_t *open[SL_PARTS_OPEN];
    uint64_t clock;
    uint64_t since_evict; /* bytes kept since the last eviction pass */
    uint64_t reserved;    /* the room that pass left */
};

void sl_part_name(const char *key, char out[SL_CACHE_KEY_MAX])
{
    snprintf(out, SL_CACHE_KEY_MAX, "%.49s.part", key); /* the key is 49 characters */
}

static void flock_wait(int fd, int op)
{
    while (flock(fd, op) < 0 && errno == EINTR) {
    }
}

int sl_parts_new(const sl_cache_t *cache, sl_parts_t **ret)
{
    sl_parts_t *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return -ENOMEM;
    }
    t->cache = cache;
    t->dir_fd = sl_cache_dir_fd(cache);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    *ret = t;
    return 0;
}

static void part_close(sl_part_t *p)
{
    if (p->fd >= 0) {
        close(p->fd);
    }
    free(p->held);
    free(p);
}

void sl_parts_free(sl_parts_t *t)
{
    if (t == NULL) {
        return;
    }
    for (unsigned i = 0; i < SL_PARTS_OPEN; i++) {
        if (t->open[i] != NULL) {
            part_close(t->open[i]);
        }
    }
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

/* Under mu: [off, end) is held. */
static void held_add(sl_part_t *p, uint64_t off, uint64_t end)
{
    size_t i = 0;
    while (i < p->nheld && p->held[i].end < off) {
        i++;
    }
    size_t j = i;
    while (j < p->nheld && p->held[j].off <= end) {
        off = p->held[j].off < off ? p->held[j].off : off;
        end = p->held[j].end > end ? p->held[j].end : end;
        j++;
    }
    if (j == i) { /* a new span at i */
        if (p->nheld == p->cap) {
            size_t cap = p->cap ? p->cap * 2 : 16;
            span_t *g = realloc(p->held, cap * sizeof(*g));
            if (g == NULL) {
                return; /* not taken as held: read again, never wrong */
            }
            p->held = g;
            p->cap = cap;
        }
        memmove(&p->held[i + 1], &p->held[i], (p->nheld - i) * sizeof(*p->held));
        p->nheld++;
    } else if (j > i + 1) { /* spans i..j-1 become one */
        memmove(&p->held[i + 1], &p->held[j], (p->nheld - j) * sizeof(*p->held));
        p->nheld -= j - i - 1;
    }
    p->held[i] = (span_t){off, end};
}

/* Under mu: the span holding [off, off + len) whole, or NULL. */
static const span_t *held_find(const sl_part_t *p, uint64_t off, uint64_t len)
{
    size_t lo = 0, hi = p->nheld;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->held[mid].off <= off) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo == 0 || p->held[lo - 1].end < off + len) {
        return NULL;
    }
    return &p->held[lo - 1];
}

/* The hash of [off, off + len) of the object as the file holds it. */
static int hash_range(int fd, uint64_t off, uint64_t len, unsigned char *buf, uint64_t *ret)
{
    uint64_t h = SL_PART_HASH_SEED;
    for (uint64_t at = 0; at < len;) {
        size_t n = len - at < SL_PART_BUF ? (size_t)(len - at) : SL_PART_BUF;
        int rc = sl_part_pread_full(fd, buf, n, SL_PART_DATA + off + at);
        if (rc < 0) {
            return rc;
        }
        h = sl_part_hash_bytes(h, buf, n);
        at += n;
    }
    *ret = sl_part_hash_final(h);
    return 0;
}

static uint64_t rec_hash(const uint64_t rec[5])
{
    return sl_part_hash_final(
        sl_part_hash_bytes(SL_PART_HASH_SEED, (const unsigned char *)rec, 32));
}

/* Reads the record slots written since the last look (by this or another
 * process) and takes the ranges whose bytes check. Not under mu (it reads
 * data); takes mu to add. */
static int refresh(sl_parts_t *t, sl_part_t *p)
{
    struct stat st;
    flock_wait(p->fd, LOCK_SH);
    if (fstat(p->fd, &st) < 0) {
        int rc = -errno;
        flock(p->fd, LOCK_UN);
        return rc;
    }
    uint64_t base = SL_PART_DATA + p->size;
    uint64_t slots = (uint64_t)st.st_size > base ? ((uint64_t)st.st_size - base) / REC_SIZE : 0;
    pthread_mutex_lock(&t->mu);
    uint64_t from = p->log_seen;
    pthread_mutex_unlock(&t->mu);
    unsigned char *buf = from < slots ? malloc(SL_PART_BUF) : NULL;
    if (from < slots && buf == NULL) {
        flock(p->fd, LOCK_UN);
        return -ENOMEM;
    }
    for (uint64_t s = from; s < slots; s++) {
        uint64_t rec[5];
        if (sl_part_pread_full(p->fd, rec, sizeof(rec), base + s * REC_SIZE) < 0) {
            break;
        }
        uint64_t h;
        if (rec[3] != REC_MAGIC || rec[4] != rec_hash(rec) || rec[1] == 0 || rec[0] > p->size ||
            rec[1] > p->size - rec[0]) {
            continue; /* torn or damaged: its range is just not held */
        }
        if (hash_range(p->fd, rec[0], rec[1], buf, &h) < 0 || h != rec[2]) {
            continue; /* the record outlived its bytes (a power cut) */
        }
        pthread_mutex_lock(&t->mu);
        held_add(p, rec[0], rec[0] + rec[1]);
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_lock(&t->mu);
    if (slots > p->log_seen) {
        p->log_seen = slots;
    }
    pthread_mutex_unlock(&t->mu);
    flock(p->fd, LOCK_UN);
    free(buf);
    return 0;
}

/* Opens (creating) the file and checks or writes its header. */
static int part_open(sl_parts_t *t, sl_part_t *p, bool create)
{
    p->fd = openat(t->dir_fd, p->name, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0),
                   0644);
    if (p->fd < 0) {
        return -errno;
    }
    unsigned char want[64] = {0}, have[64];
    uint64_t v[2] = {p->size, 0};
    memcpy(want, PART_MAGIC, 8);
    memcpy(want + 8, v, 8);
    v[1] = sl_part_hash_final(sl_part_hash_bytes(SL_PART_HASH_SEED, want, 16));
    memcpy(want + 16, &v[1], 8);
    flock_wait(p->fd, LOCK_EX);
    struct stat st;
    int rc = fstat(p->fd, &st) < 0 ? -errno : 0;
    if (rc == 0 && ((uint64_t)st.st_size < SL_PART_DATA + p->size ||
                    sl_part_pread_full(p->fd, have, sizeof(have), 0) < 0 ||
                    memcmp(have, want, sizeof(want)) != 0)) {
        /* New, or not an entry of this object (damaged): started over. */
        if (!create) {
            rc = -ENOENT;
        } else if (ftruncate(p->fd, 0) < 0 ||
                   sl_part_pwrite_full(p->fd, want, sizeof(want), 0) < 0 ||
                   ftruncate(p->fd, (off_t)(SL_PART_DATA + p->size)) < 0) {
            rc = -errno;
        }
    }
    flock(p->fd, LOCK_UN);
    if (rc == 0) {
        futimens(p->fd, NULL); /* a use, for the cache's LRU */
        rc = refresh(t, p);
    }
    return rc;
}

/* Under mu: a slot for a new handle (closing the least recently used
 * idle one when all are taken), or -1. */
static int free_slot(sl_parts_t *t)
{
    int best = -1;
    for (unsigned i = 0; i < SL_PARTS_OPEN; i++) {
        if (t->open[i] == NULL) {
            return (int)i;
        }
        if (t->open[i]->refs == 0 && (best < 0 || t->open[i]->used < t->open[best]->used)) {
            best = (int)i;
        }
    }
    if (best >= 0) {
        part_close(t->open[best]);
        t->open[best] = NULL;
    }
    return best;
}

int sl_parts_get(sl_parts_t *t, const char *key, uint64_t size, bool create, sl_part_t **ret)
{
    if (size == 0) {
        return -EINVAL;
    }
    pthread_mutex_lock(&t->mu);
    for (unsigned i = 0; i < SL_PARTS_OPEN; i++) {
        sl_part_t *p = t->open[i];
        if (p == NULL || p->size != size || strcmp(p->key, key) != 0) {
            continue;
        }
        struct stat st;
        if (!p->dead && fstat(p->fd, &st) == 0 && st.st_nlink > 0) {
            p->refs++;
            p->used = ++t->clock;
            pthread_mutex_unlock(&t->mu);
            *ret = p;
            return 0;
        }
        /* Evicted: forget it (at its last release when in use). */
        p->dead = true;
        t->open[i] = NULL;
        if (p->refs == 0) {
            part_close(p);
        }
    }
    pthread_mutex_unlock(&t->mu);
    sl_part_t *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return -ENOMEM;
    }
    snprintf(p->key, sizeof(p->key), "%s", key);
    sl_part_name(key, p->name);
    p->size = size;
    p->refs = 1;
    int rc = part_open(t, p, create);
    if (rc < 0) {
        part_close(p);
        return rc;
    }
    pthread_mutex_lock(&t->mu);
    /* Another thread may have opened it meanwhile: one handle per entry,
     * or each would know only its own ranges in flight and fetch the
     * other's again. */
    for (unsigned i = 0; i < SL_PARTS_OPEN; i++) {
        sl_part_t *o = t->open[i];
        if (o != NULL && !o->dead && o->size == size && strcmp(o->key, key) == 0) {
            o->refs++;
            o->used = ++t->clock;
            pthread_mutex_unlock(&t->mu);
            part_close(p);
            *ret = o;
            return 0;
        }
    }
    int slot = free_slot(t);
    if (slot < 0) {
        pthread_mutex_unlock(&t->mu);
        part_close(p);
        return -EAGAIN;
    }
    t->open[slot] = p;
    p->used = ++t->clock;
    pthread_mutex_unlock(&t->mu);
    *ret = p;
    return 0;
}

void sl_parts_release(sl_parts_t *t, sl_part_t *p)
{
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&t->mu);
    bool drop = --p->refs == 0 && p->dead;
    pthread_mutex_unlock(&t->mu);
    if (drop) {
        part_close(p);
    }
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Under mu: the range in flight overlapping [off, end) first, or NULL. */
static const span_t *flying(const sl_part_t *p, uint64_t off, uint64_t end)
{
    const span_t *best = NULL;
    for (unsigned i = 0; i < SL_PART_FLYING; i++) {
        const span_t *f = &p->fly[i];
        if (f->end > off && f->off < end && (best == NULL || f->off < best->off)) {
            best = f;
        }
    }
    return best;
}

/* Under mu: waits on cv until deadline (monotonic ms); false when past. */
static bool wait_until(sl_parts_t *t, int64_t deadline)
{
    int64_t left = deadline - mono_ms();
    if (left <= 0) {
        return false;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += left / 1000;
    ts.tv_nsec += (left % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    return true;
}

int sl_part_read(sl_parts_t *t, sl_part_t *p, uint64_t off, uint64_t len, int out_fd, long wait_ms)
{
    return sl_part_read_at(t, p, off, len, out_fd, off, wait_ms);
}

int sl_part_read_at(sl_parts_t *t, sl_part_t *p, uint64_t off, uint64_t len, int out_fd,
                    uint64_t out_off, long wait_ms)
{
    if (len == 0 || off > p->size || len > p->size - off) {
        return -ENOENT;
    }
    pthread_mutex_lock(&t->mu);
    bool held = held_find(p, off, len) != NULL;
    pthread_mutex_unlock(&t->mu);
    if (!held) {
        int rc = refresh(t, p);
        if (rc < 0) {
            return rc;
        }
    }
    int64_t deadline = mono_ms() + (wait_ms > 0 ? wait_ms : 0);
    pthread_mutex_lock(&t->mu);
    while (!(held = held_find(p, off, len) != NULL) && flying(p, off, off + len) != NULL &&
           wait_until(t, deadline)) {
    }
    pthread_mutex_unlock(&t->mu);
    if (!held) {
        return -ENOENT;
    }
    unsigned char *buf = malloc(SL_PART_BUF);
    if (buf == NULL) {
        return -ENOMEM;
    }
    int rc = sl_part_copy_range(p->fd, SL_PART_DATA + off, out_fd, out_off, len, buf, NULL);
    free(buf);
    return rc;
}

/* Under mu: marks [off, end) in flight; its slot, or -1 (all taken: the
 * range is fetched unmarked, at worst twice). */
static int fly_add(sl_part_t *p, uint64_t off, uint64_t end)
{
    for (unsigned i = 0; i < SL_PART_FLYING; i++) {
        if (p->fly[i].end == 0) {
            p->fly[i] = (span_t){off, end};
            return (int)i;
        }
    }
    return -1;
}

/* The fetch in fly slot (-1: unmarked) ended: waiters look again. */
static void fly_end(sl_parts_t *t, sl_part_t *p, int slot)
{
    pthread_mutex_lock(&t->mu);
    if (slot >= 0) {
        p->fly[slot] = (span_t){0, 0};
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* Another process of the host fetching the range at off: its claim
 * (pclaim.h) ".claim-<key>+<off>", so that process's bytes are waited for
 * (up to wait_ms, or the holder's deadline) rather than fetched again.
 * Returns 1: fetch it (*c holds the claim, or none: no claim possible, or
 * the wait ended); 0: it is held now (*c holds nothing). */
static int claim_range(sl_parts_t *t, sl_part_t *p, uint64_t off, long wait_ms, sl_pclaim_t *c)
{
    /* Too long for a claim (an offset past 2^56): fetched unclaimed. */
    char name[80];
    snprintf(name, sizeof(name), "%.49s+%llx", p->key, (unsigned long long)off);
    int64_t start = mono_ms(), waited_us = 0;
    for (;;) {
        sl_pclaim_holder_t h;
        int rc = sl_pclaim_try(t->dir_fd, name, wait_ms, c, &h);
        if (rc == 0) {
            /* The holder (if any) kept its bytes before it let go. */
            bool held = refresh(t, p) == 0;
            pthread_mutex_lock(&t->mu);
            held = held && held_find(p, off, 1) != NULL;
            pthread_mutex_unlock(&t->mu);
            if (held) {
                sl_pclaim_release(t->dir_fd, c);
            }
            return !held;
        }
        if (rc != -EBUSY || sl_pclaim_expired(&h) || mono_ms() - start >= wait_ms) {
            return 1;
        }
        int64_t us = sl_pclaim_backoff_us(waited_us);
        struct timespec nap = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
        nanosleep(&nap, NULL);
        waited_us += us;
    }
}

int sl_part_read_through(sl_parts_t *t, sl_part_t *p, uint64_t off, uint64_t len, int out_fd,
                         long wait_ms, sl_part_fetch_fn fetch, void *ctx, bool *ret_whole)
{
    *ret_whole = false;
    if (len == 0 || off > p->size || len > p->size - off) {
        return -EINVAL;
    }
    uint64_t end = off + len, at = off;
    int rc = refresh(t, p), mfd = -1;
    unsigned char *buf = malloc(SL_PART_BUF);
    if (buf == NULL) {
        return -ENOMEM;
    }
    /* Each range in flight gets the whole wait: a deadline for the call
     * would be spent on the first wait, and every later flight met in
     * this range would be fetched a second time at once. */
    int64_t deadline = 0;
    uint64_t waiting_at = UINT64_MAX;
    while (rc >= 0 && at < end) {
        pthread_mutex_lock(&t->mu);
        const span_t *h = held_find(p, at, 1);
        if (h != NULL) { /* held from at: copied */
            uint64_t to = h->end < end ? h->end : end;
            pthread_mutex_unlock(&t->mu);
            if (out_fd >= 0) {
                rc = sl_part_copy_range(p->fd, SL_PART_DATA + at, out_fd, at, to - at, buf, NULL);
            }
            at = to;
            continue;
        }
        const span_t *f = flying(p, at, at + 1);
        if (f != NULL && waiting_at != at) {
            waiting_at = at;
            deadline = mono_ms() + (wait_ms > 0 ? wait_ms : 0);
        }
        if (f != NULL && wait_until(t, deadline)) {
            pthread_mutex_unlock(&t->mu); /* someone fetches it: looked at again */
            continue;
        }
        /* A hole (or one in flight too long): up to the next held or
         * flying byte, fetched here. */
        uint64_t to = end;
        for (size_t i = 0; i < p->nheld; i++) {
            if (p->held[i].off > at && p->held[i].off < to) {
                to = p->held[i].off;
            }
        }
        const span_t *nf = flying(p, at + 1, to);
        if (f == NULL && nf != NULL && nf->off > at && nf->off < to) {
            to = nf->off;
        }
        int slot = fly_add(p, at, to);
        pthread_mutex_unlock(&t->mu);
        sl_pclaim_t claim;
        sl_pclaim_init(&claim);
        if (!claim_range(t, p, at, wait_ms, &claim)) {
            fly_end(t, p, slot);
            continue; /* another process kept it meanwhile: copied from the entry */
        }
        int dst = out_fd;
        if (dst < 0) { /* no reader: a scratch file per fetch */
            if (mfd < 0) {
                mfd = memfd_create("sluice-part", MFD_CLOEXEC);
            }
            dst = mfd;
            rc = mfd < 0 || ftruncate(mfd, 0) < 0 ? -errno : 0;
        }
        if (rc >= 0) {
            rc = fetch(ctx, at, to - at, dst);
        }
        if (rc >= 0) {
            int w = sl_part_write(t, p, dst, at, at, to - at);
            if (w == 1) {
                *ret_whole = true;
            } else if (w < 0 && out_fd < 0) {
                rc = w; /* a fill keeps nothing else */
            }
        }
        sl_pclaim_release(t->dir_fd, &claim); /* after the keep: a waiter finds the bytes */
        fly_end(t, p, slot);
        at = to;
    }
    if (mfd >= 0) {
        close(mfd);
    }
    free(buf);
    return rc < 0 ? rc : 0;
}

/* Under the file's exclusive lock: the record of [off, off + len) into
 * the next whole slot. */
static int append_record(sl_part_t *p, uint64_t off, uint64_t len, uint64_t h)
{
    uint64_t rec[5] = {off, len, h, REC_MAGIC, 0};
    rec[4] = rec_hash(rec);
    flock_wait(p->fd, LOCK_EX);
    struct stat st;
    int rc = fstat(p->fd, &st) < 0 ? -errno : 0;
    if (rc == 0) {
        uint64_t base = SL_PART_DATA + p->size;
        uint64_t used = (uint64_t)st.st_size > base ? (uint64_t)st.st_size - base : 0;
        uint64_t slot = (used + REC_SIZE - 1) / REC_SIZE; /* past a torn one */
        rc = sl_part_pwrite_full(p->fd, rec, sizeof(rec), base + slot * REC_SIZE);
    }
    flock(p->fd, LOCK_UN);
    return rc;
}

/* Under mu: add bytes are about to be kept. The room an eviction pass
 * must leave first (0: none due): the bytes kept since the last pass stay
 * within the room it left. */
static uint64_t reserve_locked(sl_parts_t *t, uint64_t add)
{
    if (t->since_evict + add <= t->reserved) {
        t->since_evict += add;
        return 0;
    }
    uint64_t due = sl_cache_max_bytes(t->cache) / PART_EVICT_FRACTION;
    t->reserved = add > due ? add : due;
    t->since_evict = add;
    return t->reserved;
}

int sl_part_write(sl_parts_t *t, sl_part_t *p, int src_fd, uint64_t src_off, uint64_t off,
                  uint64_t len)
{
    if (len == 0 || off > p->size || len > p->size - off) {
        return -EINVAL;
    }
    struct stat st;
    if (fstat(p->fd, &st) < 0 || st.st_nlink == 0) {
        pthread_mutex_lock(&t->mu);
        p->dead = true; /* the next get opens a new entry */
        for (unsigned i = 0; i < SL_PARTS_OPEN; i++) {
            if (t->open[i] == p) {
                t->open[i] = NULL;
            }
        }
        pthread_mutex_unlock(&t->mu);
        return -ESTALE;
    }
    uint64_t add = len + PART_WRITE_SLACK, max = sl_cache_max_bytes(t->cache);
    if ((uint64_t)st.st_blocks * 512 + add > max - max / PART_EVICT_FRACTION) {
        return -ENOSPC; /* as large as the budget allows (an object over it) */
    }
    pthread_mutex_lock(&t->mu);
    uint64_t room = reserve_locked(t, add);
    pthread_mutex_unlock(&t->mu);
    if (room > 0) {
        (void)sl_cache_evict_room(t->cache, p->name, room); /* a failed pass: the next one */
    }
    unsigned char *buf = malloc(SL_PART_BUF);
    if (buf == NULL) {
        return -ENOMEM;
    }
    uint64_t h;
    /* The bytes first, then their record (partial.h). */
    int rc = sl_part_copy_range(src_fd, src_off, p->fd, SL_PART_DATA + off, len, buf, &h);
    free(buf);
    if (rc == 0) {
        rc = append_record(p, off, len, h);
    }
    if (rc < 0) {
        return rc;
    }
    pthread_mutex_lock(&t->mu);
    held_add(p, off, off + len);
    bool whole = p->nheld == 1 && p->held[0].off == 0 && p->held[0].end == p->size;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return whole ? 1 : 0;
}

bool sl_part_missing(sl_parts_t *t, sl_part_t *p, uint64_t from, uint64_t max, uint64_t *ret_off,
                     uint64_t *ret_len)
{
    (void)refresh(t, p); /* what other processes kept: not fetched again */
    pthread_mutex_lock(&t->mu);
    uint64_t at = from;
    bool found = false;
    for (size_t i = 0; i <= p->nheld && at < p->size; i++) {
        uint64_t hole_end = i < p->nheld ? p->held[i].off : p->size;
        if (i < p->nheld && p->held[i].end <= at) {
            continue;
        }
        if (at < hole_end) {
            *ret_off = at;
            *ret_len = hole_end - at < max ? hole_end - at : max;
            found = true;
            break;
        }
        at = p->held[i].end;
    }
    pthread_mutex_unlock(&t->mu);
    return found;
}

uint64_t sl_part_held(sl_parts_t *t, sl_part_t *p)
{
    pthread_mutex_lock(&t->mu);
    uint64_t n = 0;
    for (size_t i = 0; i < p->nheld; i++) {
        n += p->held[i].end - p->held[i].off;
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

int sl_part_copy_out(sl_parts_t *t, sl_part_t *p, int fd)
{
    pthread_mutex_lock(&t->mu);
    bool whole = p->nheld == 1 && p->held[0].off == 0 && p->held[0].end == p->size;
    pthread_mutex_unlock(&t->mu);
    if (!whole) {
        return -ENOENT;
    }
    /* In the kernel when it can (the same file system), else by hand. */
    loff_t in = (loff_t)SL_PART_DATA, out = 0;
    uint64_t left = p->size;
    while (left > 0) {
        ssize_t k = copy_file_range(p->fd, &in, fd, &out, left, 0);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            break;
        }
        left -= (uint64_t)k;
    }
    if (left == 0) {
        return 0;
    }
    unsigned char *buf = malloc(SL_PART_BUF);
    if (buf == NULL) {
        return -ENOMEM;
    }
    uint64_t done = p->size - left;
    int rc = sl_part_copy_range(p->fd, SL_PART_DATA + done, fd, done, left, buf, NULL);
    free(buf);
    return rc;
}

void sl_part_remove(sl_parts_t *t, sl_part_t *p)
{
    pthread_mutex_lock(&t->mu);
    p->dead = true;
    for (unsigned i = 0; i < SL_PARTS_OPEN; i++) {
        if (t->open[i] == p) {
            t->open[i] = NULL;
        }
    }
    pthread_mutex_unlock(&t->mu);
    /* Only while the name is still this file (not a newer entry). */
    struct stat a, b;
    if (fstat(p->fd, &a) == 0 && fstatat(t->dir_fd, p->name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
        a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
        unlinkat(t->dir_fd, p->name, 0);
    }
    sl_parts_release(t, p);
}
