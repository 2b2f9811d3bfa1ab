/* make_corpus: writes the seed corpora of the fuzz targets (small valid and
 * nearly valid inputs) into tests/fuzz/corpus/<target>/. Deterministic, so
 * re-running it rewrites the same files. Built and run by
 * tests/fuzz/make-corpus.sh; the files it writes are committed, so nobody
 * needs to run it unless the formats change.
 *
 * Usage: make_corpus OUTDIR */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <png.h>
#include <zlib.h>

#include "common/rpc/rpc.h"
#include "proto/sluice.pb-c.h"
#include "tests/unit/fixtures.h"

static const char *g_out;

static void die(const char *what)
{
    fprintf(stderr, "make_corpus: %s\n", what);
    exit(1);
}

static void put(const char *target, const char *name, const void *buf, size_t len)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", g_out, target);
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        die(path);
    }
    snprintf(path, sizeof(path), "%s/%s/%s", g_out, target, name);
    if (fx_write_file(path, buf, len) != 0) {
        die(path);
    }
}

static void put_str(const char *target, const char *name, const char *s)
{
    put(target, name, s, strlen(s));
}

/* ------------------------------------------------------------ growable buffer */

typedef struct buf_s {
    uint8_t *p;
    size_t n, cap;
} buf_t;

static void buf_add(buf_t *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + n) {
            cap *= 2;
        }
        b->p = realloc(b->p, cap);
        if (b->p == NULL) {
            die("out of memory");
        }
        b->cap = cap;
    }
    if (n > 0) {
        memcpy(b->p + b->n, src, n);
    }
    b->n += n;
}

static void buf_zero(buf_t *b, size_t n)
{
    static const uint8_t z[512];
    while (n > 0) {
        size_t k = n < sizeof(z) ? n : sizeof(z);
        buf_add(b, z, k);
        n -= k;
    }
}

/* ------------------------------------------------------------ jpeg */

static uint8_t *jpeg(const fx_jpeg_opts_t *o, size_t *len)
{
    uint8_t *p = NULL;
    if (fx_make_jpeg(o, &p, len) != 0) {
        die("jpeg encode failed");
    }
    return p;
}

static void make_jpeg_seeds(void)
{
    static const struct {
        const char *name;
        fx_jpeg_opts_t o;
    } SEEDS[] = {
        {"ycbcr420_16x16.jpg", {.width = 16, .height = 16, .quality = 75}},
        {"gray_17x9.jpg", {.width = 17, .height = 9, .color = FX_COLOR_GRAY}},
        {"progressive_24x16.jpg", {.width = 24, .height = 16, .progressive = true}},
        {"cmyk_adobe_16x8.jpg", {.width = 16, .height = 8, .color = FX_COLOR_CMYK}},
        {"ycck_16x8.jpg", {.width = 16, .height = 8, .color = FX_COLOR_YCCK}},
        {"rgb_16x16.jpg", {.width = 16, .height = 16, .color = FX_COLOR_RGB}},
        {"restart_422_32x16.jpg",
         {.width = 32, .height = 16, .restart_interval = 1, .h_samp = 2, .v_samp = 1}},
        {"progressive_444_8x8.jpg",
         {.width = 8, .height = 8, .progressive = true, .h_samp = 1, .v_samp = 1}},
        {"odd_33x31_q20.jpg", {.width = 33, .height = 31, .quality = 20, .seed = 5}},
        {"cmyk_plain_8x8.jpg", {.width = 8, .height = 8, .color = FX_COLOR_CMYK,
                                .no_adobe = true}},
    };
    for (size_t i = 0; i < sizeof(SEEDS) / sizeof(SEEDS[0]); i++) {
        size_t len = 0;
        uint8_t *p = jpeg(&SEEDS[i].o, &len);
        put("jpeg", SEEDS[i].name, p, len);
        if (i == 0) {
            put("jpeg", "truncated_16x16.jpg", p, len / 2);
            /* The same file claiming 4000x4000 in its frame header: a bomb
             * above the harness's 4 Mpixel limit. */
            for (size_t k = 0; k + 8 < len; k++) {
                if (p[k] == 0xFF && p[k + 1] == 0xC0) {
                    p[k + 5] = 4000 >> 8;
                    p[k + 6] = 4000 & 0xFF;
                    p[k + 7] = 4000 >> 8;
                    p[k + 8] = 4000 & 0xFF;
                    break;
                }
            }
            put("jpeg", "bomb_4000x4000.jpg", p, len);
        }
        free(p);
    }
    put("jpeg", "not_jpeg.bin", "GIF89a", 6);
}

/* ------------------------------------------------------------ tar */

/* One 512-byte header. name/prefix as given; size octal, or base-256 when
 * b256; checksum filled in. */
static void tar_header(buf_t *b, const char *name, const char *prefix, char type,
                       uint64_t size, int b256, int ustar)
{
    uint8_t h[512];
    memset(h, 0, sizeof(h));
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "0000644");
    snprintf((char *)h + 108, 8, "0001750");
    snprintf((char *)h + 116, 8, "0001750");
    if (b256) {
        h[124] = 0x80;
        for (int i = 0; i < 8; i++) {
            h[135 - i] = (uint8_t)(size >> (8 * i));
        }
    } else {
        snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    }
    snprintf((char *)h + 136, 12, "%011o", 1700000000u);
    h[156] = (uint8_t)type;
    if (ustar) {
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        if (prefix != NULL) {
            snprintf((char *)h + 345, 155, "%s", prefix);
        }
    } else {
        memcpy(h + 257, "ustar  ", 8); /* GNU magic */
    }
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) {
        sum += h[i];
    }
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    buf_add(b, h, sizeof(h));
}

static void tar_member(buf_t *b, const char *name, const void *data, size_t len)
{
    tar_header(b, name, NULL, '0', len, 0, 1);
    buf_add(b, data, len);
    buf_zero(b, (512 - len % 512) % 512);
}

static void tar_pax(buf_t *b, char type, const char *records)
{
    size_t len = strlen(records);
    tar_header(b, "PaxHeaders/x", NULL, type, len, 0, 1);
    buf_add(b, records, len);
    buf_zero(b, (512 - len % 512) % 512);
}

static void tar_end(buf_t *b) { buf_zero(b, 1024); }

static void make_tar_seeds(void)
{
    fx_jpeg_opts_t o = {.width = 8, .height = 8, .quality = 50};
    size_t jlen = 0;
    uint8_t *jp = jpeg(&o, &jlen);

    buf_t b = {0};
    tar_member(&b, "0001.jpg", jp, jlen);
    tar_member(&b, "0001.cls", "3\n", 2);
    tar_member(&b, "0002.cls", " 7 ", 3);
    tar_member(&b, "0002.jpg", jp, jlen);
    tar_member(&b, "0003.txt", "caption", 7);
    tar_end(&b);
    put("tar", "ustar_cls.tar", b.p, b.n);

    /* GNU long name, a base-256 size, a directory and a symlink. */
    b.n = 0;
    char longname[200];
    memset(longname, 'd', sizeof(longname));
    memcpy(longname + 100, "/n0144_long.jpg", 16);
    size_t lnlen = strlen(longname) + 1;
    tar_header(&b, "././@LongLink", NULL, 'L', lnlen, 0, 0);
    buf_add(&b, longname, lnlen);
    buf_zero(&b, (512 - lnlen % 512) % 512);
    tar_header(&b, "dddd", NULL, '0', jlen, 0, 0);
    buf_add(&b, jp, jlen);
    buf_zero(&b, (512 - jlen % 512) % 512);
    tar_header(&b, "dir/", NULL, '5', 0, 0, 0);
    tar_header(&b, "dir/link.jpg", NULL, '2', 0, 0, 0);
    tar_header(&b, "b256.jpg", NULL, '0', jlen, 1, 0);
    buf_add(&b, jp, jlen);
    buf_zero(&b, (512 - jlen % 512) % 512);
    tar_end(&b);
    put("tar", "gnu_longname.tar", b.p, b.n);

    /* pax: a global header, then path and size records for one member. */
    b.n = 0;
    tar_pax(&b, 'g', "22 comment=fuzz seed\n");
    char rec[128];
    snprintf(rec, sizeof(rec), "30 path=sub/with_pax_name.jpg\n%d size=%zu\n",
             (int)(strlen(" size=\n") + 2 + snprintf(NULL, 0, "%zu", jlen)), jlen);
    tar_pax(&b, 'x', rec);
    tar_header(&b, "ignored", NULL, '0', 0, 0, 1);
    buf_add(&b, jp, jlen);
    buf_zero(&b, (512 - jlen % 512) % 512);
    tar_member(&b, "with_pax_name.cls", "12", 2);
    tar_end(&b);
    put("tar", "pax.tar", b.p, b.n);

    /* ustar prefix field, then a member that runs past the end of the file. */
    b.n = 0;
    tar_header(&b, "p.jpg", "some/prefix", '0', jlen, 0, 1);
    buf_add(&b, jp, jlen);
    buf_zero(&b, (512 - jlen % 512) % 512);
    tar_header(&b, "cut.jpg", NULL, '0', 100000, 0, 1);
    buf_add(&b, jp, jlen);
    put("tar", "prefix_truncated.tar", b.p, b.n);

    free(b.p);
    free(jp);
}

/* ------------------------------------------------------------ png */

static void png_sink(png_structp png, png_bytep data, size_t n)
{
    buf_add(png_get_io_ptr(png), data, n);
}

static void png_flush(png_structp png) { (void)png; }

/* A w x h PNG of colour type ct at depth, a deterministic pattern; a
 * palette of 16 entries (with tRNS when trns). */
static void png_make(buf_t *b, uint32_t w, uint32_t h, int depth, int ct, int interlace,
                     int trns)
{
    int ch = ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_PALETTE ? 1
             : ct == PNG_COLOR_TYPE_GRAY_ALPHA                          ? 2
             : ct == PNG_COLOR_TYPE_RGB                                 ? 3
                                                                        : 4;
    size_t rowbytes = ((size_t)w * (size_t)ch * (size_t)depth + 7) / 8;
    uint8_t *raw = calloc(h, rowbytes);
    png_bytep *rows = calloc(h, sizeof(*rows));
    if (raw == NULL || rows == NULL) {
        die("out of memory");
    }
    for (uint32_t y = 0; y < h; y++) {
        rows[y] = raw + y * rowbytes;
        for (size_t i = 0; i < rowbytes; i++) {
            uint8_t v = (uint8_t)(i * 37u + y * 91u + 13u);
            rows[y][i] = ct == PNG_COLOR_TYPE_PALETTE && depth == 8 ? v % 16 : v;
        }
    }
    if (ct == PNG_COLOR_TYPE_PALETTE && depth < 8) {
        /* Every index of a 1/2/4-bit palette image fits a 16-entry palette
         * only at depth <= 4: fine here. */
    }
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (png == NULL || info == NULL || setjmp(png_jmpbuf(png))) {
        die("libpng writer failed");
    }
    png_set_write_fn(png, b, png_sink, png_flush);
    png_set_IHDR(png, info, w, h, depth, ct, interlace, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_color pal[16];
    png_byte alpha[16];
    for (int i = 0; i < 16; i++) {
        pal[i].red = (png_byte)(i * 16);
        pal[i].green = (png_byte)(255 - i * 16);
        pal[i].blue = (png_byte)(i * 7);
        alpha[i] = (png_byte)(i * 17);
    }
    if (ct == PNG_COLOR_TYPE_PALETTE) {
        png_set_PLTE(png, info, pal, 16);
    }
    if (trns) {
        png_color_16 tc = {0};
        png_set_tRNS(png, info, alpha, ct == PNG_COLOR_TYPE_PALETTE ? 8 : 0, &tc);
    }
    png_write_info(png, info);
    png_write_image(png, rows);
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(rows);
    free(raw);
}

static void make_png_seeds(void)
{
    static const struct {
        const char *name;
        uint32_t w, h;
        int depth, ct, interlace, trns;
    } SEEDS[] = {
        {"gray1_5x3.png", 5, 3, 1, PNG_COLOR_TYPE_GRAY, 0, 0},
        {"gray16_4x4.png", 4, 4, 16, PNG_COLOR_TYPE_GRAY, 0, 1},
        {"palette4_trns_9x7.png", 9, 7, 4, PNG_COLOR_TYPE_PALETTE, 0, 1},
        {"palette8_adam7_6x6.png", 6, 6, 8, PNG_COLOR_TYPE_PALETTE, 1, 0},
        {"rgb8_adam7_7x5.png", 7, 5, 8, PNG_COLOR_TYPE_RGB, 1, 0},
        {"rgb16_3x2.png", 3, 2, 16, PNG_COLOR_TYPE_RGB, 0, 1},
        {"gray_alpha8_4x3.png", 4, 3, 8, PNG_COLOR_TYPE_GRAY_ALPHA, 0, 0},
        {"rgba16_adam7_5x9.png", 5, 9, 16, PNG_COLOR_TYPE_RGB_ALPHA, 1, 0},
        {"rgb8_40x24.png", 40, 24, 8, PNG_COLOR_TYPE_RGB, 0, 0},
    };
    buf_t b = {0};
    for (size_t i = 0; i < sizeof(SEEDS) / sizeof(SEEDS[0]); i++) {
        b.n = 0;
        png_make(&b, SEEDS[i].w, SEEDS[i].h, SEEDS[i].depth, SEEDS[i].ct, SEEDS[i].interlace,
                 SEEDS[i].trns);
        put("png", SEEDS[i].name, b.p, b.n);
    }
    /* Cut inside the image data. */
    b.n = 0;
    png_make(&b, 40, 24, 8, PNG_COLOR_TYPE_RGB, 0, 0);
    put("png", "truncated_40x24.png", b.p, b.n / 2);
    /* A bomb: 5000 x 5000 in the header, a few bytes of data. */
    b.n = 0;
    png_make(&b, 5000, 1, 8, PNG_COLOR_TYPE_GRAY, 0, 0);
    uint8_t *ihdr = b.p + 8;
    ihdr[8 + 4] = 0, ihdr[8 + 5] = 0, ihdr[8 + 6] = 0x13, ihdr[8 + 7] = 0x88; /* height */
    uint32_t crc = (uint32_t)crc32(0, ihdr + 4, 17);
    for (int k = 0; k < 4; k++) {
        ihdr[21 + k] = (uint8_t)(crc >> (24 - 8 * k));
    }
    put("png", "bomb_5000x5000.png", b.p, b.n);
    put_str("png", "not_png.bin", "\x89PNG\r\n\x1a\x0a short");
    free(b.p);
}

/* ------------------------------------------------------------ records */

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* A record field (docs/records.md): header, payload, zero padding. */
static void rec_field(buf_t *b, uint32_t *nfields, unsigned kind, unsigned dtype,
                      unsigned layout, uint32_t count, uint32_t h, uint32_t w, uint32_t c,
                      uint32_t src_h, uint32_t src_w, const void *data, size_t n)
{
    uint8_t f[40] = {0};
    f[0] = (uint8_t)kind;
    f[1] = (uint8_t)dtype;
    f[2] = (uint8_t)layout;
    le32(f + 4, count);
    le32(f + 8, h);
    le32(f + 12, w);
    le32(f + 16, c);
    le32(f + 20, src_h);
    le32(f + 24, src_w);
    le32(f + 32, (uint32_t)n);
    buf_add(b, f, sizeof(f));
    buf_add(b, data, n);
    buf_zero(b, (8 - n % 8) % 8);
    (*nfields)++;
}

static void rec_bytes(buf_t *b, uint32_t *nf, unsigned kind, const void *data, size_t n)
{
    rec_field(b, nf, kind, 0, 0, 1, (uint32_t)n, 1, 1, 0, 0, data, n);
}

static void rec_begin(buf_t *b)
{
    b->n = 0;
    buf_zero(b, 16);
    memcpy(b->p, "SLR1", 4);
}

static void rec_end(buf_t *b, uint32_t nf, const char *name)
{
    le32(b->p + 4, nf);
    le32(b->p + 8, (uint32_t)b->n);
    le32(b->p + 12, 0);
    put("record", name, b->p, b->n);
}

static void make_record_seeds(void)
{
    fx_jpeg_opts_t o = {.width = 20, .height = 12, .quality = 60};
    size_t jlen = 0;
    uint8_t *jp = jpeg(&o, &jlen);
    buf_t pngb = {0};
    png_make(&pngb, 9, 14, 8, PNG_COLOR_TYPE_PALETTE, 0, 1);
    buf_t b = {0};
    uint32_t nf = 0;
    const char *text = "two pictures: \xe7\x8c\xab \xf0\x9f\x90\x88 cat";
    uint8_t label[4] = {3, 0, 0, 0};

    rec_begin(&b);
    nf = 0;
    rec_bytes(&b, &nf, 1, "k1", 2);
    rec_field(&b, &nf, 2, 3, 0, 1, 1, 1, 1, 0, 0, label, 4);
    rec_bytes(&b, &nf, 3, text, strlen(text));
    rec_bytes(&b, &nf, 4, "{\"src\":\"coco\"}", 14);
    rec_bytes(&b, &nf, 7, jp, jlen);
    rec_bytes(&b, &nf, 7, pngb.p, pngb.n);
    rec_end(&b, nf, "jpeg_png_text.rec");

    /* What a peer sends after some units: tokens, pixels, tiles. */
    rec_begin(&b);
    nf = 0;
    rec_bytes(&b, &nf, 1, "k2", 2);
    rec_bytes(&b, &nf, 3, "hi", 2);
    uint32_t ids[3] = {'h', 'i', 9};
    rec_field(&b, &nf, 5, 3, 0, 1, 3, 1, 1, 0, 0, ids, sizeof(ids));
    uint8_t pix[6 * 5 * 3];
    for (size_t i = 0; i < sizeof(pix); i++) {
        pix[i] = (uint8_t)(i * 29);
    }
    rec_field(&b, &nf, 8, 1, 0, 1, 6, 5, 3, 6, 5, pix, sizeof(pix));
    uint8_t tiles[2 * 3 * 4 * 4];
    memset(tiles, 77, sizeof(tiles));
    rec_field(&b, &nf, 9, 1, 1, 2, 4, 4, 3, 30, 20, tiles, sizeof(tiles));
    rec_end(&b, nf, "tokens_pixels_tiles.rec");

    /* Pixels only (the units after decode), and a text-only record. */
    rec_begin(&b);
    nf = 0;
    rec_bytes(&b, &nf, 1, "k3", 2);
    rec_field(&b, &nf, 8, 1, 0, 1, 6, 5, 3, 6, 5, pix, sizeof(pix));
    rec_field(&b, &nf, 8, 1, 0, 1, 5, 6, 3, 5, 6, pix, sizeof(pix));
    rec_end(&b, nf, "two_images_hwc.rec");

    rec_begin(&b);
    nf = 0;
    rec_bytes(&b, &nf, 1, "k4", 2);
    rec_bytes(&b, &nf, 3, "<|endoftext|> only text", 23);
    rec_end(&b, nf, "text_only.rec");

    rec_begin(&b);
    rec_end(&b, 0, "empty.rec");
    free(b.p);
    free(pngb.p);
    free(jp);
}

/* ------------------------------------------------------------ tokenizer */

static void tok_seed(const char *name, uint8_t flags, uint16_t max, const void *body, size_t n)
{
    buf_t b = {0};
    uint8_t h[3] = {flags, (uint8_t)max, (uint8_t)(max >> 8)};
    buf_add(&b, h, 3);
    buf_add(&b, body, n);
    put("tokenizer", name, b.p, b.n);
    free(b.p);
}

static void make_tokenizer_seeds(void)
{
    static const char TEXT[] =
        "Hello, world! It's 2024: the thing's 12345 items.\n\n"
        "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
        "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd caf\xc3\xa9  \t tabs\r\n"
        "<|endoftext|> <|fim_prefix|>x<|endofprompt|> <|not special|>    \n";
    tok_seed("cl100k_mixed.txt", 0, 0, TEXT, sizeof(TEXT) - 1);
    tok_seed("o200k_max7.txt", 2, 7, TEXT, sizeof(TEXT) - 1);
    tok_seed("gpt2_cjk.txt", 4, 0, TEXT + 51, 60);
    tok_seed("r50k_spaces.txt", 6, 3, "   \n\n\t x  y   ", 15);
    tok_seed("invalid_utf8.txt", 0, 0, "ok \xed\xa0\x80 \xc0\xaf", 8);
    /* Ranks files: every byte, then merges; one with a bad line. */
    buf_t f = {0};
    char line[64];
    for (int r = 0; r < 256; r++) {
        uint8_t c = (uint8_t)r;
        size_t o = fx_base64(&c, 1, line);
        o += (size_t)snprintf(line + o, sizeof(line) - o, " %d\n", r);
        buf_add(&f, line, o);
    }
    static const char *const MERGES[] = {"th", "the", " t", "\xe4\xbd", "\xe4\xbd\xa0"};
    for (int i = 0; i < 5; i++) {
        size_t o = fx_base64((const uint8_t *)MERGES[i], strlen(MERGES[i]), line);
        o += (size_t)snprintf(line + o, sizeof(line) - o, " %d\n", 256 + i);
        buf_add(&f, line, o);
    }
    tok_seed("ranks_ok.tiktoken", 1, 0, f.p, f.n);
    buf_add(&f, "!!bad 999\n", 10);
    tok_seed("ranks_bad_line.tiktoken", 3, 0, f.p, f.n);
    f.n = 0;
    buf_add(&f, "YQ== 0\nYQ== 1\n", 14);
    tok_seed("ranks_dup.tiktoken", 1, 0, f.p, f.n);
    free(f.p);
}

/* ------------------------------------------------------------ records (sources) */

static void make_records_seeds(void)
{
    fx_jpeg_opts_t o = {.width = 8, .height = 8, .quality = 50};
    size_t jlen = 0;
    uint8_t *jp = jpeg(&o, &jlen);
    buf_t pngb = {0};
    png_make(&pngb, 4, 4, 8, PNG_COLOR_TYPE_RGB, 0, 0);

    buf_t b = {0};
    buf_zero(&b, 1); /* flags: webdataset */
    tar_member(&b, "s1.txt", "caption \xe7\x8c\xab", 11);
    tar_member(&b, "s1.json", "{\"src\": \"x\", \"n\": 1}", 20);
    tar_member(&b, "s1.cls", "7\n", 2);
    tar_member(&b, "s1.jpg", jp, jlen);
    tar_member(&b, "s1.2.png", pngb.p, pngb.n);
    tar_member(&b, "s1.1.jpg", jp, jlen);
    tar_member(&b, "s1.foo", "ignored", 7);
    tar_member(&b, "d/s2.txt", "just text", 9);
    static const char CONV[] = "{\"conversations\": [{\"from\": \"human\", \"value\": "
                               "\"<image>\\nWhat?\"}, {\"from\": \"gpt\", \"value\": \"A cat.\"}]}";
    tar_member(&b, "s3.json", CONV, sizeof(CONV) - 1);
    tar_member(&b, "s3.png", pngb.p, pngb.n);
    tar_member(&b, "s4.jpg", jp, jlen);
    tar_end(&b);
    put("records", "wds_multi_image.tar", b.p, b.n);

    b.n = 0;
    static const char MANIFEST[] =
        "\x01"
        "{\"id\": \"s1\", \"text\": \"a caption\", \"images\": [\"img/a.jpg\", \"img/b.png\"], "
        "\"label\": 3, \"src\": \"coco\"}\n"
        "{\"conversations\": [{\"from\": \"human\", \"value\": \"<image>\\nWhat?\"}, "
        "{\"from\": \"gpt\", \"value\": \"A cat.\"}], \"image\": \"img/in.jpg\"}\n"
        "\n"
        "{\"text\": \"\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80\", \"images\": []}\n"
        "not json\n"
        "{\"id\": \"e\", \"text\": \"empty image\", \"image\": \"img/empty.jpg\"}\n"
        "{\"text\": \"dir\", \"images\": [\"img/dir\", \"img/a.jpg\"], \"label\": 1}\n"
        "{\"text\": \"t\", \"label\": -4}";
    put("records", "jsonl_manifest.jsonl", MANIFEST, sizeof(MANIFEST) - 1);
    free(b.p);
    free(pngb.p);
    free(jp);
}

/* ------------------------------------------------------------ spec, conf */

static int copy_file(const char *target, const char *src, const char *name)
{
    uint8_t *p = NULL;
    size_t len = 0;
    if (fx_read_file(src, &p, &len) != 0) {
        return -1;
    }
    put(target, name, p, len);
    free(p);
    return 0;
}

static void make_spec_seeds(void)
{
    copy_file("spec", "conf/imagenet-train.json", "imagenet-train.json");
    copy_file("spec", "conf/eval-center-crop.json", "eval-center-crop.json");
    copy_file("spec", "conf/tar-shards.json", "tar-shards.json");
    copy_file("spec", "conf/augment-train.json", "augment-train.json");
    put_str("spec", "fixed_offload.json",
            "{\"source\": {\"type\": \"filelist\", \"path\": \"list.txt\", \"shuffle\": false},\n"
            " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"resize\", \"size\": [64, 48]},\n"
            "  {\"op\": \"center_crop\", \"size\": 32}, {\"op\": \"flip\", \"p\": 1},\n"
            "  {\"op\": \"to_chw\"}],\n"
            " \"batch_size\": 7, \"epochs\": 3, \"drop_last\": true, \"deterministic\": true,\n"
            " \"offload\": {\"split\": 2, \"local_share\": 0.25}, \"on_error\": \"fail\",\n"
            " \"max_pixels\": 1000000}\n");
    put_str("spec", "minimal.json", "{\"source\": {\"type\": \"tar\", \"path\": \"s\"}}");
    put_str("spec", "rrc_full.json",
            "{\"source\": {\"type\": \"imagefolder\", \"path\": \"a/b\","
            " \"seed\": 9007199254740993},"
            " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"random_resized_crop\","
            " \"size\": [224, 160], \"scale\": [0.5, 0.5], \"ratio\": [1, 1e0]},"
            " {\"op\": \"normalize\", \"mean\": [0, -0.0, 1e-3], \"std\": [1, 2, 3.5]}],"
            " \"offload\": \"fastflow\"}");
    put_str("spec", "bad_stage.json",
            "{\"source\": {\"type\": \"imagefolder\", \"path\": \"../x\"},\n"
            " \"stages\": [{\"op\": \"flip\", \"p\": 2}]}");
}

static void make_conf_seeds(void)
{
    copy_file("conf", "conf/dispatcher.conf", "dispatcher.conf");
    copy_file("conf", "conf/worker.conf", "worker.conf");
    put_str("conf", "small.conf",
            "split_size = 10\nmax_jobs=3\n  log_level = debug # comment\n"
            "listen = \"127.0.0.1:0\"  # quoted\nhttp = [::1]:7401\n");
    put_str("conf", "worker_keys.conf",
            "threads = 2\nbuffer_bytes = 1048576\nmax_message_bytes = 65536\n"
            "log_level = warning\nadvertise = host:1\n");
    put_str("conf", "bad.conf", "heartbeat_ms = 9999999\nno equals sign\n");
}

/* ------------------------------------------------------------ rpc */

static void rec(buf_t *b, unsigned op, unsigned dt, const ProtobufCMessage *m)
{
    uint8_t hdr[4];
    size_t n = m != NULL ? protobuf_c_message_get_packed_size(m) : 0;
    if (n > 0xFFFF) {
        die("record too large");
    }
    hdr[0] = (uint8_t)op;
    hdr[1] = (uint8_t)dt;
    hdr[2] = (uint8_t)(n & 0xFF);
    hdr[3] = (uint8_t)(n >> 8);
    buf_add(b, hdr, 4);
    if (n > 0) {
        uint8_t *p = malloc(n);
        if (p == NULL) {
            die("out of memory");
        }
        protobuf_c_message_pack(m, p);
        buf_add(b, p, n);
        free(p);
    }
}

#define SEED_SPEC(offload)                                                                   \
    "{\"source\": {\"type\": \"imagefolder\", \"path\": \"train\", \"seed\": 1},"            \
    " \"stages\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8},"      \
    " {\"op\": \"flip\"}, {\"op\": \"normalize\", \"mean\": [0.5, 0.5, 0.5],"               \
    " \"std\": [0.2, 0.2, 0.2]}], \"batch_size\": 4, \"epochs\": 2, \"offload\": " offload "}"

static void r_register(buf_t *b, unsigned dt, const char *addr)
{
    Sluice__RegisterWorkerRequest m = SLUICE__REGISTER_WORKER_REQUEST__INIT;
    m.version = SL_PROTOCOL_VERSION;
    m.address = (char *)addr;
    m.threads = 4;
    m.hostname = "w";
    rec(b, 0, dt, &m.base);
}

static void r_submit(buf_t *b, unsigned dt, const char *spec, uint64_t n)
{
    Sluice__SubmitJobRequest m = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    m.version = SL_PROTOCOL_VERSION;
    m.spec_json = (char *)spec;
    m.spec_name = "seed.json";
    m.num_samples = n;
    m.source_fingerprint = 99;
    m.client_threads = 2;
    m.client_id = "client";
    m.world_size = 1;
    rec(b, 2, dt, &m.base);
}

static void r_heartbeat(buf_t *b, unsigned dt, uint64_t wid, uint64_t *known, size_t nknown,
                        uint64_t *prog, size_t nprog, uint64_t *failed, size_t nfailed)
{
    Sluice__HeartbeatRequest m = SLUICE__HEARTBEAT_REQUEST__INIT;
    Sluice__StageStat st = SLUICE__STAGE_STAT__INIT;
    Sluice__StageStat *stp[1] = {&st};
    st.name = "decode_jpeg+center_crop";
    st.cpu_sec_per_sample = 0.002;
    st.out_bytes_per_sample = 192;
    st.samples = 100;
    m.version = SL_PROTOCOL_VERSION;
    m.worker_id = wid;
    m.load = 0.5;
    m.buffered_bytes = 4096;
    m.n_known_jobs = nknown;
    m.known_jobs = known;
    m.n_splits_in_progress = nprog;
    m.splits_in_progress = prog;
    m.n_stages = 1;
    m.stages = stp;
    m.n_failed_jobs = nfailed;
    m.failed_jobs = failed;
    m.failure = nfailed > 0 ? "source_fingerprint 5 != 99" : "";
    rec(b, 1, dt, &m.base);
}

static void r_get(buf_t *b, unsigned dt, uint64_t job)
{
    Sluice__GetAssignmentRequest m = SLUICE__GET_ASSIGNMENT_REQUEST__INIT;
    m.version = SL_PROTOCOL_VERSION;
    m.job_id = job;
    rec(b, 3, dt, &m.base);
}

static void r_ack(buf_t *b, unsigned dt, uint64_t job, uint64_t *ids, size_t n, uint64_t *retry,
                  size_t nretry)
{
    Sluice__AckSplitsRequest m = SLUICE__ACK_SPLITS_REQUEST__INIT;
    Sluice__SkipCount sk = SLUICE__SKIP_COUNT__INIT;
    Sluice__SkipCount *skp[1] = {&sk};
    sk.reason = "corrupt";
    sk.count = 2;
    m.version = SL_PROTOCOL_VERSION;
    m.job_id = job;
    m.n_split_ids = n;
    m.split_ids = ids;
    m.n_retry_split_ids = nretry;
    m.retry_split_ids = retry;
    m.n_skipped = 1;
    m.skipped = skp;
    rec(b, 4, dt, &m.base);
}

static void r_rates(buf_t *b, unsigned dt, uint64_t job)
{
    Sluice__ReportRatesRequest m = SLUICE__REPORT_RATES_REQUEST__INIT;
    Sluice__StageStat st = SLUICE__STAGE_STAT__INIT;
    Sluice__StageStat *stp[1] = {&st};
    st.name = "flip";
    st.cpu_sec_per_sample = 1e-5;
    st.out_bytes_per_sample = 192;
    st.samples = 10;
    m.version = SL_PROTOCOL_VERSION;
    m.job_id = job;
    m.delivered_per_sec = 1234.5;
    m.wait_fraction = 0.1;
    m.cpu_fraction = 0.8;
    m.cpu_budget = 8;
    m.recv_cpu_sec_per_byte = 1e-9;
    m.n_stages = 1;
    m.stages = stp;
    rec(b, 5, dt, &m.base);
}

static void r_close(buf_t *b, unsigned dt, uint64_t job)
{
    Sluice__CloseJobRequest m = SLUICE__CLOSE_JOB_REQUEST__INIT;
    m.version = SL_PROTOCOL_VERSION;
    m.job_id = job;
    rec(b, 6, dt, &m.base);
}

/* PlannerInputs for SEED_SPEC's three units: the client and one class of
 * workers (worker 1) profiled, then SubmitJob (op 2) or PlanJob (op 9). */
static void r_planned(buf_t *b, unsigned op, unsigned dt, const char *spec, uint64_t n)
{
    static const char *const UNITS[3] = {"decode_jpeg+center_crop", "flip", "normalize"};
    static const double COST[3] = {0.004, 0.00002, 0.0001};
    static const double BYTES[3] = {192, 192, 768};
    Sluice__StageStat st[2][3];
    Sluice__StageStat *pst[2][3];
    Sluice__HostProfile hp[2];
    for (int h = 0; h < 2; h++) {
        sluice__host_profile__init(&hp[h]);
        for (int u = 0; u < 3; u++) {
            sluice__stage_stat__init(&st[h][u]);
            st[h][u].name = (char *)UNITS[u];
            st[h][u].cpu_sec_per_sample = COST[u] * (h + 1);
            st[h][u].out_bytes_per_sample = BYTES[u];
            st[h][u].samples = 32;
            pst[h][u] = &st[h][u];
        }
        hp[h].host = h == 0 ? "client gpu1" : "class w";
        hp[h].n_units = 3;
        hp[h].units = pst[h];
        hp[h].read_cpu_sec_per_sample = 0.0001;
        hp[h].encoded_bytes_per_sample = 110000;
        hp[h].samples = 32;
        hp[h].seconds = 0.5;
    }
    uint64_t wids[1] = {1};
    Sluice__WorkerClass wc = SLUICE__WORKER_CLASS__INIT;
    Sluice__WorkerClass *pwc[1] = {&wc};
    wc.key = "w";
    wc.n_worker_ids = 1;
    wc.worker_ids = wids;
    wc.threads = 4;
    wc.cpu_budget = 4;
    wc.profile = &hp[1];
    wc.bandwidth_bytes_per_sec = 1.25e9;
    Sluice__PlannerInputs in = SLUICE__PLANNER_INPUTS__INIT;
    in.spec_hash = 77;
    in.client = &hp[0];
    in.client_cpu_budget = 2;
    in.recv_cpu_sec_per_byte = 1e-9;
    in.consumer_rate = 3000;
    in.n_classes = 1;
    in.classes = pwc;
    Sluice__SubmitJobRequest m = SLUICE__SUBMIT_JOB_REQUEST__INIT;
    m.version = SL_PROTOCOL_VERSION;
    m.spec_json = (char *)spec;
    m.spec_name = "planned.json";
    m.num_samples = n;
    m.source_fingerprint = 99;
    m.client_threads = 2;
    m.client_id = "gpu1";
    m.world_size = 1;
    m.planner = &in;
    rec(b, op, dt, &m.base);
}

static void r_plan_context(buf_t *b, unsigned dt, uint64_t hash)
{
    Sluice__PlanContextRequest m = SLUICE__PLAN_CONTEXT_REQUEST__INIT;
    m.version = SL_PROTOCOL_VERSION;
    m.spec_hash = hash;
    rec(b, 8, dt, &m.base);
}

/* The in-memory dispatcher of fuzz_rpc numbers workers and jobs from 1. */
static void make_rpc_seeds(void)
{
    buf_t b = {0};
    r_register(&b, 0, "127.0.0.1:9001");
    put("rpc", "register.bin", b.p, b.n);

    b.n = 0;
    r_submit(&b, 0, SEED_SPEC("\"all\""), 35);
    r_get(&b, 1, 1);
    put("rpc", "submit_get.bin", b.p, b.n);

    uint64_t known[2] = {1, 424242};
    uint64_t prog[2] = {0, 1};
    uint64_t ack[2] = {0, 2};
    uint64_t retry[1] = {1};
    b.n = 0;
    r_register(&b, 0, "127.0.0.1:9001");
    r_register(&b, 0, "127.0.0.1:9002");
    r_submit(&b, 1, SEED_SPEC("\"all\""), 35);
    r_heartbeat(&b, 1, 1, NULL, 0, NULL, 0, NULL, 0);
    r_get(&b, 1, 1);
    r_heartbeat(&b, 2, 1, known, 1, prog, 2, NULL, 0);
    r_ack(&b, 1, 1, ack, 1, retry, 1);
    r_rates(&b, 1, 1);
    r_heartbeat(&b, 1, 2, known, 1, NULL, 0, known, 1);
    r_ack(&b, 1, 1, ack, 2, NULL, 0);
    r_get(&b, 1, 1);
    r_close(&b, 1, 1);
    r_heartbeat(&b, 1, 1, known, 2, NULL, 0, NULL, 0);
    put("rpc", "flow.bin", b.p, b.n);

    b.n = 0;
    r_register(&b, 0, "[::1]:7500");
    r_submit(&b, 0, SEED_SPEC("{\"split\": 1, \"local_share\": 0.5}"), 1000);
    r_submit(&b, 0, SEED_SPEC("\"off\""), 10);
    r_heartbeat(&b, 0, 1, NULL, 0, NULL, 0, NULL, 0);
    r_get(&b, 0, 1);
    r_get(&b, 0, 2);
    rec(&b, 7, 255, NULL); /* 12.75 s: the worker is lost */
    rec(&b, 7, 255, NULL);
    r_get(&b, 0, 1);
    rec(&b, 7, 255, NULL); /* 38 s: job 2's client timed out */
    r_get(&b, 0, 2);
    put("rpc", "fixed_off_timeouts.bin", b.p, b.n);

    /* The planner: context, a planned job, rates, re-plans on the tick,
     * a fastflow PlanJob. */
    b.n = 0;
    r_register(&b, 0, "10.0.0.2:7500");
    r_plan_context(&b, 0, 77);
    r_planned(&b, 2, 1, SEED_SPEC("\"auto\""), 4000);
    r_plan_context(&b, 1, 77);
    r_rates(&b, 20, 1);
    r_heartbeat(&b, 1, 1, known, 1, NULL, 0, NULL, 0);
    r_register(&b, 40, "10.0.0.3:7500");
    r_rates(&b, 40, 1);
    r_get(&b, 1, 1);
    r_planned(&b, 9, 1, SEED_SPEC("\"fastflow\""), 4000);
    put("rpc", "planner.bin", b.p, b.n);

    b.n = 0;
    r_submit(&b, 0, "{\"source\": {\"type\": \"tar\", \"path\": \"s\"}}", 1ull << 40);
    r_submit(&b, 0, "not json", 10);
    put("rpc", "submit_errors.bin", b.p, b.n);
    free(b.p);
}

/* ------------------------------------------------------------ remote */

static void remote(const char *name, uint8_t flags, uint32_t stage_to, Sluice__Sample **samples,
                   size_t n)
{
    Sluice__Batch m = SLUICE__BATCH__INIT;
    m.job_id = 1;
    m.split_id = 0;
    m.n_samples = n;
    m.samples = samples;
    m.split_done = 1;
    m.stage_to = stage_to;
    size_t len = protobuf_c_message_get_packed_size(&m.base);
    uint8_t *p = malloc(len + 1);
    if (p == NULL) {
        die("out of memory");
    }
    p[0] = flags;
    protobuf_c_message_pack(&m.base, p + 1);
    put("remote", name, p, len + 1);
    free(p);
}

static void make_remote_seeds(void)
{
    static uint8_t pix[8 * 8 * 3 * 4];
    for (size_t i = 0; i < sizeof(pix); i++) {
        pix[i] = (uint8_t)(i * 7);
    }
    Sluice__Sample s[3];
    Sluice__Sample *sp[3] = {&s[0], &s[1], &s[2]};
    for (int i = 0; i < 3; i++) {
        sluice__sample__init(&s[i]);
        s[i].epoch = 0;
        s[i].position = (uint64_t)i % 2;
        s[i].index = (uint64_t)i % 2;
    }
    /* Everything remote: float CHW 8x8x3 (after to_chw). */
    for (int i = 0; i < 2; i++) {
        s[i].dtype = 2;
        s[i].layout = 1;
        s[i].h = 8;
        s[i].w = 8;
        s[i].c = 3;
        s[i].data.data = pix;
        s[i].data.len = 8 * 8 * 3 * 4;
    }
    remote("all_remote_f32.bin", 0, 4, sp, 2);
    /* After the fused crop: u8 HWC, the client runs flip, normalize, to_chw;
     * the duplicate third sample is dropped. */
    for (int i = 0; i < 3; i++) {
        s[i].dtype = 1;
        s[i].layout = 0;
        s[i].h = 8;
        s[i].w = 8;
        s[i].c = 3;
        s[i].data.data = pix;
        s[i].data.len = 8 * 8 * 3;
    }
    remote("split1_u8_dup.bin", 1, 1, sp, 3);
    /* Split 0: encoded bytes, decoded by the client. */
    fx_jpeg_opts_t o = {.width = 16, .height = 12, .quality = 60};
    size_t jlen = 0;
    uint8_t *jp = jpeg(&o, &jlen);
    for (int i = 0; i < 2; i++) {
        s[i].dtype = 0;
        s[i].h = (uint32_t)jlen;
        s[i].w = 1;
        s[i].c = 1;
        s[i].data.data = jp;
        s[i].data.len = jlen;
    }
    remote("split0_jpeg.bin", 1, 0, sp, 2);
    free(jp);
    /* A skipped sample and one of epoch 1. */
    s[0].skip_reason = "corrupt";
    s[0].skip_detail = "seed: decoder said no";
    s[0].data.len = 0;
    s[1].epoch = 1;
    s[1].dtype = 1;
    s[1].data.data = pix;
    s[1].data.len = 8 * 8 * 3;
    remote("skip_epoch1.bin", 0, 1, sp, 2);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_corpus OUTDIR\n");
        return 2;
    }
    g_out = argv[1];
    if (mkdir(g_out, 0755) < 0 && errno != EEXIST) {
        die(g_out);
    }
    make_jpeg_seeds();
    make_tar_seeds();
    make_spec_seeds();
    make_conf_seeds();
    make_rpc_seeds();
    make_remote_seeds();
    make_png_seeds();
    make_record_seeds();
    make_tokenizer_seeds();
    make_records_seeds();
    return 0;
}
