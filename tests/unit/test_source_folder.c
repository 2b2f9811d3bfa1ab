/* Tests for common/data/source_imagefolder.c: which entries of a real
 * directory tree become samples, in which order and with which label, and
 * how symlinks (inside, leading out, dangling, swapped after indexing) are
 * treated. Sources do not decode, so the "images" are small deterministic
 * fakes. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/data/source.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/fixtures_source.h"

/* Index i -> (name, label) for every sample, in order. */
static void expect_index(const sl_source_t *src, const char *const *names,
                         const int32_t *labels, size_t n)
{
    ck_assert_uint_eq(sl_source_count(src), n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(sl_source_name(src, i), names[i]);
        ck_assert_int_eq(sl_source_label(src, i), labels[i]);
    }
}

/* torchvision.datasets.ImageFolder's rules: every directory is a class,
 * hidden ones too; a file is a sample when its name ends in one of
 * torchvision's IMG_EXTENSIONS in any case, hidden ones too. Whether it
 * decodes is the decoder's business (a counted skip). The integration test
 * test_imagefolder_torchvision.sh checks the same against torchvision. */
START_TEST(test_imagefolder_basic)
{
    t_mkdir("train");
    t_mkdir("train/dog");
    t_mkdir("train/cat");
    t_mkdir("train/emu");
    t_mkdir("train/.git");
    t_mkdir("train/cat/nested");
    t_fake("train/cat/b.jpg", 1);
    t_fake("train/cat/a.JPEG", 2);
    t_fake("train/cat/c.Jpg", 3);
    t_fake("train/cat/notes.txt", 4);
    t_fake("train/cat/._a.jpg", 5);
    t_fake("train/cat/nested/deep.jpg", 6);
    t_fake("train/dog/z.jpeg", 7);
    t_fake("train/.git/x.jpg", 8);
    t_fake("train/top.jpg", 9);
    t_fake("train/emu/readme.md", 10);
    t_fake("train/cat/d.png", 11);
    t_fake("train/cat/e.BMP", 12);
    t_fake("train/cat/f.tiff", 13);
    t_fake("train/cat/g.webp", 14);
    t_fake("train/cat/h.ppm", 15);
    t_fake("train/cat/i.pgm", 16);
    t_fake("train/cat/j.TIF", 17);
    t_fake("train/cat/k.gif", 18);     /* not in IMG_EXTENSIONS */
    t_fake("train/cat/l.jpg.txt", 19); /* ends in .txt */
    t_fake("train/cat/.png", 20);      /* all extension: torchvision takes it */

    sl_source_t *src = open_ok(SL_SRC_IMAGEFOLDER, "train");
    const char *const names[] = {
        "train/.git/x.jpg",  "train/cat/._a.jpg", "train/cat/.png",  "train/cat/a.JPEG",
        "train/cat/b.jpg",   "train/cat/c.Jpg",   "train/cat/d.png", "train/cat/e.BMP",
        "train/cat/f.tiff",  "train/cat/g.webp",  "train/cat/h.ppm", "train/cat/i.pgm",
        "train/cat/j.TIF",   "train/cat/nested/deep.jpg",            "train/dog/z.jpeg",
    };
    const int32_t labels[] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2};
    const unsigned seeds[] = {8, 5, 20, 2, 1, 3, 11, 12, 13, 14, 15, 16, 17, 6, 7};
    const size_t n = sizeof(names) / sizeof(names[0]);
    expect_index(src, names, labels, n);
    ck_assert_uint_eq(sl_source_num_classes(src), 4); /* .git, cat, dog, emu (empty) */
    for (uint64_t i = 0; i < n; i++) {
        ck_assert_uint_eq(sl_source_size(src, i), fake_len(seeds[i]));
        check_read(src, i, seeds[i]);
    }
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "emu"));
    char err[256];
    ck_assert_int_eq(read_rc(src, n, err, sizeof(err)), -ERANGE);
    ck_assert_int_eq(sl_source_label(src, 99), -1);
    sl_source_free(src);

    /* The same tree through a non-canonical path: same names, same index. */
    sl_source_t *a = open_ok(SL_SRC_IMAGEFOLDER, "train");
    sl_source_t *b = open_ok(SL_SRC_IMAGEFOLDER, "./train//");
    ck_assert_str_eq(sl_source_name(b, 1), "train/cat/._a.jpg");
    ck_assert_uint_eq(sl_source_fingerprint(a), sl_source_fingerprint(b));
    sl_source_free(a);
    sl_source_free(b);
}
END_TEST

/* A class is walked like os.walk(followlinks=True) and sorted like
 * torchvision sorts it: directories by their whole path (so "sub-x" comes
 * between "sub" and "sub/deeper": '-' sorts before '/'), each one's files
 * by name. Symlinked directories inside the root are followed; one that
 * leads back to its own ancestor is not entered again. */
START_TEST(test_imagefolder_walk_order)
{
    t_mkdir("w");
    t_mkdir("w/c");
    t_mkdir("w/c/sub");
    t_mkdir("w/c/sub-x");
    t_mkdir("w/c/sub/deeper");
    t_mkdir("w/c/sub/y.jpg"); /* a directory with an image's name: walked */
    t_mkdir("w/c/sub0");
    t_mkdir("store");
    t_mkdir("store/linked");
    t_fake("w/c/z.jpg", 1);
    t_fake("w/c/sub/b.jpg", 2);
    t_fake("w/c/sub-x/a.jpg", 3);
    t_fake("w/c/sub/deeper/a.jpg", 4);
    t_fake("w/c/sub/y.jpg/in.jpg", 5);
    t_fake("w/c/sub0/a.jpg", 6);
    t_fake("store/linked/s.jpg", 7);
    t_symlink("../../../store/linked", "w/c/sub0/ln");
    t_symlink("../..", "w/c/sub/deeper/back"); /* back to w/c: a loop */

    sl_source_t *src = open_ok(SL_SRC_IMAGEFOLDER, "w");
    const char *const names[] = {
        "w/c/z.jpg",           "w/c/sub/b.jpg",  "w/c/sub-x/a.jpg",  "w/c/sub/deeper/a.jpg",
        "w/c/sub/y.jpg/in.jpg", "w/c/sub0/a.jpg", "w/c/sub0/ln/s.jpg",
    };
    const int32_t labels[] = {0, 0, 0, 0, 0, 0, 0};
    const unsigned seeds[] = {1, 2, 3, 4, 5, 6, 7};
    expect_index(src, names, labels, 7);
    for (uint64_t i = 0; i < 7; i++) {
        check_read(src, i, seeds[i]);
    }
    ck_assert_uint_eq(sl_source_num_classes(src), 1);
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "w/c/sub/deeper/back"));
    sl_source_free(src);
}
END_TEST

/* A file that resolves outside the root is indexed (size 0) and refused
 * when read (-EPERM: skip "outside_root"), on whichever host reads it; so
 * are dangling links (-ENOENT). A directory leading out cannot be listed:
 * the open fails naming it. */
START_TEST(test_imagefolder_outside_root)
{
    char out[PATH_MAX], outdir[PATH_MAX], err[256] = "";
    t_fake("@outside/secret.jpg", 1);
    t_mkdir("@outside/cls");
    t_fake("@outside/cls/x.jpg", 2);
    at(out, sizeof(out), "@outside/secret.jpg");
    at(outdir, sizeof(outdir), "@outside/cls");
    t_mkdir("t");
    t_mkdir("t/c");
    t_mkdir("t/d");
    t_fake("t/c/a.jpg", 3);
    t_symlink(out, "t/c/b.jpg");
    t_symlink("../../../outside/secret.jpg", "t/c/c.png");
    t_symlink(out, "t/c/notes.txt");          /* not an image name: not a sample */
    t_symlink("nowhere.jpg", "t/c/dangling.jpg");
    t_fake("t/d/x.jpg", 4);
    t_symlink(out, "t/top.jpg");              /* not a directory: not a class */

    sl_source_t *src = open_ok(SL_SRC_IMAGEFOLDER, "t");
    const char *const names[] = {"t/c/a.jpg", "t/c/b.jpg", "t/c/c.png", "t/c/dangling.jpg",
                                 "t/d/x.jpg"};
    const int32_t labels[] = {0, 0, 0, 0, 1};
    expect_index(src, names, labels, 5);
    ck_assert_uint_eq(sl_source_num_classes(src), 2);
    check_read(src, 0, 3);
    check_read(src, 4, 4);
    ck_assert_uint_eq(sl_source_size(src, 1), 0);
    ck_assert_uint_eq(sl_source_size(src, 2), 0);
    ck_assert_int_eq(read_rc(src, 1, err, sizeof(err)), -EPERM);
    ck_assert_ptr_nonnull(strstr(err, "t/c/b.jpg"));
    ck_assert_ptr_nonnull(strstr(err, "outside the data root"));
    ck_assert_int_eq(read_rc(src, 2, err, sizeof(err)), -EPERM);
    ck_assert_int_eq(read_rc(src, 3, err, sizeof(err)), -ENOENT);
    const char *warn = sl_source_open_warnings(src);
    ck_assert_ptr_nonnull(strstr(warn, "t/c/b.jpg"));
    ck_assert_ptr_nonnull(strstr(warn, "t/c/dangling.jpg"));
    sl_source_free(src);

    /* A class leading out, then a directory inside a class leading out. */
    t_symlink(outdir, "t/e");
    ck_assert_int_eq(open_fail(SL_SRC_IMAGEFOLDER, "t", err, sizeof(err)), -EPERM);
    ck_assert_ptr_nonnull(strstr(err, "'t/e'"));
    char p[PATH_MAX];
    at(p, sizeof(p), "t/e");
    ck_assert_int_eq(unlink(p), 0);
    t_symlink("../../../outside/cls", "t/d/sub");
    ck_assert_int_eq(open_fail(SL_SRC_IMAGEFOLDER, "t", err, sizeof(err)), -EPERM);
    ck_assert_ptr_nonnull(strstr(err, "'t/d/sub'"));
}
END_TEST

START_TEST(test_imagefolder_root_and_errors)
{
    t_mkdir("c0");
    t_fake("c0/x.jpg", 1);
    t_fake("file.jpg", 2);
    sl_source_t *src = open_ok(SL_SRC_IMAGEFOLDER, "");
    ck_assert_uint_eq(sl_source_count(src), 1);
    ck_assert_str_eq(sl_source_name(src, 0), "c0/x.jpg");
    check_read(src, 0, 1);
    sl_source_free(src);

    char err[256];
    ck_assert_int_eq(open_fail(SL_SRC_IMAGEFOLDER, "missing", err, sizeof(err)), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "missing"));
    ck_assert_int_eq(open_fail(SL_SRC_IMAGEFOLDER, "file.jpg", err, sizeof(err)), -ENOTDIR);
    sl_source_t *s2 = NULL;
    ck_assert_int_eq(sl_source_open("/nonexistent/sl_root", SL_SRC_IMAGEFOLDER, "x", &s2, err,
                                    sizeof(err)),
                     -ENOENT);
    ck_assert_ptr_null(s2);
}
END_TEST

START_TEST(test_zero_and_huge_files)
{
    t_mkdir("d");
    t_mkdir("d/c");
    t_write("d/c/empty.jpg", "", 0);
    t_fake("d/c/ok.jpg", 3);
    char p[PATH_MAX];
    at(p, sizeof(p), "d/c/zbig.jpg");
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)SL_SOURCE_MAX_FILE_BYTES + 1), 0); /* sparse */
    close(fd);
    sl_source_t *src = open_ok(SL_SRC_IMAGEFOLDER, "d");
    ck_assert_uint_eq(sl_source_count(src), 3);
    char err[256] = "";
    ck_assert_int_eq(read_rc(src, 0, err, sizeof(err)), -ENODATA);
    ck_assert_ptr_nonnull(strstr(err, "d/c/empty.jpg"));
    check_read(src, 1, 3);
    ck_assert_uint_eq(sl_source_size(src, 2), SL_SOURCE_MAX_FILE_BYTES + 1);
    ck_assert_int_eq(read_rc(src, 2, err, sizeof(err)), -EFBIG);
    ck_assert_ptr_nonnull(strstr(err, "zbig.jpg"));
    sl_source_free(src);
}
END_TEST

START_TEST(test_escape_symlinks_in_tree)
{
    char out[PATH_MAX], in[PATH_MAX];
    t_fake("@outside/secret.jpg", 1);
    at(out, sizeof(out), "@outside/secret.jpg");
    t_mkdir("t");
    t_mkdir("t/c");
    t_mkdir("store");
    t_fake("store/real.jpg", 2);
    t_fake("t/c/a.jpg", 3);
    /* Inside the root, relative and absolute: both allowed. */
    t_symlink("../../store/real.jpg", "t/c/rel.jpg");
    at(in, sizeof(in), "store/real.jpg");
    t_symlink(in, "t/c/abs.jpg");
    t_symlink("nowhere.jpg", "t/c/dangling.jpg");
    sl_source_t *src = open_ok(SL_SRC_IMAGEFOLDER, "t");
    ck_assert_uint_eq(sl_source_count(src), 4);
    ck_assert_str_eq(sl_source_name(src, 0), "t/c/a.jpg");
    ck_assert_str_eq(sl_source_name(src, 1), "t/c/abs.jpg");
    ck_assert_str_eq(sl_source_name(src, 2), "t/c/dangling.jpg");
    ck_assert_str_eq(sl_source_name(src, 3), "t/c/rel.jpg");
    ck_assert_uint_eq(sl_source_size(src, 1), fake_len(2));
    check_read(src, 0, 3);
    check_read(src, 1, 2);
    check_read(src, 3, 2);
    ck_assert_ptr_nonnull(strstr(sl_source_open_warnings(src), "dangling"));

    /* Swapped after indexing: a.jpg now leads out. Reads must refuse. */
    char p[PATH_MAX], p_a[PATH_MAX], err[256] = "";
    at(p, sizeof(p), "t/c/a.jpg");
    at(p_a, sizeof(p_a), "t/c/a.jpg");
    ck_assert_int_eq(unlink(p), 0);
    t_symlink(out, "t/c/a.jpg");
    ck_assert_int_eq(read_rc(src, 0, err, sizeof(err)), -EPERM);
    ck_assert_ptr_nonnull(strstr(err, "t/c/a.jpg"));
    ck_assert_int_eq(unlink(p), 0);
    t_symlink("../../../outside/secret.jpg", "t/c/a.jpg");
    ck_assert_int_eq(read_rc(src, 0, err, sizeof(err)), -EPERM);
    /* A class directory swapped for a link out. */
    at(p, sizeof(p), "@outside/c");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    t_fake("@outside/c/abs.jpg", 9);
    char cdir[PATH_MAX], moved[PATH_MAX];
    at(cdir, sizeof(cdir), "t/c");
    at(moved, sizeof(moved), "t_moved");
    ck_assert_int_eq(rename(cdir, moved), 0);
    t_symlink(p, "t/c");
    ck_assert_int_eq(read_rc(src, 1, err, sizeof(err)), -EPERM);
    sl_source_free(src);

    /* At index time: a class link leading out fails the open; a file link
     * leading out is a sample whose reads are refused. */
    char e2[256];
    ck_assert_int_eq(open_fail(SL_SRC_IMAGEFOLDER, "t", e2, sizeof(e2)), -EPERM);
    ck_assert_ptr_nonnull(strstr(e2, "t/c"));
    ck_assert_int_eq(unlink(cdir), 0);
    ck_assert_int_eq(rename(moved, cdir), 0);
    ck_assert_int_eq(unlink(p_a), 0);
    t_fake("t/c/a.jpg", 3);
    t_symlink(out, "t/c/evil.jpg");
    src = open_ok(SL_SRC_IMAGEFOLDER, "t");
    ck_assert_str_eq(sl_source_name(src, 3), "t/c/evil.jpg");
    ck_assert_int_eq(read_rc(src, 3, e2, sizeof(e2)), -EPERM);
    ck_assert_ptr_nonnull(strstr(e2, "t/c/evil.jpg"));
    sl_source_free(src);
}
END_TEST

START_TEST(test_fingerprint)
{
    t_mkdir("fp");
    t_mkdir("fp/a");
    t_mkdir("fp/b");
    t_fake("fp/a/1.jpg", 1);
    t_fake("fp/b/2.jpg", 2);
    sl_source_t *s1 = open_ok(SL_SRC_IMAGEFOLDER, "fp");
    sl_source_t *s2 = open_ok(SL_SRC_IMAGEFOLDER, "fp");
    ck_assert_uint_eq(sl_source_fingerprint(s1), sl_source_fingerprint(s2));
    sl_source_free(s2);
    /* Same names, one file a byte longer. */
    unsigned char buf[400];
    fake_fill(2, buf);
    t_write("fp/b/2.jpg", buf, fake_len(2) + 1);
    s2 = open_ok(SL_SRC_IMAGEFOLDER, "fp");
    ck_assert_uint_ne(sl_source_fingerprint(s1), sl_source_fingerprint(s2));
    sl_source_free(s2);
    /* Same sizes, a label moved (class renamed so it sorts first). */
    t_fake("fp/b/2.jpg", 2);
    char from[PATH_MAX], to[PATH_MAX];
    at(from, sizeof(from), "fp/b");
    at(to, sizeof(to), "fp/0");
    ck_assert_int_eq(rename(from, to), 0);
    s2 = open_ok(SL_SRC_IMAGEFOLDER, "fp");
    ck_assert_uint_ne(sl_source_fingerprint(s1), sl_source_fingerprint(s2));
    sl_source_free(s2);
    sl_source_free(s1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("source_folder");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, fxs_setup, fxs_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_imagefolder_basic);
    tcase_add_test(tc, test_imagefolder_walk_order);
    tcase_add_test(tc, test_imagefolder_outside_root);
    tcase_add_test(tc, test_imagefolder_root_and_errors);
    tcase_add_test(tc, test_zero_and_huge_files);
    tcase_add_test(tc, test_escape_symlinks_in_tree);
    tcase_add_test(tc, test_fingerprint);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
