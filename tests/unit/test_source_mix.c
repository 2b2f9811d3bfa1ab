/* A mixed spec's sources as one (common/data/source_mix.c): the global
 * index is the child's offset plus its own index, reads and names go to
 * the child, the spec gets the counts, and an empty or missing source is
 * refused naming it. Then the epoch order of the mix through the rank
 * machinery (common/order/ranks.h): ranks share the blend. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/source.h"
#include "common/order/blend.h"
#include "common/order/ranks.h"
#include "common/spec/mix.h"
#include "common/spec/spec.h"
#include "tests/unit/fixtures_source.h"

#define MIX_SPEC                                                                                   \
    "{\"mix\": {\"sources\": [{\"name\": \"folder\", \"weight\": 2, \"source\": {\"type\": "       \
    "\"imagefolder\", \"path\": \"a\"}}, {\"name\": \"list\", \"weight\": 1, \"source\": "         \
    "{\"type\": \"filelist\", \"path\": \"%s\"}}]}, \"stages\": [], \"batch_size\": 2%s}"

static void make_tree(void)
{
    t_mkdir("a");
    t_mkdir("a/c0");
    t_mkdir("a/c1");
    t_fake("a/c0/x.jpg", 1);
    t_fake("a/c0/y.jpg", 2);
    t_fake("a/c1/z.jpg", 3);
    t_mkdir("b");
    t_fake("b/p.jpg", 4);
    t_fake("b/q.jpg", 5);
    t_write("list.txt", "b/p.jpg 7\nb/q.jpg 8\n", 20);
    t_write("empty.txt", "# nothing\n", 10);
}

static void parse(sl_spec_t *s, const char *list, const char *extra)
{
    char buf[2048], err[1024] = "";
    snprintf(buf, sizeof(buf), MIX_SPEC, list, extra);
    ck_assert_msg(sl_spec_parse("t.json", buf, strlen(buf), s, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(test_mix_source_dispatches)
{
    make_tree();
    sl_spec_t s;
    parse(&s, "list.txt", "");
    sl_source_t *src = NULL;
    char err[1024] = "";
    ck_assert_msg(sl_source_open_spec(g_root, NULL, &s, &src, err, sizeof(err)) == 0, "%s", err);
    ck_assert_uint_eq(sl_source_count(src), 5);
    ck_assert_int_eq(sl_source_mix_apply(src, &s), 0);
    ck_assert_uint_eq(s.mix->src[0].count, 3);
    ck_assert_uint_eq(s.mix->src[1].count, 2);
    ck_assert_uint_eq(s.mix->samples_per_epoch, 6); /* all_exhausted: max(3 / (2/3), 2 / (1/3)) */
    ck_assert_str_eq(sl_source_name(src, 0), "folder:a/c0/x.jpg");
    ck_assert_str_eq(sl_source_name(src, 4), "list:b/q.jpg");
    ck_assert_int_eq(sl_source_label(src, 2), 1);
    ck_assert_int_eq(sl_source_label(src, 3), 7);
    check_read(src, 0, 1);
    check_read(src, 2, 3);
    check_read(src, 3, 4);
    check_read(src, 4, 5);
    uint32_t j = 9;
    ck_assert_int_eq(sl_source_mix_child(src, 2, &j), 0);
    ck_assert_uint_eq(j, 0);
    ck_assert_int_eq(sl_source_mix_child(src, 3, &j), 0);
    ck_assert_uint_eq(j, 1);
    ck_assert_int_eq(sl_source_mix_child(src, 5, &j), -EINVAL);
    uint64_t fp = sl_source_fingerprint(src);
    /* The spec that travels (with counts) opens the same; other data does not. */
    sl_source_t *again = NULL;
    ck_assert_int_eq(sl_source_open_spec(g_root, NULL, &s, &again, err, sizeof(err)), 0);
    ck_assert_uint_eq(sl_source_fingerprint(again), fp);
    sl_source_free(again);
    again = NULL;
    t_fake("a/c1/w.jpg", 6);
    ck_assert_int_eq(sl_source_open_spec(g_root, NULL, &s, &again, err, sizeof(err)), -ESTALE);
    ck_assert_msg(strstr(err, "mix.sources[0] (\"folder\")") != NULL, "%s", err);
    ck_assert_ptr_null(again);
    sl_source_free(src);
    sl_spec_clear(&s);
}
END_TEST

START_TEST(test_mix_source_refused)
{
    make_tree();
    sl_spec_t s;
    sl_source_t *src = NULL;
    char err[1024] = "";
    parse(&s, "empty.txt", "");
    ck_assert_int_eq(sl_source_open_spec(g_root, NULL, &s, &src, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "mix.sources[1] (\"list\"): filelist 'empty.txt' has no samples") !=
                      NULL,
                  "%s", err);
    ck_assert_ptr_null(src);
    sl_spec_clear(&s);
    parse(&s, "missing.txt", "");
    ck_assert_int_lt(sl_source_open_spec(g_root, NULL, &s, &src, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "mix.sources[1] (\"list\"): ") != NULL &&
                      strstr(err, "missing.txt") != NULL,
                  "%s", err);
    ck_assert_ptr_null(src);
    sl_spec_clear(&s);
}
END_TEST

/* Ranks share the blend like any order: the ranks' positions together are
 * the one-rank epoch's (world 2, drop). */
START_TEST(test_mix_ranks_share_the_blend)
{
    make_tree();
    sl_spec_t s1, s2;
    parse(&s1, "list.txt", "");
    sl_source_t *src = NULL;
    char err[1024] = "";
    ck_assert_int_eq(sl_source_open_spec(g_root, NULL, &s1, &src, err, sizeof(err)), 0);
    ck_assert_int_eq(sl_source_mix_apply(src, &s1), 0);
    uint64_t n = sl_source_count(src), e = sl_spec_epoch_len(&s1, n);
    ck_assert_uint_eq(e, 6);
    ck_assert_uint_eq(sl_spec_positions(&s1, n), 6);
    uint64_t one[16], r[2][16], scratch[16];
    ck_assert_uint_ge(16, sl_spec_order_len(&s1, n));
    ck_assert_int_eq(sl_rank_order(&s1, 3, n, one, one), 0);
    uint64_t per_source[2] = {0};
    for (uint64_t p = 0; p < e; p++) {
        per_source[sl_blend_source_of(s1.mix, one[p])]++;
    }
    ck_assert_uint_eq(per_source[0], 4); /* 2 : 1 */
    ck_assert_uint_eq(per_source[1], 2);
    for (uint32_t rank = 0; rank < 2; rank++) {
        ck_assert_int_eq(sl_spec_copy(&s2, &s1), 0);
        s2.world_size = 2;
        s2.rank = rank;
        ck_assert_uint_eq(sl_spec_positions(&s2, n), 3);
        ck_assert_int_eq(sl_rank_order(&s2, 3, n, scratch, r[rank]), 0);
        sl_spec_clear(&s2);
    }
    for (uint64_t q = 0; q < 3; q++) {
        ck_assert_uint_eq(r[0][q], one[2 * q]);
        ck_assert_uint_eq(r[1][q], one[2 * q + 1]);
    }
    sl_source_free(src);
    sl_spec_clear(&s1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("source_mix");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, fxs_setup, fxs_teardown);
    tcase_add_test(tc, test_mix_source_dispatches);
    tcase_add_test(tc, test_mix_source_refused);
    tcase_add_test(tc, test_mix_ranks_share_the_blend);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
