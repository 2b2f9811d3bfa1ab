/* pack_sim: packed batching (common/order/pack.h) over the samples of a
 * real `sluice run --dump` (their delivered sequence lengths and tiles), for
 * scripts/bench-balance. The schedule sees predicted costs (the model's cost
 * of each sample times a log-normal factor exp(N(0, SIGMA)): a prediction
 * that is off), and is judged on the true ones (the model's cost of the
 * delivered length), so the imbalance printed is of the real cost.
 *
 *   pack_sim DUMP --world W --microbatches M --token-budget T [--cap C]
 *            [--lookahead L] [--model a,b,c,d] [--noise SIGMA] [--seed S]
 *            [--repeat R]
 *
 * --repeat R takes every sample R times (a set R times larger with the same
 * length distribution: enough steps for many ranks).
 *
 * Prints one JSON object: packed -- mean / p95 / max over full steps of
 * max/mean rank cost (true), mean pack fill (tokens / budget), oversize
 * samples, steps, samples per step, and the schedule's time per global
 * step in milliseconds; count_based -- equal counts per rank
 * (DistributedSampler) with as many samples per step as packed used on
 * average, the same order and costs. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/rng.h"
#include "common/order/balance.h"
#include "common/order/pack.h"
#include "common/order/ranks.h"

typedef struct {
    sl_pack_params_t p;
    sl_trainer_model_t model;
    double noise;
    uint64_t seed;
    uint32_t repeat;
} opts_t;

static int load(const char *path, uint32_t **ret_tok, uint32_t **ret_tiles, uint32_t *ret_n)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    size_t cap = 1024, n = 0;
    bool nomem = false;
    uint32_t *tok = malloc(cap * 4), *tiles = malloc(cap * 4);
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
            uint32_t *t2 = realloc(tok, cap * 4), *i2 = realloc(tiles, cap * 4);
            tok = t2 ? t2 : tok;
            tiles = i2 ? i2 : tiles;
            if (t2 == NULL || i2 == NULL) {
                nomem = true;
                break;
            }
        }
        tok[n] = (uint32_t)json_integer_value(json_object_get(j, "seq_len"));
        uint32_t t = 0;
        size_t k;
        json_t *v;
        json_array_foreach(json_object_get(j, "tiles"), k, v)
        {
            t += (uint32_t)json_integer_value(v);
        }
        tiles[n++] = t;
        json_decref(j);
    }
    free(line);
    fclose(f);
    if (n == 0 || nomem || tok == NULL || tiles == NULL) {
        fprintf(stderr, "pack_sim: %s: no epoch-0 samples (or out of memory)\n", path);
        return -1;
    }
    *ret_tok = tok;
    *ret_tiles = tiles;
    *ret_n = (uint32_t)n;
    return 0;
}

static int parse(int argc, char **argv, opts_t *o, const char **dump)
{
    *o = (opts_t){.p = {.world = 4, .micro = 2, .cap = 64, .token_budget = 16384, .lookahead = 8},
                  .model = {1.0, 0.0, 0.0, 16.0},
                  .seed = 1,
                  .repeat = 1};
    *dump = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--world") == 0 && v) {
            o->p.world = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(a, "--microbatches") == 0 && v) {
            o->p.micro = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(a, "--cap") == 0 && v) {
            o->p.cap = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(a, "--token-budget") == 0 && v) {
            o->p.token_budget = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(a, "--lookahead") == 0 && v) {
            o->p.lookahead = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(a, "--noise") == 0 && v) {
            o->noise = atof(argv[++i]);
        } else if (strcmp(a, "--repeat") == 0 && v) {
            o->repeat = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(a, "--seed") == 0 && v) {
            o->seed = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(a, "--model") == 0 && v &&
                   sscanf(v, "%lf,%lf,%lf,%lf", &o->model.a, &o->model.b, &o->model.c,
                          &o->model.d) == 4) {
            i++;
        } else if (a[0] != '-' && *dump == NULL) {
            *dump = a;
        } else {
            fprintf(stderr, "usage: pack_sim DUMP --world W --microbatches M --token-budget T "
                            "[--cap C] [--lookahead L] [--model a,b,c,d] [--noise S] "
                            "[--seed S]\n");
            return -1;
        }
    }
    if (*dump == NULL || o->p.world < 1 || o->p.world > 4096 || o->p.micro < 1 || o->p.cap < 1 ||
        o->p.token_budget < 1 || o->p.lookahead < 1 || o->repeat < 1 || o->repeat > 1024) {
        fprintf(stderr, "pack_sim: a dump and positive --world (<= 4096), --microbatches, "
                        "--cap, --token-budget, --lookahead are needed\n");
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static json_t *imbalance(double *v, uint64_t k)
{
    qsort(v, k, sizeof(*v), cmp_double);
    double mean = 0;
    for (uint64_t i = 0; i < k; i++) {
        mean += v[i] / (double)k;
    }
    return json_pack("{s:f, s:f, s:f}", "mean", mean, "p95", k ? v[(uint64_t)(0.95 * (k - 1))] : 0,
                     "max", k ? v[k - 1] : 0);
}

/* Max / mean of W loads. */
static double ratio(const double *load, uint32_t w)
{
    double max = 0, sum = 0;
    for (uint32_t r = 0; r < w; r++) {
        max = load[r] > max ? load[r] : max;
        sum += load[r];
    }
    return sum > 0 ? max / (sum / w) : 1.0;
}

/* The real cost's imbalance of each full step of a packed layout (every
 * pack used, not the last) into imb; returns how many. */
static uint64_t packed_imbalance(const sl_pack_params_t *p, const uint64_t *out,
                                 const double *truth, uint64_t steps, double *load, double *imb)
{
    uint64_t k = 0;
    for (uint64_t s = 0; s + 1 < steps; s++) {
        int full = 1;
        for (uint32_t r = 0; r < p->world; r++) {
            load[r] = 0;
            for (uint32_t m = 0; m < p->micro; m++) {
                int any = 0;
                for (uint32_t j = 0; j < p->cap; j++) {
                    uint64_t x = out[((s * p->micro + m) * p->cap + j) * p->world + r];
                    if (x != SL_POS_HOLE) {
                        load[r] += truth[x];
                        any = 1;
                    }
                }
                full &= any;
            }
        }
        if (full) {
            imb[k++] = ratio(load, p->world);
        }
    }
    return k;
}

/* Count-based on the same order: per samples to each of world ranks a
 * step; each step's imbalance into imb; returns how many. */
static uint64_t count_imbalance(uint32_t world, uint64_t n, const uint64_t *base,
                                const double *truth, uint64_t per, double *load, double *imb)
{
    uint64_t k = 0;
    for (uint64_t s0 = 0; s0 + per * world <= n; s0 += per * world) {
        for (uint32_t r = 0; r < world; r++) {
            load[r] = 0;
        }
        for (uint64_t q = 0; q < per * world; q++) {
            load[q % world] += truth[base[s0 + q]];
        }
        imb[k++] = ratio(load, world);
    }
    return k;
}

int main(int argc, char **argv)
{
    opts_t o;
    const char *dump;
    uint32_t *tok, *tiles, n;
    if (parse(argc, argv, &o, &dump) < 0) {
        return 2;
    }
    if (load(dump, &tok, &tiles, &n) < 0) {
        return 1;
    }
    if (o.repeat > 1) {
        uint32_t *t2 = malloc((size_t)n * o.repeat * 4), *i2 = malloc((size_t)n * o.repeat * 4);
        if (t2 == NULL || i2 == NULL) {
            fprintf(stderr, "pack_sim: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < (size_t)n * o.repeat; i++) {
            t2[i] = tok[i % n];
            i2[i] = tiles[i % n];
        }
        free(tok);
        free(tiles);
        tok = t2, tiles = i2, n *= o.repeat;
    }
    const sl_pack_params_t *p = &o.p;
    uint64_t per_rank = sl_pack_positions(n, p->world, p->micro, p->cap);
    uint64_t slots = (uint64_t)p->micro * p->cap, total = per_rank * p->world;
    uint64_t *base = malloc(n * sizeof(*base)), *out = malloc(total * sizeof(*out));
    float *pred = malloc(n * sizeof(*pred));
    double *truth = malloc(n * sizeof(*truth)), *load = calloc(p->world, sizeof(*load));
    double *imb = malloc((per_rank / slots + 1) * sizeof(*imb));
    double *cimb = malloc((n + 1) * sizeof(*cimb));
    if (!base || !out || !pred || !truth || !load || !imb || !cimb) {
        fprintf(stderr, "pack_sim: out of memory\n");
        return 1;
    }
    sl_epoch_order(o.seed, 0, 1, n, base);
    sl_rng_t rng;
    sl_rng_init(&rng, o.seed, 0, 0, 99);
    for (uint32_t i = 0; i < n; i++) {
        truth[i] = sl_trainer_cost(&o.model, tok[i], tiles[i]);
        double u1 = sl_rng_uniform(&rng), u2 = sl_rng_uniform(&rng);
        double z = sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2);
        pred[i] = (float)(truth[i] * exp(o.noise * z));
    }
    sl_pack_stats_t st;
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    int rc = sl_pack_layout(p, n, base, pred, tok, tiles, 0, out, &st);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    if (rc < 0) {
        fprintf(stderr, "pack_sim: the schedule failed: %s\n", strerror(-rc));
        return 1;
    }
    double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    uint64_t k = packed_imbalance(p, out, truth, st.steps, load, imb);
    uint64_t per_step = st.steps ? n / st.steps : n, per = per_step / p->world;
    per = per > 0 ? per : 1;
    uint64_t kc = count_imbalance(p->world, n, base, truth, per, load, cimb);
    json_t *j =
        json_pack("{s:I, s:I, s:I, s:I, s:f, s:{s:o, s:f, s:I, s:I, s:I, s:f}, s:{s:o, s:I}}",
                  "samples", (json_int_t)n, "world", (json_int_t)p->world, "microbatches",
                  (json_int_t)p->micro, "token_budget", (json_int_t)p->token_budget, "noise",
                  o.noise, "packed", "imbalance_true", imbalance(imb, k), "fill", st.fill,
                  "oversize", (json_int_t)st.oversize, "steps", (json_int_t)st.steps,
                  "samples_per_step", (json_int_t)per_step, "ms_per_step",
                  st.steps ? ms / (double)st.steps : 0.0, "count_based", "imbalance_true",
                  imbalance(cimb, kc), "samples_per_rank", (json_int_t)per);
    char *s = json_dumps(j, JSON_COMPACT);
    printf("%s\n", s);
    free(s);
    json_decref(j);
    return 0;
}
