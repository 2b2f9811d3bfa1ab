/* costmodel: the online least-squares fit (common/cost/costmodel.h). Pure:
 * any thread, on the caller's model. */
#include "common/cost/costmodel.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/base/lsq.h"

static void feature_vec(const sl_cost_features_t *f, double x[SL_COST_NPARAM])
{
    x[0] = 1.0;
    x[1] = f->kb;
    x[2] = f->mpix;
    x[3] = f->prog_mpix;
    x[4] = f->text_kb;
    x[5] = f->images;
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
    sl_lsq_add(&m->xtx[0][0], m->xty, SL_COST_NPARAM, x, sec);
    m->n++;
}

int sl_costmodel_fit(sl_costmodel_t *m)
{
    if (m->n < 2) {
        return -EDOM;
    }
    /* The ridge only matters for a feature that never varied (all baseline
     * JPEGs: the progressive column is 0). */
    int rc = sl_lsq_solve(&m->xtx[0][0], m->xty, SL_COST_NPARAM, m->coef);
    if (rc < 0) {
        return -EDOM;
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
