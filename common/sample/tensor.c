#include "common/sample/tensor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void sl_tensor_init(sl_tensor_t *t) { memset(t, 0, sizeof(*t)); }

void sl_tensor_free(sl_tensor_t *t)
{
    if (t == NULL) {
        return;
    }
    free(t->data);
    memset(t, 0, sizeof(*t));
}

size_t sl_dtype_size(sl_dtype_e dtype)
{
    return dtype == SL_DT_F32 || dtype == SL_DT_U32 ? 4 : 1;
}

const char *sl_dtype_name(sl_dtype_e dtype)
{
    switch (dtype) {
    case SL_DT_BYTES:
        return "bytes";
    case SL_DT_U8:
        return "uint8";
    case SL_DT_F32:
        return "float32";
    case SL_DT_U32:
        return "uint32";
    case SL_DT_RECORD:
        return "record";
    }
    return "?";
}

int sl_tensor_reserve(sl_tensor_t *t, size_t n)
{
    if (n > SL_TENSOR_MAX_BYTES) {
        return -EOVERFLOW;
    }
    if (n <= t->cap) {
        return 0;
    }
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < n) {
        cap *= 2;
    }
    if (cap > SL_TENSOR_MAX_BYTES) {
        cap = SL_TENSOR_MAX_BYTES;
    }
    uint8_t *p = realloc(t->data, cap);
    if (p == NULL) {
        return -ENOMEM;
    }
    t->data = p;
    t->cap = cap;
    return 0;
}

int sl_tensor_reshape(sl_tensor_t *t, sl_dtype_e dtype, sl_layout_e layout, uint32_t h,
                      uint32_t w, uint32_t c)
{
    /* 128-bit-safe size: each factor is < 2^32, so check stepwise. */
    size_t n = sl_dtype_size(dtype);
    const uint32_t dims[3] = {h, w, c};
    for (int i = 0; i < 3; i++) {
        if (dims[i] != 0 && n > SL_TENSOR_MAX_BYTES / dims[i]) {
            return -EOVERFLOW;
        }
        n *= dims[i];
    }
    int rc = sl_tensor_reserve(t, n);
    if (rc < 0) {
        return rc;
    }
    t->dtype = dtype;
    t->layout = layout;
    t->h = h;
    t->w = w;
    t->c = c;
    t->nbytes = n;
    return 0;
}

void sl_tensor_swap(sl_tensor_t *a, sl_tensor_t *b)
{
    sl_tensor_t tmp = *a;
    *a = *b;
    *b = tmp;
}
