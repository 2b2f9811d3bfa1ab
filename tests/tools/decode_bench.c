/* decode_bench: the decode-only ceiling for scripts/bench-local.
 *
 *   decode_bench DIR [--seconds N]
 *
 * Walks DIR recursively for *.jpg / *.jpeg, reads every file into memory,
 * then decodes them round-robin with TurboJPEG (tjDecompress2, TJPF_RGB,
 * default flags: no fast DCT, no fast upsampling) on one thread until at least
 * N seconds (default 3) and one full pass have elapsed. Grayscale is decoded
 * to RGB like everything else. Files TurboJPEG cannot decode to RGB (CMYK,
 * corrupt) are found in a first, untimed pass, which also warms the caches;
 * they are counted as skipped and left out of the timed loop.
 *
 * Prints one JSON line on stdout:
 *   {"decoded": N, "seconds": S, "images_per_sec": R, "files": F, "skipped": K,
 *    "megapixels_per_sec": M}
 * Exit status: 0 ok, 1 runtime failure (no decodable file, I/O), 2 usage. */
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <turbojpeg.h>

typedef struct bench_file_s {
    char *path;       /* owned */
    unsigned char *buf; /* owned; file contents */
    size_t len;
    int width, height;
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
                         TJPF_RGB, 0);
}

static void bench_usage(FILE *to)
{
    fprintf(to, "usage: decode_bench DIR [--seconds N]\n"
                "  Decode every *.jpg under DIR with TurboJPEG to RGB on one thread, in a\n"
                "  loop for at least N seconds (default 3); print one JSON line.\n");
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    double seconds = 3.0;
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
    }
    if (max_pixels == 0) {
        fprintf(stderr, "decode_bench: no readable JPEG header under \"%s\"\n", dir);
        goto out;
    }
    out = malloc(max_pixels * 3);
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
