/* fixtures: test helpers linked into every unit test (prefix fx_).
 *
 * Synthetic JPEGs made in memory with libjpeg, deterministic from a seed, so
 * tests need no files in the repository; plus temp-directory and file helpers.
 * All functions return 0 / a pointer on success and -1 / NULL on failure
 * (tests assert on that); none of them logs. */
#ifndef SL_TESTS_FIXTURES_H
#define SL_TESTS_FIXTURES_H

#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The capability every test job is submitted with and every request about
 * it carries (docs/protocol.md "Job capabilities"). */
#define FX_JOB_SECRET "fx-job-secret-0123456789"

/* x within tol of want; a failure prints both (%g: the planner's numbers run
 * from nanoseconds per byte to thousands of samples a second). */
#define NEAR(x, want, tol)                                                                         \
    ck_assert_msg(fabs((double)(x) - (double)(want)) <= (tol), "%s = %.9g, want %.9g", #x,         \
                  (double)(x), (double)(want))

/* How the JPEG file stores its colour. */
typedef enum {
    FX_COLOR_YCBCR = 0, /* RGB source, YCbCr in the file: the usual photo */
    FX_COLOR_GRAY,      /* one component: fx_rgb_to_gray() of the pattern */
    FX_COLOR_RGB,       /* RGB stored as RGB (Adobe transform 0), no subsampling */
    FX_COLOR_CMYK,      /* fx_rgb_to_cmyk() of the pattern, Adobe marker, inverted */
    FX_COLOR_YCCK,      /* the same CMYK, stored as YCCK (Adobe transform 2) */
} fx_color_e;

typedef struct fx_jpeg_opts_s {
    uint32_t width, height;    /* > 0 */
    int quality;               /* 1..100; 0 means 90 */
    fx_color_e color;
    bool progressive;          /* jpeg_simple_progression */
    unsigned restart_interval; /* MCUs between RST markers; 0 = none */
    /* Luma sampling factors for YCbCr/YCCK (chroma is 1x1): 2,2 = 4:2:0,
     * 2,1 = 4:2:2, 1,1 = 4:4:4. 0,0 = libjpeg's default (4:2:0). */
    uint8_t h_samp, v_samp;
    bool no_adobe; /* CMYK only: omit the Adobe marker; data is then NOT inverted */
    /* Progressive with one scan per component, AC coefficient and bit
     * (630 scans per component): legal, and absurdly slow to decode. */
    bool many_scans;
    uint32_t seed; /* pattern seed */
} fx_jpeg_opts_t;

/* The synthetic source image, RGB HWC (w * h * 3 bytes): smooth gradients
 * plus blocky texture and a few hard edges, deterministic in (w, h, seed). */
void fx_pattern_rgb(uint32_t w, uint32_t h, uint32_t seed, uint8_t *rgb);
/* Gray value the FX_COLOR_GRAY fixture stores for an RGB pixel. */
uint8_t fx_rgb_to_gray(const uint8_t rgb[3]);
/* CMYK for an RGB pixel such that (255-C)(255-K)/255 = R etc.; inverted gives
 * the Adobe/Photoshop convention (255 - each value). */
void fx_rgb_to_cmyk(const uint8_t rgb[3], bool inverted, uint8_t cmyk[4]);

/* Encodes raw pixels laid out as the file stores them: 1 byte per pixel for
 * GRAY, 3 (RGB) for YCBCR/RGB, 4 (CMYK, already inverted if the file has the
 * Adobe marker) for CMYK/YCCK. *ret_buf is malloc'd: free() it. */
int fx_jpeg_encode(const uint8_t *pixels, const fx_jpeg_opts_t *o, uint8_t **ret_buf,
                   size_t *ret_len);
/* fx_pattern_rgb converted for o->color, then fx_jpeg_encode. */
int fx_make_jpeg(const fx_jpeg_opts_t *o, uint8_t **ret_buf, size_t *ret_len);
int fx_make_jpeg_file(const char *path, const fx_jpeg_opts_t *o);

/* Writes len bytes to path (created or truncated, mode 0644). */
int fx_write_file(const char *path, const void *buf, size_t len);
/* Reads a whole file into a malloc'd buffer. */
int fx_read_file(const char *path, uint8_t **ret_buf, size_t *ret_len);
/* Creates /tmp/sluice-test-XXXXXX; path must hold at least FX_TMPDIR_LEN bytes. */
#define FX_TMPDIR_LEN 64
int fx_mkdtemp(char *path);
/* fx_mkdtemp, then path/train/cls: an empty ImageFolder class. */
int fx_mkdtemp_class(char *path, const char *cls);
/* Removes path and everything below it (does not follow symlinks). */
int fx_rmtree(const char *path);
/* An ImageFolder of one class: root/train/a/0000.jpg .. n-1, w x h, seed =
 * the image's number. Returns 0 or a negative errno. */
int fx_make_imagefolder(const char *root, int n, uint32_t w, uint32_t h);

/* Runs a Check suite (forking per test unless nofork: gRPC suites must
 * not fork after grpc_init: gRPC's threads do not survive fork) and frees
 * it. Returns EXIT_SUCCESS when every test passed, else EXIT_FAILURE. */
struct Suite;
/* Standard base64 (with padding) of p[0, n) into out, which holds at least
 * 4 * ((n + 2) / 3) + 1 bytes; NUL-terminated. Returns the length. */
size_t fx_base64(const uint8_t *p, size_t n, char *out);

int fx_run_suite(struct Suite *s, int nofork);

#endif
