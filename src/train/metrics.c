/* Classification metrics for the per-epoch evaluation: accuracy and macro-F1. */
#include <stdlib.h>

#include "loupe/train.h"

void lp_metrics_classification(const int32_t *labels, const int32_t *preds, int64_t n, int32_t L,
                               double *accuracy, double *macro_f1)
{
    int64_t *tp = calloc((size_t)(L > 0 ? L : 1) * 3, sizeof *tp);
    int64_t correct = 0;
    if (!tp || n <= 0 || L <= 0) {
        *accuracy = *macro_f1 = 0.0;
        free(tp);
        return;
    }
    int64_t *fp = tp + L, *fn = fp + L;
    for (int64_t i = 0; i < n; i++) {
        int32_t y = labels[i], p = preds[i];
        if (y == p) {
            correct++;
            if (y >= 0 && y < L)
                tp[y]++;
        } else {
            if (p >= 0 && p < L)
                fp[p]++;
            if (y >= 0 && y < L)
                fn[y]++;
        }
    }
    double f1_sum = 0.0;
    int32_t classes = 0;
    for (int32_t c = 0; c < L; c++) {
        if (tp[c] + fp[c] + fn[c] == 0)
            continue;
        classes++;
        f1_sum += 2.0 * (double)tp[c] / (double)(2 * tp[c] + fp[c] + fn[c]);
    }
    *accuracy = (double)correct / (double)n;
    *macro_f1 = classes ? f1_sum / classes : 0.0;
    free(tp);
}
