/* lsq: least squares by normal equations, for the small online models
 * (common/cost/costmodel.c: a sample's CPU seconds; client/lib/steps.c: a
 * training step's seconds). The caller keeps X'X and X'y (sufficient
 * statistics, so adding an observation is O(n^2)); this solves them. */
#ifndef SL_LSQ_H
#define SL_LSQ_H

#include <stddef.h>

#define SL_LSQ_MAX 8 /* parameters */

/* Solves (xtx + ridge) x = xty for n <= SL_LSQ_MAX parameters, xtx row-major
 * n x n. The ridge, relative to each diagonal entry, only matters for a
 * feature that never varied. Returns 0, -EINVAL (n out of range), -EDOM
 * (singular, or a non-finite solution). */
int sl_lsq_solve(const double *xtx, const double *xty, size_t n, double *ret_x);

/* Adds observation (x[0..n), y) to the statistics. */
void sl_lsq_add(double *xtx, double *xty, size_t n, const double *x, double y);

#endif
