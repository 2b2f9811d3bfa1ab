#include "common/base/lsq.h"

#include <errno.h>
#include <math.h>

void sl_lsq_add(double *xtx, double *xty, size_t n, const double *x, double y)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            xtx[i * n + j] += x[i] * x[j];
        }
        xty[i] += x[i] * y;
    }
}

int sl_lsq_solve(const double *xtx, const double *xty, size_t n, double *ret_x)
{
    if (n == 0 || n > SL_LSQ_MAX) {
        return -EINVAL;
    }
    /* Gaussian elimination with partial pivoting on the augmented matrix. */
    double a[SL_LSQ_MAX][SL_LSQ_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            a[i][j] = xtx[i * n + j];
        }
        a[i][i] += 1e-9 * (xtx[i * n + i] > 0.0 ? xtx[i * n + i] : 1.0);
        a[i][n] = xty[i];
    }
    for (size_t c = 0; c < n; c++) {
        size_t piv = c;
        for (size_t r = c + 1; r < n; r++) {
            if (fabs(a[r][c]) > fabs(a[piv][c])) {
                piv = r;
            }
        }
        if (fabs(a[piv][c]) < 1e-300) {
            return -EDOM;
        }
        if (piv != c) {
            for (size_t j = 0; j <= n; j++) {
                double t = a[c][j];
                a[c][j] = a[piv][j];
                a[piv][j] = t;
            }
        }
        for (size_t r = 0; r < n; r++) {
            if (r == c) {
                continue;
            }
            double k = a[r][c] / a[c][c];
            for (size_t j = c; j <= n; j++) {
                a[r][j] -= k * a[c][j];
            }
        }
    }
    double x[SL_LSQ_MAX];
    for (size_t i = 0; i < n; i++) {
        x[i] = a[i][n] / a[i][i];
        if (!isfinite(x[i])) {
            return -EDOM;
        }
    }
    for (size_t i = 0; i < n; i++) {
        ret_x[i] = x[i];
    }
    return 0;
}
