/* Tests for common/data/source*.c except the imagefolder indexer
 * (test_source_folder.c): confinement, tar shards (headers written here,
 * checksums and all), file lists, concurrent reads and skip reasons, on real
 * files in a fresh temp dir per test. Sources do not decode, so the "JPEG"
 * bytes are small deterministic fakes. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/data/skip.h"
#include "common/data/source.h"
#include "common/data/source_impl.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_source.h"
#include "tests/unit/fixtures_tar.h"

/* The tar writer: tests/unit/fixtures_tar.h. */

/* ---- confinement ----------------------------------------------------- */

START_TEST(test_escape_source_path)
{
    char err[256];
    t_mkdir("ok");
    ck_assert_int_eq(open_fail(SL_SRC_IMAGEFOLDER, "../outside", err, sizeof(err)), -EPERM);
    ck_assert_ptr_nonnull(strstr(err, "../outside"));
    ck_assert_int_eq(open_fail(SL_SRC_IMAGEFOLDER, "ok/../../outside", err, sizeof(err)),
                     -EPERM);
    ck_assert_int_eq(open_fail(SL_SRC_IMAGEFOLDER, "/etc", err, sizeof(err)), -EPERM);
    ck_assert_ptr_nonnull(strstr(err, "/etc"));
    ck_assert_int_eq(open_fail(SL_SRC_TAR, "/etc/passwd", err, sizeof(err)), -EPERM);
    ck_assert_int_eq(open_fail(SL_SRC_FILELIST, "..", err, sizeof(err)), -EPERM);
    /* The source path itself a symlink leading out. */
    char out[PATH_MAX];
    at(out, sizeof(out), "@outside");
    t_symlink(out, "linkout");
    ck_assert_int_eq(open_fail(SL_SRC_IMAGEFOLDER, "linkout", err, sizeof(err)), -EPERM);
    ck_assert_ptr_nonnull(strstr(err, "linkout"));
    t_symlink("../outside", "rellinkout");
    ck_assert_int_eq(open_fail(SL_SRC_TAR, "rellinkout", err, sizeof(err)), -EPERM);
}
END_TEST

START_TEST(test_beneath_fallback)
{
    /* The /proc-verified fallback, forced, agrees with openat2. */
    char out[PATH_MAX], in[PATH_MAX];
    t_fake("@outside/secret.jpg", 1);
    at(out, sizeof(out), "@outside/secret.jpg");
    t_mkdir("c");
    t_fake("c/a.jpg", 2);
    at(in, sizeof(in), "c/a.jpg");
    t_symlink(in, "c/abs.jpg");
    t_symlink("a.jpg", "c/rel.jpg");
    t_symlink(out, "c/out.jpg");
    t_symlink("../../outside/secret.jpg", "c/outrel.jpg");
    t_write("none.txt", "# no samples\n", 13); /* a source just for its root */
    sl_source_t *src = open_ok(SL_SRC_FILELIST, "none.txt");
    for (unsigned how = 0; how <= SL_SRC_BENEATH_NO_OPENAT2; how++) {
        const char *good[3] = {"c/a.jpg", "c/abs.jpg", "c/rel.jpg"};
        for (int i = 0; i < 3; i++) {
            int fd = sl_src_open_beneath(src, good[i], O_RDONLY, how);
            ck_assert_msg(fd >= 0, "%s how=%u: %d", good[i], how, fd);
            close(fd);
            fd = sl_src_open_beneath(src, good[i], O_PATH, how);
            ck_assert_int_ge(fd, 0);
            close(fd);
        }
        ck_assert_int_eq(sl_src_open_beneath(src, "c/out.jpg", O_RDONLY, how), -EPERM);
        ck_assert_int_eq(sl_src_open_beneath(src, "c/outrel.jpg", O_PATH, how), -EPERM);
        ck_assert_int_eq(sl_src_open_beneath(src, "c/none.jpg", O_RDONLY, how), -ENOENT);
        int fd = sl_src_open_beneath(src, "", O_RDONLY | O_DIRECTORY, how);
        ck_assert_int_ge(fd, 0);
        close(fd);
    }
    sl_source_free(src);

    char norm[64];
    ck_assert_int_eq(sl_src_normalize("./a//b/./c/", norm, sizeof(norm)), 0);
    ck_assert_str_eq(norm, "a/b/c");
    ck_assert_int_eq(sl_src_normalize("a/../b", norm, sizeof(norm)), -EPERM);
    ck_assert_int_eq(sl_src_normalize("/a", norm, sizeof(norm)), -EPERM);
    ck_assert_int_eq(sl_src_normalize("a/..", norm, sizeof(norm)), -EPERM);
    ck_assert_int_eq(sl_src_normalize("a/..b/c..", norm, sizeof(norm)), 0);
    ck_assert_int_eq(sl_src_normalize("abcdefgh", norm, 8), -ENAMETOOLONG);
    ck_assert_int_eq(sl_src_normalize(".", norm, sizeof(norm)), 0);
    ck_assert_str_eq(norm, "");
}
END_TEST

/* ---- tar ------------------------------------------------------------- */

START_TEST(test_tar_single_shard)
{
    tbuf_t b = {0};
    tb_header(&b, "a/", '5', 0, NULL);
    tb_text(&b, "a/k1.cls", "3\n");
    tb_fake(&b, "a/k1.jpg", 1);
    tb_fake(&b, "a/k2.jpg", 2);
    tb_text(&b, "a/k2.cls", " 5 ");
    tb_fake(&b, "a/k3.jpg", 3);
    tb_fake(&b, "a/k4.jpg", 4);
    tb_text(&b, "a/k4.cls", "x1");
    tb_text(&b, "a/readme.txt", "hello");
    tb_fake(&b, "./a/k5.JPEG", 5);
    tb_header(&b, "a/k6.jpg", '2', 0, NULL); /* symlink member: not a sample */
    tb_fake(&b, "a/k7.seg.jpg", 6);          /* key a/k7, ext "seg.jpg": not a sample */
    tb_end(&b);
    tb_save(&b, "data.tar");

    sl_source_t *src = open_ok(SL_SRC_TAR, "data.tar");
    ck_assert_uint_eq(sl_source_count(src), 5);
    const char *names[5] = {"data.tar:a/k1", "data.tar:a/k2", "data.tar:a/k3",
                            "data.tar:a/k4", "data.tar:a/k5"};
    const int32_t labels[5] = {3, 5, -1, -1, -1};
    for (uint64_t i = 0; i < 5; i++) {
        ck_assert_str_eq(sl_source_name(src, i), names[i]);
        ck_assert_int_eq(sl_source_label(src, i), labels[i]);
        ck_assert_uint_eq(sl_source_size(src, i), fake_len((unsigned)i + 1));
        check_read(src, i, (unsigned)i + 1);
    }
    ck_assert_uint_eq(sl_source_num_classes(src), 6);
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "a/k4.cls"));
    sl_source_free(src);
}
END_TEST

START_TEST(test_tar_shard_dir)
{
    t_mkdir("shards");
    tbuf_t b = {0};
    tb_fake(&b, "x/s1a.jpg", 11);
    tb_text(&b, "x/s1a.cls", "1");
    tb_end(&b);
    tb_save(&b, "shards/s1.tar");
    tb_text(&b, "s0b.cls", "7");
    tb_fake(&b, "s0a.jpg", 10);
    tb_fake(&b, "s0b.jpeg", 12);
    tb_text(&b, "s0a.cls", "2\n");
    tb_end(&b);
    tb_save(&b, "shards/s0.tar");
    tb_fake(&b, "hidden.jpg", 13);
    tb_end(&b);
    tb_save(&b, "shards/.hidden.tar");
    t_write("shards/notes.txt", "x", 1);
    t_mkdir("shards/dir.tar");

    sl_source_t *src = open_ok(SL_SRC_TAR, "shards");
    ck_assert_uint_eq(sl_source_count(src), 3);
    ck_assert_str_eq(sl_source_name(src, 0), "shards/s0.tar:s0a");
    ck_assert_str_eq(sl_source_name(src, 1), "shards/s0.tar:s0b");
    ck_assert_str_eq(sl_source_name(src, 2), "shards/s1.tar:x/s1a");
    ck_assert_int_eq(sl_source_label(src, 0), 2);
    ck_assert_int_eq(sl_source_label(src, 1), 7);
    ck_assert_int_eq(sl_source_label(src, 2), 1);
    ck_assert_uint_eq(sl_source_num_classes(src), 8);
    check_read(src, 0, 10);
    check_read(src, 1, 12);
    check_read(src, 2, 11);
    ck_assert_str_eq(sl_source_open_warnings(src), "");
    sl_source_free(src);

    /* The data root itself as the shard directory. */
    src = open_ok(SL_SRC_TAR, "shards/.");
    ck_assert_str_eq(sl_source_name(src, 0), "shards/s0.tar:s0a");
    sl_source_free(src);
}
END_TEST

START_TEST(test_tar_long_names)
{
    char longname[400], longkey[300];
    char pad[201];
    memset(pad, 'p', 150);
    pad[150] = '\0';
    snprintf(longkey, sizeof(longkey), "dir/%s/img_1", pad);
    snprintf(longname, sizeof(longname), "%s.jpg", longkey);
    char clsname[420];
    snprintf(clsname, sizeof(clsname), "%s.cls", longkey);

    tbuf_t b = {0};
    tb_longname(&b, longname, 1);
    hdr_opts_t gnu = {.gnu = true};
    tb_header(&b, "././@LongLink", 'L', strlen(clsname) + 1, &gnu);
    tb_data(&b, clsname, strlen(clsname) + 1);
    tb_header(&b, clsname, '0', 2, &gnu);
    tb_data(&b, "4\n", 2);
    /* ustar prefix */
    hdr_opts_t pre = {.prefix = "pre/fix/dir"};
    unsigned char buf[400];
    fake_fill(2, buf);
    tb_header(&b, "img_2.jpg", '0', fake_len(2), &pre);
    tb_data(&b, buf, fake_len(2));
    /* pax path + size */
    char paxname[400];
    memset(pad, 'q', 200);
    pad[200] = '\0';
    snprintf(paxname, sizeof(paxname), "paxdir/%s/img_3.jpg", pad);
    tb_pax(&b, paxname, 3);
    /* GNU base-256 size */
    hdr_opts_t b256 = {.base256 = true, .gnu = true};
    fake_fill(4, buf);
    tb_header(&b, "b256.jpg", '0', fake_len(4), &b256);
    tb_data(&b, buf, fake_len(4));
    tb_end(&b);
    tb_save(&b, "long.tar");

    sl_source_t *src = open_ok(SL_SRC_TAR, "long.tar");
    ck_assert_uint_eq(sl_source_count(src), 4);
    char want[512];
    snprintf(want, sizeof(want), "long.tar:%s", longkey);
    ck_assert_str_eq(sl_source_name(src, 0), want);
    ck_assert_int_eq(sl_source_label(src, 0), 4);
    ck_assert_str_eq(sl_source_name(src, 1), "long.tar:pre/fix/dir/img_2");
    snprintf(want, sizeof(want), "long.tar:paxdir/%s/img_3", pad);
    ck_assert_str_eq(sl_source_name(src, 2), want);
    ck_assert_str_eq(sl_source_name(src, 3), "long.tar:b256");
    for (uint64_t i = 0; i < 4; i++) {
        check_read(src, i, (unsigned)i + 1);
    }
    ck_assert_str_eq(sl_source_open_warnings(src), "");
    sl_source_free(src);
}
END_TEST

START_TEST(test_tar_truncated_member)
{
    tbuf_t b = {0};
    tb_fake(&b, "k1.jpg", 1);
    tb_text(&b, "k1.cls", "0");
    unsigned char buf[400];
    fake_fill(2, buf);
    tb_header(&b, "k2.jpg", '0', 1000, NULL);
    tb_put(&b, buf, 100); /* 900 bytes missing, no end blocks */
    tb_save(&b, "trunc.tar");

    sl_source_t *src = open_ok(SL_SRC_TAR, "trunc.tar");
    ck_assert_uint_eq(sl_source_count(src), 2);
    check_read(src, 0, 1);
    ck_assert_uint_eq(sl_source_size(src, 1), 1000);
    char err[256] = "";
    ck_assert_int_eq(read_rc(src, 1, err, sizeof(err)), -ENOMSG);
    ck_assert_ptr_nonnull(strstr(err, "trunc.tar:k2"));
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "past the end"));
    sl_source_free(src);

    /* A header cut short after a good member. */
    tb_fake(&b, "k1.jpg", 1);
    tb_put(&b, "garbage", 7);
    tb_save(&b, "cut.tar");
    src = open_ok(SL_SRC_TAR, "cut.tar");
    ck_assert_uint_eq(sl_source_count(src), 1);
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "cut short"));
    sl_source_free(src);
}
END_TEST

START_TEST(test_tar_bad_checksum)
{
    tbuf_t b = {0};
    tb_fake(&b, "k1.jpg", 1);
    tb_fake(&b, "k2.jpg", 2);
    size_t bad = b.len;
    tb_fake(&b, "k3.jpg", 3);
    tb_fake(&b, "k4.jpg", 4);
    tb_end(&b);
    b.p[bad + 10] ^= 0x01; /* one bit of k3's name */
    tb_save(&b, "bad.tar");
    t_mkdir("sh");
    /* A zero-byte shard and an intact one next to each other. */
    t_write("sh/a.tar", "", 0);
    tb_fake(&b, "z.jpg", 5);
    tb_end(&b);
    tb_save(&b, "sh/b.tar");

    sl_source_t *src = open_ok(SL_SRC_TAR, "bad.tar");
    ck_assert_uint_eq(sl_source_count(src), 2);
    check_read(src, 0, 1);
    check_read(src, 1, 2);
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "checksum"));
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "bad.tar"));
    sl_source_free(src);

    t_write("empty.tar", "", 0);
    src = open_ok(SL_SRC_TAR, "empty.tar");
    ck_assert_uint_eq(sl_source_count(src), 0);
    ck_assert_uint_eq(sl_source_num_classes(src), 0);
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "empty"));
    sl_source_free(src);

    src = open_ok(SL_SRC_TAR, "sh");
    ck_assert_uint_eq(sl_source_count(src), 1);
    check_read(src, 0, 5);
    sl_source_free(src);
}
END_TEST

START_TEST(test_tar_zero_member_and_errors)
{
    tbuf_t b = {0};
    tb_file(&b, "z.jpg", "", 0);
    tb_fake(&b, "k.jpg", 1);
    tb_end(&b);
    tb_save(&b, "z.tar");
    sl_source_t *src = open_ok(SL_SRC_TAR, "z.tar");
    ck_assert_uint_eq(sl_source_count(src), 2);
    char err[256] = "";
    ck_assert_int_eq(read_rc(src, 0, err, sizeof(err)), -ENODATA);
    ck_assert_ptr_nonnull(strstr(err, "z.tar:z"));
    check_read(src, 1, 1);
    sl_source_free(src);

    ck_assert_int_eq(open_fail(SL_SRC_TAR, "nope.tar", err, sizeof(err)), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "nope.tar"));
    /* A shard symlink in a shard directory leading out. */
    t_mkdir("sd");
    tb_fake(&b, "o.jpg", 1);
    tb_end(&b);
    tb_save(&b, "@outside/o.tar");
    char out[PATH_MAX];
    at(out, sizeof(out), "@outside/o.tar");
    t_symlink(out, "sd/o.tar");
    ck_assert_int_eq(open_fail(SL_SRC_TAR, "sd", err, sizeof(err)), -EPERM);
    ck_assert_ptr_nonnull(strstr(err, "sd/o.tar"));
}
END_TEST

START_TEST(test_tar_open_shard_budget)
{
    /* RLIMIT_NOFILE 64 -> at most 16 shard fds kept; the rest open per read. */
    struct rlimit old, rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    rl = old;
    rl.rlim_cur = 64;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    t_mkdir("many");
    enum { NSHARDS = 40 };
    for (unsigned i = 0; i < NSHARDS; i++) {
        tbuf_t b = {0};
        char name[64];
        tb_fake(&b, "k.jpg", i);
        tb_end(&b);
        snprintf(name, sizeof(name), "many/s%03u.tar", i);
        tb_save(&b, name);
    }
    sl_source_t *src = open_ok(SL_SRC_TAR, "many");
    ck_assert_uint_eq(sl_source_count(src), NSHARDS);
    for (unsigned i = 0; i < NSHARDS; i++) {
        check_read(src, i, i);
    }
    sl_source_free(src);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
}
END_TEST

/* ---- filelist -------------------------------------------------------- */

static void make_list_tree(void)
{
    t_mkdir("img");
    t_mkdir("img/sp ace");
    t_fake("img/a.jpg", 1);
    t_fake("img/b.jpg", 2);
    t_fake("img/sp ace/c.jpg", 3);
    t_mkdir("lists");
}

START_TEST(test_filelist_good)
{
    make_list_tree();
    const char *list = "# header comment\n"
                       "\n"
                       "img/b.jpg 3\n"
                       "   # indented comment\n"
                       "  ./img//a.jpg\t0  \r\n"
                       "img/sp ace/c.jpg 12\n"
                       "img/b.jpg 1"; /* no final newline; duplicates are allowed */
    t_write("lists/train.txt", list, strlen(list));
    sl_source_t *src = open_ok(SL_SRC_FILELIST, "lists/train.txt");
    ck_assert_uint_eq(sl_source_count(src), 4);
    ck_assert_str_eq(sl_source_name(src, 0), "img/b.jpg");
    ck_assert_str_eq(sl_source_name(src, 1), "img/a.jpg");
    ck_assert_str_eq(sl_source_name(src, 2), "img/sp ace/c.jpg");
    ck_assert_int_eq(sl_source_label(src, 0), 3);
    ck_assert_int_eq(sl_source_label(src, 1), 0);
    ck_assert_int_eq(sl_source_label(src, 2), 12);
    ck_assert_int_eq(sl_source_label(src, 3), 1);
    ck_assert_uint_eq(sl_source_size(src, 2), fake_len(3));
    ck_assert_uint_eq(sl_source_num_classes(src), 13);
    check_read(src, 0, 2);
    check_read(src, 1, 1);
    check_read(src, 2, 3);
    sl_source_free(src);

    /* A symlink leading out, named in the list: a sample whose reads are
     * refused (skip "outside_root"), not a list error. */
    t_fake("@outside/s.jpg", 9);
    char out[PATH_MAX], err[256] = "";
    at(out, sizeof(out), "@outside/s.jpg");
    t_symlink(out, "img/link.jpg");
    const char *outlist = "img/a.jpg 0\nimg/link.jpg 1\n";
    t_write("lists/out.txt", outlist, strlen(outlist));
    src = open_ok(SL_SRC_FILELIST, "lists/out.txt");
    ck_assert_uint_eq(sl_source_count(src), 2);
    ck_assert_uint_eq(sl_source_size(src, 1), 0);
    check_read(src, 0, 1);
    ck_assert_int_eq(read_rc(src, 1, err, sizeof(err)), -EPERM);
    ck_assert_ptr_nonnull(strstr(err, "img/link.jpg"));
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "lists/out.txt:2"));
    sl_source_free(src);

    t_write("lists/empty.txt", "# nothing\n", 10);
    src = open_ok(SL_SRC_FILELIST, "lists/empty.txt");
    ck_assert_uint_eq(sl_source_count(src), 0);
    sl_source_free(src);
}
END_TEST

/* Writes a list and expects open to fail with code and "FILE:LINE:" in err. */
static void list_fails(const char *content, int code, const char *where, const char *also)
{
    char err[512];
    t_write("lists/bad.txt", content, strlen(content));
    ck_assert_int_eq(open_fail(SL_SRC_FILELIST, "lists/bad.txt", err, sizeof(err)), code);
    ck_assert_msg(strstr(err, where) != NULL, "'%s' not in '%s'", where, err);
    if (also != NULL) {
        ck_assert_msg(strstr(err, also) != NULL, "'%s' not in '%s'", also, err);
    }
}

START_TEST(test_filelist_malformed)
{
    make_list_tree();
    list_fails("img/a.jpg 1\nimg/b.jpg\n", -EINVAL, "lists/bad.txt:2:", "RELPATH LABEL");
    list_fails("# c\nimg/a.jpg -1\n", -EINVAL, "lists/bad.txt:2:", "-1");
    list_fails("img/a.jpg 1x\n", -EINVAL, "lists/bad.txt:1:", "1x");
    list_fails("img/a.jpg 99999999999\n", -EINVAL, "lists/bad.txt:1:", NULL);
    list_fails("img/a.jpg 0\nimg/nope.jpg 1\n", -ENOENT, "lists/bad.txt:2:", "img/nope.jpg");
    list_fails("img 1\n", -EINVAL, "lists/bad.txt:1:", "regular");
    list_fails("../outside/x.jpg 1\n", -EPERM, "lists/bad.txt:1:", "../outside/x.jpg");
    list_fails("\n/etc/passwd 1\n", -EPERM, "lists/bad.txt:2:", "/etc/passwd");
    char nul[] = "img/a.jpg 1\nimg/a\0.jpg 1\n";
    t_write("lists/bad.txt", nul, sizeof(nul) - 1);
    char err[256];
    ck_assert_int_eq(open_fail(SL_SRC_FILELIST, "lists/bad.txt", err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "lists/bad.txt:2:"));

    /* A line over the bound, then one exactly at it (a valid comment). */
    char *big = malloc(6000);
    ck_assert_ptr_nonnull(big);
    memset(big, 'a', 5000);
    memcpy(big, "img/a.jpg 1\n", 12);
    strcpy(big + 5000, " 1\n");
    list_fails(big, -EINVAL, "lists/bad.txt:2:", "longer than");
    big[0] = '#';
    memset(big + 1, 'a', 4095);
    strcpy(big + 4096, "\nimg/a.jpg 5\n");
    t_write("lists/ok.txt", big, strlen(big));
    sl_source_t *src = open_ok(SL_SRC_FILELIST, "lists/ok.txt");
    ck_assert_uint_eq(sl_source_count(src), 1);
    ck_assert_int_eq(sl_source_label(src, 0), 5);
    sl_source_free(src);
    free(big);

    ck_assert_int_eq(open_fail(SL_SRC_FILELIST, "lists/missing.txt", err, sizeof(err)),
                     -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "lists/missing.txt"));
}
END_TEST

/* ---- concurrency and fingerprints ------------------------------------ */

typedef struct reader_arg_s {
    const sl_source_t *src;
    const unsigned *seeds;
    uint64_t n;
    int bad;
} reader_arg_t;

static void *reader_main(void *p)
{
    reader_arg_t *a = p;
    sl_tensor_t t;
    unsigned char want[400];
    char err[256];
    sl_tensor_init(&t);
    for (int round = 0; round < 20; round++) {
        for (uint64_t k = 0; k < a->n; k++) {
            uint64_t i = (k * 7 + (uint64_t)round) % a->n;
            fake_fill(a->seeds[i], want);
            if (sl_source_read(a->src, i, &t, err, sizeof(err)) != 0 ||
                t.nbytes != fake_len(a->seeds[i]) || memcmp(t.data, want, t.nbytes) != 0) {
                a->bad++;
            }
        }
    }
    sl_tensor_free(&t);
    return NULL;
}

static void read_concurrently(const sl_source_t *src, const unsigned *seeds, uint64_t n)
{
    pthread_t th[4];
    reader_arg_t args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (reader_arg_t){.src = src, .seeds = seeds, .n = n, .bad = 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, reader_main, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_int_eq(args[i].bad, 0);
    }
}

START_TEST(test_concurrent_reads)
{
    enum { N = 30 };
    unsigned seeds[N];
    t_mkdir("cc");
    tbuf_t b = {0};
    for (unsigned i = 0; i < N; i++) {
        char rel[64], member[64];
        snprintf(rel, sizeof(rel), "cc/c%u", i % 3);
        if (i < 3) {
            t_mkdir(rel);
        }
        /* Sorted order: c0/f00, c0/f03, ..., c1/f01, ... */
        snprintf(rel, sizeof(rel), "cc/c%u/f%02u.jpg", i % 3, i);
        t_fake(rel, i + 100);
        snprintf(member, sizeof(member), "m%02u.jpg", i);
        tb_fake(&b, member, i + 200);
    }
    tb_end(&b);
    tb_save(&b, "cc.tar");
    sl_source_t *src = open_ok(SL_SRC_IMAGEFOLDER, "cc");
    ck_assert_uint_eq(sl_source_count(src), N);
    for (unsigned k = 0; k < N; k++) {
        unsigned cls = k / 10, j = k % 10;
        seeds[k] = cls + 3 * j + 100;
    }
    read_concurrently(src, seeds, N);
    sl_source_free(src);

    src = open_ok(SL_SRC_TAR, "cc.tar");
    ck_assert_uint_eq(sl_source_count(src), N);
    for (unsigned k = 0; k < N; k++) {
        seeds[k] = k + 200;
    }
    read_concurrently(src, seeds, N);
    sl_source_free(src);
}
END_TEST

/* ---- skip reasons ---------------------------------------------------- */

START_TEST(test_skip_reasons)
{
    ck_assert_int_eq(sl_skip_from_errno(-ENODATA), SL_SKIP_EMPTY);
    ck_assert_int_eq(sl_skip_from_errno(-EILSEQ), SL_SKIP_NOT_JPEG);
    ck_assert_int_eq(sl_skip_from_errno(-ENOMSG), SL_SKIP_TRUNCATED);
    ck_assert_int_eq(sl_skip_from_errno(-EFBIG), SL_SKIP_TOO_LARGE);
    ck_assert_int_eq(sl_skip_from_errno(-EBADMSG), SL_SKIP_CORRUPT);
    /* What sl_source_read returns for a file that resolves outside the root. */
    ck_assert_int_eq(sl_skip_from_errno(-EPERM), SL_SKIP_OUTSIDE_ROOT);
    ck_assert_str_eq(sl_skip_name(SL_SKIP_OUTSIDE_ROOT), "outside_root");
    ck_assert_int_eq(sl_skip_from_errno(-ENOENT), SL_SKIP_IO);
    ck_assert_int_eq(sl_skip_from_errno(-EIO), SL_SKIP_IO);
    ck_assert_str_eq(sl_skip_name(SL_SKIP__COUNT), "unknown");
    /* Names are JSON keys and metrics labels: distinct and snake_case. */
    for (int i = 0; i < SL_SKIP__COUNT; i++) {
        const char *a = sl_skip_name((sl_skip_e)i);
        ck_assert_uint_eq(strspn(a, "abcdefghijklmnopqrstuvwxyz_"), strlen(a));
        for (int j = 0; j < i; j++) {
            ck_assert_str_ne(a, sl_skip_name((sl_skip_e)j));
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("source");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, fxs_setup, fxs_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_escape_source_path);
    tcase_add_test(tc, test_beneath_fallback);
    tcase_add_test(tc, test_tar_single_shard);
    tcase_add_test(tc, test_tar_shard_dir);
    tcase_add_test(tc, test_tar_long_names);
    tcase_add_test(tc, test_tar_truncated_member);
    tcase_add_test(tc, test_tar_bad_checksum);
    tcase_add_test(tc, test_tar_zero_member_and_errors);
    tcase_add_test(tc, test_tar_open_shard_budget);
    tcase_add_test(tc, test_filelist_good);
    tcase_add_test(tc, test_filelist_malformed);
    tcase_add_test(tc, test_concurrent_reads);
    tcase_add_test(tc, test_skip_reasons);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
