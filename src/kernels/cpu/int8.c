/* int8 weights with one absmax scale per output channel (row): the third base precision
 * beside f32 and NF4. scale = max|w_row| / qmax, q = round-half-even(w / scale) (qmax 127;
 * 63 for the integer GEMM's tiles, see i8gemm.c); an all-zero row has scale 0 and codes 0.
 * Dequantization is one float32 multiply, q * scale. */
#include <math.h>

#include "cpu_kernels.h"

void lp_k_int8_quantize(lp_qweight *q, const float *w, int qmax)
{
    const float lim = (float)qmax;
    int64_t C = q->cols;
#pragma omp parallel for schedule(static) if (q->n >= 65536)
    for (int64_t o = 0; o < q->rows; o++) {
        const float *row = w + o * C;
        float am = 0.0f;
        for (int64_t i = 0; i < C; i++)
            am = fmaxf(am, fabsf(row[i]));
        float sc = am / lim;
        q->scale[o] = sc;
        for (int64_t i = 0; i < C; i++) {
            float v = sc > 0.0f ? nearbyintf(row[i] / sc) : 0.0f; /* default mode: ties to even */
            v = v < -lim ? -lim : v > lim ? lim : v;
            q->q[o * C + i] = (int8_t)v;
        }
    }
}

/* A weight packed for the integer GEMM keeps its bytes and scales only in the tiles. */
static void dequantize_tiles(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const int64_t o = (start + i) / w->cols, k = (start + i) % w->cols;
        out[i] = (float)lp_k_int8_tile_q(w, o, k) * lp_k_int8_tile_scale(w, o);
    }
}

void lp_k_int8_dequantize_ref(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    if (!w->q) {
        dequantize_tiles(out, w, start, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t e = start + i;
        out[i] = (float)w->q[e] * w->scale[e / w->cols];
    }
}

void lp_k_int8_dequantize_opt(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    if (!w->q) {
        dequantize_tiles(out, w, start, n);
        return;
    }
    int64_t e = start, end = start + n, C = w->cols;
    while (e < end) {
        int64_t row = e / C, stop = (row + 1) * C < end ? (row + 1) * C : end;
        float sc = w->scale[row];
        const int8_t *src = w->q + e;
        float *dst = out + (e - start);
#pragma omp simd
        for (int64_t i = 0; i < stop - e; i++)
            dst[i] = (float)src[i] * sc;
        e = stop;
    }
}
