/* Worker pure logic: packing finished samples into Batch messages, the
 * output-buffer budget, the registration backoff and its jitter. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/rng.h"
#include "common/data/skip.h"
#include "worker/control.h"
#include "worker/msg.h"
#include "worker/tasks.h"
#include "tests/unit/fixtures.h"

/* A delivered sample with nbytes payload bytes, each = position & 0xff. */
static sl_sample_t mk(uint64_t pos, size_t nbytes)
{
    sl_sample_t s = {.epoch = 3, .position = pos, .index = pos + 1000, .label = (int32_t)pos,
                     .skip = -1};
    sl_tensor_init(&s.t);
    ck_assert_int_eq(sl_tensor_reshape(&s.t, SL_DT_U8, SL_LAYOUT_HWC, 1, (uint32_t)nbytes, 1),
                     0);
    memset(s.t.data, (int)(pos & 0xff), nbytes);
    return s;
}

static sl_sample_t mk_skip(uint64_t pos, sl_skip_e why)
{
    sl_sample_t s = {.epoch = 3, .position = pos, .index = pos + 1000, .label = -1,
                     .skip = (int)why};
    sl_tensor_init(&s.t);
    return s;
}

/* Sum of samples over every message, checking each message's bounds and
 * that split_done is set on the last one only. */
static size_t check_list(wk_msglist_t *l, uint32_t batch, size_t max_bytes, int expect_done)
{
    size_t total = 0;
    size_t i = 0;
    for (wk_msg_t *m = l->head; m != NULL; m = m->next, i++) {
        ck_assert_uint_le(m->batch.n_samples, batch);
        size_t packed = sluice__batch__get_packed_size(&m->batch);
        ck_assert_uint_le(packed, m->bytes);
        ck_assert_uint_le(packed, max_bytes);
        int last = m->next == NULL;
        ck_assert_int_eq(m->batch.split_done, last && expect_done);
        ck_assert_uint_eq(m->batch.job_id, 7);
        ck_assert_uint_eq(m->batch.split_id, 9);
        ck_assert_uint_eq(m->batch.stage_to, 2);
        total += m->batch.n_samples;
    }
    ck_assert_uint_eq(i, l->count);
    return total;
}

START_TEST(test_packer_batch_size)
{
    wk_packer_t pk;
    wk_msglist_t out;
    wk_msglist_init(&out);
    wk_packer_init(&pk, 7, 9, 2, 4, 1 << 20);
    for (uint64_t p = 0; p < 10; p++) {
        sl_sample_t s = mk(p, 100);
        ck_assert_int_eq(wk_packer_add(&pk, &s, NULL, NULL, &out), 0);
        ck_assert_ptr_null(s.t.data); /* data moved into the message */
    }
    /* Lazy flush: two full messages out, the third partial until finish. */
    ck_assert_uint_eq(out.count, 2);
    ck_assert_uint_gt(wk_packer_bytes(&pk), 0);
    ck_assert_int_eq(wk_packer_finish(&pk, &out), 0);
    ck_assert_uint_eq(wk_packer_bytes(&pk), 0);
    ck_assert_uint_eq(out.count, 3);
    ck_assert_uint_eq(check_list(&out, 4, 1 << 20, 1), 10);
    /* Round trip through protobuf: what the client will see. */
    wk_msg_t *m = out.head;
    size_t n = sluice__batch__get_packed_size(&m->batch);
    uint8_t *buf = malloc(n);
    sluice__batch__pack(&m->batch, buf);
    Sluice__Batch *b = sluice__batch__unpack(NULL, n, buf);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->n_samples, 4);
    ck_assert_uint_eq(b->stage_to, 2); /* every message names the units run */
    ck_assert_uint_eq(b->samples[2]->position, 2);
    ck_assert_uint_eq(b->samples[2]->index, 1002);
    ck_assert_uint_eq(b->samples[2]->epoch, 3);
    ck_assert_uint_eq(b->samples[2]->w, 100);
    ck_assert_uint_eq(b->samples[2]->data.len, 100);
    ck_assert_uint_eq(b->samples[2]->data.data[5], 2);
    ck_assert_str_eq(b->samples[2]->skip_reason, "");
    sluice__batch__free_unpacked(b, NULL);
    free(buf);
    wk_msglist_clear(&out);
    ck_assert_uint_eq(out.count, 0);
    ck_assert_uint_eq(out.bytes, 0);
}
END_TEST

START_TEST(test_packer_byte_bound)
{
    wk_packer_t pk;
    wk_msglist_t out;
    wk_msglist_init(&out);
    const size_t max = 1000;
    wk_packer_init(&pk, 7, 9, 2, 100, max);
    for (uint64_t p = 0; p < 20; p++) {
        sl_sample_t s = mk(p, 300);
        ck_assert_int_eq(wk_packer_add(&pk, &s, NULL, NULL, &out), 0);
    }
    ck_assert_int_eq(wk_packer_finish(&pk, &out), 0);
    ck_assert_uint_eq(check_list(&out, 100, max, 1), 20);
    /* 300-byte samples with ~20 bytes of framing: three per 1000-byte message. */
    ck_assert_uint_eq(out.head->batch.n_samples, 3);
    wk_msglist_clear(&out);
}
END_TEST

START_TEST(test_packer_too_large_becomes_skip)
{
    wk_packer_t pk;
    wk_msglist_t out;
    wk_msglist_init(&out);
    wk_packer_init(&pk, 7, 9, 2, 8, 1000);
    sl_sample_t a = mk(0, 10);
    sl_sample_t big = mk(1, 5000);
    ck_assert_int_eq(wk_packer_add(&pk, &a, NULL, NULL, &out), 0);
    ck_assert_int_eq(wk_packer_add(&pk, &big, NULL, NULL, &out), 0);
    ck_assert_int_eq(wk_packer_finish(&pk, &out), 0);
    ck_assert_uint_eq(pk.skipped_too_large, 1);
    ck_assert_uint_eq(check_list(&out, 8, 1000, 1), 2);
    Sluice__Sample *s = out.head->batch.samples[1];
    ck_assert_str_eq(s->skip_reason, "too_large");
    ck_assert_ptr_nonnull(strstr(s->skip_detail, "max_message_bytes"));
    ck_assert_uint_eq(s->data.len, 0);
    wk_msglist_clear(&out);
}
END_TEST

START_TEST(test_packer_skips_and_empty_split)
{
    wk_packer_t pk;
    wk_msglist_t out;
    wk_msglist_init(&out);
    /* An empty split: one message, zero samples, split_done. */
    wk_packer_init(&pk, 7, 9, 2, 8, 1 << 20);
    ck_assert_int_eq(wk_packer_finish(&pk, &out), 0);
    ck_assert_uint_eq(out.count, 1);
    ck_assert_uint_eq(out.head->batch.n_samples, 0);
    ck_assert(out.head->batch.split_done);
    wk_msglist_clear(&out);

    wk_packer_init(&pk, 7, 9, 2, 8, 1 << 20);
    sl_sample_t s = mk_skip(4, SL_SKIP_CORRUPT);
    ck_assert_int_eq(wk_packer_add(&pk, &s, "img_4.jpg: bad Huffman table", NULL, &out), 0);
    ck_assert_int_eq(wk_packer_finish(&pk, &out), 0);
    Sluice__Sample *ps = out.head->batch.samples[0];
    ck_assert_str_eq(ps->skip_reason, "corrupt");
    ck_assert_str_eq(ps->skip_detail, "img_4.jpg: bad Huffman table");
    ck_assert_uint_eq(ps->position, 4);
    ck_assert_uint_le(sluice__batch__get_packed_size(&out.head->batch), out.head->bytes);
    wk_msglist_clear(&out);

    /* A dropped split's partial message is freed by reset (ASan checks). */
    wk_packer_init(&pk, 7, 9, 2, 8, 1 << 20);
    sl_sample_t t = mk(1, 64);
    ck_assert_int_eq(wk_packer_add(&pk, &t, NULL, NULL, &out), 0);
    wk_packer_reset(&pk);
    ck_assert_uint_eq(wk_packer_bytes(&pk), 0);
    ck_assert_uint_eq(out.count, 0);
}
END_TEST

/* A delivered sample's URL versions go out flattened in url_versions (the
 * message owns a copy: the sample's go away); a skipped one's never, and
 * the byte bound counts them. */
START_TEST(test_packer_url_versions)
{
    wk_packer_t pk;
    wk_msglist_t out;
    wk_msglist_init(&out);
    wk_packer_init(&pk, 7, 9, 2, 8, 1 << 20);
    sl_sample_t a = mk(0, 10);
    ck_assert_int_eq(sl_url_vers_add(&a.vers, 11, 12), 0);
    ck_assert_int_eq(sl_url_vers_add(&a.vers, 13, 14), 0);
    size_t with = wk_sample_wire_bytes(&a, NULL, NULL);
    sl_url_vers_t keep = a.vers;
    a.vers.n = 0;
    ck_assert_uint_eq(with, wk_sample_wire_bytes(&a, NULL, NULL) + 2 + 1 + 32);
    a.vers = keep;
    sl_sample_t b = mk_skip(1, SL_SKIP_CORRUPT);
    ck_assert_int_eq(sl_url_vers_add(&b.vers, 15, 16), 0);
    ck_assert_int_eq(wk_packer_add(&pk, &a, NULL, NULL, &out), 0);
    memset(&a.vers, 0xee, sizeof(a.vers)); /* the message must not point here */
    ck_assert_int_eq(wk_packer_add(&pk, &b, "broken", NULL, &out), 0);
    ck_assert_int_eq(wk_packer_finish(&pk, &out), 0);
    ck_assert_uint_eq(check_list(&out, 8, 1 << 20, 1), 2);
    Sluice__Sample *pa = out.head->batch.samples[0], *pb = out.head->batch.samples[1];
    ck_assert_uint_eq(pa->n_url_versions, 4);
    const uint64_t want[] = {11, 12, 13, 14};
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(pa->url_versions[i], want[i]);
    }
    ck_assert_uint_eq(pb->n_url_versions, 0);
    wk_msglist_clear(&out);
}
END_TEST

START_TEST(test_budget)
{
    /* Nothing drainable and nothing in flight: always one more, whatever the estimate. */
    ck_assert(wk_budget_allows(0, 0, 0, 1u << 30, 1u << 20));
    ck_assert(wk_budget_allows(0, 5000, 0, 1u << 30, 1u << 20));
    /* Otherwise queued + partial + (inflight + 1) x estimate must fit. */
    ck_assert(wk_budget_allows(100, 0, 1, 100, 300));
    ck_assert(!wk_budget_allows(101, 0, 1, 100, 300));
    ck_assert(!wk_budget_allows(0, 0, 3, 100, 300));
    ck_assert(wk_budget_allows(0, 0, 2, 100, 300));
    ck_assert(!wk_budget_allows(50, 60, 1, 100, 300));
}
END_TEST

START_TEST(test_backoff)
{
    int b = 0;
    int seen[12];
    for (int i = 0; i < 12; i++) {
        b = wk_backoff_next(b, WK_BACKOFF_MAX_MS);
        seen[i] = b;
    }
    ck_assert_int_eq(seen[0], 100);
    ck_assert_int_eq(seen[1], 200);
    ck_assert_int_eq(seen[2], 400);
    ck_assert_int_eq(seen[3], 800);
    ck_assert_int_eq(seen[4], WK_BACKOFF_MAX_MS);
    ck_assert_int_eq(seen[11], WK_BACKOFF_MAX_MS);
    /* The promise to operators: a worker retries a dispatcher that is back
     * within a second (plus the channel's own 1 s reconnect step), not the
     * 5 s a 26 s outage used to cost on top. */
    ck_assert_int_le(WK_BACKOFF_MAX_MS, 1000);
    /* A cap below the minimum wins. */
    ck_assert_int_eq(wk_backoff_next(0, 50), 50);
    ck_assert_int_eq(wk_backoff_next(800, 1000), 1000);
    ck_assert_int_eq(wk_backoff_next(400, 500), 500);
}
END_TEST

/* Jitter: within [ms/2, ms] (never past the cap), and 1000 workers that
 * failed in the same millisecond spread over the whole range instead of
 * calling the dispatcher together. */
START_TEST(test_backoff_jitter)
{
    ck_assert_int_eq(wk_backoff_jitter(1000, 0), 1000);
    ck_assert_int_eq(wk_backoff_jitter(1000, 500), 500);
    ck_assert_int_eq(wk_backoff_jitter(1000, 501), 1000);
    ck_assert_int_eq(wk_backoff_jitter(101, UINT64_MAX), 101 - (int)(UINT64_MAX % 51));
    ck_assert_int_eq(wk_backoff_jitter(1, 12345), 1);
    ck_assert_int_eq(wk_backoff_jitter(0, 12345), 0);

    enum { WORKERS = 1000 };
    int per_ms[WK_BACKOFF_MAX_MS + 1] = {0};
    for (uint64_t w = 0; w < WORKERS; w++) {
        sl_rng_t r;
        sl_rng_init(&r, 0x5eed + w, 0, 0, 0); /* one seed per worker */
        int d = wk_backoff_jitter(WK_BACKOFF_MAX_MS, sl_rng_u64(&r));
        ck_assert_int_ge(d, WK_BACKOFF_MAX_MS - WK_BACKOFF_MAX_MS / 2);
        ck_assert_int_le(d, WK_BACKOFF_MAX_MS);
        per_ms[d]++;
    }
    int busiest = 0, used = 0;
    for (int ms = 0; ms <= WK_BACKOFF_MAX_MS; ms++) {
        busiest = per_ms[ms] > busiest ? per_ms[ms] : busiest;
        used += per_ms[ms] > 0;
    }
    /* 1000 draws over 501 values: a fair spread uses most of them and piles
     * at most a handful in one millisecond. */
    ck_assert_int_le(busiest, 10);
    ck_assert_int_ge(used, 300);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("worker_msg");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_packer_batch_size);
    tcase_add_test(tc, test_packer_byte_bound);
    tcase_add_test(tc, test_packer_too_large_becomes_skip);
    tcase_add_test(tc, test_packer_skips_and_empty_split);
    tcase_add_test(tc, test_budget);
    tcase_add_test(tc, test_packer_url_versions);
    tcase_add_test(tc, test_backoff);
    tcase_add_test(tc, test_backoff_jitter);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
