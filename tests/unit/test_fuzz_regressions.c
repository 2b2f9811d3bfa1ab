/* test_fuzz_regressions: every input a fuzzer ever crashed on, replayed
 * through the same target bodies make fuzz runs (tests/fuzz/fuzz_*.c,
 * compiled here without -DSL_LIBFUZZER), under gcc and under make asan.
 *
 * For each target NAME: every file in tests/fuzz/regressions/NAME/ (crashes
 * found and fixed: the file name says what broke) and in
 * tests/fuzz/corpus/NAME/ (the seeds, which must keep passing the targets'
 * checks). A target body aborts on a broken contract, which Check reports
 * as an error of that target's test. Runs from the repository root, as
 * tests/run-unit.sh does. */
#include <check.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_conf.c"
#include "tests/fuzz/fuzz_jpeg.c"
#include "tests/fuzz/fuzz_png.c"
#include "tests/fuzz/fuzz_record.c"
#include "tests/fuzz/fuzz_records.c"
#include "tests/fuzz/fuzz_remote.c"
#include "tests/fuzz/fuzz_rpc.c"
#include "tests/fuzz/fuzz_spec.c"
#include "tests/fuzz/fuzz_tar.c"
#include "tests/fuzz/fuzz_tokenizer.c"
#include "tests/fuzz/fuzz_video.c"
#include "tests/fuzz/fuzz_wire.c"
#include "tests/unit/fixtures.h"

typedef struct fz_target_s {
    const char *name;
    int (*one)(const uint8_t *data, size_t size);
} fz_target_t;

/* clang-format off */
static const fz_target_t TARGETS[] = {
    {"spec", fuzz_spec_one}, {"tar", fuzz_tar_one},   {"jpeg", fuzz_jpeg_one},
    {"rpc", fuzz_rpc_one},   {"conf", fuzz_conf_one}, {"remote", fuzz_remote_one},
    {"wire", fuzz_wire_one},  {"record", fuzz_record_one}, {"png", fuzz_png_one},
    {"tokenizer", fuzz_tokenizer_one}, {"records", fuzz_records_one},
    {"video", fuzz_video_one},
};
/* clang-format on */
#define NTARGETS (sizeof(TARGETS) / sizeof(TARGETS[0]))

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays every regular file of dir (sorted, so a failure names the same
 * file every time); returns how many. A missing dir has none. */
static size_t replay_dir(const fz_target_t *t, const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return 0;
    }
    char *names[4096];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < sizeof(names) / sizeof(names[0])) {
        if (e->d_name[0] != '.') {
            names[n] = strdup(e->d_name);
            ck_assert_ptr_nonnull(names[n]);
            n++;
        }
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), name_cmp);
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        uint8_t *buf = NULL;
        size_t len = 0;
        ck_assert_msg(fx_read_file(path, &buf, &len) == 0, "cannot read %s", path);
        /* Named on stderr first: an abort inside the target says nothing else. */
        fprintf(stderr, "replay %s\n", path);
        t->one(buf, len);
        free(buf);
        free(names[i]);
    }
    return n;
}

START_TEST(test_replay)
{
    const fz_target_t *t = &TARGETS[_i];
    char dir[256];
    snprintf(dir, sizeof(dir), "tests/fuzz/regressions/%s", t->name);
    (void)replay_dir(t, dir);
    snprintf(dir, sizeof(dir), "tests/fuzz/corpus/%s", t->name);
    ck_assert_msg(replay_dir(t, dir) > 0, "no seed corpus in %s", dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fuzz_regressions");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_replay, 0, (int)NTARGETS);
    suite_add_tcase(s, tc);
    return fx_run_suite(s, 0);
}
