/* pcache: the prefix cache's entries (pcache.h). */
#include "common/pcache/pcache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/base/clock.h"
#include "common/base/err.h"
#include "common/base/sha256.h"
#include "common/remote/pclaim.h"
#include "common/sample/codec.h"
#include "common/spec/spec_layout.h"
#include "common/spec/spec_prefix.h"

/* The header, little-endian at fixed offsets. */
enum {
    H_MAGIC = 0,
    H_VERSION = 4,
    H_PREFIX = 8,
    H_FP = 40,
    H_INDEX = 48,
    H_DTYPE = 56,
    H_LAYOUT = 57,
    H_CODEC = 58,
    H_H = 60,
    H_W = 64,
    H_C = 68,
    H_RAW = 72,
    H_PAYLOAD = 80,
    H_SUM = 88,
    H_SIZE = 96,
};

typedef struct pc_thread_s {
    sl_codec_t *z;
    uint8_t *buf; /* an entry's payload as read */
    size_t cap;
    sl_pclaim_t claim; /* the key this thread computes, or none */
    uint64_t claim_index;
} pc_thread_t;

struct sl_pcache_s {
    sl_cache_t *store;
    uint8_t prefix_hash[SL_PREFIX_HASH_LEN];
    char hex[33]; /* the first 16 bytes of prefix_hash: the entry names' start */
    uint64_t fingerprint;
    uint32_t prefix;
    unsigned nthreads;
    pc_thread_t *th;
    int64_t claim_ms; /* 0: no claims */
    _Atomic uint64_t hits, misses, bytes_read, bytes_written, evictions, store_errors, corrupt;
    _Atomic uint64_t waited, claim_timeouts;
    _Atomic uint64_t bytes_evicted;
    /* The hits' timings (pcache.h sl_pcache_stats_t): one lock per hit,
     * small beside the hit's open, read and checksum. */
    pthread_mutex_t cost_mu;
    uint64_t read_ns;
    double read_bytes_sq, read_bytes_ns;
};

/* This thread's CPU time, ns: a hit's cost without the waits of a shared
 * machine, like the profiles' CPU s per sample it is compared with. */
static uint64_t thread_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0) {
        return 0;
    }
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        v |= (uint32_t)p[i] << (8 * i);
    }
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v |= (uint64_t)p[i] << (8 * i);
    }
    return v;
}

/* FNV-1a over 8-byte words (then the tail): finds torn and flipped bytes
 * at memory speed; not a defence against a forger (the directory is the
 * worker's own). */
static uint64_t checksum(uint64_t h, const uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
    }
    for (; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    return h;
}

static uint64_t entry_sum(const uint8_t *hdr, const uint8_t *payload, size_t n)
{
    return checksum(checksum(0xcbf29ce484222325ULL, hdr, H_SUM), payload, n);
}

static void entry_name(const sl_pcache_t *pc, uint64_t index, char out[SL_CACHE_KEY_MAX])
{
    snprintf(out, SL_CACHE_KEY_MAX, "%s-%016llx-%012llx", pc->hex,
             (unsigned long long)pc->fingerprint, (unsigned long long)index);
}

/* The entry names' start: the first 16 bytes of the prefix hash. */
static void set_hex(sl_pcache_t *pc)
{
    for (int i = 0; i < 16; i++) {
        snprintf(pc->hex + 2 * i, 3, "%02x", pc->prefix_hash[i]);
    }
}

int sl_pcache_new(sl_cache_t *store, const sl_spec_t *spec, uint64_t fingerprint, unsigned nthreads,
                  sl_pcache_t **ret, char *err, size_t errlen)
{
    *ret = NULL;
    if (nthreads == 0 || store == NULL) {
        return sl_err(err, errlen, -EINVAL, "prefix cache: no store or no threads");
    }
    if (spec->cache == SL_CACHE_OFF) {
        return 0;
    }
    sl_layout_t *l = malloc(sizeof(*l)); /* KBs: off the caller's stack */
    if (l == NULL) {
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    int rc = sl_spec_layout(spec, 0, l);
    uint32_t prefix = rc == 0 ? sl_spec_cache_prefix(spec, l) : 0;
    sl_pcache_t *pc = NULL;
    if (rc == 0 && prefix > 0) {
        pc = calloc(1, sizeof(*pc));
        rc = pc == NULL ? -ENOMEM : sl_spec_prefix_hash(spec, l, prefix, pc->prefix_hash);
    }
    free(l);
    if (rc < 0 || pc == NULL) {
        free(pc);
        return rc < 0 ? sl_err(err, errlen, rc, "prefix cache: %s", strerror(-rc)) : 0;
    }
    pthread_mutex_init(&pc->cost_mu, NULL);
    pc->store = store;
    pc->fingerprint = fingerprint;
    pc->prefix = prefix;
    pc->nthreads = nthreads;
    const char *claims = getenv("SLUICE_PCACHE_CLAIMS");
    pc->claim_ms = claims != NULL && strcmp(claims, "off") == 0 ? 0 : SL_PCLAIM_WAIT_MS;
    set_hex(pc);
    pc->th = calloc(nthreads, sizeof(*pc->th));
    for (unsigned i = 0; pc->th != NULL && i < nthreads; i++) {
        sl_pclaim_init(&pc->th[i].claim);
        pc->th[i].z = sl_codec_new();
        if (pc->th[i].z == NULL) {
            break;
        }
    }
    if (pc->th == NULL || pc->th[nthreads - 1].z == NULL) {
        sl_pcache_free(pc);
        return sl_err(err, errlen, -ENOMEM, "out of memory");
    }
    *ret = pc;
    return 0;
}

void sl_pcache_free(sl_pcache_t *pc)
{
    if (pc == NULL) {
        return;
    }
    for (unsigned i = 0; pc->th != NULL && i < pc->nthreads; i++) {
        sl_pclaim_release(sl_cache_dir_fd(pc->store), &pc->th[i].claim);
        sl_codec_free(pc->th[i].z);
        free(pc->th[i].buf);
    }
    free(pc->th);
    pthread_mutex_destroy(&pc->cost_mu);
    free(pc);
}

void sl_pcache_key_content(sl_pcache_t *pc, const uint8_t sha[32])
{
    /* The header stores the whole key: the mixed hash is the prefix hash
     * from now on, so a reader of the other contents refuses the entry. */
    static const char tag[] = "sluice-prefix-content-v1\n";
    sl_sha256_t h;
    sl_sha256_init(&h);
    sl_sha256_update(&h, tag, sizeof(tag) - 1);
    sl_sha256_update(&h, pc->prefix_hash, SL_PREFIX_HASH_LEN);
    sl_sha256_update(&h, sha, 32);
    sl_sha256_final(&h, pc->prefix_hash);
    set_hex(pc);
}

uint32_t sl_pcache_prefix(const sl_pcache_t *pc) { return pc->prefix; }

void sl_pcache_set_claim_ms(sl_pcache_t *pc, int64_t ms) { pc->claim_ms = ms > 0 ? ms : 0; }

void sl_pcache_release(sl_pcache_t *pc, unsigned tid)
{
    if (tid < pc->nthreads) {
        sl_pclaim_release(sl_cache_dir_fd(pc->store), &pc->th[tid].claim);
    }
}

static int read_full(int fd, uint8_t *p, size_t n, off_t off)
{
    while (n > 0) {
        ssize_t r = pread(fd, p, n, off);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return r < 0 ? -errno : -EBADMSG;
        }
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

/* Checks the header against this cache and index and the file's size;
 * -EBADMSG for anything that is not this entry. A payload is never longer
 * than its tensor (compressed only when smaller), which bounds what a
 * damaged or foreign file can make a reader allocate. */
static int check_header(const sl_pcache_t *pc, uint64_t index, const uint8_t *h, uint64_t fsize)
{
    uint64_t raw = get64(h + H_RAW), payload = get64(h + H_PAYLOAD);
    int ok = get32(h + H_MAGIC) == SL_PCACHE_MAGIC && get32(h + H_VERSION) == SL_PCACHE_VERSION &&
             memcmp(h + H_PREFIX, pc->prefix_hash, SL_PREFIX_HASH_LEN) == 0 &&
             get64(h + H_FP) == pc->fingerprint && get64(h + H_INDEX) == index &&
             h[H_CODEC] < SL_CODEC__COUNT && h[H_DTYPE] <= SL_DT_RECORD &&
             h[H_LAYOUT] <= SL_LAYOUT_CHW && raw <= SL_TENSOR_MAX_BYTES &&
             payload == fsize - H_SIZE && payload <= raw &&
             (h[H_CODEC] != SL_CODEC_NONE || payload == raw);
    return ok ? 0 : -EBADMSG;
}

/* The payload into the thread's buffer, checked, and decoded into out. */
static int load(sl_pcache_t *pc, pc_thread_t *th, int fd, const uint8_t *h, sl_tensor_t *out)
{
    uint64_t raw = get64(h + H_RAW), payload = get64(h + H_PAYLOAD);
    if (payload > th->cap) {
        uint8_t *b = realloc(th->buf, payload);
        if (b == NULL) {
            return -ENOMEM;
        }
        th->buf = b;
        th->cap = payload;
    }
    int rc = read_full(fd, th->buf, payload, H_SIZE);
    if (rc < 0 || entry_sum(h, th->buf, payload) != get64(h + H_SUM)) {
        return -EBADMSG;
    }
    rc = sl_tensor_reshape(out, (sl_dtype_e)h[H_DTYPE], (sl_layout_e)h[H_LAYOUT], get32(h + H_H),
                           get32(h + H_W), get32(h + H_C));
    if (rc < 0 || out->nbytes != raw) {
        return rc == -ENOMEM ? rc : -EBADMSG;
    }
    if (h[H_CODEC] == SL_CODEC_NONE) {
        memcpy(out->data, th->buf, raw);
        return 0;
    }
    uint32_t row = 0, step = 0;
    (void)sl_codec_for_tensor(out, &row, &step);
    struct iovec iov = {.iov_base = th->buf, .iov_len = payload};
    char why[128];
    return sl_codec_decompress(th->z, (sl_codec_e)h[H_CODEC], &iov, 1, out->data, raw, row, step,
                               why, sizeof(why));
}

/* Reads key's entry into out: 0, -ENOENT (none), -EBADMSG (refused:
 * counted and removed), -ENOMEM. */
static int read_entry(sl_pcache_t *pc, unsigned tid, const char *key, uint64_t index,
                      sl_tensor_t *out)
{
    uint64_t t0 = thread_ns();
    int fd = sl_cache_lookup(pc->store, key);
    if (fd < 0) {
        return -ENOENT;
    }
    uint8_t h[H_SIZE];
    struct stat st;
    int rc = fstat(fd, &st) < 0 ? -errno : 0;
    if (rc == 0) {
        rc = st.st_size < H_SIZE ? -EBADMSG : read_full(fd, h, H_SIZE, 0);
    }
    if (rc == 0) {
        rc = check_header(pc, index, h, (uint64_t)st.st_size);
    }
    if (rc == 0) {
        rc = load(pc, &pc->th[tid], fd, h, out);
    }
    close(fd);
    if (rc == -ENOMEM) {
        return rc;
    }
    if (rc < 0) {
        /* Never served: recomputed by the caller and written again. */
        atomic_fetch_add(&pc->corrupt, 1);
        sl_cache_remove(pc->store, key);
        return -EBADMSG;
    }
    uint64_t t1 = thread_ns();
    uint64_t ns = t1 > t0 ? t1 - t0 : 0;
    double b = (double)st.st_size;
    pthread_mutex_lock(&pc->cost_mu);
    /* Under the lock with the sums: a reader sees hits and timings agree. */
    atomic_fetch_add(&pc->hits, 1);
    atomic_fetch_add(&pc->bytes_read, (uint64_t)st.st_size);
    pc->read_ns += ns;
    pc->read_bytes_sq += b * b;
    pc->read_bytes_ns += b * (double)ns;
    pthread_mutex_unlock(&pc->cost_mu);
    return 0;
}

static void pause_us(int64_t us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

int sl_pcache_get(sl_pcache_t *pc, unsigned tid, uint64_t index, sl_tensor_t *out)
{
    if (tid >= pc->nthreads) {
        return -EINVAL;
    }
    pc_thread_t *th = &pc->th[tid];
    int dir = sl_cache_dir_fd(pc->store);
    sl_pclaim_release(dir, &th->claim); /* never wait holding one (pclaim.h) */
    char key[SL_CACHE_KEY_MAX];
    entry_name(pc, index, key);
    double t0 = 0;
    /* A miss claims the key, then looks once more (its holder may have
     * stored it between our look and our claim); a busy key is looked at
     * until its entry appears, its claim goes (the holder failed or died:
     * we claim it), or the wait ends. */
    for (;;) {
        int rc = read_entry(pc, tid, key, index, out);
        if (rc == 0) {
            /* a hit, counted by read_entry with its timing; the holder
             * finished first */
            sl_pclaim_release(dir, &th->claim);
            if (t0 > 0) {
                atomic_fetch_add(&pc->waited, 1);
            }
            return 0;
        }
        if (rc == -ENOMEM) {
            return rc; /* a claim taken stays with the thread until its put */
        }
        if (pc->claim_ms == 0 || th->claim.fd >= 0) {
            break;
        }
        sl_pclaim_holder_t holder;
        rc = sl_pclaim_try(dir, key, pc->claim_ms, &th->claim, &holder);
        if (rc == 0) {
            th->claim_index = index;
            continue;
        }
        if (rc != -EBUSY) {
            break; /* no claim file can be made: compute unclaimed */
        }
        double now = sl_mono_sec();
        t0 = t0 > 0 ? t0 : now;
        if (sl_pclaim_expired(&holder) || (now - t0) * 1000 >= (double)pc->claim_ms) {
            atomic_fetch_add(&pc->claim_timeouts, 1);
            break;
        }
        pause_us(sl_pclaim_backoff_us((int64_t)((now - t0) * 1e6)));
    }
    atomic_fetch_add(&pc->misses, 1);
    return -ENOENT;
}

static void fill_header(const sl_pcache_t *pc, uint64_t index, const sl_tensor_t *t,
                        sl_codec_e codec, const uint8_t *payload, size_t n, uint8_t *h)
{
    memset(h, 0, H_SIZE);
    put32(h + H_MAGIC, SL_PCACHE_MAGIC);
    put32(h + H_VERSION, SL_PCACHE_VERSION);
    memcpy(h + H_PREFIX, pc->prefix_hash, SL_PREFIX_HASH_LEN);
    put64(h + H_FP, pc->fingerprint);
    put64(h + H_INDEX, index);
    h[H_DTYPE] = (uint8_t)t->dtype;
    h[H_LAYOUT] = (uint8_t)t->layout;
    h[H_CODEC] = (uint8_t)codec;
    put32(h + H_H, t->h);
    put32(h + H_W, t->w);
    put32(h + H_C, t->c);
    put64(h + H_RAW, t->nbytes);
    put64(h + H_PAYLOAD, n);
    put64(h + H_SUM, entry_sum(h, payload, n));
}

int sl_pcache_put(sl_pcache_t *pc, unsigned tid, uint64_t index, const sl_tensor_t *t)
{
    if (tid >= pc->nthreads || t->nbytes > SL_TENSOR_MAX_BYTES) {
        return -EINVAL;
    }
    uint32_t row = 0, step = 0;
    sl_codec_e codec = sl_codec_for_tensor(t, &row, &step);
    uint8_t *packed = NULL;
    size_t n = t->nbytes;
    if (codec != SL_CODEC_NONE &&
        sl_codec_compress(pc->th[tid].z, codec, t->data, t->nbytes, row, step, &packed, &n) < 0) {
        codec = SL_CODEC_NONE; /* does not shrink (or no memory): stored raw */
        packed = NULL;
        n = t->nbytes;
    }
    const uint8_t *payload = packed != NULL ? packed : t->data;
    uint8_t h[H_SIZE];
    fill_header(pc, index, t, codec, payload, n, h);
    struct iovec iov[2] = {{.iov_base = h, .iov_len = H_SIZE},
                           {.iov_base = (void *)payload, .iov_len = n}};
    char key[SL_CACHE_KEY_MAX];
    entry_name(pc, index, key);
    uint64_t evicted = 0, evicted_bytes = 0;
    int rc = sl_cache_put_ex(pc->store, key, iov, 2, &evicted, &evicted_bytes);
    free(packed);
    if (pc->th[tid].claim.fd >= 0 && pc->th[tid].claim_index == index) {
        sl_pclaim_release(sl_cache_dir_fd(pc->store), &pc->th[tid].claim);
    }
    atomic_fetch_add(&pc->evictions, evicted);
    atomic_fetch_add(&pc->bytes_evicted, evicted_bytes);
    if (rc < 0) {
        atomic_fetch_add(&pc->store_errors, 1);
        return rc;
    }
    atomic_fetch_add(&pc->bytes_written, H_SIZE + n);
    return 0;
}

void sl_pcache_stats(const sl_pcache_t *pc, sl_pcache_stats_t *ret)
{
    sl_pcache_t *m = (sl_pcache_t *)pc; /* atomic loads of const counters */
    pthread_mutex_lock(&m->cost_mu);
    ret->hits = atomic_load(&m->hits);
    ret->bytes_read = atomic_load(&m->bytes_read);
    ret->read_ns = m->read_ns;
    ret->read_bytes_sq = m->read_bytes_sq;
    ret->read_bytes_ns = m->read_bytes_ns;
    pthread_mutex_unlock(&m->cost_mu);
    ret->misses = atomic_load(&m->misses);
    ret->bytes_evicted = atomic_load(&m->bytes_evicted);
    ret->bytes_written = atomic_load(&m->bytes_written);
    ret->evictions = atomic_load(&m->evictions);
    ret->store_errors = atomic_load(&m->store_errors);
    ret->corrupt = atomic_load(&m->corrupt);
    ret->waited = atomic_load(&m->waited);
    ret->claim_timeouts = atomic_load(&m->claim_timeouts);
}

void sl_pcache_stats_add(sl_pcache_stats_t *sum, const sl_pcache_stats_t *a)
{
    sum->hits += a->hits;
    sum->misses += a->misses;
    sum->bytes_read += a->bytes_read;
    sum->bytes_written += a->bytes_written;
    sum->evictions += a->evictions;
    sum->store_errors += a->store_errors;
    sum->corrupt += a->corrupt;
    sum->waited += a->waited;
    sum->claim_timeouts += a->claim_timeouts;
    sum->bytes_evicted += a->bytes_evicted;
    sum->read_ns += a->read_ns;
    sum->read_bytes_sq += a->read_bytes_sq;
    sum->read_bytes_ns += a->read_bytes_ns;
}
