/* GEMM with a quantized (NF4 or int8) frozen weight, PyTorch layout W (OC,C):
 * forward out = inp @ W^T + bias, backward dinp = dout @ W. The reference dequantizes one
 * element at a time inside plain loops. The optimized version never holds an f32 copy of
 * W: it cuts W into panels of ~256 KiB (rows for the forward, columns for the backward),
 * each thread dequantizes its panel into its own L2-sized buffer and feeds OpenBLAS with it
 * (single-threaded inside our parallel region), writing a disjoint slice of the output. */
#include <cblas.h>
#include <omp.h>

#include "cpu_kernels.h"

static lp_status check_shape(const lp_qweight *w, int64_t C, int64_t OC, const char *op)
{
    if (!w || !w->mem || w->rows != OC || w->cols != C)
        return lp_err(LP_STATUS_INVALID_ARG, "%s: weight is [%lld, %lld], the call says [%lld, %lld]", op,
                      w ? (long long)w->rows : -1LL, w ? (long long)w->cols : -1LL, (long long)OC,
                      (long long)C);
    return LP_OK;
}

// out (N,OC) = inp (N,C) @ W^T (C,OC) + bias (OC)
lp_status lp_k_qmatmul_forward_ref(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                   int64_t N, int64_t C, int64_t OC)
{
    lp_status st = check_shape(w, C, OC, "qmatmul_forward");
    if (st)
        return st;
    for (int64_t i = 0; i < N; i++)
        for (int64_t o = 0; o < OC; o++) {
            double acc = bias ? bias[o] : 0.0;
            for (int64_t k = 0; k < C; k++) {
                float wv;
                lp_k_qweight_dequantize_ref(&wv, w, o * C + k, 1);
                acc += (double)inp[i * C + k] * wv;
            }
            out[i * OC + o] = (float)acc;
        }
    return LP_OK;
}

// dinp (N,C) = dout (N,OC) @ W (OC,C)
lp_status lp_k_qmatmul_backward_ref(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                                    int64_t OC)
{
    lp_status st = check_shape(w, C, OC, "qmatmul_backward");
    if (st)
        return st;
    for (int64_t i = 0; i < N; i++)
        for (int64_t k = 0; k < C; k++) {
            double acc = 0.0;
            for (int64_t o = 0; o < OC; o++) {
                float wv;
                lp_k_qweight_dequantize_ref(&wv, w, o * C + k, 1);
                acc += (double)dout[i * OC + o] * wv;
            }
            dinp[i * C + k] = (float)acc;
        }
    return LP_OK;
}

/* Panel extent along a dimension of `total` whose other side is `other` long: ~128Ki
 * floats (512 KiB, within a core's L2 beside OpenBLAS's packed blocks) but at least 64
 * (thinner panels starve the GEMM micro-kernel), a multiple of 16, and evened out so the
 * panel count is a multiple of the thread count (5 panels on 2 threads would leave one
 * thread idle a fifth of the time). */
static int64_t panel_len(int64_t other, int64_t total, int nthreads)
{
    int64_t p = (131072 / (other > 0 ? other : 1)) & ~(int64_t)15;
    if (p < 64)
        p = 64;
    if (p >= total)
        return total;
    int64_t np = (total + p - 1) / p;
    np = (np + nthreads - 1) / nthreads * nthreads;
    p = ((total + np - 1) / np + 15) & ~(int64_t)15;
    return p < total ? p : total;
}

/* Splits the rows of the activation too when there are fewer panels than 2 per thread,
 * so that small-OC layers (heads) still use every core. */
static int64_t m_chunks(int64_t npanels, int64_t N, int nthreads)
{
    if (npanels >= 2 * nthreads || N < 64)
        return 1;
    int64_t m = (2 * nthreads + npanels - 1) / npanels;
    return m < N / 32 ? m : (N / 32 > 0 ? N / 32 : 1);
}

static void dequant_one_thread(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    if (w->dtype == LP_DTYPE_NF4)
        lp_k_nf4_dequantize_opt(out, w, start, n);
    else
        lp_k_int8_dequantize_opt(out, w, start, n);
}

/* out (N,OC) = inp @ Wb^T + bias [+ s * u @ B^T when u]: one task per (row panel of W,
 * chunk of inp's rows); the LoRA update is added to each output slice right after its base
 * GEMM, while the slice is still in cache. Wb is wf (f32, read in place) or wq. */
lp_status lp_k_linear_forward_panels(float *out, const float *inp, const float *wf, const lp_qweight *wq,
                                     const float *bias, const float *u, const float *B, float s, int64_t N,
                                     int64_t C, int64_t OC, int64_t r)
{
    int nthreads = omp_get_max_threads();
    int64_t nb = panel_len(C, OC, nthreads), npanels = (OC + nb - 1) / nb;
    int64_t mch = m_chunks(npanels, N, nthreads), mlen = (N + mch - 1) / mch;
    float *buf = NULL;
    if (!wf) {
        buf = lp_alloc((size_t)nthreads * (size_t)(nb * C) * sizeof(float), LP_MEM_CATEGORY_TEMPORARY,
                       "qmatmul panels");
        if (!buf)
            return LP_STATUS_NO_MEMORY;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < npanels * mch; t++) {
        int64_t p = t % npanels, mc = t / npanels;
        int64_t o0 = p * nb, rows = OC - o0 < nb ? OC - o0 : nb;
        int64_t i0 = mc * mlen, m = N - i0 < mlen ? N - i0 : mlen;
        if (m <= 0)
            continue;
        const float *panel = wf ? wf + o0 * C : NULL;
        if (!wf) {
            float *pb = buf + (size_t)omp_get_thread_num() * (size_t)(nb * C);
            /* rows [o0, o0+rows) of W are one contiguous run of the flattened weight */
            dequant_one_thread(pb, wq, o0 * C, rows * C);
            panel = pb;
        }
        float *y = out + i0 * OC + o0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)rows, (int)C, 1.0f, inp + i0 * C,
                    (int)C, panel, (int)C, 0.0f, y, (int)OC);
        if (u) /* y += s * u (m,r) @ B[o0:o0+rows]^T (r,rows): a rank-r update, never B @ A */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)rows, (int)r, s, u + i0 * r,
                        (int)r, B + o0 * r, (int)r, 1.0f, y, (int)OC);
        if (bias)
            for (int64_t i = 0; i < m; i++)
                for (int64_t o = 0; o < rows; o++)
                    y[i * OC + o] += bias[o0 + o];
    }
    lp_free(buf);
    return LP_OK;
}

/* dinp (N,C) = dout @ Wb [+ s * drop'(g @ A) when g]: one task per (column panel of W,
 * chunk of rows). drop' multiplies by keep / (1-p) when p > 0. */
lp_status lp_k_linear_backward_panels(float *dinp, const float *dout, const float *wf, const lp_qweight *wq,
                                      const float *g, const float *A, float s, const uint8_t *keep, float p,
                                      int64_t N, int64_t C, int64_t OC, int64_t r)
{
    int nthreads = omp_get_max_threads();
    int64_t kb = panel_len(OC, C, nthreads), npanels = (C + kb - 1) / kb;
    int64_t mch = m_chunks(npanels, N, nthreads), mlen = (N + mch - 1) / mch;
    const int64_t TR = 32; /* rows of the masked LoRA term held at a time */
    size_t per = (size_t)(wf ? 0 : kb * OC) + (size_t)((g && p > 0.0f) ? TR * kb : 0);
    float *buf = NULL;
    if (per) {
        buf = lp_alloc((size_t)nthreads * per * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "qmatmul panels");
        if (!buf)
            return LP_STATUS_NO_MEMORY;
    }
    float sd = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t t = 0; t < npanels * mch; t++) {
        int64_t pi = t % npanels, mc = t / npanels;
        int64_t k0 = pi * kb, cols = C - k0 < kb ? C - k0 : kb;
        int64_t i0 = mc * mlen, m = N - i0 < mlen ? N - i0 : mlen;
        if (m <= 0)
            continue;
        float *mine = buf ? buf + (size_t)omp_get_thread_num() * per : NULL;
        const float *panel = wf ? wf + k0 : mine;
        int64_t ldp = wf ? C : cols;
        if (!wf) /* columns [k0, k0+cols) of W: one run per row, packed (OC, cols) */
            for (int64_t o = 0; o < OC; o++)
                dequant_one_thread(mine + o * cols, wq, o * C + k0, cols);
        float *dx = dinp + i0 * C + k0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)cols, (int)OC, 1.0f,
                    dout + i0 * OC, (int)OC, panel, (int)ldp, 0.0f, dx, (int)C);
        if (!g)
            continue;
        if (p == 0.0f) { /* dx += s * g (m,r) @ A[:, k0:k0+cols] (r,cols) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)cols, (int)r, s, g + i0 * r,
                        (int)r, A + k0, (int)C, 1.0f, dx, (int)C);
            continue;
        }
        float *tmp = mine + (wf ? 0 : kb * OC);
        for (int64_t a = 0; a < m; a += TR) {
            int64_t mr = m - a < TR ? m - a : TR;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)mr, (int)cols, (int)r, s,
                        g + (i0 + a) * r, (int)r, A + k0, (int)C, 0.0f, tmp, (int)cols);
            for (int64_t i = 0; i < mr; i++) {
                const uint8_t *kp = keep + (i0 + a + i) * C + k0;
                float *d = dx + (a + i) * C;
                for (int64_t c = 0; c < cols; c++)
                    d[c] += kp[c] ? tmp[i * cols + c] * sd : 0.0f;
            }
        }
    }
    lp_free(buf);
    return LP_OK;
}

lp_status lp_k_qmatmul_forward_opt(float *out, const float *inp, const lp_qweight *w, const float *bias,
                                   int64_t N, int64_t C, int64_t OC)
{
    lp_status st = check_shape(w, C, OC, "qmatmul_forward");
    if (st || N <= 0)
        return st;
    return lp_k_linear_forward_panels(out, inp, NULL, w, bias, NULL, NULL, 0.0f, N, C, OC, 0);
}

lp_status lp_k_qmatmul_backward_opt(float *dinp, const float *dout, const lp_qweight *w, int64_t N, int64_t C,
                                    int64_t OC)
{
    lp_status st = check_shape(w, C, OC, "qmatmul_backward");
    if (st || N <= 0)
        return st;
    return lp_k_linear_backward_panels(dinp, dout, NULL, w, NULL, NULL, 0.0f, NULL, 0.0f, N, C, OC, 0);
}
