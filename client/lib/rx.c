#include "client/lib/rx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int index_segs(cl_rx_t *rx, const sl_pbw_seg_t *segs, size_t n, cl_rx_t **ret, char *err,
                      size_t errlen)
{
    int rc = sl_wire_batch_parse(segs, n, SL_WIRE_MAX_SAMPLES, &rx->wb, err, errlen);
    if (rc < 0) {
        cl_rx_free(rx);
        return rc;
    }
    *ret = rx;
    return 0;
}

int cl_rx_from_raw(sl_rpc_raw_t *raw, cl_rx_t **ret, char *err, size_t errlen)
{
    *ret = NULL;
    cl_rx_t *rx = calloc(1, sizeof(*rx));
    if (rx == NULL) {
        sl_rpc_raw_free(raw);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    rx->raw = raw;
    size_t n;
    const sl_pbw_seg_t *segs = sl_rpc_raw_segs(raw, &n);
    return index_segs(rx, segs, n, ret, err, errlen);
}

int cl_rx_from_batch(const Sluice__Batch *b, cl_rx_t **ret, char *err, size_t errlen)
{
    *ret = NULL;
    cl_rx_t *rx = calloc(1, sizeof(*rx));
    size_t n = sluice__batch__get_packed_size(b);
    if (rx != NULL) {
        rx->flat = malloc(n ? n : 1);
    }
    if (rx == NULL || rx->flat == NULL) {
        cl_rx_free(rx);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    rx->seg = (sl_pbw_seg_t){rx->flat, sluice__batch__pack(b, rx->flat)};
    return index_segs(rx, &rx->seg, 1, ret, err, errlen);
}

void cl_rx_free(cl_rx_t *rx)
{
    if (rx == NULL) {
        return;
    }
    sl_wire_batch_free(&rx->wb);
    sl_rpc_raw_free(rx->raw);
    free(rx->flat);
    free(rx);
}
