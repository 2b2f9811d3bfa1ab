/* decode_bench: the decode-only ceiling for scripts/bench-local.
 *
 *   decode_bench DIR [--seconds N]
 *
 * Walks DIR recursively for *.jpg / *.jpeg, reads every file into memory,
 * then decodes them round-robin with TurboJPEG (tjDecompress2, TJPF_RGB,
 * default flags: no fast DCT, no fast upsampling) on one thread until at least
 * N seconds (default 3) and one full pass have elapsed. Grayscale is decoded
 * to RGB like everything else; CMYK/YCCK files to CMYK (TurboJPEG has no
 * CMYK-to-RGB conversion; sluice converts them itself). Files TurboJPEG
 * cannot decode (corrupt) are found in a first, untimed pass, which also
 * warms the caches; they are counted as skipped and left out of the timed
 * loop.
 *
 * Prints one JSON line on stdout:
 *   {"decoded": N, "seconds": S, "images_per_sec": R, "files": F, "skipped": K,
 *    "megapixels_per_sec": M}
 *
 *   decode_bench DIR --fused SCALES [--seconds N]
 *
 * Times sluice's fused decode + random-resized-crop unit instead, stage by
 * stage, on the same files: for file i a crop is drawn as the pipeline draws
 * it (sl_rrc_params, scale 0.08-1, ratio 3/4-4/3, RNG keyed by seed 42,
 * epoch 0, index i: the same crop on every pass), the DCT scale is the
 * smallest M/8 of SCALES ("1,2,4,8", "all" = 1..8) that leaves the crop at
 * least 1.5 x 224 px each way (--margin F: F x 224 px; else 8/8), as the
 * pipeline picks with SCALES "1,2,3,4,5,6", then: sl_jpeg_probe, the region decode
 * (sl_jpeg_decode_region_timed, the pipeline's: RGB regions keep libjpeg's
 * whole column crop) and the antialiased resample to 224x224
 * (sl_img_resize_rect_ex, CLIP). images_per_sec counts those three only.
 * Separately timed, not in the rate: "entropy_ms", libjpeg at the same scale
 * skipping every row down to the crop's last (jpeg_skip_scanlines: entropy
 * decoding only, but for the last iMCU row), i.e. the part of the region
 * decode no scale or crop can remove; "idct_color_ms" = region - entropy;
 * "full_entropy_ms", the same for the whole image at 8/8 (a full decode's
 * share that is not IDCT, upsampling and colour); "decoded_fraction", the
 * mean share of the scaled image's pixels the region decode returned (the
 * columns libjpeg's crop keeps, the region's rows): with the ceiling's
 * full decode time, (full - full_entropy) x decoded_fraction is what the
 * region's IDCT and colour would cost at TurboJPEG's rate per pixel.
 * Adds "probe_ms", "region_ms", "resample_ms" per image and "scale_use"
 * (files per M in one pass, index 0 = 1/8). The untimed first pass also runs the
 * unfused path on every crop (sl_jpeg_decode, then the same resample of the
 * integer crop) and reports, per M, the mean and the worst per-sample mean
 * absolute difference in levels of 255: "mad_mean", "mad_worst" (-1: unused).
 * Also outside the rate, per image: "resample_ms_by_path", the same resample
 * again on each kernel this CPU runs (scalar, sse2, avx2; interleaved per
 * file, best of 3 calls each, every path's bytes checked equal to the
 * pipeline's), and
 * "tail_ms", the flip + normalize/CHW pass the pipeline runs after the unit,
 * and "normalize_chw_ms_by_path", that pass on each kernel (best of 3, bytes
 * checked).
 *
 *   decode_bench DIR --scan [--margin F]
 *
 * Which DCT scales pay off: the same crops; for each, region decode +
 * resample at every M/8 that leaves >= 1.5 x 224 px (--margin; the best
 * of 3 runs each, so a noisy neighbour does not decide). Prints one JSON
 * line per smallest feasible M ("min_m"): how many crops, and the mean ms at
 * each M >= min_m.
 * Exit status: 0 ok, 1 runtime failure (no decodable file, I/O), 2 usage. */
#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <jpeglib.h>
#include <turbojpeg.h>

#include "common/base/rng.h"
#include "common/image/simd.h"
#include "common/image/imgops.h"
#include "common/image/jpeg.h"
#include "common/sample/tensor.h"

#define BENCH_OUT 224

typedef struct bench_file_s {
    char *path;       /* owned */
    unsigned char *buf; /* owned; file contents */
    size_t len;
    int width, height;
    int pixel_format; /* TJPF_RGB, or TJPF_CMYK for CMYK/YCCK files */
} bench_file_t;

typedef struct bench_set_s {
    bench_file_t *files; /* owned array */
    size_t n, cap;
} bench_set_t;

/* nftw offers no user pointer: the walk appends to this set (main thread only). */
static bench_set_t g_set;
static int g_walk_err;

static double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int bench_has_jpeg_ext(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot != NULL && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0);
}

static int bench_read_file(const char *path, unsigned char **ret_buf, size_t *ret_len)
{
    FILE *f = NULL;
    unsigned char *buf = NULL;
    struct stat st;
    int rc = 0;

    f = fopen(path, "rbe");
    if (f == NULL) {
        rc = -errno;
        goto out;
    }
    if (fstat(fileno(f), &st) != 0) {
        rc = -errno;
        goto out;
    }
    /* +1 so an empty file still gets a non-NULL buffer. */
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    if (st.st_size > 0 && fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        rc = -EIO;
        goto out;
    }
    *ret_buf = buf;
    *ret_len = (size_t)st.st_size;
    buf = NULL;
out:
    free(buf);
    if (f != NULL) {
        fclose(f);
    }
    return rc;
}

static int bench_visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    bench_file_t *bf;

    if (type != FTW_F || !bench_has_jpeg_ext(path)) {
        return 0;
    }
    if (g_set.n == g_set.cap) {
        size_t cap = g_set.cap ? g_set.cap * 2 : 256;
        bench_file_t *grown = realloc(g_set.files, cap * sizeof(*grown));
        if (grown == NULL) {
            g_walk_err = -ENOMEM;
            return 1;
        }
        g_set.files = grown;
        g_set.cap = cap;
    }
    bf = &g_set.files[g_set.n];
    memset(bf, 0, sizeof(*bf));
    bf->path = strdup(path);
    if (bf->path == NULL) {
        g_walk_err = -ENOMEM;
        return 1;
    }
    g_walk_err = bench_read_file(path, &bf->buf, &bf->len);
    if (g_walk_err != 0) {
        fprintf(stderr, "decode_bench: cannot read \"%s\": %s\n", path, strerror(-g_walk_err));
        free(bf->path);
        return 1;
    }
    g_set.n++;
    return 0;
}

static int bench_cmp_path(const void *a, const void *b)
{
    return strcmp(((const bench_file_t *)a)->path, ((const bench_file_t *)b)->path);
}

static void bench_set_clear(bench_set_t *set)
{
    for (size_t i = 0; i < set->n; i++) {
        free(set->files[i].path);
        free(set->files[i].buf);
    }
    free(set->files);
    memset(set, 0, sizeof(*set));
}

static int bench_decode(tjhandle tj, bench_file_t *bf, unsigned char *out)
{
    return tjDecompress2(tj, bf->buf, (unsigned long)bf->len, out, bf->width, 0, bf->height,
                         bf->pixel_format, 0);
}

static void bench_usage(FILE *to)
{
    fprintf(to, "usage: decode_bench DIR [--seconds N] [--fused SCALES [--margin F] | --scan]\n"
                "  Decode every *.jpg under DIR with TurboJPEG to RGB on one thread, in a\n"
                "  loop for at least N seconds (default 3); print one JSON line.\n"
                "  --fused SCALES: time sluice's fused decode + random-resized-crop unit\n"
                "  by stage instead, DCT scales M/8 from SCALES (\"1,2,4,8\", \"all\").\n"
                "  --margin F: a scale must leave F x 224 px of the crop (default 1.5).\n"
                "  --scan: cost of region decode + resample at every usable M/8.\n");
}

/* Bit M-1 set: M/8 allowed. */
static int bench_parse_scales(const char *arg, unsigned *ret_mask)
{
    unsigned mask = 0;
    if (strcmp(arg, "all") == 0) {
        *ret_mask = 0xffu;
        return 0;
    }
    for (const char *p = arg; *p != '\0';) {
        char *end;
        long m = strtol(p, &end, 10);
        if (end == p || m < 1 || m > 8 || (*end != ',' && *end != '\0')) {
            return -EINVAL;
        }
        mask |= 1u << (m - 1);
        p = *end == ',' ? end + 1 : end;
    }
    *ret_mask = mask | 0x80u; /* 8/8 always: the fallback */
    return 0;
}

/* --margin: the scaled crop must keep margin x 224 px; the default is
 * pipeline.c's pick_scale rule (SCALE_MARGIN_NUM / SCALE_MARGIN_DEN). */
static double g_margin = 1.5;

/* The smallest allowed M with floor(side * M / 8) >= margin * out on both sides. */
static uint32_t bench_pick(unsigned mask, uint32_t w, uint32_t h)
{
    double need = g_margin * BENCH_OUT;
    for (uint32_t m = 1; m < 8; m++) {
        if ((mask & (1u << (m - 1))) && (double)((uint64_t)w * m / 8) >= need &&
            (double)((uint64_t)h * m / 8) >= need) {
            return m;
        }
    }
    return 8;
}

/* Entropy decoding down to scaled row y1 (see the top comment). Files were
 * validated by the untimed pass; libjpeg's default error handler exits. */
static void bench_entropy(bench_file_t *bf, uint32_t m, uint32_t y1)
{
    struct jpeg_decompress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, bf->buf, (unsigned long)bf->len);
    (void)jpeg_read_header(&ci, TRUE);
    ci.scale_num = m;
    ci.scale_denom = 8;
    /* As the unit decodes them (libjpeg has no CMYK-to-RGB conversion). */
    ci.out_color_space =
        ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK ? JCS_CMYK : JCS_RGB;
    ci.do_block_smoothing = FALSE;
    (void)jpeg_start_decompress(&ci);
    /* libjpeg-turbo returns at once, decoding nothing, when asked to skip
     * to the image's last row or past it: stop one row short, so a crop
     * that reaches the bottom counts its entropy decoding too. */
    if (y1 >= ci.output_height) {
        y1 = ci.output_height - 1;
    }
    if (y1 > 0) {
        (void)jpeg_skip_scanlines(&ci, y1);
    }
    jpeg_destroy_decompress(&ci);
}

/* The resample's and normalize_chw's kernels, timed side by side on the
 * same regions, each the best of BENCH_BEST_OF calls (a shared machine's
 * preemptions otherwise decide the comparison). */
#define BENCH_BEST_OF 3
#define BENCH_PATHS 3
static const sl_simd_e bench_path[BENCH_PATHS] = {
    SL_SIMD_SCALAR, SL_SIMD_SSE2, SL_SIMD_AVX2};
static const char *const bench_path_name[BENCH_PATHS] = {"scalar", "sse2", "avx2"};

typedef struct bench_fused_s {
    double probe, region, resample, entropy; /* seconds, summed */
    double full_entropy;                     /* the whole image's, at 8/8 */
    double decoded;                          /* sum of region / scaled image pixels */
    double by_path[BENCH_PATHS];             /* the resample again on each path */
    double tail;                             /* flip + normalize_chw */
    double norm_by_path[BENCH_PATHS];        /* normalize_chw again on each path */
    uint64_t scale_use[8];
    double mad_sum[8], mad_worst[8]; /* first pass only */
    sl_tensor_t *full, *ref;         /* non-NULL: compare with the unfused path */
    sl_tensor_t *alt, *chw, *chw2;   /* scratch: other paths' resample, the tail */
} bench_fused_t;

/* Mean absolute difference of two same-shape u8 tensors. */
static double bench_mad(const sl_tensor_t *a, const sl_tensor_t *b)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < a->nbytes; i++) {
        sum += (uint64_t)abs((int)a->data[i] - (int)b->data[i]);
    }
    return (double)sum / (double)a->nbytes;
}

static int bench_fused_one(bench_file_t *bf, size_t idx, unsigned mask, sl_tensor_t *reg,
                           sl_tensor_t *res, bench_fused_t *acc)
{
    static const double SCALE[2] = {0.08, 1.0};
    static const double RATIO[2] = {3.0 / 4.0, 4.0 / 3.0};
    char err[256];
    sl_jpeg_info_t info;
    sl_rng_t rng;
    uint32_t x, y, w, h, x0, y0;

    double t0 = bench_now();
    if (sl_jpeg_probe(bf->buf, bf->len, &info, err, sizeof(err)) != 0) {
        fprintf(stderr, "decode_bench: \"%s\": %s\n", bf->path, err);
        return -1;
    }
    sl_rng_init(&rng, 42, 0, idx, 0);
    sl_rrc_params(info.height, info.width, SCALE, RATIO, &rng, &x, &y, &w, &h);
    uint32_t m = bench_pick(mask, w, h);
    double t1 = bench_now();
    if (sl_jpeg_decode_region_timed(bf->buf, bf->len, UINT64_MAX, x, y, w, h, m, reg, &x0, &y0,
                                    NULL, err, sizeof(err)) != 0) {
        fprintf(stderr, "decode_bench: \"%s\": %s\n", bf->path, err);
        return -1;
    }
    double t2 = bench_now();
    double s = (double)m / 8.0;
    if (sl_img_resize_rect_ex(reg, x * s - x0, y * s - y0, w * s, h * s, BENCH_OUT, BENCH_OUT,
                              SL_RESIZE_CLIP, NULL, res) != 0) {
        fprintf(stderr, "decode_bench: \"%s\": resample failed\n", bf->path);
        return -1;
    }
    double t3 = bench_now();
    bench_entropy(bf, m, y0 + reg->h);
    double t4 = bench_now();
    bench_entropy(bf, 8, UINT32_MAX);
    acc->full_entropy += bench_now() - t4;
    uint64_t sw = ((uint64_t)info.width * m + 7) / 8, sh = ((uint64_t)info.height * m + 7) / 8;
    acc->decoded += (double)reg->w * reg->h / ((double)sw * (double)sh);
    /* Untimed by the rate: each kernel on the same region (starting at a
     * different one per file, so none always runs with warmer caches), and
     * the tail the pipeline runs after the unit. The paths must agree. */
    for (int k = 0; k < BENCH_PATHS; k++) {
        int pi = (int)((idx + (size_t)k) % BENCH_PATHS);
        if (!sl_simd_ok(bench_path[pi])) {
            continue;
        }
        double best = 1e30;
        for (int rep = 0; rep < BENCH_BEST_OF; rep++) {
            double a = bench_now();
            if (sl_img_resize_rect_path(reg, x * s - x0, y * s - y0, w * s, h * s, BENCH_OUT,
                                        BENCH_OUT, SL_RESIZE_CLIP, NULL, acc->alt,
                                        bench_path[pi]) != 0) {
                fprintf(stderr, "decode_bench: \"%s\": resample (%s) failed\n", bf->path,
                        bench_path_name[pi]);
                return -1;
            }
            double t = bench_now() - a;
            best = t < best ? t : best;
        }
        acc->by_path[pi] += best;
        if (acc->alt->nbytes != res->nbytes ||
            memcmp(acc->alt->data, res->data, res->nbytes) != 0) {
            fprintf(stderr, "decode_bench: \"%s\": the %s resample differs\n", bf->path,
                    bench_path_name[pi]);
            return -1;
        }
    }
    if (acc->full != NULL) {
        if (sl_jpeg_decode(bf->buf, bf->len, UINT64_MAX, acc->full, err, sizeof(err)) != 0 ||
            sl_img_resize_rect_ex(acc->full, x, y, w, h, BENCH_OUT, BENCH_OUT, SL_RESIZE_CLIP,
                                  NULL, acc->ref) != 0) {
            fprintf(stderr, "decode_bench: \"%s\": unfused path failed\n", bf->path);
            return -1;
        }
        double d = bench_mad(res, acc->ref);
        acc->mad_sum[m - 1] += d;
        acc->mad_worst[m - 1] = d > acc->mad_worst[m - 1] ? d : acc->mad_worst[m - 1];
    }
    /* Last: the flip changes res. */
    static const float MEAN[3] = {0.485f, 0.456f, 0.406f};
    static const float STD[3] = {0.229f, 0.224f, 0.225f};
    double t5 = bench_now();
    if (sl_img_flip_h(res) != 0 || sl_img_normalize_chw(res, MEAN, STD, acc->chw) != 0) {
        fprintf(stderr, "decode_bench: \"%s\": tail failed\n", bf->path);
        return -1;
    }
    acc->tail += bench_now() - t5;
    for (int k = 0; k < BENCH_PATHS; k++) {
        int pi = (int)((idx + (size_t)k) % BENCH_PATHS);
        if (!sl_simd_ok(bench_path[pi])) {
            continue;
        }
        double best = 1e30;
        for (int rep = 0; rep < BENCH_BEST_OF; rep++) {
            double a = bench_now();
            if (sl_img_normalize_chw_path(res, MEAN, STD, acc->chw2, bench_path[pi]) != 0) {
                fprintf(stderr, "decode_bench: \"%s\": normalize_chw (%s) failed\n",
                        bf->path, bench_path_name[pi]);
                return -1;
            }
            double t = bench_now() - a;
            best = t < best ? t : best;
        }
        acc->norm_by_path[pi] += best;
        if (memcmp(acc->chw2->data, acc->chw->data, acc->chw->nbytes) != 0) {
            fprintf(stderr, "decode_bench: \"%s\": the %s normalize_chw differs\n", bf->path,
                    bench_path_name[pi]);
            return -1;
        }
    }
    acc->probe += t1 - t0;
    acc->region += t2 - t1;
    acc->resample += t3 - t2;
    acc->entropy += t4 - t3;
    acc->scale_use[m - 1]++;
    return 0;
}

/* Region decode + resample of one crop at m/8, best of 3, in seconds. */
static double bench_scan_one(bench_file_t *bf, uint32_t m, uint32_t x, uint32_t y, uint32_t w,
                             uint32_t h, sl_tensor_t *reg, sl_tensor_t *res)
{
    double best = 1e30, s = (double)m / 8.0;
    for (int k = 0; k < 3; k++) {
        uint32_t x0, y0;
        double t0 = bench_now();
        if (sl_jpeg_decode_region_timed(bf->buf, bf->len, UINT64_MAX, x, y, w, h, m, reg, &x0,
                                        &y0, NULL, NULL, 0) != 0 ||
            sl_img_resize_rect_ex(reg, x * s - x0, y * s - y0, w * s, h * s, BENCH_OUT,
                                  BENCH_OUT, SL_RESIZE_CLIP, NULL, res) != 0) {
            return -1.0;
        }
        double t = bench_now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

/* The --scan mode; prints one JSON line per smallest feasible M. */
static int bench_scan(size_t n)
{
    static const double SCALE[2] = {0.08, 1.0};
    static const double RATIO[2] = {3.0 / 4.0, 4.0 / 3.0};
    double cost[8][8];
    uint64_t count[8];
    sl_tensor_t reg, res;
    int rc = -1;

    memset(cost, 0, sizeof(cost));
    memset(count, 0, sizeof(count));
    sl_tensor_init(&reg);
    sl_tensor_init(&res);
    for (size_t i = 0; i < n; i++) {
        bench_file_t *bf = &g_set.files[i];
        sl_jpeg_info_t info;
        sl_rng_t rng;
        uint32_t x, y, w, h;
        if (sl_jpeg_probe(bf->buf, bf->len, &info, NULL, 0) != 0) {
            goto out;
        }
        sl_rng_init(&rng, 42, 0, i, 0);
        sl_rrc_params(info.height, info.width, SCALE, RATIO, &rng, &x, &y, &w, &h);
        uint32_t mmin = bench_pick(0xffu, w, h);
        count[mmin - 1]++;
        for (uint32_t m = mmin; m <= 8; m++) {
            double t = bench_scan_one(bf, m, x, y, w, h, &reg, &res);
            if (t < 0) {
                fprintf(stderr, "decode_bench: \"%s\": decode failed\n", bf->path);
                goto out;
            }
            cost[mmin - 1][m - 1] += t;
        }
    }
    for (int a = 0; a < 8; a++) {
        if (count[a] == 0) {
            continue;
        }
        printf("{\"min_m\": %d, \"crops\": %llu, \"ms_at_m\": {", a + 1,
               (unsigned long long)count[a]);
        for (int m = a; m < 8; m++) {
            printf("%s\"%d\": %.3f", m > a ? ", " : "", m + 1,
                   cost[a][m] * 1e3 / (double)count[a]);
        }
        printf("}}\n");
    }
    fflush(stdout);
    rc = 0;
out:
    sl_tensor_free(&reg);
    sl_tensor_free(&res);
    return rc;
}

/* The --fused mode over the validated files; prints the JSON line. */
static int bench_fused(size_t n, unsigned mask, double seconds)
{
    sl_tensor_t reg, res, full, ref, alt, chw, chw2;
    bench_fused_t acc, warm;
    uint64_t done = 0;
    int rc = -1;

    sl_tensor_init(&reg);
    sl_tensor_init(&res);
    sl_tensor_init(&full);
    sl_tensor_init(&ref);
    sl_tensor_init(&alt);
    sl_tensor_init(&chw);
    sl_tensor_init(&chw2);
    memset(&acc, 0, sizeof(acc));
    memset(&warm, 0, sizeof(warm));
    acc.alt = warm.alt = &alt;
    acc.chw = warm.chw = &chw;
    acc.chw2 = warm.chw2 = &chw2;
    warm.full = &full;
    warm.ref = &ref;
    /* Untimed first pass: the tolerance, and buffers reach their largest size. */
    for (size_t i = 0; i < n; i++) {
        if (bench_fused_one(&g_set.files[i], i, mask, &reg, &res, &warm) != 0) {
            goto out;
        }
    }
    double t0 = bench_now();
    while (done < n || bench_now() - t0 < seconds) {
        for (size_t i = 0; i < n; i++, done++) {
            if (bench_fused_one(&g_set.files[i], i, mask, &reg, &res, &acc) != 0) {
                goto out;
            }
        }
    }
    double unit = acc.probe + acc.region + acc.resample;
    double per = 1e3 / (double)done;
    printf("{\"decoded\": %llu, \"seconds\": %.3f, \"images_per_sec\": %.1f, "
           "\"probe_ms\": %.3f, \"region_ms\": %.3f, \"entropy_ms\": %.3f, "
           "\"idct_color_ms\": %.3f, \"resample_ms\": %.3f, \"full_entropy_ms\": %.3f, "
           "\"decoded_fraction\": %.3f, ",
           (unsigned long long)done, unit, (double)done / unit, acc.probe * per,
           acc.region * per, acc.entropy * per, (acc.region - acc.entropy) * per,
           acc.resample * per, acc.full_entropy * per, acc.decoded / (double)done);
    printf("\"tail_ms\": %.3f, \"resample_ms_by_path\": {", acc.tail * per);
    for (int k = 0, first = 1; k < BENCH_PATHS; k++) {
        if (sl_simd_ok(bench_path[k])) {
            printf("%s\"%s\": %.3f", first ? "" : ", ", bench_path_name[k],
                   acc.by_path[k] * per);
            first = 0;
        }
    }
    printf("}, \"normalize_chw_ms_by_path\": {");
    for (int k = 0, first = 1; k < BENCH_PATHS; k++) {
        if (sl_simd_ok(bench_path[k])) {
            printf("%s\"%s\": %.3f", first ? "" : ", ", bench_path_name[k],
                   acc.norm_by_path[k] * per);
            first = 0;
        }
    }
    printf("}, \"scale_use\": [");
    for (int m = 0; m < 8; m++) {
        printf("%s%llu", m ? ", " : "", (unsigned long long)warm.scale_use[m]);
    }
    for (int k = 0; k < 2; k++) {
        printf("], \"%s\": [", k == 0 ? "mad_mean" : "mad_worst");
        for (int m = 0; m < 8; m++) {
            double v = warm.scale_use[m] == 0 ? -1.0
                       : k == 0                ? warm.mad_sum[m] / (double)warm.scale_use[m]
                                               : warm.mad_worst[m];
            printf("%s%.3f", m ? ", " : "", v);
        }
    }
    printf("]}\n");
    fflush(stdout);
    rc = 0;
out:
    sl_tensor_free(&chw2);
    sl_tensor_free(&chw);
    sl_tensor_free(&alt);
    sl_tensor_free(&ref);
    sl_tensor_free(&full);
    sl_tensor_free(&reg);
    sl_tensor_free(&res);
    return rc;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    double seconds = 3.0;
    unsigned fused_mask = 0;
    bool scan = false;
    tjhandle tj = NULL;
    unsigned char *out = NULL;
    size_t max_pixels = 0, skipped = 0, usable = 0;
    uint64_t decoded = 0, pixels = 0;
    double t0, elapsed;
    int rc = 1;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            bench_usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            char *end;
            seconds = strtod(argv[++i], &end);
            if (*end != '\0' || !(seconds > 0.0) || seconds > 86400.0) {
                fprintf(stderr, "decode_bench: bad --seconds \"%s\"\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--fused") == 0 && i + 1 < argc) {
            if (bench_parse_scales(argv[++i], &fused_mask) != 0) {
                fprintf(stderr, "decode_bench: bad --fused \"%s\"\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--margin") == 0 && i + 1 < argc) {
            char *end;
            g_margin = strtod(argv[++i], &end);
            if (*end != '\0' || !(g_margin >= 1.0) || g_margin > 8.0) {
                fprintf(stderr, "decode_bench: bad --margin \"%s\"\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--scan") == 0) {
            scan = true;
        } else if (argv[i][0] != '-' && dir == NULL) {
            dir = argv[i];
        } else {
            bench_usage(stderr);
            return 2;
        }
    }
    if (dir == NULL) {
        bench_usage(stderr);
        return 2;
    }

    if (nftw(dir, bench_visit, 32, FTW_PHYS) != 0) {
        if (g_walk_err == 0) {
            fprintf(stderr, "decode_bench: cannot walk \"%s\": %s\n", dir, strerror(errno));
        } else if (g_walk_err == -ENOMEM) {
            fprintf(stderr, "decode_bench: out of memory\n");
        }
        goto out;
    }
    if (g_set.n == 0) {
        fprintf(stderr, "decode_bench: no *.jpg files under \"%s\"\n", dir);
        goto out;
    }
    /* A fixed order whatever the directory order: runs are comparable. */
    qsort(g_set.files, g_set.n, sizeof(g_set.files[0]), bench_cmp_path);

    tj = tjInitDecompress();
    if (tj == NULL) {
        fprintf(stderr, "decode_bench: tjInitDecompress: %s\n", tjGetErrorStr2(NULL));
        goto out;
    }

    /* Headers first: size the one output buffer. */
    for (size_t i = 0; i < g_set.n; i++) {
        bench_file_t *bf = &g_set.files[i];
        int subsamp, colorspace;
        if (tjDecompressHeader3(tj, bf->buf, (unsigned long)bf->len, &bf->width, &bf->height,
                                &subsamp, &colorspace) != 0) {
            bf->width = bf->height = 0;
            continue;
        }
        if ((size_t)bf->width * (size_t)bf->height > max_pixels) {
            max_pixels = (size_t)bf->width * (size_t)bf->height;
        }
        /* TurboJPEG will not turn CMYK into RGB: decode those to CMYK, so
         * the ceiling decodes every file sluice does (skipping them made it
         * look faster on sets with CMYK photos). */
        bf->pixel_format =
            colorspace == TJCS_CMYK || colorspace == TJCS_YCCK ? TJPF_CMYK : TJPF_RGB;
    }
    if (max_pixels == 0) {
        fprintf(stderr, "decode_bench: no readable JPEG header under \"%s\"\n", dir);
        goto out;
    }
    out = malloc(max_pixels * 4);
    if (out == NULL) {
        fprintf(stderr, "decode_bench: out of memory (%zu pixels)\n", max_pixels);
        goto out;
    }

    /* Untimed pass: drop what cannot be decoded to RGB, warm the caches. Kept
     * files are compacted to the front so the timed loop has no branches. */
    for (size_t i = 0; i < g_set.n; i++) {
        bench_file_t *bf = &g_set.files[i];
        if (bf->width == 0 || bench_decode(tj, bf, out) != 0) {
            fprintf(stderr, "decode_bench: skipping \"%s\": %s\n", bf->path,
                    bf->width == 0 ? "bad header" : tjGetErrorStr2(tj));
            skipped++;
            free(bf->path);
            free(bf->buf);
            continue;
        }
        g_set.files[usable++] = *bf;
    }
    g_set.n = usable;
    if (usable == 0) {
        fprintf(stderr, "decode_bench: no decodable JPEG under \"%s\"\n", dir);
        goto out;
    }

    if (scan) {
        rc = bench_scan(usable) == 0 ? 0 : 1;
        goto out;
    }
    if (fused_mask != 0) {
        rc = bench_fused(usable, fused_mask, seconds) == 0 ? 0 : 1;
        goto out;
    }
    t0 = bench_now();
    for (;;) {
        for (size_t i = 0; i < usable; i++) {
            bench_file_t *bf = &g_set.files[i];
            if (bench_decode(tj, bf, out) != 0) {
                fprintf(stderr, "decode_bench: \"%s\" failed on a second decode: %s\n",
                        bf->path, tjGetErrorStr2(tj));
                goto out;
            }
            decoded++;
            pixels += (uint64_t)bf->width * (uint64_t)bf->height;
            /* Stop mid-pass only after one full pass: every file counts once. */
            if (decoded >= usable && bench_now() - t0 >= seconds) {
                goto done;
            }
        }
    }
done:
    elapsed = bench_now() - t0;
    printf("{\"decoded\": %llu, \"seconds\": %.3f, \"images_per_sec\": %.1f, \"files\": %zu, "
           "\"skipped\": %zu, \"megapixels_per_sec\": %.2f}\n",
           (unsigned long long)decoded, elapsed, (double)decoded / elapsed, usable + skipped,
           skipped, (double)pixels / 1e6 / elapsed);
    fflush(stdout);
    rc = 0;
out:
    free(out);
    if (tj != NULL) {
        tjDestroy(tj);
    }
    bench_set_clear(&g_set);
    return rc;
}
