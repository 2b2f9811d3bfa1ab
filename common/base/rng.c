#include "common/base/rng.h"

#include <math.h>

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void sl_rng_init(sl_rng_t *r, uint64_t seed, uint64_t epoch, uint64_t index, uint64_t stream)
{
    uint64_t k = mix64(seed + 0x9e3779b97f4a7c15ULL);
    k = mix64(k ^ (epoch + 0x632be59bd9b4e019ULL));
    k = mix64(k ^ (index + 0x8cb92ba72f3d8dd7ULL));
    k = mix64(k ^ (stream + 0xd6e8feb86659fd93ULL));
    r->key = k;
    r->ctr = 0;
}

uint64_t sl_rng_u64(sl_rng_t *r)
{
    r->ctr++;
    return mix64(r->key + r->ctr * 0x9e3779b97f4a7c15ULL);
}

double sl_rng_uniform(sl_rng_t *r) { return (double)(sl_rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t sl_rng_below(sl_rng_t *r, uint64_t n)
{
    /* Rejection sampling: draws above the largest multiple of n are retried. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = sl_rng_u64(r);
    } while (x >= limit);
    return x % n;
}

double sl_rng_normal(sl_rng_t *r)
{
    /* 1 - u is in (0, 1]: log never sees 0. */
    double u1 = 1.0 - sl_rng_uniform(r);
    double u2 = sl_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double sl_rng_gamma(sl_rng_t *r, double a)
{
    if (a < 1.0) {
        double g = sl_rng_gamma(r, a + 1.0);
        double u = 1.0 - sl_rng_uniform(r); /* (0, 1] */
        return g * pow(u, 1.0 / a);
    }
    double d = a - 1.0 / 3.0;
    double c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = sl_rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = sl_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) {
            return d * v;
        }
        if (u > 0.0 && log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) {
            return d * v;
        }
    }
}

double sl_rng_beta(sl_rng_t *r, double a, double b)
{
    double x = sl_rng_gamma(r, a);
    double y = sl_rng_gamma(r, b);
    /* Both underflow only for tiny shapes: call it a fair coin's edge. */
    if (x + y <= 0.0) {
        return sl_rng_uniform(r) < a / (a + b) ? 1.0 : 0.0;
    }
    return x / (x + y);
}

void sl_epoch_order(uint64_t seed, uint64_t epoch, int shuffle, uint64_t n, uint64_t *order)
{
    for (uint64_t i = 0; i < n; i++) {
        order[i] = i;
    }
    if (!shuffle || n < 2) {
        return;
    }
    sl_rng_t r;
    sl_rng_init(&r, seed, epoch, UINT64_MAX, 0);
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = sl_rng_below(&r, i + 1);
        uint64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* Fisher-Yates over order[0, n) from stream r. */
static void shuffle_range(sl_rng_t *r, uint64_t *order, uint64_t n)
{
    for (uint64_t i = n > 0 ? n - 1 : 0; i > 0; i--) {
        uint64_t j = sl_rng_below(r, i + 1);
        uint64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

void sl_epoch_order_blocks(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t block,
                           uint64_t *order)
{
    if (block < 2 || n < 2) {
        sl_epoch_order(seed, epoch, 1, n, order);
        return;
    }
    uint64_t nb = n / block + (n % block != 0);
    uint64_t last_len = n - (nb - 1) * block;
    for (uint64_t b = 0; b < nb; b++) {
        order[b] = b;
    }
    sl_rng_t r;
    sl_rng_init(&r, seed, epoch, UINT64_MAX, 1);
    shuffle_range(&r, order, nb);
    /* Expand in place from the back: block position i starts at or after
     * i (block >= 2), so the block numbers still to read are never
     * overwritten. Only the last block may be short. */
    uint64_t short_at = nb; /* position of the short block in the permutation */
    for (uint64_t i = 0; i < nb; i++) {
        if (order[i] == nb - 1) {
            short_at = i;
        }
    }
    for (uint64_t i = nb; i-- > 0;) {
        uint64_t b = order[i];
        uint64_t start = i * block - (i > short_at ? block - last_len : 0);
        uint64_t len = b == nb - 1 ? last_len : block;
        for (uint64_t k = len; k-- > 0;) {
            order[start + k] = b * block + k;
        }
    }
    uint64_t win = block * SL_SHUFFLE_WINDOW_BLOCKS;
    sl_rng_init(&r, seed, epoch, UINT64_MAX, 2);
    for (uint64_t s = 0; s < n; s += win) {
        shuffle_range(&r, order + s, n - s < win ? n - s : win);
    }
}
