/* bpe_merge: tiktoken's byte_pair_encode for one piece that is not itself a
 * token. Rule (tiktoken src/lib.rs, _byte_pair_merge): start from single
 * bytes; repeatedly merge the adjacent pair whose concatenated bytes have
 * the lowest rank, the leftmost such pair on a tie; stop when no adjacent
 * pair is a token; each remaining part's rank is an id.
 *
 * Short pieces (nearly all of them) use tiktoken's own scheme: an array of
 * (start, rank of the pair starting there), a linear scan for the minimum,
 * a memmove per merge -- O(n*m), cache-friendly. Long pieces (a run of
 * punctuation, a base64 blob) would make that quadratic, so they use a
 * doubly linked list and a min-heap keyed (rank, start): the same choice
 * every step (lowest rank, then leftmost), O(n log n). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/text/text_impl.h"

#define DEAD (SL_RANK_NONE - 1) /* a merged-away position (ranks are < 2^24) */

typedef struct part_s {
    uint32_t start;
    uint32_t rank; /* of the token parts[i] + parts[i + 1] */
} part_t;

static inline uint32_t rank_of(const sl_bpe_ranks_t *r, const uint8_t *p, size_t a, size_t b)
{
    if (b - a == 2) {
        return sl_bpe_rank2(r, p[a], p[a + 1]);
    }
    if (b - a == 1) {
        return sl_bpe_rank1(r, p[a]);
    }
    return sl_bpe_rank(r, p + a, b - a);
}

static int grow(sl_bpe_buf_t *b, size_t na, size_t nl)
{
    if (na > b->acap) {
        size_t c = b->acap ? b->acap : 256;
        while (c < na) {
            c *= 2;
        }
        uint64_t *a = realloc(b->a, c * sizeof(uint64_t));
        if (a == NULL) {
            return -ENOMEM;
        }
        b->a = a;
        b->acap = c;
    }
    if (nl > b->lcap) {
        size_t c = b->lcap ? b->lcap : 256;
        while (c < nl) {
            c *= 2;
        }
        uint32_t *l = realloc(b->link, c * sizeof(uint32_t));
        if (l == NULL) {
            return -ENOMEM;
        }
        b->link = l;
        b->lcap = c;
    }
    return 0;
}

static size_t merge_linear(const sl_bpe_ranks_t *r, part_t *parts, const uint8_t *p, size_t n,
                           uint32_t *out)
{
    size_t m = n + 1;
    uint32_t min_rank = SL_RANK_NONE;
    size_t min_i = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t rk = sl_bpe_rank2(r, p[i], p[i + 1]);
        if (rk < min_rank) {
            min_rank = rk;
            min_i = i;
        }
        parts[i] = (part_t){(uint32_t)i, rk};
    }
    parts[n - 1] = (part_t){(uint32_t)(n - 1), SL_RANK_NONE};
    parts[n] = (part_t){(uint32_t)n, SL_RANK_NONE};
    while (min_rank != SL_RANK_NONE) {
        size_t i = min_i;
        /* Ranks of the pairs around the merge, read before parts[i + 1] goes
         * (hence i + 3: the end of the part after the merged one). */
        if (i > 0) {
            parts[i - 1].rank = i + 2 < m ? rank_of(r, p, parts[i - 1].start, parts[i + 2].start)
                                          : SL_RANK_NONE;
        }
        parts[i].rank =
            i + 3 < m ? rank_of(r, p, parts[i].start, parts[i + 3].start) : SL_RANK_NONE;
        memmove(&parts[i + 1], &parts[i + 2], (m - i - 2) * sizeof(part_t));
        m--;
        min_rank = SL_RANK_NONE;
        for (size_t k = 0; k + 1 < m; k++) {
            if (parts[k].rank < min_rank) {
                min_rank = parts[k].rank;
                min_i = k;
            }
        }
    }
    for (size_t k = 0; k + 1 < m; k++) {
        out[k] = rank_of(r, p, parts[k].start, parts[k + 1].start);
    }
    return m - 1;
}

/* Min-heap of (rank << 32 | start). */
static inline void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (h[up] <= v) {
            break;
        }
        h[i] = h[up];
        i = up;
    }
    h[i] = v;
}

static inline uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], v = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) {
            break;
        }
        if (c + 1 < *n && h[c + 1] < h[c]) {
            c++;
        }
        if (v <= h[c]) {
            break;
        }
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
    return top;
}

static size_t merge_heap(const sl_bpe_ranks_t *r, sl_bpe_buf_t *b, const uint8_t *p, size_t n,
                         uint32_t *out)
{
    /* Positions 0..n-1 start a part while alive; n is the end sentinel. */
    uint32_t *nxt = b->link, *prv = nxt + (n + 1), *rk = prv + (n + 1);
    uint64_t *heap = b->a;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        nxt[i] = (uint32_t)i + 1;
        prv[i] = (uint32_t)i - 1;
        rk[i] = i + 1 < n ? sl_bpe_rank2(r, p[i], p[i + 1]) : SL_RANK_NONE;
        if (rk[i] != SL_RANK_NONE) {
            heap_push(heap, &hn, (uint64_t)rk[i] << 32 | i);
        }
    }
    prv[n] = (uint32_t)n - 1;
    while (hn > 0) {
        uint64_t top = heap_pop(heap, &hn);
        uint32_t x = (uint32_t)top, rank = (uint32_t)(top >> 32);
        if (rk[x] != rank) {
            continue; /* stale: x was merged away or its pair changed */
        }
        uint32_t y = nxt[x], z = nxt[y];
        nxt[x] = z;
        prv[z] = x;
        rk[y] = DEAD;
        /* The pair starting at x, then the one ending at x (as tiktoken). */
        rk[x] = z < n ? rank_of(r, p, x, nxt[z]) : SL_RANK_NONE;
        if (rk[x] != SL_RANK_NONE) {
            heap_push(heap, &hn, (uint64_t)rk[x] << 32 | x);
        }
        if (x > 0) {
            uint32_t w = prv[x];
            rk[w] = rank_of(r, p, w, z);
            if (rk[w] != SL_RANK_NONE) {
                heap_push(heap, &hn, (uint64_t)rk[w] << 32 | w);
            }
        }
    }
    size_t k = 0;
    for (uint32_t x = 0; x != n; x = nxt[x]) {
        out[k++] = rank_of(r, p, x, nxt[x]);
    }
    return k;
}

int sl_bpe_merge(const sl_bpe_ranks_t *r, sl_bpe_buf_t *b, const uint8_t *p, size_t n,
                 uint32_t *out, size_t *ret_n, int algo)
{
    if (n < 2) {
        out[0] = sl_bpe_rank1(r, p[0]);
        *ret_n = 1;
        return 0;
    }
    int heap = algo == 2 || (algo == 0 && n >= SL_BPE_HEAP_MIN);
    if (heap) {
        /* Heap: n initial entries plus at most two per merge. */
        if (grow(b, 3 * n, 3 * (n + 1)) < 0) {
            return -ENOMEM;
        }
        *ret_n = merge_heap(r, b, p, n, out);
    } else {
        if (grow(b, n + 1, 0) < 0) {
            return -ENOMEM;
        }
        *ret_n = merge_linear(r, (part_t *)(void *)b->a, p, n, out);
    }
    return 0;
}

void sl_bpe_buf_release(sl_bpe_buf_t *b)
{
    free(b->a);
    free(b->link);
    memset(b, 0, sizeof(*b));
}
