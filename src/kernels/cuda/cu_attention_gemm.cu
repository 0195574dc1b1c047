/* The SIMT steps of attention as GEMMs (../attn_gemm.h; the GEMMs are cuBLASLt's, and
 * cuda_attention.c puts the two together): the head-major copies in and out, and the masked
 * softmax over materialized scores with its backward, the semantics of the CPU steps in
 * cpu/attn_gemm.c (lp_attn_gemm_*_cpu), which test_cuda_nn holds them to.
 *
 * Softmax: a warp per row (8 rows a block), three passes over the row (max, sum, write; the
 * row is re-read from L1/L2, any T), visibility (causal, window, padding, segments) and the
 * Philox dropout mask of lp_attn_dropout element by element, so the GPU drops exactly the
 * probabilities the CPU and the fused kernel drop. Sums in a fixed order: deterministic. */
#include "cu_nn_common.cuh"
#include "cu_attn_drop.cuh"

#define AG_THREADS 256
#define AG_ROWS (AG_THREADS / 32) /* warps, so rows, per block */

typedef struct ag_args {
    const int32_t *mask;
    int64_t T, H, D, window;
    float scale;
    bool causal, segments;
    lp_cu_attn_drop drop;
} ag_args;

static ag_args ag_make(const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    ag_args a;
    a.mask = mask;
    a.T = g->T, a.H = g->H, a.D = g->D, a.window = g->window;
    a.scale = lp_attn_scale(g);
    a.causal = g->causal, a.segments = g->segments && mask;
    a.drop = lp_cu_attn_drop_make(drop);
    return a;
}

/* whether key j is visible to query i of a row with mask mb (NULL: none); mi = mb[i] */
static __device__ __forceinline__ bool ag_visible(const ag_args &a, const int32_t *mb, int64_t i, int64_t j,
                                                  int32_t mi)
{
    if (a.causal && j > i)
        return false;
    if (a.window > 0 && i - j >= a.window)
        return false;
    if (!mb)
        return true;
    const int32_t mj = mb[j];
    return mj && (!a.segments || mj == mi);
}

/* xh (B,Hx,T,D) = x (B,T,Hx,D) stride ld, or back (to_x); V: 4 floats at a time. Grid y walks
 * the (b, h) slabs, x the T*D/V elements of one (32-bit index arithmetic: T*D < 2^31). */
template <int V, bool to_x>
__global__ void ag_heads_kernel(float *dst, const float *src, int64_t BH, int T, int64_t Hx, int D, int64_t ld)
{
    const int Dv = D / V, n = T * Dv;
    for (int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const int64_t b = bh / Hx, h = bh % Hx;
        const float *s = src + (to_x ? bh * n * V : b * T * ld + h * D);
        float *d = dst + (to_x ? b * T * ld + h * D : bh * n * V);
        for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x) {
            const int t = e / Dv, dv = e % Dv;
            const int64_t xo = (int64_t)t * ld + dv * V, ho = (int64_t)e * V;
            const int64_t so = to_x ? ho : xo, dof = to_x ? xo : ho;
            if (V == 4)
                *reinterpret_cast<float4 *>(d + dof) = *reinterpret_cast<const float4 *>(s + so);
            else
                d[dof] = s[so];
        }
    }
}

static void ag_heads(float *dst, const float *src, int64_t B, int64_t T, int64_t Hx, int64_t D, int64_t ld, bool to_x,
                     const char *op)
{
    const float *x = to_x ? dst : src, *xh = to_x ? src : dst;
    const bool vec = D % 4 == 0 && ld % 4 == 0 && ((uintptr_t)x & 15) == 0 && ((uintptr_t)xh & 15) == 0;
    const int64_t n = T * (vec ? D / 4 : D), BH = B * Hx;
    if (n == 0 || BH == 0)
        return;
    if (n > INT32_MAX) {
        lp_cu_nn_refuse(op, lp_err(LP_STATUS_UNSUPPORTED, "cuda %s: T*D = %lld above 2^31", op, (long long)(T * D)));
        return;
    }
    const dim3 grid(cu_blocks(n, AG_THREADS, 1024), (unsigned)(BH < 65535 ? BH : 65535));
    void (*kern)(float *, const float *, int64_t, int, int64_t, int, int64_t) =
        vec ? (to_x ? ag_heads_kernel<4, true> : ag_heads_kernel<4, false>)
            : (to_x ? ag_heads_kernel<1, true> : ag_heads_kernel<1, false>);
    LP_CU_LAUNCH(kern, grid, AG_THREADS, 0, lp_cu_nn_stream(), dst, src, BH, (int)T, Hx, (int)D, ld);
    (void)lp_cu_nn_launched(op);
}

/* s (rows of T): scaled scores -> z p; lse (rows). Row r = (b H + h) T + i. */
__global__ void __launch_bounds__(AG_THREADS) ag_softmax_forward_kernel(float *s, float *lse, int64_t rows, ag_args a)
{
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)blockIdx.x * AG_ROWS + (threadIdx.x >> 5), T = a.T;
    if (r >= rows)
        return; /* the whole warp leaves together */
    const int64_t b = r / (a.H * T), i = r % T;
    const int32_t *mb = a.mask ? a.mask + b * T : NULL;
    const int32_t mi = mb ? mb[i] : 1;
    float *row = s + r * T;
    float m = -INFINITY, l = 0.0f;
    for (int64_t j = lane; j < T; j += 32)
        if (ag_visible(a, mb, i, j, mi))
            m = fmaxf(m, row[j]);
    m = warp_max(m);
    if (m != -INFINITY) /* warp-uniform */
        for (int64_t j = lane; j < T; j += 32)
            if (ag_visible(a, mb, i, j, mi))
                l += expf(row[j] - m);
    l = warp_sum(l);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int64_t j = lane; j < T; j += 32) {
        const bool vis = l > 0.0f && ag_visible(a, mb, i, j, mi);
        float p = vis ? expf(row[j] - m) * inv : 0.0f;
        if (vis && a.drop.on)
            p *= lp_cu_attn_drop_factor(a.drop, (uint64_t)(r * T + j));
        row[j] = p;
    }
    if (lane == 0)
        lse[r] = l > 0.0f ? m + logf(l) : -INFINITY;
}

/* s: scaled scores -> z p; dp: dout.v -> ds = p (z dp - D_i) scale */
__global__ void __launch_bounds__(AG_THREADS)
    ag_softmax_backward_kernel(float *s, float *dp, const float *dout, const float *out, const float *lse, int64_t rows,
                               ag_args a)
{
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)blockIdx.x * AG_ROWS + (threadIdx.x >> 5), T = a.T, D = a.D;
    if (r >= rows)
        return;
    const int64_t b = r / (a.H * T), h = (r / T) % a.H, i = r % T;
    const int32_t *mb = a.mask ? a.mask + b * T : NULL;
    const int32_t mi = mb ? mb[i] : 1;
    const float *doi = dout + (b * T + i) * a.H * D + h * D, *oi = out + (b * T + i) * a.H * D + h * D;
    float di = 0.0f;
    for (int64_t d = lane; d < D; d += 32)
        di += doi[d] * oi[d];
    di = warp_sum(di);
    const float li = lse[r];
    float *srow = s + r * T, *drow = dp + r * T;
    for (int64_t j = lane; j < T; j += 32) {
        float pz = 0.0f, ds = 0.0f;
        if (li != -INFINITY && ag_visible(a, mb, i, j, mi)) {
            const float p = expf(srow[j] - li);
            const float z = a.drop.on ? lp_cu_attn_drop_factor(a.drop, (uint64_t)(r * T + j)) : 1.0f;
            pz = z * p;
            ds = p * (z * drow[j] - di) * a.scale;
        }
        srow[j] = pz;
        drow[j] = ds;
    }
}

extern "C" void lp_cu_attn_gemm_to_heads(float *xh, const float *x, int64_t B, int64_t T, int64_t Hx, int64_t D,
                                         int64_t ld)
{
    ag_heads(xh, x, B, T, Hx, D, ld, false, "attention (GEMMs): to heads");
}

extern "C" void lp_cu_attn_gemm_from_heads(float *x, const float *xh, int64_t B, int64_t T, int64_t Hx, int64_t D,
                                           int64_t ld)
{
    ag_heads(x, xh, B, T, Hx, D, ld, true, "attention (GEMMs): from heads");
}

extern "C" void lp_cu_attn_gemm_softmax_forward(float *s, float *lse, const int32_t *mask, const lp_attn_geom *g,
                                                const lp_attn_dropout *drop)
{
    const int64_t rows = g->B * g->H * g->T;
    const unsigned blocks = (unsigned)((rows + AG_ROWS - 1) / AG_ROWS);
    LP_CU_LAUNCH(ag_softmax_forward_kernel, blocks, AG_THREADS, 0, lp_cu_nn_stream(), s, lse, rows,
                 ag_make(mask, g, drop));
    (void)lp_cu_nn_launched("attention (GEMMs): softmax");
}

extern "C" void lp_cu_attn_gemm_softmax_backward(float *s, float *dp, const float *dout, const float *out,
                                                 const float *lse, const int32_t *mask, const lp_attn_geom *g,
                                                 const lp_attn_dropout *drop)
{
    const int64_t rows = g->B * g->H * g->T;
    const unsigned blocks = (unsigned)((rows + AG_ROWS - 1) / AG_ROWS);
    LP_CU_LAUNCH(ag_softmax_backward_kernel, blocks, AG_THREADS, 0, lp_cu_nn_stream(), s, dp, dout, out, lse, rows,
                 ag_make(mask, g, drop));
    (void)lp_cu_nn_launched("attention (GEMMs): softmax backward");
}
