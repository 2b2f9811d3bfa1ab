/* costmodel: what a sample costs (DFLOP's lesson): pipeline CPU seconds
 * predicted from features read from the JPEG header without decoding --
 * file size, pixels, progressive (common/profile/features.h reads them;
 * this model is the arithmetic only) -- by a linear model fitted online from
 * measured times (sufficient statistics, so adding a sample is O(1)); and
 * the cheaper size proxy the client sends when it opens no file.
 *
 * Pure and lock-free: any thread may call, each on its own model. The
 * profiler (common/profile/profiler.h) fits one per profiled host. */
#ifndef SL_COSTMODEL_H
#define SL_COSTMODEL_H

#include <stddef.h>
#include <stdint.h>

/* A record (common/sample/record.h) sums its images: kb and mpix over all
 * of them, prog_mpix over the progressive ones; text_kb and images are its
 * own (a JPEG sample: one image, no text). */
typedef struct sl_cost_features_s {
    double kb;        /* encoded size, 1000 bytes */
    double mpix;      /* width * height / 1e6 from the header */
    int progressive;
    double prog_mpix; /* mpix of progressive images */
    double text_kb;   /* text bytes / 1000 (records) */
    double images;    /* images in the sample */
} sl_cost_features_t;

/* The per-sample cost a client sends with SubmitJob (client/lib/costs.c) is
 * the encoded size plus this share of the mean size: the work that does
 * not grow with pixels. No file is opened for it, unlike the model below;
 * profiles report how far off both are. */
#define SL_COST_SIZE_OVERHEAD_SHARE 0.25

/* That cost of a sample of `bytes` in a set whose mean is mean_bytes. */
static inline double sl_cost_size_proxy(double bytes, double mean_bytes)
{
    return bytes + SL_COST_SIZE_OVERHEAD_SHARE * mean_bytes;
}

/* cost = c0 + c1 kb + c2 mpix + c3 prog_mpix + c4 text_kb + c5 images
 * (an image sample has images = 1: the ridge keeps c5 and c0 apart). */
#define SL_COST_NPARAM 6

typedef struct sl_costmodel_s {
    double xtx[SL_COST_NPARAM][SL_COST_NPARAM];
    double xty[SL_COST_NPARAM];
    uint64_t n;
    double coef[SL_COST_NPARAM];
    int fitted;
} sl_costmodel_t;

void sl_costmodel_init(sl_costmodel_t *m);
/* Adds one measured sample (seconds of pipeline CPU). */
void sl_costmodel_add(sl_costmodel_t *m, const sl_cost_features_t *f, double sec);
/* Solves the least squares (a tiny ridge keeps it defined when a feature
 * never varies). Returns 0, or -EDOM with fewer than 2 samples. */
int sl_costmodel_fit(sl_costmodel_t *m);
/* A model fitted elsewhere (a cached profile's coefficients): fitted, with
 * no statistics to add to. Refuses non-finite coefficients (-EINVAL). */
int sl_costmodel_set(sl_costmodel_t *m, const double *coef, size_t n);
/* Predicted seconds (never negative); the mean when not fitted. */
double sl_costmodel_predict(const sl_costmodel_t *m, const sl_cost_features_t *f);

#endif
