#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/sha256.h"
#include "tests/unit/fixtures.h"

START_TEST(test_known_vectors)
{
    char hex[65];
    sl_sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sl_sha256_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sl_sha256_hex(m, strlen(m), hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

START_TEST(test_million_a_in_pieces)
{
    /* Uneven update sizes exercise the partial-block path. */
    sl_sha256_t s;
    sl_sha256_init(&s);
    char buf[997];
    memset(buf, 'a', sizeof(buf));
    size_t left = 1000000;
    while (left > 0) {
        size_t n = left < sizeof(buf) ? left : sizeof(buf);
        sl_sha256_update(&s, buf, n);
        left -= n;
    }
    uint8_t d[32];
    sl_sha256_final(&s, d);
    static const uint8_t want[32] = {0xcd, 0xc7, 0x6e, 0x5c, 0x99, 0x14, 0xfb, 0x92,
                                     0x81, 0xa1, 0xc7, 0xe2, 0x84, 0xd7, 0x3e, 0x67,
                                     0xf1, 0x80, 0x9a, 0x48, 0xa4, 0x97, 0x20, 0x0e,
                                     0x04, 0x6d, 0x39, 0xcc, 0xc7, 0x11, 0x2c, 0xd0};
    ck_assert_mem_eq(d, want, 32);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sha256");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_known_vectors);
    tcase_add_test(tc, test_million_a_in_pieces);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
