/* features: a sample's cost features read from its encoded bytes
 * (common/profile/features.h). */
#include "common/profile/features.h"

#include <string.h>

#include "common/image/jpeg.h"
#include "common/sample/record.h"
#include "common/video/video.h"

void sl_cost_features(const uint8_t *buf, size_t len, sl_cost_features_t *ret)
{
    sl_cost_features_head(buf, len, len, ret);
}

/* Adds one encoded image's features (JPEG or PNG header). */
static void add_image(const uint8_t *buf, size_t len, uint64_t bytes, sl_cost_features_t *f)
{
    f->kb += (double)bytes / 1000.0;
    f->images += 1.0;
    uint32_t w = 0, h = 0;
    int progressive = 0;
    sl_jpeg_info_t info;
    if (buf == NULL) {
        return;
    }
    if (sl_jpeg_probe(buf, len, &info, NULL, 0) == 0) {
        w = info.width;
        h = info.height;
        progressive = info.progressive;
    } else if (len >= 24 && memcmp(buf, "\x89PNG\r\n\x1a\n", 8) == 0 &&
               memcmp(buf + 12, "IHDR", 4) == 0) {
        w = (uint32_t)buf[16] << 24 | (uint32_t)buf[17] << 16 | (uint32_t)buf[18] << 8 | buf[19];
        h = (uint32_t)buf[20] << 24 | (uint32_t)buf[21] << 16 | (uint32_t)buf[22] << 8 | buf[23];
    }
    double mp = (double)w * (double)h / 1e6;
    f->mpix += mp;
    if (progressive) {
        f->progressive = 1;
        f->prog_mpix += mp;
    }
}

/* Adds one clip's features from its container header (what the whole
 * bytes, or a head holding the header, tell): its bytes, one visual
 * input, and the decode work of SL_COST_VIDEO_FRAMES frames as mpix. A
 * header the probe cannot read adds its bytes only. */
static void add_clip(const uint8_t *buf, size_t len, uint64_t bytes, sl_cost_features_t *f)
{
    f->kb += (double)bytes / 1000.0;
    f->images += 1.0;
    sl_video_info_t info;
    if (buf != NULL && sl_video_probe(buf, len, &info, NULL, 0) == 0) {
        f->mpix += sl_video_work_mpix(&info, SL_COST_VIDEO_FRAMES);
    }
}

void sl_cost_features_head(const uint8_t *buf, size_t len, uint64_t file_bytes,
                           sl_cost_features_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    sl_rec_t r;
    if (buf != NULL && len == file_bytes && len >= 4 && memcmp(buf, SL_REC_MAGIC, 4) == 0 &&
        sl_rec_parse(buf, len, &r, NULL, 0) == 0) {
        for (uint32_t i = 0; i < r.n; i++) {
            const sl_rfield_t *f = &r.f[i];
            if (f->kind == SL_RF_TEXT) {
                ret->text_kb += (double)f->nbytes / 1000.0;
            } else if (f->kind == SL_RF_IMAGE_ENC) {
                add_image(f->data, f->nbytes, f->nbytes, ret);
            } else if (f->kind == SL_RF_VIDEO_ENC) {
                add_clip(f->data, f->nbytes, f->nbytes, ret);
            }
        }
        return;
    }
    add_image(buf, len, file_bytes, ret);
}

void sl_cost_features_heads(const uint8_t *rec, size_t len, uint64_t image_bytes,
                            uint64_t text_bytes, sl_cost_features_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    sl_rec_t r;
    if (rec != NULL && sl_rec_parse(rec, len, &r, NULL, 0) == 0) {
        for (uint32_t i = 0; i < r.n; i++) {
            if (r.f[i].kind == SL_RF_IMAGE_ENC) {
                add_image(r.f[i].data, r.f[i].nbytes, 0, ret);
            } else if (r.f[i].kind == SL_RF_VIDEO_ENC) {
                add_clip(r.f[i].data, r.f[i].nbytes, 0, ret);
            }
        }
    }
    ret->kb = (double)image_bytes / 1000.0; /* the whole images', not the heads' */
    ret->text_kb = (double)text_bytes / 1000.0;
}
