/* nftw, mkdtemp; the Makefile defines it too. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "tests/unit/fixtures.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>

/* Small integer hash: the texture must be identical on every host. */
static uint32_t fx_hash(uint32_t a, uint32_t b, uint32_t seed)
{
    uint32_t h = seed * 0x9E3779B9u ^ a * 0x85EBCA6Bu ^ b * 0xC2B2AE35u;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    h *= 0x846CA68Bu;
    h ^= h >> 16;
    return h;
}

static uint8_t fx_clamp(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

void fx_pattern_rgb(uint32_t w, uint32_t h, uint32_t seed, uint8_t *rgb)
{
    uint32_t phase = fx_hash(seed, 1, 7) % 256;
    for (uint32_t y = 0; y < h; y++) {
        for (uint32_t x = 0; x < w; x++) {
            /* Gradients across the image, a diagonal ramp seeded by phase,
             * 4x4-block luma texture (+-12) and a hard vertical edge. */
            int gx = (int)(x * 255 / (w > 1 ? w - 1 : 1));
            int gy = (int)(y * 255 / (h > 1 ? h - 1 : 1));
            int gd = (int)((x + y + phase) % 256);
            int tex = (int)(fx_hash(x / 4, y / 4, seed) % 25) - 12;
            int edge = x > w / 3 && x < w / 3 + w / 8 ? 40 : 0;
            uint8_t *p = rgb + ((size_t)y * w + x) * 3;
            p[0] = fx_clamp(gx * 3 / 4 + 20 + tex + edge);
            p[1] = fx_clamp(gy * 3 / 4 + 30 + tex - edge);
            p[2] = fx_clamp(gd / 2 + 60 + tex);
        }
    }
}

uint8_t fx_rgb_to_gray(const uint8_t rgb[3])
{
    return (uint8_t)((77u * rgb[0] + 150u * rgb[1] + 29u * rgb[2] + 128u) >> 8);
}

void fx_rgb_to_cmyk(const uint8_t rgb[3], bool inverted, uint8_t cmyk[4])
{
    unsigned m = rgb[0] > rgb[1] ? rgb[0] : rgb[1];
    m = m > rgb[2] ? m : rgb[2];
    cmyk[3] = (uint8_t)(255u - m);
    for (int i = 0; i < 3; i++) {
        /* (255 - C) = 255 * c / max, so (255 - C)(255 - K)/255 = c. */
        cmyk[i] = m == 0 ? 0 : (uint8_t)(255u - (255u * rgb[i] + m / 2) / m);
    }
    if (inverted) {
        for (int i = 0; i < 4; i++) {
            cmyk[i] = (uint8_t)(255u - cmyk[i]);
        }
    }
}

typedef struct fx_jerr_s {
    struct jpeg_error_mgr pub; /* first: libjpeg passes &pub */
    jmp_buf jmp;
} fx_jerr_t;

static void fx_error_exit(j_common_ptr c) { longjmp(((fx_jerr_t *)c->err)->jmp, 1); }

static void fx_emit_message(j_common_ptr c, int level) { (void)c, (void)level; }

static void fx_many_scans(struct jpeg_compress_struct *ci)
{
    int nc = ci->num_components;
    int n = 1 + nc * 63 * 10;
    jpeg_scan_info *scans = (*ci->mem->alloc_small)((j_common_ptr)ci, JPOOL_PERMANENT,
                                                    (size_t)n * sizeof(*scans));
    memset(scans, 0, (size_t)n * sizeof(*scans));
    scans[0].comps_in_scan = nc;
    for (int c = 0; c < nc; c++) {
        scans[0].component_index[c] = c;
    }
    jpeg_scan_info *s = scans + 1;
    for (int c = 0; c < nc; c++) {
        for (int k = 1; k < 64; k++) {
            for (int al = 9; al >= 0; al--, s++) {
                s->comps_in_scan = 1;
                s->component_index[0] = c;
                s->Ss = s->Se = k;
                s->Ah = al == 9 ? 0 : al + 1;
                s->Al = al;
            }
        }
    }
    ci->scan_info = scans;
    ci->num_scans = n;
}

/* setjmp lives here; the compressor belongs to the caller (see common/image/jpeg.c). */
static int fx_encode_run(struct jpeg_compress_struct *ci, fx_jerr_t *jerr,
                         const uint8_t *pixels, const fx_jpeg_opts_t *o, uint8_t **buf,
                         unsigned long *len)
{
    static const struct {
        J_COLOR_SPACE in, file;
        int comps;
    } map[] = {
        [FX_COLOR_YCBCR] = {JCS_RGB, JCS_YCbCr, 3},
        [FX_COLOR_GRAY] = {JCS_GRAYSCALE, JCS_GRAYSCALE, 1},
        [FX_COLOR_RGB] = {JCS_RGB, JCS_RGB, 3},
        [FX_COLOR_CMYK] = {JCS_CMYK, JCS_CMYK, 4},
        [FX_COLOR_YCCK] = {JCS_CMYK, JCS_YCCK, 4},
    };
    ci->err = jpeg_std_error(&jerr->pub);
    jerr->pub.error_exit = fx_error_exit;
    jerr->pub.emit_message = fx_emit_message;
    if (setjmp(jerr->jmp) != 0) {
        return -1;
    }
    jpeg_create_compress(ci);
    jpeg_mem_dest(ci, buf, len);
    ci->image_width = o->width;
    ci->image_height = o->height;
    ci->input_components = map[o->color].comps;
    ci->in_color_space = map[o->color].in;
    jpeg_set_defaults(ci);
    jpeg_set_colorspace(ci, map[o->color].file);
    jpeg_set_quality(ci, o->quality > 0 ? o->quality : 90, TRUE);
    if (o->h_samp != 0 && (o->color == FX_COLOR_YCBCR || o->color == FX_COLOR_YCCK)) {
        ci->comp_info[0].h_samp_factor = o->h_samp;
        ci->comp_info[0].v_samp_factor = o->v_samp;
    }
    if (o->color == FX_COLOR_CMYK && o->no_adobe) {
        ci->write_Adobe_marker = FALSE;
    }
    ci->restart_interval = o->restart_interval;
    if (o->many_scans) {
        fx_many_scans(ci);
    } else if (o->progressive) {
        jpeg_simple_progression(ci);
    }
    jpeg_start_compress(ci, TRUE);
    size_t stride = (size_t)o->width * (size_t)map[o->color].comps;
    while (ci->next_scanline < ci->image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + ci->next_scanline * stride);
        jpeg_write_scanlines(ci, &row, 1);
    }
    jpeg_finish_compress(ci);
    return 0;
}

int fx_jpeg_encode(const uint8_t *pixels, const fx_jpeg_opts_t *o, uint8_t **ret_buf,
                   size_t *ret_len)
{
    if (o->width == 0 || o->height == 0 || (unsigned)o->color > FX_COLOR_YCCK ||
        o->quality < 0 || o->quality > 100 || o->h_samp > 4 || o->v_samp > 4 ||
        (o->h_samp == 0) != (o->v_samp == 0)) {
        return -1;
    }
    struct jpeg_compress_struct ci;
    fx_jerr_t jerr;
    memset(&ci, 0, sizeof(ci));
    uint8_t *buf = NULL;
    unsigned long len = 0;
    int rc = fx_encode_run(&ci, &jerr, pixels, o, &buf, &len);
    jpeg_destroy_compress(&ci);
    if (rc < 0) {
        /* Not freed: after a mid-stream error buf may point to a block
         * libjpeg's memory destination already replaced and freed. Options
         * are checked above, so this only happens on out-of-memory. */
        return -1;
    }
    *ret_buf = buf;
    *ret_len = len;
    return 0;
}

int fx_make_jpeg(const fx_jpeg_opts_t *o, uint8_t **ret_buf, size_t *ret_len)
{
    size_t n = (size_t)o->width * o->height;
    uint8_t *rgb = malloc(n * 3);
    uint8_t *px = malloc(n * 4);
    int rc = -1;
    if (rgb == NULL || px == NULL) {
        goto out;
    }
    fx_pattern_rgb(o->width, o->height, o->seed, rgb);
    for (size_t i = 0; i < n; i++) {
        switch (o->color) {
        case FX_COLOR_GRAY:
            px[i] = fx_rgb_to_gray(rgb + i * 3);
            break;
        case FX_COLOR_CMYK:
        case FX_COLOR_YCCK:
            /* YCCK always has the Adobe marker; libjpeg expects inverted CMYK. */
            fx_rgb_to_cmyk(rgb + i * 3, !(o->color == FX_COLOR_CMYK && o->no_adobe),
                           px + i * 4);
            break;
        default:
            memcpy(px + i * 3, rgb + i * 3, 3);
            break;
        }
    }
    rc = fx_jpeg_encode(px, o, ret_buf, ret_len);
out:
    free(px);
    free(rgb);
    return rc;
}

int fx_make_jpeg_file(const char *path, const fx_jpeg_opts_t *o)
{
    uint8_t *buf;
    size_t len;
    if (fx_make_jpeg(o, &buf, &len) < 0) {
        return -1;
    }
    int rc = fx_write_file(path, buf, len);
    free(buf);
    return rc;
}

int fx_write_file(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -1;
    }
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            close(fd);
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return close(fd) == 0 ? 0 : -1;
}

int fx_read_file(const char *path, uint8_t **ret_buf, size_t *ret_len)
{
    FILE *f = fopen(path, "rbe");
    if (f == NULL) {
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *p = realloc(buf, cap);
            if (p == NULL) {
                free(buf);
                fclose(f);
                return -1;
            }
            buf = p;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            break;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return -1;
    }
    *ret_buf = buf;
    *ret_len = len;
    return 0;
}

int fx_mkdtemp(char *path)
{
    snprintf(path, FX_TMPDIR_LEN, "/tmp/sluice-test-XXXXXX");
    return mkdtemp(path) != NULL ? 0 : -1;
}

static int fx_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int fx_rmtree(const char *path)
{
    /* FTW_DEPTH: children before their directory; FTW_PHYS: never follow links. */
    return nftw(path, fx_rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

int fx_make_imagefolder(const char *root, int n, uint32_t w, uint32_t h)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/train", root);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        return -errno;
    }
    snprintf(path, sizeof(path), "%s/train/a", root);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        return -errno;
    }
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/train/a/%04d.jpg", root, i);
        fx_jpeg_opts_t o = {.width = w, .height = h, .seed = (uint32_t)i};
        int rc = fx_make_jpeg_file(path, &o);
        if (rc != 0) {
            return rc < 0 ? rc : -EIO;
        }
    }
    return 0;
}

int fx_run_suite(struct Suite *s, int nofork)
{
    SRunner *sr = srunner_create(s);
    if (nofork) {
        srunner_set_fork_status(sr, CK_NOFORK);
    }
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

int fx_mkdtemp_class(char *path, const char *cls)
{
    char sub[FX_TMPDIR_LEN + 300];
    if (fx_mkdtemp(path) != 0) {
        return -1;
    }
    snprintf(sub, sizeof(sub), "%s/train", path);
    if (mkdir(sub, 0755) != 0) {
        return -1;
    }
    snprintf(sub, sizeof(sub), "%s/train/%.200s", path, cls);
    return mkdir(sub, 0755) == 0 ? 0 : -1;
}

size_t fx_base64(const uint8_t *p, size_t n, char *out)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        out[o++] = A[w >> 18 & 63];
        out[o++] = A[w >> 12 & 63];
        out[o++] = i + 1 < n ? A[w >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? A[w & 63] : '=';
    }
    out[o] = '\0';
    return o;
}
