/* jpeg: probe and decode through libjpeg-turbo's libjpeg API.
 *
 * Every call owns one decompressor on its own stack frame (no shared state,
 * any thread may call). libjpeg reports errors by calling error_exit, which
 * must not return: we longjmp back to the one setjmp in dec_run(). The
 * decompressor lives in the caller of dec_run(), not in the function that
 * calls setjmp, so nothing the C standard calls "indeterminate after
 * longjmp" is ever read; everything libjpeg allocates lives in its pools and
 * goes away with jpeg_destroy_decompress on every path.
 *
 * Warnings are errors here: libjpeg would otherwise carry on and return a
 * gray-filled or garbled image as a success. Premature end of data is
 * -ENOMSG (truncated), any other corrupt-data warning -EBADMSG. We stop at
 * the first one instead of decoding the rest of a broken file. A region
 * decode stops reading after its last row, so damage or truncation below
 * the region goes unnoticed: in a sequential file it is never read, in a
 * progressive one (see dec_short_frame) each scan is decoded down to an iMCU
 * row below the region and the rest skipped to the next marker; truncation
 * still fails (-ENOMSG), and any failure of that cut decode is redone on the
 * whole frame, so the code is the full decode's. Nor is anything after the
 * last scanline read: a sequential file whose pixels are complete but whose tail is junk
 * (or has no EOI, when the entropy decoder did not need to look past the
 * data) decodes. A few metadata-only warnings are ignored; see
 * dec_emit_message().
 *
 * Region output convention: the output is trimmed to exactly the scaled
 * columns/rows that cover the region at scale M/8, i.e. *ret_x0 =
 * floor(x * M / 8), *ret_y0 = floor(y * M / 8), out->w = min(ceil((x + w) *
 * M / 8), ceil(W * M / 8)) - x0, same for rows. libjpeg's crop is widened
 * by a small margin first and the margin is dropped, so that the image-edge
 * handling of fancy upsampling at the crop boundary never touches the
 * region's pixels: at every scale the region
 * is bit-identical to the same rectangle of the whole image decoded at that
 * scale (at 8/8: of sl_jpeg_decode). The wide variant (the pipeline's)
 * keeps the margin and libjpeg's iMCU rounding in an RGB output instead of
 * dropping them, and *ret_x0 says where its columns start. */
#include "common/image/jpeg.h"

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "common/base/clock.h"
#include "common/base/err.h"

/* A legitimate progressive file has ~10 scans (mozjpeg: a few dozen). Each
 * scan re-walks the whole coefficient buffer, so thousands of tiny scans
 * make a small file cost minutes: a hang, for DESIGN invariant 4. */
#define SL_JPEG_MAX_SCANS 500

/* Scanlines per jpeg_read_scanlines call: amortises the per-call overhead
 * without a big pointer array. */
#define SL_JPEG_ROWS_PER_CALL 16

/* dec_short_frame copies the file; above this size it decodes the whole
 * frame instead (libjpeg's pools refuse single allocations near 1 GB). */
#define SL_JPEG_SHORT_FRAME_MAX_COPY ((size_t)64 << 20)

/* Scaled pixels of extra crop on each side of a region (see top comment). */
#define SL_JPEG_CROP_MARGIN 2

typedef struct jpeg_err_s {
    struct jpeg_error_mgr pub; /* first: libjpeg hands us &pub as cinfo->err */
    jmp_buf jmp;
    int code;
    bool short_frame; /* dec_short_frame() cut the frame: see dec_emit_message */
    int skipped_scan; /* short_frame: the last scan whose tail was skipped */
    char msg[JMSG_LENGTH_MAX];
} jpeg_err_t;

typedef struct dec_s {
    struct jpeg_decompress_struct cinfo;
    jpeg_err_t jerr;
    struct jpeg_progress_mgr progress;
} dec_t;

typedef enum {
    DEC_PROBE = 0,
    DEC_FULL,
    DEC_REGION,
} dec_mode_e;

typedef struct dec_req_s {
    dec_mode_e mode;
    const uint8_t *buf;
    size_t len;
    uint64_t max_pixels;
    uint32_t x, y, w, h;        /* DEC_REGION only */
    uint32_t scale_num;         /* DCT scale in eighths, 1..8; 8 = full size */
    sl_tensor_t *out;
    sl_jpeg_info_t *info;       /* DEC_PROBE only */
    uint32_t x0, y0;            /* DEC_REGION result */
    sl_jpeg_times_t *times;     /* DEC_REGION, optional: filled by dec_read_rows */
    bool wide;                  /* DEC_REGION: out may keep libjpeg's whole column crop */
    bool whole_frame;           /* DEC_REGION: never cut the frame (dec_short_frame) */
    bool cut;                   /* set when dec_short_frame cut it */
} dec_req_t;

static void dec_fail(j_common_ptr c, int code)
{
    jpeg_err_t *e = (jpeg_err_t *)c->err;
    e->code = code;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jmp, 1);
}

static void dec_error_exit(j_common_ptr c)
{
    int code = -EBADMSG;
    if (c->err->msg_code == JERR_OUT_OF_MEMORY) {
        code = -ENOMEM;
    } else if (c->err->msg_code == JERR_IMAGE_TOO_BIG) {
        /* Dimension above libjpeg's 65500 limit: a bomb as far as we care. */
        code = -EFBIG;
    }
    dec_fail(c, code);
}

static void dec_emit_message(j_common_ptr c, int level)
{
    if (level >= 0) {
        return; /* trace messages */
    }
    switch (c->err->msg_code) {
    case JWRN_JFIF_MAJOR:
    case JWRN_ADOBE_XFORM:
    case JWRN_BOGUS_ICC:
    case JWRN_NOT_SEQUENTIAL:
        /* Metadata or header oddities after which libjpeg carries on with
         * correct pixels: not worth losing a sample over. */
        return;
    case JWRN_EXTRANEOUS_DATA: {
        /* Expected once after every scan of a cut progressive frame: the
         * rows below the cut are the bytes libjpeg skips to the next marker.
         * A second time in one scan means that search stopped at a marker
         * forged by damaged scan data: fail (dec_call then decodes the
         * whole frame, which reports the damage as before). */
        jpeg_err_t *e = (jpeg_err_t *)c->err;
        int scan = ((j_decompress_ptr)c)->input_scan_number;
        if (e->short_frame && e->skipped_scan != scan) {
            e->skipped_scan = scan;
            return;
        }
        dec_fail(c, -EBADMSG);
        break;
    }
    case JWRN_JPEG_EOF:
        dec_fail(c, -ENOMSG);
        break;
    default:
        dec_fail(c, -EBADMSG);
        break;
    }
}

static void dec_progress(j_common_ptr c)
{
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->input_scan_number > SL_JPEG_MAX_SCANS) {
        jpeg_err_t *e = (jpeg_err_t *)c->err;
        e->code = -EBADMSG;
        snprintf(e->msg, sizeof(e->msg), "more than %d scans", SL_JPEG_MAX_SCANS);
        longjmp(e->jmp, 1);
    }
}

static sl_jpeg_colorspace_e dec_colorspace(J_COLOR_SPACE cs)
{
    switch (cs) {
    case JCS_GRAYSCALE:
        return SL_JCS_GRAY;
    case JCS_YCbCr:
        return SL_JCS_YCBCR;
    case JCS_RGB:
        return SL_JCS_RGB;
    case JCS_CMYK:
        return SL_JCS_CMYK;
    case JCS_YCCK:
        return SL_JCS_YCCK;
    default:
        return SL_JCS_OTHER;
    }
}

static void dec_fill_info(const struct jpeg_decompress_struct *ci, sl_jpeg_info_t *info)
{
    memset(info, 0, sizeof(*info));
    info->width = ci->image_width;
    info->height = ci->image_height;
    info->components = (uint32_t)ci->num_components;
    info->colorspace = dec_colorspace(ci->jpeg_color_space);
    info->progressive = ci->progressive_mode != 0;
    info->subsamp_h = 1;
    info->subsamp_v = 1;
    if (ci->num_components < 2) {
        return;
    }
    /* Chroma is components 1 and 2 (Cb, Cr); YCCK's K is full-size like Y. */
    int ch = 1, cv = 1;
    for (int i = 1; i < ci->num_components && i <= 2; i++) {
        ch = ci->comp_info[i].h_samp_factor > ch ? ci->comp_info[i].h_samp_factor : ch;
        cv = ci->comp_info[i].v_samp_factor > cv ? ci->comp_info[i].v_samp_factor : cv;
    }
    /* Factors are 1..4 (checked by libjpeg); odd ratios such as 3:2 round
     * down, never below 1. */
    int h = ci->comp_info[0].h_samp_factor / ch;
    int v = ci->comp_info[0].v_samp_factor / cv;
    info->subsamp_h = (uint8_t)(h < 1 ? 1 : h);
    info->subsamp_v = (uint8_t)(v < 1 ? 1 : v);
}

/* x * y / 255 rounded, exact for x, y in 0..255. */
static inline uint8_t mul255(unsigned x, unsigned y)
{
    unsigned t = x * y + 128;
    return (uint8_t)((t + (t >> 8)) >> 8);
}

/* CMYK row (as libjpeg returns it; YCCK arrives here as CMYK) to RGB.
 * Adobe files (Photoshop) store inverted CMYK: 0 means full ink. */
static void cmyk_to_rgb(const uint8_t *src, uint8_t *dst, uint32_t n, bool inverted)
{
    if (inverted) {
        for (uint32_t i = 0; i < n; i++, src += 4, dst += 3) {
            dst[0] = mul255(src[0], src[3]);
            dst[1] = mul255(src[1], src[3]);
            dst[2] = mul255(src[2], src[3]);
        }
    } else {
        for (uint32_t i = 0; i < n; i++, src += 4, dst += 3) {
            unsigned k = 255u - src[3];
            dst[0] = mul255(255u - src[0], k);
            dst[1] = mul255(255u - src[1], k);
            dst[2] = mul255(255u - src[2], k);
        }
    }
}

/* The steps of dec_run after the header. They are called from dec_run and
 * may longjmp back to it; noinline keeps each in a frame of its own, so no
 * local of theirs lives in the frame that calls setjmp (what gcc's
 * -Wclobbered warns about once they are inlined there). */
#define DEC_STEP __attribute__((noinline))

/* The scaled rectangle a decode returns, [x0, x1) x [y0, y1), and how
 * libjpeg's rows become RGB. */
typedef struct dec_rect_s {
    uint32_t x0, x1, y0, y1;
    bool cmyk; /* rows arrive as CMYK (YCCK converted by libjpeg) */
} dec_rect_t;

/* After the header: refuses a bomb, then sets the output parameters. */
static DEC_STEP int dec_configure(dec_t *d, const dec_req_t *rq, dec_rect_t *r)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    /* Before jpeg_start_decompress: nothing image-sized is allocated yet. */
    uint64_t pixels = (uint64_t)ci->image_width * ci->image_height;
    if (pixels > rq->max_pixels) {
        return sl_err(d->jerr.msg, sizeof(d->jerr.msg), -EFBIG,
                      "%ux%u is more than %llu pixels", (unsigned)ci->image_width,
                      (unsigned)ci->image_height, (unsigned long long)rq->max_pixels);
    }
    r->cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    /* libjpeg-turbo expands gray to RGB itself (SIMD), but will not convert
     * CMYK/YCCK to RGB: take CMYK (YCCK is converted to it) and do the rest. */
    ci->out_color_space = r->cmyk ? JCS_CMYK : JCS_RGB;
    ci->scale_num = rq->scale_num;
    ci->scale_denom = 8;
    /* A progressive file that ends before its last scans (legal) would be
     * smoothed across block edges, from neighbours up to two blocks away:
     * then a region differs from the same rectangle of the whole image
     * (found by tests/fuzz/fuzz_jpeg), and the result depends on the
     * libjpeg-turbo version (2.1 changed the filter). Without smoothing
     * every block is decoded on its own. */
    ci->do_block_smoothing = FALSE;
    d->progress.progress_monitor = dec_progress;
    ci->progress = &d->progress;
    jpeg_calc_output_dimensions(ci);
    return 0;
}

/* The scaled rectangle to return (the whole image but for DEC_REGION), and
 * the output tensor sized for it. */
static DEC_STEP int dec_place(dec_t *d, const dec_req_t *rq, dec_rect_t *r)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    uint32_t ow = ci->output_width, oh = ci->output_height;
    r->x0 = 0;
    r->x1 = ow;
    r->y0 = 0;
    r->y1 = oh;
    if (rq->mode == DEC_REGION) {
        if ((uint64_t)rq->x + rq->w > ci->image_width ||
            (uint64_t)rq->y + rq->h > ci->image_height) {
            return sl_err(d->jerr.msg, sizeof(d->jerr.msg), -EINVAL,
                          "region %u,%u %ux%u outside %ux%u image", rq->x, rq->y, rq->w,
                          rq->h, (unsigned)ci->image_width, (unsigned)ci->image_height);
        }
        /* Scaled pixel j covers full-size [8j/M, 8(j+1)/M). */
        uint64_t m = rq->scale_num;
        r->x0 = (uint32_t)(rq->x * m / 8);
        r->y0 = (uint32_t)(rq->y * m / 8);
        r->x1 = (uint32_t)(((rq->x + (uint64_t)rq->w) * m + 7) / 8);
        r->y1 = (uint32_t)(((rq->y + (uint64_t)rq->h) * m + 7) / 8);
        r->x1 = r->x1 > ow ? ow : r->x1;
        r->y1 = r->y1 > oh ? oh : r->y1;
    }
    /* Output buffer first, so SL_TENSOR_MAX_BYTES is enforced before libjpeg
     * allocates its own image-sized buffers. */
    int rc = sl_tensor_reshape(rq->out, SL_DT_U8, SL_LAYOUT_HWC, r->y1 - r->y0, r->x1 - r->x0, 3);
    if (rc < 0) {
        return sl_err(d->jerr.msg, sizeof(d->jerr.msg), rc == -EOVERFLOW ? -EFBIG : rc,
                      "cannot hold %ux%u RGB output", r->x1 - r->x0, r->y1 - r->y0);
    }
    return 0;
}

/* After jpeg_start_decompress: reads the rows of r into rq->out, cropping
 * columns in libjpeg where it can and converting CMYK. With rq->wide, an RGB
 * region keeps every column libjpeg's crop returns (r->x0, r->x1 widened to
 * them) and is decoded straight into rq->out: on photographs the copy out of
 * a scratch buffer cost ~0.1 ms of a ~1 ms sample (docs/benchmarks.md). */
static DEC_STEP int dec_read_rows(dec_t *d, const dec_req_t *rq, dec_rect_t *r)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    uint32_t ow = ci->output_width;
    uint32_t sx0 = r->x0, sx1 = r->x1, sy0 = r->y0;
    /* Columns libjpeg will hand us: [cx0, cx0 + cw). */
    JDIMENSION cx0 = 0, cw = ci->output_width;
    if (sx1 - sx0 < ow) {
        cx0 = sx0 > SL_JPEG_CROP_MARGIN ? sx0 - SL_JPEG_CROP_MARGIN : 0;
        JDIMENSION cx1 = sx1 + SL_JPEG_CROP_MARGIN < ow ? sx1 + SL_JPEG_CROP_MARGIN : ow;
        cw = cx1 - cx0;
        jpeg_crop_scanline(ci, &cx0, &cw); /* may move cx0 left to an iMCU edge */
    }
    double t_skip = rq->times != NULL ? sl_thread_cpu_sec() : 0;
    if (sy0 > 0 && jpeg_skip_scanlines(ci, sy0) != sy0) {
        return sl_err(d->jerr.msg, sizeof(d->jerr.msg), -EBADMSG, "cannot skip %u rows",
                      sy0);
    }
    double t_rows = rq->times != NULL ? sl_thread_cpu_sec() : 0;

    int ncomp = ci->output_components;
    if (rq->wide && !r->cmyk && (cx0 != sx0 || cw != sx1 - sx0)) {
        /* Only grows the tensor by the crop's margin and iMCU rounding. */
        int rc = sl_tensor_reshape(rq->out, SL_DT_U8, SL_LAYOUT_HWC, r->y1 - r->y0, cw, 3);
        if (rc < 0) {
            return sl_err(d->jerr.msg, sizeof(d->jerr.msg), rc == -EOVERFLOW ? -EFBIG : rc,
                          "cannot hold %ux%u RGB output", (unsigned)cw, r->y1 - r->y0);
        }
        sx0 = r->x0 = cx0;
        sx1 = r->x1 = cx0 + cw;
    }
    size_t out_stride = (size_t)(sx1 - sx0) * 3;
    /* Straight into the tensor when libjpeg's rows are exactly ours. */
    bool direct = !r->cmyk && cx0 == sx0 && cw == sx1 - sx0;
    JSAMPARRAY scratch = NULL;
    if (!direct) {
        /* Pool memory: freed by jpeg_destroy_decompress, even after longjmp. */
        scratch = (*ci->mem->alloc_sarray)((j_common_ptr)ci, JPOOL_IMAGE,
                                           cw * (JDIMENSION)ncomp, SL_JPEG_ROWS_PER_CALL);
    }
    size_t skip_bytes = (size_t)(sx0 - cx0) * (size_t)ncomp;
    bool inverted = ci->saw_Adobe_marker != 0;
    uint8_t *dst = rq->out->data;
    JSAMPROW rows[SL_JPEG_ROWS_PER_CALL];
    uint32_t done = 0, want = r->y1 - sy0;

    while (done < want) {
        uint32_t n = want - done < SL_JPEG_ROWS_PER_CALL ? want - done : SL_JPEG_ROWS_PER_CALL;
        for (uint32_t i = 0; i < n; i++) {
            rows[i] = direct ? dst + (size_t)(done + i) * out_stride : scratch[i];
        }
        JDIMENSION got = jpeg_read_scanlines(ci, rows, n);
        if (got == 0 || got > n) {
            return sl_err(d->jerr.msg, sizeof(d->jerr.msg), -EBADMSG,
                          "decoder stalled at row %u", sy0 + done);
        }
        if (!direct) {
            for (uint32_t i = 0; i < got; i++) {
                uint8_t *o = dst + (size_t)(done + i) * out_stride;
                if (r->cmyk) {
                    cmyk_to_rgb(scratch[i] + skip_bytes, o, sx1 - sx0, inverted);
                } else {
                    memcpy(o, scratch[i] + skip_bytes, out_stride);
                }
            }
        }
        done += got;
    }
    if (rq->times != NULL) {
        rq->times->skip_sec = t_rows - t_skip;
        rq->times->rows_sec = sl_thread_cpu_sec() - t_rows;
    }
    return 0;
}

/* Offset of the frame height in buf's SOF segment, 0 if not found before
 * the first scan (the caller then decodes the frame as it is). */
static size_t dec_sof_height_at(const uint8_t *buf, size_t len)
{
    size_t pos = 2;
    while (pos + 9 <= len) {
        if (buf[pos] != 0xFF) {
            return 0;
        }
        uint8_t m = buf[pos + 1];
        if (m == 0xFF) {
            pos++; /* fill byte */
            continue;
        }
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            return pos + 5; /* FF Cn, length (2), precision (1), height (2) */
        }
        if (m == 0xDA || m == 0xD9) {
            return 0;
        }
        pos += 2 + (((size_t)buf[pos + 2] << 8) | buf[pos + 3]);
    }
    return 0;
}

/* A progressive file is entropy-decoded whole inside jpeg_start_decompress,
 * every scan, before the first row: on photographs that is most of its
 * cost, and the rows below a region are wasted. libjpeg cannot stop a scan
 * early, but it decodes a shorter frame if told one: this re-reads the
 * header from a copy of the file whose SOF height ends one iMCU row below
 * the region's last (so fancy upsampling still sees the real row below).
 * Each scan then stops after that row and libjpeg skips the rest of its
 * bytes to the next marker (a byte search, no Huffman decoding). The frame
 * keeps whole iMCU rows, so every scan's blocks are a prefix of the
 * original's and the region is the same bytes (test_jpeg test_region_m8).
 * A cut decode that fails is redone on the whole frame (dec_call), so a
 * damaged file reports what it always did; damage in the skipped bytes
 * that forges a marker there is made such a failure (dec_emit_message,
 * dec_check_cut_end).
 * Only Huffman-coded progressive frames without restart intervals: with
 * restarts the skipped bytes would hold RST markers, arithmetic coding has
 * no such prefix property worth the risk. Call after dec_place (r and the
 * output checked against the real frame); redoes dec_configure. */
static DEC_STEP int dec_short_frame(dec_t *d, dec_req_t *rq, dec_rect_t *r)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;
    if (rq->mode != DEC_REGION || rq->whole_frame || !ci->progressive_mode || ci->arith_code ||
        ci->restart_interval != 0 || rq->len > SL_JPEG_SHORT_FRAME_MAX_COPY) {
        return 0;
    }
    /* Scaled rows per iMCU row, and the iMCU row after the region's last. */
    uint64_t imcu = (uint64_t)ci->max_v_samp_factor * (uint64_t)ci->min_DCT_scaled_size;
    uint64_t rows = ((r->y1 - 1) / imcu + 2) * (uint64_t)ci->max_v_samp_factor * DCTSIZE;
    size_t at = dec_sof_height_at(rq->buf, rq->len);
    if (rows >= ci->image_height || at == 0 ||
        (((uint32_t)rq->buf[at] << 8) | rq->buf[at + 1]) != ci->image_height) {
        return 0;
    }
    /* Pool memory: freed by jpeg_destroy_decompress, even after longjmp.
     * PERMANENT: jpeg_abort_decompress below frees the IMAGE pool. */
    JOCTET *copy = (*ci->mem->alloc_large)((j_common_ptr)ci, JPOOL_PERMANENT, rq->len);
    memcpy(copy, rq->buf, rq->len);
    copy[at] = (JOCTET)(rows >> 8);
    copy[at + 1] = (JOCTET)(rows & 0xFF);
    jpeg_abort_decompress(ci);
    jpeg_mem_src(ci, copy, (unsigned long)rq->len);
    (void)jpeg_read_header(ci, TRUE);
    d->jerr.short_frame = true;
    d->jerr.skipped_scan = -1;
    rq->cut = true;
    dec_rect_t again;
    int rc = dec_configure(d, rq, &again);
    if (rc == 0 && (ci->output_height < r->y1 || ci->output_width < r->x1)) {
        rc = sl_err(d->jerr.msg, sizeof(d->jerr.msg), -EBADMSG,
                    "frame cut to %u rows lost the region", (unsigned)rows);
    }
    return rc;
}

/* After jpeg_start_decompress of a cut frame, every scan has been read up
 * to the EOI libjpeg found. Damaged scan data can forge an EOI in the bytes
 * a cut scan skips: libjpeg would then stop early and return the region
 * without the later scans. A real EOI has no scan after it, so an SOS
 * marker (FF DA) anywhere in the rest of the file fails the cut decode
 * (dec_call then decodes the whole frame). A file with junk or a second
 * image after its EOI just takes that slower path. */
static DEC_STEP int dec_check_cut_end(dec_t *d, const dec_req_t *rq)
{
    const struct jpeg_source_mgr *src = d->cinfo.src;
    const uint8_t *rest = src->next_input_byte;
    size_t n = src->bytes_in_buffer < rq->len ? src->bytes_in_buffer : rq->len;
    for (size_t i = 0; i + 1 < n; i++) {
        if (rest[i] == 0xFF && rest[i + 1] == 0xDA) {
            return sl_err(d->jerr.msg, sizeof(d->jerr.msg), -EBADMSG,
                          "scan after the end of image in a cut frame");
        }
    }
    return 0;
}

/* The body of every call; returns 0 or a negative errno. The only setjmp:
 * libjpeg's errors in the steps it calls longjmp back here. */
static int dec_run(dec_t *d, dec_req_t *rq)
{
    struct jpeg_decompress_struct *ci = &d->cinfo;

    ci->err = jpeg_std_error(&d->jerr.pub);
    d->jerr.pub.error_exit = dec_error_exit;
    d->jerr.pub.emit_message = dec_emit_message;
    if (setjmp(d->jerr.jmp) != 0) {
        return d->jerr.code;
    }
    jpeg_create_decompress(ci);
    jpeg_mem_src(ci, rq->buf, (unsigned long)rq->len);
    (void)jpeg_read_header(ci, TRUE);

    if (rq->mode == DEC_PROBE) {
        dec_fill_info(ci, rq->info);
        return 0;
    }
    dec_rect_t r;
    int rc = dec_configure(d, rq, &r);
    if (rc == 0) {
        rc = dec_place(d, rq, &r);
    }
    if (rc == 0) {
        rc = dec_short_frame(d, rq, &r);
    }
    if (rc < 0) {
        return rc;
    }
    (void)jpeg_start_decompress(ci);
    if (rq->cut) {
        rc = dec_check_cut_end(d, rq);
        if (rc < 0) {
            return rc;
        }
    }
    rc = dec_read_rows(d, rq, &r);
    if (rc < 0) {
        return rc;
    }
    /* No jpeg_finish_decompress: we have every pixel we want, and the rest of
     * the file (remaining rows of a region, the EOI marker) is not worth
     * reading. The caller's jpeg_destroy_decompress aborts cleanly. */
    rq->x0 = r.x0;
    rq->y0 = r.y0;
    return 0;
}

/* Input checks shared by every entry point, then dec_run. */
static int dec_call(dec_req_t *rq, char *err, size_t errlen)
{
    if (rq->len == 0) {
        return sl_err(err, errlen, -ENODATA, "empty input");
    }
    if (rq->len < 2 || rq->buf[0] != 0xFF || rq->buf[1] != 0xD8) {
        return sl_err(err, errlen, -EILSEQ, "not a JPEG (no SOI marker)");
    }
    if (rq->len > ULONG_MAX) {
        return sl_err(err, errlen, -EFBIG, "input of %zu bytes too large", rq->len);
    }
    /* Zeroed so that jpeg_destroy_decompress is safe even if
     * jpeg_create_decompress itself failed. */
    dec_t d;
    memset(&d, 0, sizeof(d));
    int rc = dec_run(&d, rq);
    jpeg_destroy_decompress(&d.cinfo);
    if (rc < 0 && rq->cut) {
        /* A cut frame failed: whatever the damage, report what the whole
         * frame reports (or decode it, if the damage was all below). */
        rq->cut = false;
        rq->whole_frame = true;
        memset(&d, 0, sizeof(d));
        rc = dec_run(&d, rq);
        jpeg_destroy_decompress(&d.cinfo);
    }
    if (rc < 0) {
        return sl_err(err, errlen, rc, "%s", d.jerr.msg);
    }
    return 0;
}

int sl_jpeg_probe(const uint8_t *buf, size_t len, sl_jpeg_info_t *ret_info, char *err,
                  size_t errlen)
{
    sl_jpeg_info_t info;
    dec_req_t rq = {.mode = DEC_PROBE, .buf = buf, .len = len, .scale_num = 8,
                     .info = &info};
    int rc = dec_call(&rq, err, errlen);
    if (rc == 0) {
        *ret_info = info;
    }
    return rc;
}

int sl_jpeg_decode(const uint8_t *buf, size_t len, uint64_t max_pixels, sl_tensor_t *out,
                   char *err, size_t errlen)
{
    dec_req_t rq = {
        .mode = DEC_FULL, .buf = buf, .len = len, .max_pixels = max_pixels, .scale_num = 8,
        .out = out,
    };
    return dec_call(&rq, err, errlen);
}

static int dec_region(const uint8_t *buf, size_t len, uint64_t max_pixels, uint32_t x,
                      uint32_t y, uint32_t w, uint32_t h, uint32_t scale_num, bool wide,
                      sl_tensor_t *out, uint32_t *ret_x0, uint32_t *ret_y0,
                      sl_jpeg_times_t *ret_times, char *err, size_t errlen)
{
    if (scale_num < 1 || scale_num > 8) {
        return sl_err(err, errlen, -EINVAL, "scale %u/8 not one of 1/8 .. 8/8", scale_num);
    }
    if (w == 0 || h == 0) {
        return sl_err(err, errlen, -EINVAL, "empty region %ux%u", w, h);
    }
    dec_req_t rq = {
        .mode = DEC_REGION, .buf = buf, .len = len, .max_pixels = max_pixels,
        .x = x, .y = y, .w = w, .h = h, .scale_num = scale_num, .out = out, .wide = wide,
    };
    sl_jpeg_times_t times;
    rq.times = ret_times != NULL ? &times : NULL;
    int rc = dec_call(&rq, err, errlen);
    if (rc == 0) {
        *ret_x0 = rq.x0;
        *ret_y0 = rq.y0;
        if (ret_times != NULL) {
            *ret_times = times;
        }
    }
    return rc;
}

int sl_jpeg_decode_region_timed(const uint8_t *buf, size_t len, uint64_t max_pixels, uint32_t x,
                                uint32_t y, uint32_t w, uint32_t h, uint32_t scale_num,
                                sl_tensor_t *out, uint32_t *ret_x0, uint32_t *ret_y0,
                                sl_jpeg_times_t *ret_times, char *err, size_t errlen)
{
    return dec_region(buf, len, max_pixels, x, y, w, h, scale_num, true, out, ret_x0, ret_y0,
                      ret_times, err, errlen);
}

int sl_jpeg_decode_region_m8(const uint8_t *buf, size_t len, uint64_t max_pixels, uint32_t x,
                             uint32_t y, uint32_t w, uint32_t h, uint32_t scale_num,
                             sl_tensor_t *out, uint32_t *ret_x0, uint32_t *ret_y0, char *err,
                             size_t errlen)
{
    return dec_region(buf, len, max_pixels, x, y, w, h, scale_num, false, out, ret_x0, ret_y0,
                      NULL, err, errlen);
}

int sl_jpeg_decode_region(const uint8_t *buf, size_t len, uint64_t max_pixels, uint32_t x,
                          uint32_t y, uint32_t w, uint32_t h, uint32_t scale_denom,
                          sl_tensor_t *out, uint32_t *ret_x0, uint32_t *ret_y0, char *err,
                          size_t errlen)
{
    if (scale_denom != 1 && scale_denom != 2 && scale_denom != 4 && scale_denom != 8) {
        return sl_err(err, errlen, -EINVAL, "scale 1/%u not one of 1/1, 1/2, 1/4, 1/8",
                      scale_denom);
    }
    return sl_jpeg_decode_region_m8(buf, len, max_pixels, x, y, w, h, 8 / scale_denom, out,
                                    ret_x0, ret_y0, err, errlen);
}
