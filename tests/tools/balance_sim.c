/* balance_sim: per-step load imbalance of a data-parallel job over the
 * samples of a real `sluice run --dump` (their sequence lengths and image
 * tiles), count-based shares (DistributedSampler) against balanced bins
 * (common/order/balance.h), for scripts/bench-balance.
 *
 *   balance_sim DUMP --world W --batch B [--microbatches M] [--lookahead L]
 *               [--token-budget T] [--model a,b,c,d] [--noise SIGMA] [--seed S]
 *
 * The epoch order is a seeded shuffle of the dump's epoch-0 samples; a
 * global step takes W x B of them. Count-based: rank r gets the step's
 * positions q W + r. Balanced: L steps' samples dealt to the steps, then
 * each step packed into W ranks of equal counts and each rank into M
 * microbatches (sl_balance_order's algorithm). Costs:
 * predicted by the model; "true" costs are the predicted ones times a
 * log-normal factor exp(N(0, SIGMA)) -- a synthetic trainer whose steps take
 * a sample's true cost -- so the schedule is judged on costs it did not see.
 * Prints one JSON object: per policy the mean, p95 and max over steps of
 * max/mean rank load (predicted and true), and the summed step time (max
 * rank load per step) relative to the ideal (mean rank load per step). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/rng.h"
#include "common/order/balance.h"

typedef struct {
    uint32_t world, batch, micro, lookahead;
    uint64_t budget;
    sl_trainer_model_t model;
    double noise;
    uint64_t seed;
} opts_t;

typedef struct {
    double *imb, *imb_true; /* per step */
    double step, step_true, ideal, ideal_true;
    uint32_t over_budget; /* microbatches over the token budget */
} result_t;

static int load(const char *path, uint32_t **ret_tok, double **ret_tiles, uint32_t *ret_n)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        fprintf(stderr, "balance_sim: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1024, n = 0;
    uint32_t *tok = malloc(cap * sizeof(*tok));
    double *tiles = malloc(cap * sizeof(*tiles));
    char *line = NULL;
    size_t llen = 0;
    while (tok != NULL && tiles != NULL && getline(&line, &llen, f) > 0) {
        json_t *j = json_loads(line, 0, NULL);
        if (j == NULL || json_integer_value(json_object_get(j, "epoch")) != 0) {
            json_decref(j);
            continue;
        }
        if (n == cap) {
            cap *= 2;
            tok = realloc(tok, cap * sizeof(*tok));
            tiles = realloc(tiles, cap * sizeof(*tiles));
            if (tok == NULL || tiles == NULL) {
                break;
            }
        }
        tok[n] = (uint32_t)json_integer_value(json_object_get(j, "seq_len"));
        double t = 0;
        size_t k;
        json_t *v;
        json_array_foreach(json_object_get(j, "tiles"), k, v)
        {
            t += (double)json_integer_value(v);
        }
        tiles[n++] = t;
        json_decref(j);
    }
    free(line);
    fclose(f);
    if (tok == NULL || tiles == NULL || n == 0) {
        fprintf(stderr, "balance_sim: %s: no epoch-0 samples (or out of memory)\n", path);
        free(tok);
        free(tiles);
        return -1;
    }
    *ret_tok = tok;
    *ret_tiles = tiles;
    *ret_n = (uint32_t)n;
    return 0;
}

static double max_over_mean(const double *load, uint32_t k)
{
    double max = 0, sum = 0;
    for (uint32_t i = 0; i < k; i++) {
        max = load[i] > max ? load[i] : max;
        sum += load[i];
    }
    return sum > 0 ? max / (sum / k) : 1.0;
}

/* One step's rank loads from its items' rank assignment. */
static void account(const opts_t *o, const double *c, const double *ct, const uint32_t *rank,
                    uint32_t m, result_t *r, uint32_t step)
{
    double load[4096] = {0}, loadt[4096] = {0};
    for (uint32_t i = 0; i < m; i++) {
        load[rank[i]] += c[i];
        loadt[rank[i]] += ct[i];
    }
    r->imb[step] = max_over_mean(load, o->world);
    r->imb_true[step] = max_over_mean(loadt, o->world);
    double mx = 0, mxt = 0, sum = 0, sumt = 0;
    for (uint32_t k = 0; k < o->world; k++) {
        mx = load[k] > mx ? load[k] : mx;
        mxt = loadt[k] > mxt ? loadt[k] : mxt;
        sum += load[k];
        sumt += loadt[k];
    }
    r->step += mx;
    r->step_true += mxt;
    r->ideal += sum / o->world;
    r->ideal_true += sumt / o->world;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static json_t *summary(const result_t *r, uint32_t steps)
{
    double *s = malloc(steps * sizeof(*s));
    json_t *o = json_object();
    for (int t = 0; t < 2 && s != NULL; t++) {
        memcpy(s, t ? r->imb_true : r->imb, steps * sizeof(*s));
        qsort(s, steps, sizeof(*s), cmp_double);
        double mean = 0;
        for (uint32_t i = 0; i < steps; i++) {
            mean += s[i] / steps;
        }
        json_object_set_new(o, t ? "imbalance_true" : "imbalance",
                            json_pack("{s:f, s:f, s:f}", "mean", mean, "p95",
                                      s[(uint32_t)(0.95 * (steps - 1))], "max", s[steps - 1]));
    }
    free(s);
    json_object_set_new(o, "step_time_vs_ideal", json_real(r->step / r->ideal));
    json_object_set_new(o, "step_time_vs_ideal_true", json_real(r->step_true / r->ideal_true));
    json_object_set_new(o, "microbatches_over_budget", json_integer(r->over_budget));
    return o;
}

static int parse(int argc, char **argv, opts_t *o, const char **dump)
{
    *o = (opts_t){.world = 4, .batch = 8, .micro = 1, .lookahead = 4,
                  .model = {1.0, 1.0 / 4096, 0, 50}, .seed = 1};
    *dump = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--world") == 0 && v) {
            o->world = (uint32_t)atoi(v), i++;
        } else if (strcmp(a, "--batch") == 0 && v) {
            o->batch = (uint32_t)atoi(v), i++;
        } else if (strcmp(a, "--microbatches") == 0 && v) {
            o->micro = (uint32_t)atoi(v), i++;
        } else if (strcmp(a, "--lookahead") == 0 && v) {
            o->lookahead = (uint32_t)atoi(v), i++;
        } else if (strcmp(a, "--token-budget") == 0 && v) {
            o->budget = strtoull(v, NULL, 10), i++;
        } else if (strcmp(a, "--noise") == 0 && v) {
            o->noise = atof(v), i++;
        } else if (strcmp(a, "--seed") == 0 && v) {
            o->seed = strtoull(v, NULL, 10), i++;
        } else if (strcmp(a, "--model") == 0 && v &&
                   sscanf(v, "%lf,%lf,%lf,%lf", &o->model.a, &o->model.b, &o->model.c,
                          &o->model.d) == 4) {
            i++;
        } else if (a[0] != '-' && *dump == NULL) {
            *dump = a;
        } else {
            fprintf(stderr, "usage: balance_sim DUMP --world W --batch B [--microbatches M] "
                            "[--lookahead L] [--token-budget T] [--model a,b,c,d] "
                            "[--noise SIGMA] [--seed S]\n");
            return -1;
        }
    }
    if (*dump == NULL || o->world < 1 || o->world > 4096 || o->batch < 1 || o->micro < 1 ||
        o->lookahead < 1) {
        fprintf(stderr, "balance_sim: a dump file and positive --world (<= 4096), --batch, "
                        "--microbatches, --lookahead are needed\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    const char *dump;
    if (parse(argc, argv, &o, &dump) < 0) {
        return 2;
    }
    uint32_t *tok, n;
    double *tiles;
    if (load(dump, &tok, &tiles, &n) < 0) {
        return 1;
    }
    uint32_t g = o.world * o.batch * o.micro, steps = n / g, win = o.lookahead;
    if (steps < win) {
        fprintf(stderr, "balance_sim: %u samples make %u steps of %u; fewer than the "
                        "look-ahead %u\n", n, steps, g, win);
        return 1;
    }
    steps -= steps % win; /* whole windows */
    uint64_t *order = malloc((size_t)n * sizeof(*order));
    double *c = malloc((size_t)n * sizeof(*c)), *ct = malloc((size_t)n * sizeof(*ct));
    uint32_t *rank = malloc((size_t)g * win * sizeof(*rank)), *deal = malloc(g * win * 4);
    uint32_t *tk = malloc(g * win * 4), *mb = malloc(g * 4);
    double *wc = malloc(g * win * sizeof(double)), *wct = malloc(g * win * sizeof(double));
    double *load = malloc(4096 * sizeof(double));
    double *sc = malloc(g * sizeof(double)), *sct = malloc(g * sizeof(double));
    double *rc = malloc(g * sizeof(double));
    uint32_t *stk = malloc(g * 4), *rt = malloc(g * 4);
    result_t count = {.imb = calloc(steps, 8), .imb_true = calloc(steps, 8)};
    result_t bal = {.imb = calloc(steps, 8), .imb_true = calloc(steps, 8)};
    if (!order || !c || !ct || !rank || !deal || !tk || !mb || !wc || !wct || !load || !sc ||
        !sct || !rc || !stk || !rt ||
        !count.imb || !count.imb_true || !bal.imb || !bal.imb_true) {
        fprintf(stderr, "balance_sim: out of memory\n");
        return 1;
    }
    sl_epoch_order(o.seed, 0, 1, n, order);
    sl_rng_t rng;
    sl_rng_init(&rng, o.seed, 0, 0, 99);
    for (uint32_t i = 0; i < n; i++) {
        c[i] = sl_trainer_cost(&o.model, tok[i], tiles[i]);
        /* Box-Muller: one normal per sample. */
        double u1 = sl_rng_uniform(&rng), u2 = sl_rng_uniform(&rng);
        double z = sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2);
        ct[i] = c[i] * exp(o.noise * z);
    }
    for (uint32_t w0 = 0; w0 < steps; w0 += win) {
        /* The window's samples in epoch order. */
        for (uint32_t k = 0; k < g * win; k++) {
            uint64_t idx = order[(uint64_t)w0 * g + k];
            wc[k] = c[idx];
            wct[k] = ct[idx];
            tk[k] = tok[idx];
        }
        /* Count-based: position q W + r of each step goes to rank r. */
        for (uint32_t s = 0; s < win; s++) {
            for (uint32_t k = 0; k < g; k++) {
                rank[k] = k % o.world;
            }
            account(&o, wc + (size_t)s * g, wct + (size_t)s * g, rank, g, &count, w0 + s);
        }
        /* Balanced: deal the window to its steps, pack each step. */
        if (sl_balance_deal(wc, win, g, deal) < 0) {
            return 1;
        }
        for (uint32_t s = 0; s < win; s++) {
            for (uint32_t k = 0; k < g; k++) {
                uint32_t it = deal[(size_t)s * g + k];
                sc[k] = wc[it];
                sct[k] = wct[it];
                stk[k] = tk[it];
            }
            /* As the runtime does: every rank the same count (M x B). */
            if (sl_balance_pack_cap(sc, stk, g, o.world, g / o.world, 0, rank, load) < 0) {
                return 1;
            }
            account(&o, sc, sct, rank, g, &bal, w0 + s);
            /* Each rank's samples into M microbatches within the budget. */
            for (uint32_t r = 0; r < o.world; r++) {
                uint32_t m = 0;
                for (uint32_t k = 0; k < g; k++) {
                    if (rank[k] == r) {
                        rc[m] = sc[k];
                        rt[m++] = stk[k];
                    }
                }
                double ml[4096];
                uint64_t mt[4096] = {0};
                if (o.micro > 4096 ||
                    sl_balance_pack_cap(rc, rt, m, o.micro, (m + o.micro - 1) / o.micro, o.budget,
                                        mb, ml) < 0) {
                    return 1;
                }
                for (uint32_t k = 0; k < m; k++) {
                    mt[mb[k]] += rt[k];
                }
                for (uint32_t b = 0; o.budget > 0 && b < o.micro; b++) {
                    bal.over_budget += mt[b] > o.budget;
                }
            }
        }
    }
    json_t *out = json_pack("{s:I, s:I, s:I, s:I, s:I, s:f, s:o, s:o}", "samples", (json_int_t)n,
                            "steps", (json_int_t)steps, "world", (json_int_t)o.world, "batch",
                            (json_int_t)o.batch, "lookahead", (json_int_t)win, "noise", o.noise,
                            "count_based", summary(&count, steps), "balanced",
                            summary(&bal, steps));
    char *s = json_dumps(out, JSON_COMPACT);
    printf("%s\n", s);
    free(s);
    json_decref(out);
    return 0;
}
