/* imgops: pixel operations on decoded images: resampling, crop geometry,
 * flip, normalize, layout. Pure functions over tensors; no I/O, no state.
 *
 * Resampling follows Pillow's / torchvision's antialiased bilinear filter
 * (triangle kernel whose support widens by the downscale factor), separable,
 * horizontal pass then vertical pass, so results are close to torchvision's
 * Resize/RandomResizedCrop on PIL images. */
#ifndef SL_IMGOPS_H
#define SL_IMGOPS_H

#include <stdint.h>

#include "common/base/rng.h"
#include "common/sample/tensor.h"

/* Resamples the rectangle (x, y, w, h) of in -- in input pixel units,
 * fractional allowed, inside [0, in->w] x [0, in->h] -- to out_h x out_w.
 * in: U8 HWC, 1..4 channels. out: U8 HWC, same channels. The input may be
 * larger than the rectangle (the rectangle is a view): pixels outside it
 * contribute only where the filter support reaches, as in Pillow's box
 * argument. Returns -EINVAL on a bad rectangle or size. */
int sl_img_resize_rect(const sl_tensor_t *in, double x, double y, double w, double h,
                       uint32_t out_h, uint32_t out_w, sl_tensor_t *out);

/* Treat the rectangle, widened to whole pixels, as the whole image: pixels
 * outside it never contribute. For an integer rectangle this is exactly
 * torchvision's crop-then-resize (RandomResizedCrop on a PIL image), which
 * differs from Pillow's box argument at the edges. */
#define SL_RESIZE_CLIP 1u

/* sl_img_resize_rect with flags (SL_RESIZE_*) and an optional scratch tensor
 * (NULL: allocate per call). The scratch is only grown, never shrunk; its
 * shape and contents are clobbered. One scratch per thread. */
int sl_img_resize_rect_ex(const sl_tensor_t *in, double x, double y, double w, double h,
                          uint32_t out_h, uint32_t out_w, uint32_t flags, sl_tensor_t *scratch,
                          sl_tensor_t *out);

/* The resampling filters of resize and random_resized_crop. */
typedef enum {
    SL_IMG_BILINEAR = 0, /* Pillow's BILINEAR, antialiased (sl_img_resize_rect_ex) */
    SL_IMG_BICUBIC,      /* Pillow's BICUBIC (a = -0.5), antialiased; plain C loops */
    SL_IMG_NEAREST,      /* torch's nearest on tensors: floor(d * in / out); needs
                             * SL_RESIZE_CLIP and an integer rectangle */
} sl_img_interp_e;
/* sl_img_resize_rect_ex with a choice of filter. */
int sl_img_resize_interp(const sl_tensor_t *in, double x, double y, double w, double h,
                         uint32_t out_h, uint32_t out_w, uint32_t flags, sl_img_interp_e interp,
                         sl_tensor_t *scratch, sl_tensor_t *out);

/* SL_IMG_NEAREST alone: the integer rectangle (x, y, w, h) of U8 HWC in to
 * out_h x out_w, output pixel d reading floor(d * (float)in / out). */
int sl_img_resize_nearest(const sl_tensor_t *in, double x, double y, double w, double h,
                          uint32_t out_h, uint32_t out_w, sl_tensor_t *out);

/* Integer crop of U8/F32 HWC: rows [y, y+h), columns [x, x+w). */
int sl_img_crop(const sl_tensor_t *in, uint32_t x, uint32_t y, uint32_t w, uint32_t h,
                sl_tensor_t *out);

/* Horizontal flip in place; any dtype (not BYTES), HWC or CHW. */
int sl_img_flip_h(sl_tensor_t *t);
/* Vertical flip in place (rows reversed); any dtype (not BYTES), HWC or CHW. */
int sl_img_flip_v(sl_tensor_t *t);

/* ToTensor + Normalize: out = (in / 255 - mean[c]) / std[c] for U8 input, or
 * (in - mean[c]) / std[c] for F32 input. HWC or CHW kept; out is F32. in->c
 * must be 3 (or 1, using mean[0], std[0]). */
int sl_img_normalize(const sl_tensor_t *in, const float mean[3], const float std[3],
                     sl_tensor_t *out);

/* sl_img_normalize then sl_img_to_chw in one pass: out is CHW F32 holding
 * exactly the floats of the two calls (the same formula in the same order),
 * without the HWC F32 image in between. Same inputs as sl_img_normalize;
 * out must not be in. */
int sl_img_normalize_chw(const sl_tensor_t *in, const float mean[3], const float std[3],
                         sl_tensor_t *out);

/* HWC -> CHW, any pixel dtype. A CHW input is copied unchanged. */
int sl_img_to_chw(const sl_tensor_t *in, sl_tensor_t *out);

/* torchvision RandomResizedCrop.get_params on an H x W image: up to 10 tries
 * of area fraction uniform(scale) and log-uniform aspect ratio(ratio), then the
 * centre-crop fallback, exactly as torchvision 0.14 does it, drawing from r.
 * Output: top-left (x, y) and size (w, h), all inside the image. */
void sl_rrc_params(uint32_t img_h, uint32_t img_w, const double scale[2], const double ratio[2],
                   sl_rng_t *r, uint32_t *ret_x, uint32_t *ret_y, uint32_t *ret_w,
                   uint32_t *ret_h);

/* torchvision CenterCrop geometry: (x, y) of a crop_h x crop_w window centred
 * in img_h x img_w (int(round((H - h) / 2.0))). The crop must fit (callers
 * resize first or the pipeline pads; see pipeline.c). */
void sl_center_crop_params(uint32_t img_h, uint32_t img_w, uint32_t crop_h, uint32_t crop_w,
                           uint32_t *ret_x, uint32_t *ret_y);

/* torchvision Resize(int) geometry: the shorter side becomes size, the longer
 * one int(size * long / short) (truncated, as torchvision does). */
void sl_resize_shorter_dims(uint32_t img_h, uint32_t img_w, uint32_t size, uint32_t *ret_h,
                            uint32_t *ret_w);

#endif
