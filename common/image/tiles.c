/* tiles: InternVL's grid choice and the tiles cut from the resized image.
 *
 * InternVL builds its candidate grids as a Python set and sorts them by
 * cols * rows with a stable sort, so among grids of one product the set's
 * iteration order decides exact ties. That order is a CPython detail, but a
 * fixed one: int hashes are the ints themselves (no hash randomisation), the
 * tuple hash is the xxHash-based one of CPython 3.8+, and a set built from a
 * generator is a table of 8 slots grown to the next power of two above
 * 4 * used whenever it is 3/5 full, probed 10 slots at a time then by
 * perturbation. py_set_* below replays exactly that (Objects/setobject.c,
 * set_add_entry / set_insert_clean / set_table_resize) on (cols, rows) keys:
 * a few hundred keys at most, a few microseconds per image. */
#include "common/image/tiles.h"

#include <errno.h>
#include <string.h>

#include "common/base/err.h"
#include "common/image/imgops.h"

/* ---- CPython's set, for (cols, rows) tuples of small ints ---- */

#define PY_SET_MINSIZE 8
#define PY_LINEAR_PROBES 9
#define PY_PERTURB_SHIFT 5
/* Distinct grids with cols * rows <= 64 number 280; the table then has
 * 2048 slots (grown to > 4 * used when 3/5 full), never more. */
#define PY_SET_MAX_SLOTS 2048

typedef struct py_set_s {
    uint16_t key[PY_SET_MAX_SLOTS]; /* cols << 8 | rows; 0 = empty slot */
    size_t mask, fill, used;
} py_set_t;

/* CPython >= 3.8 tuplehash() of (a, b) with int items, 64-bit. */
static uint64_t py_tuple2_hash(uint64_t a, uint64_t b)
{
    const uint64_t p1 = 11400714785074694791ull;
    const uint64_t p2 = 14029467366897019727ull;
    const uint64_t p5 = 2870177450012600261ull;
    const uint64_t lanes[2] = {a, b};
    uint64_t acc = p5;
    for (int i = 0; i < 2; i++) {
        acc += lanes[i] * p2;
        acc = (acc << 31) | (acc >> 33);
        acc *= p1;
    }
    acc += 2u ^ (p5 ^ 3527539ull);
    return acc == UINT64_MAX ? 1546275796u : acc;
}

static uint64_t py_key_hash(uint16_t key) { return py_tuple2_hash(key >> 8, key & 0xFFu); }

/* The slot holding key, or the empty slot where set_add_entry (and, for a
 * key known absent, set_insert_clean: the same probe sequence) puts it. */
static size_t py_set_slot(const uint16_t *table, size_t mask, uint64_t hash, uint16_t key)
{
    size_t perturb = (size_t)hash;
    size_t i = (size_t)hash & mask;
    for (;;) {
        size_t probes = i + PY_LINEAR_PROBES <= mask ? PY_LINEAR_PROBES : 0;
        for (size_t k = 0; k <= probes; k++) {
            if (table[i + k] == 0 || table[i + k] == key) {
                return i + k;
            }
        }
        perturb >>= PY_PERTURB_SHIFT;
        i = (i * 5 + 1 + perturb) & mask;
    }
}

static int py_set_resize(py_set_t *s, size_t minused)
{
    size_t newsize = PY_SET_MINSIZE;
    while (newsize <= minused) {
        newsize <<= 1;
    }
    if (newsize > PY_SET_MAX_SLOTS) {
        return -EOVERFLOW; /* not reachable with SL_TILES_MAX_COUNT 64 */
    }
    uint16_t old[PY_SET_MAX_SLOTS];
    size_t oldslots = s->mask + 1;
    memcpy(old, s->key, oldslots * sizeof(old[0]));
    memset(s->key, 0, sizeof(s->key));
    s->mask = newsize - 1;
    for (size_t i = 0; i < oldslots; i++) {
        if (old[i] != 0) {
            s->key[py_set_slot(s->key, s->mask, py_key_hash(old[i]), old[i])] = old[i];
        }
    }
    return 0;
}

static int py_set_add(py_set_t *s, uint16_t key)
{
    size_t slot = py_set_slot(s->key, s->mask, py_key_hash(key), key);
    if (s->key[slot] == key) {
        return 0;
    }
    s->key[slot] = key;
    s->fill++;
    s->used++;
    if (s->fill * 5 < s->mask * 3) {
        return 0;
    }
    return py_set_resize(s, s->used > 50000 ? s->used * 2 : s->used * 4);
}

/* ---- the grid ---- */

int sl_tiles_grid(uint32_t width, uint32_t height, uint32_t tile, uint32_t min_tiles,
                  uint32_t max_tiles, uint32_t *ret_cols, uint32_t *ret_rows)
{
    if (width == 0 || height == 0 || tile == 0 || tile > SL_TILES_MAX_TILE || min_tiles == 0 ||
        min_tiles > max_tiles || max_tiles > SL_TILES_MAX_COUNT) {
        return -EINVAL;
    }
    /* target_ratios = set((i, j) for n in range(min_num, max_num + 1)
     *     for i in range(1, n + 1) for j in range(1, n + 1)
     *     if i * j <= max_num and i * j >= min_num) */
    py_set_t set;
    memset(&set, 0, sizeof(set));
    set.mask = PY_SET_MINSIZE - 1;
    for (uint32_t n = min_tiles; n <= max_tiles; n++) {
        for (uint32_t i = 1; i <= n; i++) {
            for (uint32_t j = 1; j <= n; j++) {
                if (i * j <= max_tiles && i * j >= min_tiles) {
                    int rc = py_set_add(&set, (uint16_t)(i << 8 | j));
                    if (rc < 0) {
                        return rc;
                    }
                }
            }
        }
    }
    /* sorted(target_ratios, key=lambda x: x[0] * x[1]): stable, so a
     * counting sort by product over the set's iteration (slot) order. */
    uint16_t order[PY_SET_MAX_SLOTS];
    size_t n = 0;
    for (uint32_t prod = min_tiles; prod <= max_tiles; prod++) {
        for (size_t i = 0; i <= set.mask; i++) {
            uint16_t k = set.key[i];
            if (k != 0 && (uint32_t)(k >> 8) * (k & 0xFFu) == prod) {
                order[n++] = k;
            }
        }
    }
    /* find_closest_aspect_ratio. Doubles as Python's floats; width / height
     * is correctly rounded in both. The tie test area > 0.5 * tile^2 * i * j
     * is exact in Python (int vs float) and here: the right side is an
     * integer or a half-integer x / 2 below 2^31, and for an integer area,
     * area > x / 2 exactly when area > floor(x / 2). */
    double aspect = (double)width / (double)height;
    uint64_t area = (uint64_t)width * height;
    double best_diff = __builtin_inf();
    uint32_t best_i = 1, best_j = 1;
    for (size_t k = 0; k < n; k++) {
        uint32_t i = order[k] >> 8, j = order[k] & 0xFFu;
        double diff = aspect - (double)i / (double)j;
        diff = diff < 0 ? -diff : diff;
        if (diff < best_diff) {
            best_diff = diff;
            best_i = i;
            best_j = j;
        } else if (diff == best_diff) {
            if (area > (uint64_t)tile * tile * i * j / 2) {
                best_i = i;
                best_j = j;
            }
        }
    }
    *ret_cols = best_i;
    *ret_rows = best_j;
    return 0;
}

/* ---- the tiles ---- */

/* The tile x tile square at (x0, y0) of an RGB HWC image, as 3 planes. */
static void tile_to_chw(const sl_tensor_t *src, uint32_t x0, uint32_t y0, uint32_t tile,
                        uint8_t *dst)
{
    size_t plane = (size_t)tile * tile;
    for (uint32_t y = 0; y < tile; y++) {
        const uint8_t *s = src->data + (((size_t)y0 + y) * src->w + x0) * 3;
        uint8_t *r = dst + (size_t)y * tile;
        uint8_t *g = r + plane;
        uint8_t *b = g + plane;
        for (uint32_t x = 0; x < tile; x++, s += 3) {
            r[x] = s[0];
            g[x] = s[1];
            b[x] = s[2];
        }
    }
}

int sl_tiles_make(const sl_tensor_t *in, uint32_t tile, uint32_t min_tiles, uint32_t max_tiles,
                  bool thumbnail, sl_tensor_t *out, uint32_t *ret_ntiles, uint32_t *ret_cols,
                  uint32_t *ret_rows, char *err, size_t errlen)
{
    if (in == NULL || in->dtype != SL_DT_U8 || in->layout != SL_LAYOUT_HWC || in->c != 3 ||
        in->h == 0 || in->w == 0 || in->data == NULL ||
        in->nbytes != (size_t)in->h * in->w * 3) {
        return sl_err(err, errlen, -EINVAL, "tiles need a non-empty uint8 RGB HWC image");
    }
    if (out == in) {
        return sl_err(err, errlen, -EINVAL, "tiles: out must not be in");
    }
    uint32_t cols, rows;
    if (sl_tiles_grid(in->w, in->h, tile, min_tiles, max_tiles, &cols, &rows) < 0) {
        return sl_err(err, errlen, -EINVAL,
                      "tiles: tile %u (1..%u), min %u, max %u (1 <= min <= max <= %u)", tile,
                      SL_TILES_MAX_TILE, min_tiles, max_tiles, SL_TILES_MAX_COUNT);
    }
    uint32_t grid = cols * rows;
    uint32_t n = grid + (thumbnail && grid > 1 ? 1 : 0);
    size_t plane = (size_t)tile * tile; /* <= 2^24 */
    /* n <= 65, so n * 3 * plane < 2^32 * 65: no overflow in size_t. */
    if ((size_t)n * 3 * plane > SL_TENSOR_MAX_BYTES ||
        (size_t)grid * 3 * plane > SL_TENSOR_MAX_BYTES) {
        return sl_err(err, errlen, -EFBIG, "%u tiles of %ux%u exceed %zu bytes", n, tile, tile,
                      (size_t)SL_TENSOR_MAX_BYTES);
    }
    int rc = sl_tensor_reshape(out, SL_DT_U8, SL_LAYOUT_CHW, tile, tile, 3 * n);
    if (rc < 0) {
        return sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc, "cannot hold %u tiles of %ux%u",
                      n, tile, tile);
    }
    sl_tensor_t big, scratch;
    sl_tensor_init(&big);
    sl_tensor_init(&scratch);
    rc = sl_img_resize_rect_ex(in, 0, 0, in->w, in->h, rows * tile, cols * tile, 0, &scratch,
                               &big);
    if (rc < 0) {
        rc = sl_err(err, errlen, rc == -EOVERFLOW ? -EFBIG : rc,
                    "tiles: cannot resize %ux%u to %ux%u", in->w, in->h, cols * tile,
                    rows * tile);
        goto out;
    }
    for (uint32_t k = 0; k < grid; k++) {
        tile_to_chw(&big, (k % cols) * tile, (k / cols) * tile, tile,
                    out->data + (size_t)k * 3 * plane);
    }
    if (n > grid) {
        rc = sl_img_resize_rect_ex(in, 0, 0, in->w, in->h, tile, tile, 0, &scratch, &big);
        if (rc < 0) {
            rc = sl_err(err, errlen, rc, "tiles: cannot make the %ux%u thumbnail", tile, tile);
            goto out;
        }
        tile_to_chw(&big, 0, 0, tile, out->data + (size_t)grid * 3 * plane);
    }
    *ret_ntiles = n;
    if (ret_cols != NULL) {
        *ret_cols = cols;
    }
    if (ret_rows != NULL) {
        *ret_rows = rows;
    }
out:
    sl_tensor_free(&scratch);
    sl_tensor_free(&big);
    return rc;
}
