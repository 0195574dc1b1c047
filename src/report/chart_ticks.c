/* Axis ticks for the charts: "nice" steps (1, 2, 2.5, 5 x 10^k) so tick labels read as
 * round numbers, and labels with just the decimals the step needs. */
#include <math.h>
#include <stdio.h>

#include "loupe/report.h"

int32_t lp_chart_nice_ticks(double lo, double hi, int32_t max_ticks, double *ticks, double *step)
{
    if (!isfinite(lo) || !isfinite(hi) || max_ticks < 2) {
        *step = 1;
        return 0;
    }
    if (hi < lo) {
        double t = lo;
        lo = hi;
        hi = t;
    }
    if (hi - lo < 1e-12 * (fabs(lo) + fabs(hi)) || hi == lo) { // one value: a range around it
        double pad = lo == 0 ? 1 : fabs(lo) * 0.1;
        lo -= pad;
        hi += pad;
    }
    static const double mult[] = {1, 2, 2.5, 5, 10};
    double raw = (hi - lo) / (max_ticks - 1);
    double mag = pow(10, floor(log10(raw)));
    double s = mag * 10;
    for (size_t i = 0; i < sizeof mult / sizeof mult[0]; i++)
        if (mult[i] * mag >= raw * (1 - 1e-9)) {
            s = mult[i] * mag;
            break;
        }
    /* the first and last ticks enclose [lo, hi]; a step that needs more ticks grows */
    for (;;) {
        double first = floor(lo / s + 1e-9) * s, last = ceil(hi / s - 1e-9) * s;
        int32_t n = (int32_t)llround((last - first) / s) + 1;
        if (n <= max_ticks) {
            for (int32_t i = 0; i < n; i++) {
                double v = first + i * s;
                ticks[i] = fabs(v) < s * 1e-9 ? 0 : v; // no "-0"
            }
            *step = s;
            return n;
        }
        double m = s / pow(10, floor(log10(s)));
        s *= m > 1.5 && m < 2.25 ? 1.25 : 2; // 1 -> 2 -> 2.5 -> 5 -> 10
    }
}

void lp_chart_format_tick(double v, double step, char *buf, size_t cap)
{
    static const struct {
        double div;
        const char *suffix;
    } units[] = {{1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
    if (fabs(v) <= fabs(step) * 1e-9) { // zero reads "0" whatever the scale ("0k" would not)
        snprintf(buf, cap, "0");
        return;
    }
    double a = fabs(v) > fabs(step) ? fabs(v) : fabs(step);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (a >= 10 * units[i].div) { // 10000 -> "10k", 2500 stays "2500"
            double sv = v / units[i].div, ss = step / units[i].div;
            int dec = ss >= 1 ? 0 : (int)ceil(-log10(ss) - 1e-9);
            if (dec > 3)
                dec = 3;
            snprintf(buf, cap, "%.*f%s", dec, sv, units[i].suffix);
            return;
        }
    }
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (step > 0 && dec >= 0) { // 2.5-steps need one decimal more than their magnitude
        double scaled = step * pow(10, dec);
        if (fabs(scaled - llround(scaled)) > 1e-6)
            dec++;
    }
    if (dec > 6)
        snprintf(buf, cap, "%.2g", v);
    else
        snprintf(buf, cap, "%.*f", dec, v);
}
