/* Fused (flash-style) attention forward and backward on the GPU, f32 with f32 accumulation,
 * the semantics of attention_fused_ref.c over a whole lp_attn_geom: GQA, ldq/ldkv strides,
 * causal, sliding window, padding mask, segments (packing), scale, and the Philox dropout
 * mask of lp_attn_dropout (the same counters, so CPU and GPU drop the same probabilities).
 *
 * Forward: a block owns 32 queries of one (batch, head), 8 warps of 4 queries each; key
 * tiles of 32 go through shared memory, one key per lane: each lane scores its key against
 * the warp's 4 queries, the warp takes the tile's max and sum (online softmax), and every
 * lane accumulates the output dimensions it owns (d = lane + 32 t, t < DPL = ceil(D/32), so
 * any D up to 256). Key tiles no query of the block can see (causal, window) are skipped.
 * lse saves m + log l, -inf for a query that sees no key (its output is 0, never NaN).
 *
 * Backward, two kernels and no atomics (deterministic): dq with the forward's layout (a
 * block per query tile, streaming key tiles), and dk/dv (a block per key tile of one kv
 * head, streaming the query tiles of every query head of its group in order, so the GQA sum
 * has a fixed order). Both recompute p = exp(scale q.k - lse) and dp = dout.v; D_i =
 * dout_i . out_i is recomputed where needed (a D-long dot per query tile row). */
#include "cu_nn_common.cuh"
#include "cu_attn_drop.cuh"

#define AQ 32        /* queries per block */
#define AK 32        /* keys per tile: one per lane */
#define AW 8         /* warps per block */
#define QW (AQ / AW) /* queries per warp (forward, dq) */
#define KW (AK / AW) /* keys per warp (dk/dv) */
#define ATHREADS (32 * AW)
/* Blocks per SM the kernels are compiled for (__launch_bounds__), so registers per thread
 * are capped at 65536 / (ATHREADS * n). The forward at D <= 64 (DPL <= 2) fits 64 registers
 * with a few spilled bytes outside its loops, and 4 blocks hide latency better than 2: on an
 * H200 the DistilBERT-shaped forward (B32 T128 H12 D64) went from 0.169 to 0.125 ms and the
 * Qwen-shaped one from 0.373 to 0.316 ms. Larger D keeps 2 (it spills more at 64). dq
 * likewise (DistilBERT backward 0.526 -> 0.486 ms, Qwen unchanged). dk/dv has its own
 * instantiation with 4 (attn_dkv_kernel<DPL, 4>), used only for grids of at least
 * ADKV_MANY_BLOCKS blocks: it took the DistilBERT backward to 0.42 ms but slowed the Qwen one
 * (256 blocks of 7 query heads each: occupancy buys nothing there, the spills cost 10%). */
#define AFWD_MINB(dpl) ((dpl) <= 2 ? 4 : 2)
#define ADQ_MINB(dpl) ((dpl) <= 2 ? 4 : 2)
#define ADKV_MANY_BLOCKS 1024

typedef struct attn_args {
    const float *q, *k, *v;
    const int32_t *mask;
    int64_t T, H, ldq, ldkv, window;
    int D, grp;
    float scale;
    bool causal, segments;
    lp_cu_attn_drop drop;
} attn_args;

/* whether key j is visible to query i (both < T), mi / mj their mask values (1 when no mask) */
static __device__ __forceinline__ bool visible(const attn_args &a, int64_t i, int64_t j, int32_t mi,
                                               int32_t mj)
{
    if (a.causal && j > i)
        return false;
    if (a.window > 0 && i - j >= a.window)
        return false;
    return !a.mask || (mj && (!a.segments || mj == mi));
}

/* Tiles in shared memory have Dp = D rounded up to 4 columns (zeros past D), so the dot
 * products read float4s. Tiles read across lanes (lane = column) use stride Dp; tiles read
 * one row per lane (lane = row) use stride lane_ld: a multiple of 4 whose quarter is odd,
 * so the 8 lanes of each 128-bit load phase hit distinct banks. */
static __host__ __device__ __forceinline__ int pad4(int D)
{
    return (D + 3) / 4 * 4;
}
static __host__ __device__ __forceinline__ int lane_ld(int D)
{
    return (pad4(D) / 4) % 2 ? pad4(D) : pad4(D) + 4;
}

/* the 4 floats at p (16-byte aligned: tile strides and offsets are multiples of 4 floats) */
static __device__ __forceinline__ float4 ld4(const float *p)
{
#ifdef LP_CUDA_EMU
    if ((uintptr_t)p % 16)
        __trap();
#endif
    return *reinterpret_cast<const float4 *>(p);
}

/* Each warp hands its lanes' per-key (or per-query) values to all its lanes through a small
 * slice of shared memory, QW (= KW = 4) floats per lane, read back as broadcast float4s:
 * one 128-bit load per step instead of four shuffles. */
static_assert(QW == 4 && KW == 4, "the exchange slices hold one float4 per lane");
static __device__ __forceinline__ void st4(float *p, float a, float b, float c, float d)
{
#ifdef LP_CUDA_EMU
    if ((uintptr_t)p % 16)
        __trap();
#endif
    *reinterpret_cast<float4 *>(p) = make_float4(a, b, c, d);
}

/* s + a . b over one float4, in order */
static __device__ __forceinline__ float dot4(float4 a, float4 b, float s)
{
    return fmaf(a.w, b.w, fmaf(a.z, b.z, fmaf(a.y, b.y, fmaf(a.x, b.x, s))));
}

/* rows [row0, row0+32) x Dp of src (row stride ld; columns past D and rows past T read 0)
 * into dst (row stride dld) */
static __device__ __forceinline__ void load_tile(float *dst, int dld, const float *src, int64_t ld,
                                                 int64_t row0, int64_t T, int D, int Dp)
{
    if (D % 4 == 0 && ld % 4 == 0 && ((uintptr_t)src & 15) == 0) {
        /* whole float4s (Dp == D, every row 16-byte aligned): a quarter of the loads and of
         * the index arithmetic, which dominate the short-T forward */
        const int D4 = D / 4;
        for (int e = threadIdx.x; e < AK * D4; e += ATHREADS) {
            const int r = e / D4, d = (e % D4) * 4;
            const int64_t i = row0 + r;
            const float4 v = i < T ? *reinterpret_cast<const float4 *>(src + i * ld + d) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            *reinterpret_cast<float4 *>(dst + r * dld + d) = v;
        }
        return;
    }
    for (int e = threadIdx.x; e < AK * Dp; e += ATHREADS) {
        const int r = e / Dp, d = e % Dp;
        const int64_t i = row0 + r;
        dst[r * dld + d] = i < T && d < D ? src[i * ld + d] : 0.0f;
    }
}

template <int DPL>
__global__ void __launch_bounds__(ATHREADS, AFWD_MINB(DPL)) attn_fwd_kernel(float *out, float *lse, attn_args a)
{
    LP_CU_DYN_SMEM(float4, sm4);
    const int D = a.D, Dp = pad4(D), LD = lane_ld(D);
    float *Qs = (float *)sm4; /* AQ x Dp, read by broadcast */
    float *Ks = Qs + AQ * Dp; /* AK x LD, one row per lane */
    float *Vs = Ks + AK * LD; /* AK x Dp, read across lanes */
    float *Ps = Vs + AK * Dp; /* AW x AK x QW: each warp's probabilities, [key][query] */
    int *Ms = (int *)(Ps + AW * AK * QW);
    const int64_t T = a.T, b = blockIdx.z, h = blockIdx.y, q0 = (int64_t)blockIdx.x * AQ;
    const int64_t kvo = (h / a.grp) * D;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int32_t *mb = a.mask ? a.mask + b * T : NULL;

    load_tile(Qs, Dp, a.q + b * T * a.ldq + h * D, a.ldq, q0, T, D, Dp);

    float m[QW], l[QW], o[QW][DPL];
    int32_t mi[QW];
#pragma unroll
    for (int rr = 0; rr < QW; rr++) {
        const int64_t i = q0 + warp * QW + rr;
        m[rr] = -INFINITY;
        l[rr] = 0.0f;
        mi[rr] = mb && i < T ? mb[i] : 1;
#pragma unroll
        for (int t = 0; t < DPL; t++)
            o[rr][t] = 0.0f;
    }
    /* keys any query of the block may see */
    const int64_t qlast = (q0 + AQ < T ? q0 + AQ : T) - 1;
    const int64_t khi = a.causal ? qlast + 1 : T;
    const int64_t klo = a.window > 0 && q0 - a.window + 1 > 0 ? q0 - a.window + 1 : 0;

    for (int64_t k0 = klo; k0 < khi; k0 += AK) {
        __syncthreads(); /* the previous tile is no longer read */
        load_tile(Ks, LD, a.k + b * T * a.ldkv + kvo, a.ldkv, k0, T, D, Dp);
        load_tile(Vs, Dp, a.v + b * T * a.ldkv + kvo, a.ldkv, k0, T, D, Dp);
        if (threadIdx.x < AK) {
            const int64_t j = k0 + threadIdx.x;
            Ms[threadIdx.x] = j < T ? (mb ? mb[j] : 1) : 0;
        }
        __syncthreads();
        const int64_t j = k0 + lane;
        float s[QW];
#pragma unroll
        for (int rr = 0; rr < QW; rr++)
            s[rr] = 0.0f;
        const float *kr = Ks + lane * LD, *qr = Qs + warp * QW * Dp;
        for (int d = 0; d < Dp; d += 4) {
            const float4 kd = ld4(kr + d);
#pragma unroll
            for (int rr = 0; rr < QW; rr++)
                s[rr] = dot4(ld4(qr + rr * Dp + d), kd, s[rr]);
        }
        float pz[QW];
#pragma unroll
        for (int rr = 0; rr < QW; rr++) {
            const int64_t i = q0 + warp * QW + rr;
            const bool vis = i < T && j < khi && j < T && visible(a, i, j, mi[rr], Ms[lane]);
            const float sc = vis ? s[rr] * a.scale : -INFINITY;
            const float mn = fmaxf(m[rr], warp_max(sc));
            pz[rr] = 0.0f;
            if (mn == -INFINITY)
                continue; /* nothing visible yet (warp-uniform) */
            const float corr = expf(m[rr] - mn), p = vis ? expf(sc - mn) : 0.0f;
            l[rr] = l[rr] * corr + warp_sum(p);
            m[rr] = mn;
#pragma unroll
            for (int t = 0; t < DPL; t++)
                o[rr][t] *= corr;
            pz[rr] = p;
            if (a.drop.on && vis)
                pz[rr] *= lp_cu_attn_drop_factor(a.drop, (uint64_t)(((b * a.H + h) * T + i) * T + j));
        }
        float *pw = Ps + warp * AK * QW;
        st4(pw + lane * QW, pz[0], pz[1], pz[2], pz[3]);
        __syncwarp();
        for (int jj = 0; jj < AK; jj++) {
            const float4 p4 = ld4(pw + jj * QW);
            const float pj[QW] = {p4.x, p4.y, p4.z, p4.w};
            const float *vr = Vs + jj * Dp;
#pragma unroll
            for (int t = 0; t < DPL; t++) {
                const int d = lane + 32 * t;
                const float vd = d < D ? vr[d] : 0.0f;
#pragma unroll
                for (int rr = 0; rr < QW; rr++)
                    o[rr][t] += pj[rr] * vd;
            }
        }
    }
    const int64_t C = a.H * D;
#pragma unroll
    for (int rr = 0; rr < QW; rr++) {
        const int64_t i = q0 + warp * QW + rr;
        if (i >= T)
            continue;
        const float inv = l[rr] > 0.0f ? 1.0f / l[rr] : 0.0f; /* no visible key: 0 */
        float *orow = out + (b * T + i) * C + h * D;
#pragma unroll
        for (int t = 0; t < DPL; t++) {
            const int d = lane + 32 * t;
            if (d < D)
                orow[d] = o[rr][t] * inv;
        }
        if (lane == 0)
            lse[(b * a.H + h) * T + i] = l[rr] > 0.0f ? m[rr] + logf(l[rr]) : -INFINITY;
    }
}

/* dq (layout of q) = sum_j ds_ij k_j, ds = p (z dp - D_i) scale; a block per query tile */
template <int DPL>
__global__ void __launch_bounds__(ATHREADS, ADQ_MINB(DPL))
    attn_dq_kernel(float *dq, const float *dout, const float *out, const float *lse, attn_args a)
{
    LP_CU_DYN_SMEM(float4, sm4);
    const int D = a.D, Dp = pad4(D), LD = lane_ld(D);
    float *Qs = (float *)sm4; /* AQ x Dp, broadcast */
    float *Os = Qs + AQ * Dp; /* AQ x Dp: dout rows, broadcast */
    float *Ks = Os + AQ * Dp; /* AK x LD: one row per lane, and across lanes */
    float *Vs = Ks + AK * LD; /* AK x LD: one row per lane */
    float *Ps = Vs + AK * LD; /* AW x AK x QW: each warp's ds, [key][query] */
    int *Ms = (int *)(Ps + AW * AK * QW);
    const int64_t T = a.T, b = blockIdx.z, h = blockIdx.y, q0 = (int64_t)blockIdx.x * AQ, C = a.H * D;
    const int64_t kvo = (h / a.grp) * D;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int32_t *mb = a.mask ? a.mask + b * T : NULL;

    load_tile(Qs, Dp, a.q + b * T * a.ldq + h * D, a.ldq, q0, T, D, Dp);
    load_tile(Os, Dp, dout + b * T * C + h * D, C, q0, T, D, Dp);

    float li[QW], di[QW], acc[QW][DPL];
    int32_t mi[QW];
#pragma unroll
    for (int rr = 0; rr < QW; rr++) {
        const int64_t i = q0 + warp * QW + rr;
        li[rr] = i < T ? lse[(b * a.H + h) * T + i] : -INFINITY;
        mi[rr] = mb && i < T ? mb[i] : 1;
        float x = 0.0f;
        if (i < T) {
            const float *orow = out + (b * T + i) * C + h * D, *drow = dout + (b * T + i) * C + h * D;
            for (int d = lane; d < D; d += 32)
                x += drow[d] * orow[d];
        }
        di[rr] = warp_sum(x);
#pragma unroll
        for (int t = 0; t < DPL; t++)
            acc[rr][t] = 0.0f;
    }
    const int64_t qlast = (q0 + AQ < T ? q0 + AQ : T) - 1;
    const int64_t khi = a.causal ? qlast + 1 : T;
    const int64_t klo = a.window > 0 && q0 - a.window + 1 > 0 ? q0 - a.window + 1 : 0;

    for (int64_t k0 = klo; k0 < khi; k0 += AK) {
        __syncthreads();
        load_tile(Ks, LD, a.k + b * T * a.ldkv + kvo, a.ldkv, k0, T, D, Dp);
        load_tile(Vs, LD, a.v + b * T * a.ldkv + kvo, a.ldkv, k0, T, D, Dp);
        if (threadIdx.x < AK) {
            const int64_t j = k0 + threadIdx.x;
            Ms[threadIdx.x] = j < T ? (mb ? mb[j] : 1) : 0;
        }
        __syncthreads();
        const int64_t j = k0 + lane;
        float s[QW], dp[QW];
#pragma unroll
        for (int rr = 0; rr < QW; rr++)
            s[rr] = dp[rr] = 0.0f;
        const float *kr = Ks + lane * LD, *vr = Vs + lane * LD;
        const float *qr = Qs + warp * QW * Dp, *orr = Os + warp * QW * Dp;
        for (int d = 0; d < Dp; d += 4) {
            const float4 kd = ld4(kr + d), vd = ld4(vr + d);
#pragma unroll
            for (int rr = 0; rr < QW; rr++) {
                s[rr] = dot4(ld4(qr + rr * Dp + d), kd, s[rr]);
                dp[rr] = dot4(ld4(orr + rr * Dp + d), vd, dp[rr]);
            }
        }
        float ds[QW];
#pragma unroll
        for (int rr = 0; rr < QW; rr++) {
            const int64_t i = q0 + warp * QW + rr;
            const bool vis =
                i < T && j < khi && j < T && li[rr] != -INFINITY && visible(a, i, j, mi[rr], Ms[lane]);
            ds[rr] = 0.0f;
            if (vis) {
                const float p = expf(s[rr] * a.scale - li[rr]);
                const float z =
                    a.drop.on ? lp_cu_attn_drop_factor(a.drop, (uint64_t)(((b * a.H + h) * T + i) * T + j))
                              : 1.0f;
                ds[rr] = p * (z * dp[rr] - di[rr]) * a.scale;
            }
        }
        float *pw = Ps + warp * AK * QW;
        st4(pw + lane * QW, ds[0], ds[1], ds[2], ds[3]);
        __syncwarp();
        for (int jj = 0; jj < AK; jj++) {
            const float4 d4 = ld4(pw + jj * QW);
            const float dj[QW] = {d4.x, d4.y, d4.z, d4.w};
            const float *krow = Ks + jj * LD;
#pragma unroll
            for (int t = 0; t < DPL; t++) {
                const int d = lane + 32 * t;
                const float kd = d < D ? krow[d] : 0.0f;
#pragma unroll
                for (int rr = 0; rr < QW; rr++)
                    acc[rr][t] += dj[rr] * kd;
            }
        }
    }
#pragma unroll
    for (int rr = 0; rr < QW; rr++) {
        const int64_t i = q0 + warp * QW + rr;
        if (i >= T)
            continue;
        float *row = dq + (b * T + i) * a.ldq + h * D;
#pragma unroll
        for (int t = 0; t < DPL; t++) {
            const int d = lane + 32 * t;
            if (d < D)
                row[d] = acc[rr][t];
        }
    }
}

/* dk, dv (layout of k, v) for a tile of AK keys of one kv head: sums over the query heads of
 * its group (in order) and their visible queries; a warp owns KW keys, lanes own dimensions */
template <int DPL, int MINB = 2>
__global__ void __launch_bounds__(ATHREADS, MINB)
    attn_dkv_kernel(float *dk, float *dv, const float *dout, const float *out, const float *lse, attn_args a)
{
    LP_CU_DYN_SMEM(float4, sm4);
    const int D = a.D, Dp = pad4(D), LD = lane_ld(D);
    float *Ks = (float *)sm4;      /* AK x Dp, broadcast */
    float *Vs = Ks + AK * Dp;      /* AK x Dp, broadcast */
    float *Qs = Vs + AK * Dp;      /* AQ x LD: one row per lane, and across lanes */
    float *Os = Qs + AQ * LD;      /* AQ x LD: dout rows, likewise */
    float *Ls = Os + AQ * LD;      /* AQ lse */
    float *Ds = Ls + AQ;           /* AQ D_i */
    float *Pz = Ds + AQ;           /* AW x AQ x KW: each warp's z p, [query][key] */
    float *Dz = Pz + AW * AQ * KW; /* AW x AQ x KW: each warp's ds */
    int *Mq = (int *)(Dz + AW * AQ * KW);
    const int64_t T = a.T, b = blockIdx.z, kvh = blockIdx.y, k0 = (int64_t)blockIdx.x * AK, C = a.H * D;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int32_t *mb = a.mask ? a.mask + b * T : NULL;

    load_tile(Ks, Dp, a.k + b * T * a.ldkv + kvh * D, a.ldkv, k0, T, D, Dp);
    load_tile(Vs, Dp, a.v + b * T * a.ldkv + kvh * D, a.ldkv, k0, T, D, Dp);
    float gk[KW][DPL], gv[KW][DPL];
    int32_t mj[KW];
#pragma unroll
    for (int kk = 0; kk < KW; kk++) {
        const int64_t j = k0 + warp * KW + kk;
        mj[kk] = mb && j < T ? mb[j] : 1;
#pragma unroll
        for (int t = 0; t < DPL; t++)
            gk[kk][t] = gv[kk][t] = 0.0f;
    }
    /* queries that may see a key of the tile */
    const int64_t klast = (k0 + AK < T ? k0 + AK : T) - 1;
    const int64_t ilo = a.causal ? k0 : 0;
    const int64_t ihi = a.window > 0 && klast + a.window < T ? klast + a.window : T;

    for (int g = 0; g < a.grp; g++) {
        const int64_t h = kvh * a.grp + g;
        for (int64_t i0 = ilo - ilo % AQ; i0 < ihi; i0 += AQ) {
            __syncthreads();
            load_tile(Qs, LD, a.q + b * T * a.ldq + h * D, a.ldq, i0, T, D, Dp);
            load_tile(Os, LD, dout + b * T * C + h * D, C, i0, T, D, Dp);
#pragma unroll
            for (int rr = 0; rr < QW; rr++) { /* this warp's QW rows of lse, D_i, mask */
                const int r = warp * QW + rr;
                const int64_t i = i0 + r;
                float x = 0.0f;
                if (i < T) {
                    const float *orow = out + (b * T + i) * C + h * D, *drow = dout + (b * T + i) * C + h * D;
                    for (int d = lane; d < D; d += 32)
                        x += drow[d] * orow[d];
                }
                x = warp_sum(x);
                if (lane == 0) {
                    Ls[r] = i < T ? lse[(b * a.H + h) * T + i] : -INFINITY;
                    Ds[r] = x;
                    Mq[r] = mb && i < T ? mb[i] : 1;
                }
            }
            __syncthreads();
            const int64_t i = i0 + lane;
            const float li = Ls[lane], dli = Ds[lane];
            float s[KW], dp[KW];
#pragma unroll
            for (int kk = 0; kk < KW; kk++)
                s[kk] = dp[kk] = 0.0f;
            const float *qr = Qs + lane * LD, *orr = Os + lane * LD;
            const float *kw = Ks + warp * KW * Dp, *vw = Vs + warp * KW * Dp;
            for (int d = 0; d < Dp; d += 4) {
                const float4 qd = ld4(qr + d), od = ld4(orr + d);
#pragma unroll
                for (int kk = 0; kk < KW; kk++) {
                    s[kk] = dot4(qd, ld4(kw + kk * Dp + d), s[kk]);
                    dp[kk] = dot4(od, ld4(vw + kk * Dp + d), dp[kk]);
                }
            }
            float pz[KW], ds[KW];
#pragma unroll
            for (int kk = 0; kk < KW; kk++) {
                const int64_t j = k0 + warp * KW + kk;
                const bool vis = i < T && j < T && li != -INFINITY && visible(a, i, j, Mq[lane], mj[kk]);
                pz[kk] = ds[kk] = 0.0f;
                if (vis) {
                    const float p = expf(s[kk] * a.scale - li);
                    const float z =
                        a.drop.on
                            ? lp_cu_attn_drop_factor(a.drop, (uint64_t)(((b * a.H + h) * T + i) * T + j))
                            : 1.0f;
                    pz[kk] = z * p;
                    ds[kk] = p * (z * dp[kk] - dli) * a.scale;
                }
            }
            float *pw = Pz + warp * AQ * KW, *dw = Dz + warp * AQ * KW;
            st4(pw + lane * KW, pz[0], pz[1], pz[2], pz[3]);
            st4(dw + lane * KW, ds[0], ds[1], ds[2], ds[3]);
            __syncwarp();
            for (int ii = 0; ii < AQ; ii++) {
                const float4 p4 = ld4(pw + ii * KW), d4 = ld4(dw + ii * KW);
                const float pj[KW] = {p4.x, p4.y, p4.z, p4.w}, dj[KW] = {d4.x, d4.y, d4.z, d4.w};
                const float *qrow = Qs + ii * LD, *orow = Os + ii * LD;
#pragma unroll
                for (int t = 0; t < DPL; t++) {
                    const int d = lane + 32 * t;
                    const float qd = d < D ? qrow[d] : 0.0f, od = d < D ? orow[d] : 0.0f;
#pragma unroll
                    for (int kk = 0; kk < KW; kk++) {
                        gv[kk][t] += pj[kk] * od;
                        gk[kk][t] += dj[kk] * qd;
                    }
                }
            }
        }
    }
#pragma unroll
    for (int kk = 0; kk < KW; kk++) {
        const int64_t j = k0 + warp * KW + kk;
        if (j >= T)
            continue;
        float *rk = dk + (b * T + j) * a.ldkv + kvh * D, *rv = dv + (b * T + j) * a.ldkv + kvh * D;
#pragma unroll
        for (int t = 0; t < DPL; t++) {
            const int d = lane + 32 * t;
            if (d < D) {
                rk[d] = gk[kk][t];
                rv[d] = gv[kk][t];
            }
        }
    }
}

static size_t fwd_smem(int D)
{
    return ((size_t)AQ * pad4(D) + (size_t)AK * lane_ld(D) + (size_t)AK * pad4(D) + AW * AK * QW + AK) * 4;
}
static size_t dq_smem(int D)
{
    return ((size_t)2 * AQ * pad4(D) + (size_t)2 * AK * lane_ld(D) + AW * AK * QW + AK) * 4;
}
static size_t dkv_smem(int D)
{
    return ((size_t)2 * AK * pad4(D) + (size_t)2 * AQ * lane_ld(D) + 2 * AW * AQ * KW + 3 * AQ) * 4;
}

extern "C" lp_status lp_cu_attention_supports(const lp_attn_geom *g)
{
    lp_status st = lp_attention_geom_check(g, "cuda fused attention");
    if (st != LP_OK)
        return st;
    if (g->D > LP_CU_ATTN_MAX_D)
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda fused attention: head size D=%lld above %d",
                      (long long)g->D, LP_CU_ATTN_MAX_D);
    if (g->H > 65535 || g->B > 65535 || (g->T + AQ - 1) / AQ > INT32_MAX)
        return lp_err(LP_STATUS_UNSUPPORTED,
                      "cuda fused attention: B=%lld H=%lld T=%lld exceed one launch grid", (long long)g->B,
                      (long long)g->H, (long long)g->T);
    return LP_OK;
}

static attn_args make_args(const float *q, const float *k, const float *v, const int32_t *mask,
                           const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    attn_args a;
    a.q = q, a.k = k, a.v = v, a.mask = mask;
    a.T = g->T, a.H = g->H, a.ldq = g->ldq, a.ldkv = g->ldkv, a.window = g->window;
    a.D = (int)g->D, a.grp = (int)(g->H / g->Hkv);
    a.scale = lp_attn_scale(g);
    a.causal = g->causal, a.segments = g->segments && mask;
    a.drop = lp_cu_attn_drop_make(drop);
    return a;
}

/* launches kernel K<DPL> with smem bytes, opting in above the 48 KiB default */
#define ATTN_LAUNCH(KERNEL, DPLV, grid, smem, ...)                                                           \
    do {                                                                                                     \
        if ((smem) > 48 * 1024)                                                                              \
            (void)cudaFuncSetAttribute(KERNEL<DPLV>, cudaFuncAttributeMaxDynamicSharedMemorySize,            \
                                       (int)(smem));                                                         \
        LP_CU_LAUNCH(KERNEL<DPLV>, grid, ATHREADS, smem, lp_cu_nn_stream(), __VA_ARGS__);                    \
    } while (0)

#define ATTN_DISPATCH(KERNEL, dpl, grid, smem, ...)                                                          \
    switch (dpl) {                                                                                           \
    case 1:                                                                                                  \
        ATTN_LAUNCH(KERNEL, 1, grid, smem, __VA_ARGS__);                                                     \
        break;                                                                                               \
    case 2:                                                                                                  \
        ATTN_LAUNCH(KERNEL, 2, grid, smem, __VA_ARGS__);                                                     \
        break;                                                                                               \
    case 3:                                                                                                  \
        ATTN_LAUNCH(KERNEL, 3, grid, smem, __VA_ARGS__);                                                     \
        break;                                                                                               \
    case 4:                                                                                                  \
        ATTN_LAUNCH(KERNEL, 4, grid, smem, __VA_ARGS__);                                                     \
        break;                                                                                               \
    case 5:                                                                                                  \
        ATTN_LAUNCH(KERNEL, 5, grid, smem, __VA_ARGS__);                                                     \
        break;                                                                                               \
    case 6:                                                                                                  \
        ATTN_LAUNCH(KERNEL, 6, grid, smem, __VA_ARGS__);                                                     \
        break;                                                                                               \
    case 7:                                                                                                  \
        ATTN_LAUNCH(KERNEL, 7, grid, smem, __VA_ARGS__);                                                     \
        break;                                                                                               \
    default:                                                                                                 \
        ATTN_LAUNCH(KERNEL, 8, grid, smem, __VA_ARGS__);                                                     \
        break;                                                                                               \
    }

extern "C" void lp_cu_attention_fused_forward(float *out, float *lse, const float *q, const float *k,
                                              const float *v, const int32_t *mask, const lp_attn_geom *g,
                                              const lp_attn_dropout *drop)
{
    lp_status st = lp_cu_attention_supports(g);
    if (st != LP_OK) {
        lp_cu_nn_refuse("attention_fused_forward", st);
        return;
    }
    const attn_args a = make_args(q, k, v, mask, g, drop);
    const int dpl = (a.D + 31) / 32;
    const dim3 grid((unsigned)((g->T + AQ - 1) / AQ), (unsigned)g->H, (unsigned)g->B);
    const size_t smem = fwd_smem(a.D);
    ATTN_DISPATCH(attn_fwd_kernel, dpl, grid, smem, out, lse, a);
    (void)lp_cu_nn_launched("attention_fused_forward");
}

extern "C" void lp_cu_attention_fused_backward(float *dq, float *dk, float *dv, const float *dout,
                                               const float *out, const float *lse, const float *q,
                                               const float *k, const float *v, const int32_t *mask,
                                               const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    lp_status st = lp_cu_attention_supports(g);
    if (st != LP_OK) {
        lp_cu_nn_refuse("attention_fused_backward", st);
        return;
    }
    const attn_args a = make_args(q, k, v, mask, g, drop);
    const int dpl = (a.D + 31) / 32;
    const dim3 gq((unsigned)((g->T + AQ - 1) / AQ), (unsigned)g->H, (unsigned)g->B);
    const size_t sq = dq_smem(a.D);
    ATTN_DISPATCH(attn_dq_kernel, dpl, gq, sq, dq, dout, out, lse, a);
    if (lp_cu_nn_launched("attention_fused_backward (dq)") != LP_OK)
        return;
    const dim3 gk((unsigned)((g->T + AK - 1) / AK), (unsigned)g->Hkv, (unsigned)g->B);
    const size_t sk = dkv_smem(a.D);
    if (dpl <= 2 && (int64_t)gk.x * gk.y * gk.z >= ADKV_MANY_BLOCKS) {
        /* D <= 64: under the 48 KiB default of shared memory, no opt-in needed */
        void (*kern)(float *, float *, const float *, const float *, const float *, attn_args) =
            dpl == 1 ? attn_dkv_kernel<1, 4> : attn_dkv_kernel<2, 4>;
        LP_CU_LAUNCH(kern, gk, ATHREADS, sk, lp_cu_nn_stream(), dk, dv, dout, out, lse, a);
    } else {
        ATTN_DISPATCH(attn_dkv_kernel, dpl, gk, sk, dk, dv, dout, out, lse, a);
    }
    (void)lp_cu_nn_launched("attention_fused_backward (dk, dv)");
}
