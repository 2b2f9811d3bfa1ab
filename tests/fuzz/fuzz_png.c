/* fuzz_png: PNG probe and decode (common/image/png.c), the format-sniffing front
 * door (common/image/image_decode.c) and any-resolution tiling
 * (common/image/tiles.c) on arbitrary bytes -- what a worker decodes from a
 * webdataset shard or a jsonl image it does not control. Tile geometry comes
 * from a hash of the input. Contracts (png.h, image_decode.h, tiles.h):
 *   - every call returns 0 or a documented code with a printable message;
 *   - the probe needs only the first SL_PNG_PROBE_BYTES bytes: a prefix
 *     probes the same;
 *   - above max_pixels a decode is -EFBIG (nothing image-sized allocated),
 *     and max_pixels = width x height - 1 from the probe is -EFBIG too;
 *   - a decode is width x height x 3 U8 HWC as the probe said, and every
 *     pixel is written (two decodes into buffers pre-filled differently
 *     give the same bytes);
 *   - sl_image_probe/sl_image_decode agree with the PNG calls for PNG bytes
 *     and say -EILSEQ/-ENODATA for bytes that are neither JPEG nor PNG;
 *   - tiles of the decoded image (or, when nothing decodes, of the input
 *     bytes taken as pixels) are n = cols x rows (+ 1 thumbnail) tiles of
 *     3 x tile x tile U8 CHW, the grid sl_tiles_grid picks, within
 *     min_tiles..max_tiles; bad parameters are -EINVAL. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/image/image_decode.h"
#include "common/image/png.h"
#include "common/image/tiles.h"
#include "tests/fuzz/fuzz.h"

/* Small enough that a bomb costs the fuzzer nothing. */
#define FZ_PNG_MAX_PIXELS (4u << 20)

/* Tiles of img with geometry from the seed; one in eight tries bad
 * parameters and expects -EINVAL. */
static void fz_png_tiles(const sl_tensor_t *img, uint64_t *seed)
{
    uint64_t r = fz_next(seed);
    uint32_t tile = 1 + (uint32_t)(r % 48);
    uint32_t max_tiles = 1 + (uint32_t)((r >> 8) % 12);
    uint32_t min_tiles = 1 + (uint32_t)((r >> 16) % max_tiles);
    bool thumbnail = (r >> 24) & 1;
    bool bad = ((r >> 25) & 7) == 0;
    if (bad) {
        switch ((r >> 28) & 3) {
        case 0:
            tile = 0;
            break;
        case 1:
            tile = SL_TILES_MAX_TILE + 1;
            break;
        case 2:
            min_tiles = max_tiles + 1;
            break;
        default:
            max_tiles = SL_TILES_MAX_COUNT + 1;
            break;
        }
    }
    sl_tensor_t out;
    sl_tensor_init(&out);
    uint32_t n = 0, cols = 0, rows = 0;
    char err[512];
    int rc = sl_tiles_make(img, tile, min_tiles, max_tiles, thumbnail, &out, &n, &cols, &rows,
                           err, sizeof(err));
    FZ_CHECK(rc == 0 || rc == -EINVAL || rc == -EFBIG || rc == -ENOMEM,
             "tiles returned %d: %s", rc, err);
    if (rc != 0) {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
        FZ_CHECK(bad || rc != -EINVAL || img->c != 3 || img->dtype != SL_DT_U8,
                 "tiles %u (%u..%u) of a %ux%ux%u image: -EINVAL: %s", tile, min_tiles,
                 max_tiles, img->h, img->w, img->c, err);
        goto out;
    }
    FZ_CHECK(!bad, "bad tile parameters %u (%u..%u) accepted", tile, min_tiles, max_tiles);
    uint32_t gc = 0, gr = 0;
    FZ_CHECK(sl_tiles_grid(img->w, img->h, tile, min_tiles, max_tiles, &gc, &gr) == 0,
             "grid refused what tiles took");
    FZ_CHECK(gc == cols && gr == rows, "grid %ux%u, tiles %ux%u", gc, gr, cols, rows);
    FZ_CHECK(cols * rows >= min_tiles && cols * rows <= max_tiles, "grid %ux%u outside %u..%u",
             cols, rows, min_tiles, max_tiles);
    uint32_t want = cols * rows + (thumbnail && cols * rows > 1 ? 1 : 0);
    FZ_CHECK(n == want && out.dtype == SL_DT_U8 && out.layout == SL_LAYOUT_CHW &&
                 out.h == tile && out.w == tile && out.c == 3 * n &&
                 out.nbytes == (size_t)n * 3 * tile * tile,
             "%u tiles (want %u) of %u: %ux%ux%u, %zu bytes", n, want, tile, out.c, out.h,
             out.w, out.nbytes);
out:
    sl_tensor_free(&out);
}

int fuzz_png_one(const uint8_t *data, size_t size)
{
    uint64_t seed = fz_hash(0x84222325cbf29ce4ull, data, size);
    char err[512];
    sl_png_info_t info;
    memset(&info, 0, sizeof(info));
    int prc = sl_png_probe(data, size, &info, err, sizeof(err));
    FZ_CHECK(prc == 0 || prc == -ENODATA || prc == -EILSEQ || prc == -ENOMSG ||
                 prc == -EBADMSG,
             "probe returned %d: %s", prc, err);
    if (prc == 0) {
        FZ_CHECK(info.width > 0 && info.height > 0 && info.channels >= 1 &&
                     info.channels <= 4 && info.bit_depth >= 1 && info.bit_depth <= 16,
                 "probe: %ux%u, %u channels of %u bits", info.width, info.height,
                 info.channels, info.bit_depth);
        sl_png_info_t head;
        FZ_CHECK(sl_png_probe(data, SL_PNG_PROBE_BYTES, &head, err, sizeof(err)) == 0 &&
                     memcmp(&head, &info, sizeof(info)) == 0,
                 "a %d-byte prefix probes differently", SL_PNG_PROBE_BYTES);
        uint64_t px = (uint64_t)info.width * info.height;
        sl_tensor_t t;
        sl_tensor_init(&t);
        int rc = sl_png_decode(data, size, px - 1, &t, err, sizeof(err));
        FZ_CHECK(rc == -EFBIG, "max_pixels %llu below %ux%u returned %d",
                 (unsigned long long)(px - 1), info.width, info.height, rc);
        FZ_CHECK(t.cap == 0, "a refused decode allocated %zu bytes", t.cap);
        sl_tensor_free(&t);
    } else {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
    }

    /* Two decodes into buffers filled with different bytes. */
    sl_tensor_t a, b;
    sl_tensor_init(&a);
    sl_tensor_init(&b);
    int rc = sl_png_decode(data, size, FZ_PNG_MAX_PIXELS, &a, err, sizeof(err));
    FZ_CHECK(fz_image_code_ok(rc), "decode returned %d: %s", rc, err);
    if (rc == 0) {
        FZ_CHECK(prc == 0, "decode succeeded where probe failed");
        FZ_CHECK(a.w == info.width && a.h == info.height && a.c == 3 && a.dtype == SL_DT_U8 &&
                     a.layout == SL_LAYOUT_HWC && a.nbytes == (size_t)a.w * a.h * 3,
                 "decoded %ux%ux%u, probe said %ux%u", a.h, a.w, a.c, info.height, info.width);
        FZ_CHECK((uint64_t)info.width * info.height <= FZ_PNG_MAX_PIXELS, "bomb decoded");
        FZ_CHECK(sl_tensor_reshape(&b, SL_DT_U8, SL_LAYOUT_HWC, a.h, a.w, 3) == 0,
                 "out of memory");
        memset(b.data, 0x5a, b.nbytes);
        memset(a.data, 0xa5, a.nbytes);
        FZ_CHECK(sl_png_decode(data, size, FZ_PNG_MAX_PIXELS, &a, err, sizeof(err)) == 0,
                 "a second decode failed: %s", err);
        FZ_CHECK(sl_png_decode(data, size, FZ_PNG_MAX_PIXELS, &b, err, sizeof(err)) == 0,
                 "a third decode failed: %s", err);
        FZ_CHECK(memcmp(a.data, b.data, a.nbytes) == 0,
                 "%ux%u: pixels depend on the output buffer's old contents", a.w, a.h);
    } else {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
        FZ_CHECK(prc != 0 || (uint64_t)info.width * info.height <= FZ_PNG_MAX_PIXELS ||
                     rc == -EFBIG,
                 "a %ux%u bomb returned %d, not -EFBIG", info.width, info.height, rc);
        FZ_CHECK(prc == 0 || rc == prc, "probe said %d, decode %d", prc, rc);
    }

    /* The front door. */
    sl_image_format_e fmt = sl_image_sniff(data, size);
    uint32_t iw = 0, ih = 0;
    sl_image_format_e pfmt = SL_IMAGE_UNKNOWN;
    int irc = sl_image_probe(data, size, &iw, &ih, &pfmt, err, sizeof(err));
    FZ_CHECK(fz_image_code_ok(irc), "image probe returned %d: %s", irc, err);
    if (irc != 0) {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
    }
    if (fmt == SL_IMAGE_PNG) {
        FZ_CHECK(irc == prc, "image probe %d, png probe %d", irc, prc);
        FZ_CHECK(irc != 0 || (iw == info.width && ih == info.height && pfmt == SL_IMAGE_PNG),
                 "image probe %ux%u, png probe %ux%u", iw, ih, info.width, info.height);
    } else if (fmt == SL_IMAGE_UNKNOWN) {
        FZ_CHECK(irc == (size == 0 ? -ENODATA : -EILSEQ), "unknown format probed %d", irc);
    }
    sl_tensor_t d;
    sl_tensor_init(&d);
    sl_image_format_e dfmt = SL_IMAGE_UNKNOWN;
    int drc = sl_image_decode(data, size, FZ_PNG_MAX_PIXELS, &d, &dfmt, err, sizeof(err));
    FZ_CHECK(fz_image_code_ok(drc), "image decode returned %d: %s", drc, err);
    FZ_CHECK(dfmt == fmt, "decode says format %d, sniff %d", dfmt, fmt);
    if (drc == 0) {
        FZ_CHECK(irc == 0 && d.w == iw && d.h == ih && d.c == 3 && d.dtype == SL_DT_U8 &&
                     d.nbytes == (size_t)iw * ih * 3,
                 "image decode %ux%ux%u, probe %ux%u", d.h, d.w, d.c, ih, iw);
    } else {
        FZ_CHECK(fz_err_ok(err, sizeof(err)), "unprintable error message");
    }
    if (fmt == SL_IMAGE_PNG) {
        FZ_CHECK(drc == rc, "image decode %d, png decode %d", drc, rc);
        FZ_CHECK(drc != 0 || memcmp(d.data, a.data, a.nbytes) == 0,
                 "image decode and png decode differ");
    } else if (fmt == SL_IMAGE_UNKNOWN) {
        FZ_CHECK(drc == (size == 0 ? -ENODATA : -EILSEQ), "unknown format decoded %d", drc);
    }
    sl_tensor_free(&d);

    /* Tiles: of the decoded image, else of the input bytes as pixels (width
     * from the first byte, channels from the second: c != 3 is -EINVAL). */
    if (rc == 0) {
        fz_png_tiles(&a, &seed);
    } else if (size >= 2) {
        uint32_t c = (data[1] & 7) == 0 ? 1 + (data[1] >> 3) % 4 : 3;
        uint32_t w = 1 + data[0] % 64;
        uint32_t h = (uint32_t)((size - 2) / ((size_t)w * c));
        if (h > 0) {
            sl_tensor_t raw;
            sl_tensor_init(&raw);
            FZ_CHECK(sl_tensor_reshape(&raw, SL_DT_U8, SL_LAYOUT_HWC, h, w, c) == 0,
                     "out of memory");
            memcpy(raw.data, data + 2, raw.nbytes);
            fz_png_tiles(&raw, &seed);
            sl_tensor_free(&raw);
        }
    }
    sl_tensor_free(&a);
    sl_tensor_free(&b);
    return 0;
}

FZ_LIBFUZZER_ENTRY(fuzz_png_one)
