/* costmodel: features from a JPEG header and the online least-squares fit
 * (common/cost/costmodel.h). Pure: any thread, on the caller's model. */
#include "common/cost/costmodel.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/image/jpeg.h"

void sl_cost_features(const uint8_t *buf, size_t len, sl_cost_features_t *ret)
{
    sl_cost_features_head(buf, len, len, ret);
}

void sl_cost_features_head(const uint8_t *buf, size_t len, uint64_t file_bytes,
                           sl_cost_features_t *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->kb = (double)file_bytes / 1000.0;
    sl_jpeg_info_t info;
    if (buf != NULL && sl_jpeg_probe(buf, len, &info, NULL, 0) == 0) {
        ret->mpix = (double)info.width * (double)info.height / 1e6;
        ret->progressive = info.progressive;
    }
}

static void feature_vec(const sl_cost_features_t *f, double x[SL_COST_NPARAM])
{
    x[0] = 1.0;
    x[1] = f->kb;
    x[2] = f->mpix;
    x[3] = f->progressive ? f->mpix : 0.0;
}

void sl_costmodel_init(sl_costmodel_t *m) { memset(m, 0, sizeof(*m)); }

int sl_costmodel_set(sl_costmodel_t *m, const double *coef, size_t n)
{
    if (coef == NULL || n != SL_COST_NPARAM) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(coef[i])) {
            return -EINVAL;
        }
    }
    sl_costmodel_init(m);
    memcpy(m->coef, coef, sizeof(m->coef));
    m->fitted = 1;
    return 0;
}

void sl_costmodel_add(sl_costmodel_t *m, const sl_cost_features_t *f, double sec)
{
    if (!isfinite(sec) || sec < 0.0) {
        return;
    }
    double x[SL_COST_NPARAM];
    feature_vec(f, x);
    for (int i = 0; i < SL_COST_NPARAM; i++) {
        for (int j = 0; j < SL_COST_NPARAM; j++) {
            m->xtx[i][j] += x[i] * x[j];
        }
        m->xty[i] += x[i] * sec;
    }
    m->n++;
}

int sl_costmodel_fit(sl_costmodel_t *m)
{
    if (m->n < 2) {
        return -EDOM;
    }
    /* Gaussian elimination with partial pivoting on (XtX + ridge) c = Xty.
     * The ridge, relative to each diagonal, only matters for a feature that
     * never varied (all baseline JPEGs: the progressive column is 0). */
    double a[SL_COST_NPARAM][SL_COST_NPARAM + 1];
    for (int i = 0; i < SL_COST_NPARAM; i++) {
        for (int j = 0; j < SL_COST_NPARAM; j++) {
            a[i][j] = m->xtx[i][j];
        }
        a[i][i] += 1e-9 * (m->xtx[i][i] > 0.0 ? m->xtx[i][i] : 1.0);
        a[i][SL_COST_NPARAM] = m->xty[i];
    }
    for (int c = 0; c < SL_COST_NPARAM; c++) {
        int piv = c;
        for (int r = c + 1; r < SL_COST_NPARAM; r++) {
            if (fabs(a[r][c]) > fabs(a[piv][c])) {
                piv = r;
            }
        }
        if (fabs(a[piv][c]) < 1e-300) {
            return -EDOM;
        }
        if (piv != c) {
            for (int j = 0; j <= SL_COST_NPARAM; j++) {
                double t = a[c][j];
                a[c][j] = a[piv][j];
                a[piv][j] = t;
            }
        }
        for (int r = 0; r < SL_COST_NPARAM; r++) {
            if (r == c) {
                continue;
            }
            double k = a[r][c] / a[c][c];
            for (int j = c; j <= SL_COST_NPARAM; j++) {
                a[r][j] -= k * a[c][j];
            }
        }
    }
    for (int i = 0; i < SL_COST_NPARAM; i++) {
        m->coef[i] = a[i][SL_COST_NPARAM] / a[i][i];
        if (!isfinite(m->coef[i])) {
            return -EDOM;
        }
    }
    m->fitted = 1;
    return 0;
}

double sl_costmodel_predict(const sl_costmodel_t *m, const sl_cost_features_t *f)
{
    if (!m->fitted) {
        return m->n > 0 ? m->xty[0] / (double)m->n : 0.0; /* xty[0] sums the costs */
    }
    double x[SL_COST_NPARAM];
    feature_vec(f, x);
    double y = 0.0;
    for (int i = 0; i < SL_COST_NPARAM; i++) {
        y += m->coef[i] * x[i];
    }
    return y > 0.0 ? y : 0.0;
}
