/* tensor: the one buffer type that flows between stages, hosts and the
 * training loop. A tensor owns its data (malloc); capacity is kept so that a
 * stage can reuse an output buffer across samples without reallocating. */
#ifndef SL_TENSOR_H
#define SL_TENSOR_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    SL_DT_BYTES = 0, /* encoded file bytes (JPEG): shape is {nbytes, 1, 1} */
    SL_DT_U8 = 1,    /* 8-bit pixels */
    SL_DT_F32 = 2,   /* float32 pixels (after normalize) */
    SL_DT_U32 = 3,   /* token ids (a record's fields only) */
    SL_DT_RECORD = 4, /* a multimodal record (common/sample/record.h): shape {nbytes, 1, 1} */
} sl_dtype_e;

typedef enum {
    SL_LAYOUT_HWC = 0,
    SL_LAYOUT_CHW = 1,
} sl_layout_e;

/* Dimensions are named for HWC; for CHW they keep their meaning (h rows,
 * w columns, c channels) and only the memory order changes. */
typedef struct sl_tensor_s {
    sl_dtype_e dtype;
    sl_layout_e layout;
    uint32_t h, w, c;
    size_t nbytes; /* valid bytes in data */
    size_t cap;    /* allocated bytes */
    uint8_t *data; /* owned */
} sl_tensor_t;

/* Largest tensor any stage may produce: a peer or a file can never make us
 * allocate more than this per sample. */
#define SL_TENSOR_MAX_BYTES ((size_t)1 << 31)

void sl_tensor_init(sl_tensor_t *t);
void sl_tensor_free(sl_tensor_t *t); /* releases data; t itself may be on the stack */
/* Sets shape/dtype and makes room for the data (grows, never shrinks).
 * Returns -EOVERFLOW beyond SL_TENSOR_MAX_BYTES, -ENOMEM on allocation failure. */
int sl_tensor_reshape(sl_tensor_t *t, sl_dtype_e dtype, sl_layout_e layout, uint32_t h,
                      uint32_t w, uint32_t c);
/* Ensures cap >= n bytes (contents preserved up to nbytes). */
int sl_tensor_reserve(sl_tensor_t *t, size_t n);
/* Swaps the contents of a and b (used to ping-pong stage buffers). */
void sl_tensor_swap(sl_tensor_t *a, sl_tensor_t *b);
size_t sl_dtype_size(sl_dtype_e dtype);
const char *sl_dtype_name(sl_dtype_e dtype);

#endif
