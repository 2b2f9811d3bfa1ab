#include "common/rpc/pb_wire.h"

#include <errno.h>
#include <string.h>

void sl_pbw_init(sl_pbw_reader_t *r, const sl_pbw_seg_t *segs, size_t nsegs)
{
    size_t total = 0;
    for (size_t i = 0; i < nsegs; i++) {
        total += segs[i].n;
    }
    *r = (sl_pbw_reader_t){.segs = segs, .nsegs = nsegs, .seg = 0, .off = 0, .left = total};
}

/* Steps over exhausted segments; only called with left > 0, and init/sub
 * guarantee the segments hold at least left more bytes. */
static void settle(sl_pbw_reader_t *r)
{
    while (r->seg < r->nsegs && r->off == r->segs[r->seg].n) {
        r->seg++;
        r->off = 0;
    }
}

int sl_pbw_varint(sl_pbw_reader_t *r, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (r->left == 0) {
            return -EBADMSG; /* truncated */
        }
        settle(r);
        uint8_t b = r->segs[r->seg].p[r->off++];
        r->left--;
        /* The tenth byte may only carry the top bit of a 64-bit value. */
        if (i == 9 && b > 1) {
            return -EBADMSG;
        }
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if ((b & 0x80) == 0) {
            *v = x;
            return 0;
        }
    }
    return -EBADMSG; /* more than 10 bytes */
}

int sl_pbw_tag(sl_pbw_reader_t *r, uint32_t *field, uint32_t *wire_type)
{
    uint64_t k;
    int rc = sl_pbw_varint(r, &k);
    if (rc < 0) {
        return rc;
    }
    uint64_t f = k >> 3;
    uint32_t wt = (uint32_t)(k & 7);
    if (f == 0 || f > 536870911u ||
        (wt != SL_PBW_VARINT && wt != SL_PBW_I64 && wt != SL_PBW_LEN && wt != SL_PBW_I32)) {
        return -EBADMSG;
    }
    *field = (uint32_t)f;
    *wire_type = wt;
    return 0;
}

int sl_pbw_advance(sl_pbw_reader_t *r, size_t n)
{
    if (n > r->left) {
        return -EBADMSG;
    }
    r->left -= n;
    while (n > 0) {
        settle(r);
        size_t here = r->segs[r->seg].n - r->off;
        size_t k = n < here ? n : here;
        r->off += k;
        n -= k;
    }
    return 0;
}

int sl_pbw_skip(sl_pbw_reader_t *r, uint32_t wire_type)
{
    uint64_t v;
    switch (wire_type) {
    case SL_PBW_VARINT:
        return sl_pbw_varint(r, &v);
    case SL_PBW_I64:
        return sl_pbw_advance(r, 8);
    case SL_PBW_I32:
        return sl_pbw_advance(r, 4);
    case SL_PBW_LEN: {
        sl_pbw_reader_t sub;
        return sl_pbw_sub(r, &sub);
    }
    default:
        return -EBADMSG;
    }
}

int sl_pbw_sub(sl_pbw_reader_t *r, sl_pbw_reader_t *sub)
{
    uint64_t len;
    int rc = sl_pbw_varint(r, &len);
    if (rc < 0) {
        return rc;
    }
    if (len > r->left) {
        return -EBADMSG; /* claims more than the message holds */
    }
    *sub = *r;
    sub->left = (size_t)len;
    return sl_pbw_advance(r, (size_t)len);
}

int sl_pbw_copy(sl_pbw_reader_t *r, void *dst, size_t n)
{
    if (n > r->left) {
        return -EBADMSG;
    }
    uint8_t *d = dst;
    r->left -= n;
    while (n > 0) {
        settle(r);
        size_t here = r->segs[r->seg].n - r->off;
        size_t k = n < here ? n : here;
        memcpy(d, r->segs[r->seg].p + r->off, k);
        d += k;
        r->off += k;
        n -= k;
    }
    return 0;
}

int sl_pbw_contig(sl_pbw_reader_t *r, size_t n, const uint8_t **p)
{
    if (n > r->left) {
        return -EBADMSG;
    }
    if (n == 0) {
        *p = NULL;
        return 0;
    }
    settle(r);
    if (r->segs[r->seg].n - r->off < n) {
        return -EAGAIN;
    }
    *p = r->segs[r->seg].p + r->off;
    r->off += n;
    r->left -= n;
    return 0;
}
