#include "common/order/balance.h"

#include <errno.h>
#include <stdlib.h>

double sl_trainer_cost(const sl_trainer_model_t *m, double tokens, double tiles)
{
    double c = m->a * tokens + m->b * tokens * tokens + m->c * tiles + m->d;
    return c > 0 ? c : 0;
}

/* qsort has no context argument: sort (cost, index) pairs instead. */
typedef struct {
    double cost;
    uint32_t idx;
} item_t;

static int by_cost_desc(const void *pa, const void *pb)
{
    const item_t *a = pa, *b = pb;
    if (a->cost != b->cost) {
        return a->cost > b->cost ? -1 : 1;
    }
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Items of cost, sorted largest first, ties by position. NULL on ENOMEM. */
static item_t *sorted(const double *cost, uint32_t n)
{
    item_t *it = malloc((n > 0 ? n : 1) * sizeof(*it));
    if (it == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        it[i] = (item_t){cost[i], i};
    }
    qsort(it, n, sizeof(*it), by_cost_desc);
    return it;
}

int sl_balance_pack_cap(const double *cost, const uint32_t *tokens, uint32_t n, uint32_t nbins,
                        uint32_t cap, uint64_t token_budget, uint32_t *ret_bin,
                        double *ret_load)
{
    if (nbins == 0 || (cap > 0 && (uint64_t)nbins * cap < n)) {
        return -EINVAL;
    }
    uint64_t *btok = calloc(nbins, sizeof(*btok));
    uint32_t *cnt = calloc(nbins, sizeof(*cnt));
    item_t *it = sorted(cost, n);
    if (btok == NULL || cnt == NULL || it == NULL) {
        free(btok);
        free(cnt);
        free(it);
        return -ENOMEM;
    }
    for (uint32_t b = 0; b < nbins; b++) {
        ret_load[b] = 0;
    }
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = it[k].idx;
        uint32_t best = UINT32_MAX, least = UINT32_MAX;
        for (uint32_t b = 0; b < nbins; b++) {
            if (cap > 0 && cnt[b] >= cap) {
                continue;
            }
            if (least == UINT32_MAX || ret_load[b] < ret_load[least]) {
                least = b;
            }
            int fits = token_budget == 0 || btok[b] + tokens[i] <= token_budget;
            if (fits && (best == UINT32_MAX || ret_load[b] < ret_load[best])) {
                best = b;
            }
        }
        uint32_t b = best != UINT32_MAX ? best : least;
        ret_bin[i] = b;
        ret_load[b] += cost[i];
        btok[b] += tokens[i];
        cnt[b]++;
    }
    free(btok);
    free(cnt);
    free(it);
    return 0;
}

int sl_balance_pack(const double *cost, const uint32_t *tokens, uint32_t n, uint32_t nbins,
                    uint64_t token_budget, uint32_t *ret_bin, double *ret_load)
{
    return sl_balance_pack_cap(cost, tokens, n, nbins, 0, token_budget, ret_bin, ret_load);
}

int sl_balance_deal(const double *cost, uint32_t nsteps, uint32_t per_step, uint32_t *ret_order)
{
    uint64_t n64 = (uint64_t)nsteps * per_step;
    if (n64 > UINT32_MAX) {
        return -EOVERFLOW;
    }
    uint32_t n = (uint32_t)n64;
    item_t *it = sorted(cost, n);
    uint32_t *fill = calloc(nsteps > 0 ? nsteps : 1, sizeof(*fill));
    if (it == NULL || fill == NULL) {
        free(it);
        free(fill);
        return -ENOMEM;
    }
    /* Snake order over the steps (0..S-1, S-1..0, ...) so their sums stay
     * close as the costs shrink. */
    for (uint32_t k = 0; k < n; k++) {
        uint32_t round = k / nsteps, pos = k % nsteps;
        uint32_t s = round % 2 == 0 ? pos : nsteps - 1 - pos;
        ret_order[(size_t)s * per_step + fill[s]++] = it[k].idx;
    }
    free(it);
    free(fill);
    return 0;
}
