/* Job capabilities (common/base/jobcap.h): the secret's shape, its hash and
 * check, the ranks' derivation, and HMAC-SHA256 against RFC 4231. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/base/jobcap.h"
#include "common/base/sha256.h"
#include "tests/unit/fixtures.h"

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        snprintf(out + 2 * i, 3, "%02x", d[i]);
    }
}

START_TEST(test_hmac_rfc4231)
{
    uint8_t d[32];
    char h[65];
    /* RFC 4231 test case 2. */
    sl_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
    hex(d, 32, h);
    ck_assert_str_eq(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* Test case 6: a key longer than the block is hashed first. */
    uint8_t key[131];
    memset(key, 0xaa, sizeof(key));
    const char *msg = "Test Using Larger Than Block-Size Key - Hash Key First";
    sl_hmac_sha256(key, sizeof(key), msg, strlen(msg), d);
    hex(d, 32, h);
    ck_assert_str_eq(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}
END_TEST

START_TEST(test_new_and_check)
{
    char a[SL_JOBCAP_MAX + 1], b[SL_JOBCAP_MAX + 1];
    ck_assert_int_eq(sl_jobcap_new(a), 0);
    ck_assert_int_eq(sl_jobcap_new(b), 0);
    ck_assert_uint_eq(strlen(a), 32); /* 128 bits */
    ck_assert_str_ne(a, b);
    ck_assert(sl_jobcap_valid(a));
    uint8_t h[SL_JOBCAP_HASH];
    sl_jobcap_hash(a, h);
    ck_assert(sl_jobcap_check(h, a));
    ck_assert(!sl_jobcap_check(h, b));
    ck_assert(!sl_jobcap_check(h, NULL));
    ck_assert(!sl_jobcap_check(h, ""));
    /* One character off, or a prefix, is refused. */
    char c[SL_JOBCAP_MAX + 1];
    snprintf(c, sizeof(c), "%s", a);
    c[5] = c[5] == '0' ? '1' : '0';
    ck_assert(!sl_jobcap_check(h, c));
    c[31] = '\0';
    ck_assert(!sl_jobcap_check(h, c));
    /* The hash is not the secret's plain SHA-256 (domain-separated). */
    uint8_t plain[32];
    sl_sha256_t s;
    sl_sha256_init(&s);
    sl_sha256_update(&s, a, strlen(a));
    sl_sha256_final(&s, plain);
    ck_assert(memcmp(plain, h, 32) != 0);
}
END_TEST

START_TEST(test_valid)
{
    ck_assert(!sl_jobcap_valid(NULL));
    ck_assert(!sl_jobcap_valid("short"));
    ck_assert(!sl_jobcap_valid("0123456789abcde")); /* 15 */
    ck_assert(sl_jobcap_valid("0123456789abcdef"));
    ck_assert(!sl_jobcap_valid("0123456789 abcdef"));
    ck_assert(!sl_jobcap_valid("0123456789abcdef\n"));
    char big[SL_JOBCAP_MAX + 2];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ck_assert(!sl_jobcap_valid(big));
    big[SL_JOBCAP_MAX] = '\0';
    ck_assert(sl_jobcap_valid(big));
}
END_TEST

START_TEST(test_derive)
{
    char a[65], b[65], c[65], d[65];
    sl_jobcap_derive("team-secret-0123456789", "job-a", a);
    sl_jobcap_derive("team-secret-0123456789", "job-a", b);
    sl_jobcap_derive("team-secret-0123456789", "job-b", c);
    sl_jobcap_derive("other-secret-012345678", "job-a", d);
    ck_assert_str_eq(a, b);  /* every rank derives the same */
    ck_assert_str_ne(a, c);  /* per job name */
    ck_assert_str_ne(a, d);  /* per key */
    ck_assert(sl_jobcap_valid(a));
    /* The documented formula (tests/integration/test_job_capability.sh
     * computes it with Python's hmac). */
    uint8_t mac[32];
    char h[65];
    const char msg[] = "sluice-rank-job\njob-a";
    sl_hmac_sha256("team-secret-0123456789", 22, msg, sizeof(msg) - 1, mac);
    hex(mac, 32, h);
    ck_assert_str_eq(a, h);
    sl_jobcap_derive(NULL, "job-a", b);
    ck_assert(sl_jobcap_valid(b));
}
END_TEST

/* A multi-rank job's capability derived with no key is public: anyone who
 * knows the name can produce it; one derived with a key is not. */
START_TEST(test_is_public)
{
    char open_secret[65], keyed[65];
    uint8_t h_open[SL_JOBCAP_HASH], h_keyed[SL_JOBCAP_HASH];
    sl_jobcap_derive("", "job-a", open_secret);
    sl_jobcap_derive("team-secret-0123456789", "job-a", keyed);
    sl_jobcap_hash(open_secret, h_open);
    sl_jobcap_hash(keyed, h_keyed);
    ck_assert_int_eq(sl_jobcap_is_public(h_open, "job-a"), 1);
    ck_assert_int_eq(sl_jobcap_is_public(h_open, "job-b"), 0);
    ck_assert_int_eq(sl_jobcap_is_public(h_keyed, "job-a"), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jobcap");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_hmac_rfc4231);
    tcase_add_test(tc, test_new_and_check);
    tcase_add_test(tc, test_valid);
    tcase_add_test(tc, test_derive);
    tcase_add_test(tc, test_is_public);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
