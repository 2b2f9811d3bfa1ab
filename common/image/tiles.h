/* tiles: "any-resolution" tiling for vision-language models (InternVL's
 * dynamic_preprocess, LLaVA-NeXT's anyres): pick a cols x rows grid whose
 * aspect ratio is closest to the image's, resize the image onto it, cut it
 * into tile x tile squares, optionally add a thumbnail of the whole image.
 *
 * Cost: the tile count per image (sl_tiles_grid, from the header's width and
 * height alone) is what the trainer's vision cost depends on: every tile is
 * one vision-encoder forward pass.
 *
 * Pure functions: no state, no I/O, never log; the same bytes on every host
 * (the grid is integer and IEEE double arithmetic without libm; the resize is
 * img_resize.c's fixed-point one). Any thread may call. */
#ifndef SL_TILES_H
#define SL_TILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/sample/tensor.h"

#define SL_TILES_MAX_TILE 4096u /* tile side, pixels */
#define SL_TILES_MAX_COUNT 64u  /* max_tiles (the thumbnail comes on top) */

/* InternVL's grid choice, exactly as its load_image code
 * (find_closest_aspect_ratio over dynamic_preprocess's target_ratios):
 * candidates are every (cols, rows) with min_tiles <= cols * rows <=
 * max_tiles; the one whose cols / rows is closest to width / height (as
 * doubles) wins; on an exact tie a later candidate replaces the current best
 * only if width * height > 0.5 * tile^2 * cols * rows. Candidates are visited
 * in InternVL's order: sorted by cols * rows, and within one product in the
 * iteration order of the Python set they were built in. We emulate CPython's
 * set (3.8 and later: xxHash-style tuple hash, the table and probing of
 * Objects/setobject.c) to reproduce that order: it decides ties such as a 5:4
 * image between 1x2 and 2x1. tests/integration/test_tiles_grid.sh checks
 * this against the Python code itself.
 * -EINVAL: width or height 0, tile outside 1..SL_TILES_MAX_TILE, or not
 * 1 <= min_tiles <= max_tiles <= SL_TILES_MAX_COUNT. */
int sl_tiles_grid(uint32_t width, uint32_t height, uint32_t tile, uint32_t min_tiles,
                  uint32_t max_tiles, uint32_t *ret_cols, uint32_t *ret_rows);

/* Tiles of an image. in: U8 HWC RGB (c = 3), as the decoders return it.
 * The image is resized to (cols * tile) x (rows * tile) with sl_img_resize_rect
 * (Pillow's antialiased bilinear; InternVL's PIL resize defaults to bicubic,
 * so pixels are close to, not identical with, InternVL's) and cut into
 * cols * rows tiles in row-major order (tile k is column k % cols, row
 * k / cols, InternVL's order). With thumbnail and more than one tile, the
 * whole image resized to tile x tile comes last. n = cols * rows (+ 1).
 *
 * out (reshaped, its buffer reused): dtype U8, layout CHW, h = w = tile,
 * c = 3 * n. Its memory is exactly a contiguous [n][3][tile][tile] array:
 * tile k's R, G and B planes are planes 3k, 3k + 1, 3k + 2. A stage that
 * wants one RGB image (c == 3) refuses it instead of misreading it.
 * *ret_ntiles = n; ret_cols / ret_rows (may be NULL) get the grid.
 *
 * Errors (err filled): -EINVAL bad input tensor or parameters (as
 * sl_tiles_grid), -EFBIG the resized image or out above SL_TENSOR_MAX_BYTES,
 * -ENOMEM. out's contents are unspecified on failure. */
int sl_tiles_make(const sl_tensor_t *in, uint32_t tile, uint32_t min_tiles, uint32_t max_tiles,
                  bool thumbnail, sl_tensor_t *out, uint32_t *ret_ntiles, uint32_t *ret_cols,
                  uint32_t *ret_rows, char *err, size_t errlen);

#endif
