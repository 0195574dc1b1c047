/* int8 inference GEMM with per-row scales (`--dtype int8` / `--quantize int8`):
 * out (N,OC) = inp (N,C) @ W^T + bias, W int8 with one f32 scale per output row (the LoRA
 * int8 base's format, lp_qweight_quantize LP_DTYPE_INT8, repacked once at load), each
 * activation row quantized per call with one scale per row (token).
 *
 * Why per row and not Q8_0's per 32-block scales (qgemm_ggml.c): a block scale costs two
 * f32 FMAs per 8 `vpdpbusd`, and on Zen 5 those share the integer dot product's two pipes
 * (bench/int8/README.md: a ceiling of 826 of 1032 int8 GOP/s). With one scale per row on
 * both sides the int8 products are summed in int32 over all of C and each output is scaled
 * once: out = fma((float)sum, scale[o] * d[i], bias[o]). The sum is exact (|sum| <=
 * 127 * 63 * C < 2^31 for C <= LP_INT8_MAX_COLS, offset included), so every level's result
 * equals the reference bit for bit.
 *
 * Tiles (lp_qweight_quantize_int8_tiles): 16 rows interleaved 4 bytes at a time, so one
 * vector holds 4 consecutive int8 of each of 16 (AVX-512) or 8 (AVX2: half a tile) rows, one
 * int32 lane each; one broadcast of 4 activation bytes feeds NV weight vectors, each weight
 * vector MR activation rows; nothing is summed across lanes.
 *
 * Both sides are 7-bit: weights in [-63, 63] (LP_INT8_TILE_QMAX), activations in [-63, 63]
 * (LP_INT8_ACT_QMAX, one bit fewer than the weights of lp_qweight_quantize, as PyTorch's
 * fbgemm drops the activations' bit: reduce_range). On every SIMD level the activations are
 * stored as x + 64 (u8, at most 127) and the weights stay signed; sum (x + 64) w = sum x w +
 * 64 sum_k w, and the row sums of w come with the tiles, so one shift and subtract per
 * output vector undoes the offset.
 * - VNNI (`vpdpbusd`, the avx512bf16 level): one instruction per 4 products a lane.
 * - AVX2 and AVX-512 without VNNI: `pmaddubsw` gives pairs of products in int16; a pair is
 *   at most 2 * 127 * 63 = 16002, so the pairs of two steps add in int16 (32004) before one
 *   `pmaddwd` by 1 widens them to int32 and one add accumulates: 5 instructions per 64
 *   products a lane (3 on the multiply pipes). History on Zen 3 (bench/int8/README.md):
 *   8-bit weights with their sign moved onto x (`psignb`, 4 per 32) ran at 0.87-0.97x
 *   PyTorch's int8; 7-bit weights, 8-bit activations (3 per 32) at 1.17-1.31x.
 * - baseline: plain C over the same tiles, x signed. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "qdot.h"

enum { QT = LP_I8_QT, HDR = LP_I8_HDR };

size_t lp_qweight_int8_tiles_nbytes(int64_t rows, int64_t cols)
{
    if (rows <= 0 || cols <= 0 || cols % 32 || cols > LP_INT8_MAX_COLS)
        return 0;
    return (size_t)((rows + QT - 1) / QT) * lp_k_int8_tile_bytes(cols);
}

/* Repacks q's rows (codes within LP_INT8_TILE_QMAX) into the tiles, which replace them. */
static lp_status pack_tiles(lp_qweight *q)
{
    const int64_t C = q->cols;
    const size_t n = lp_qweight_int8_tiles_nbytes(q->rows, C), tb = lp_k_int8_tile_bytes(C);
    uint8_t *tiles = lp_alloc(n, LP_MEM_CATEGORY_QUANTIZED_WEIGHT, "int8 tiles");
    if (!tiles)
        return lp_err(LP_STATUS_NO_MEMORY, "i8gemm.c: no memory for the %zu bytes of int8 tiles", n);
    memset(tiles, 0, n); /* padding rows: scale 0, sum 0, bytes 0 */
    for (int64_t o = 0; o < q->rows; o++) {
        uint8_t *t = tiles + (size_t)(o / QT) * tb;
        const int r = (int)(o % QT);
        const int8_t *src = q->q + o * C;
        int32_t s = 0;
        for (int64_t k = 0; k < C; k++)
            s += src[k];
        memcpy(t + 4 * r, &q->scale[o], 4);
        memcpy(t + 64 + 4 * r, &s, 4);
        for (int64_t g = 0; g < C / 4; g++)
            memcpy(t + HDR + 64 * g + 4 * r, src + 4 * g, 4);
    }
    lp_free(q->mem); /* the tiles hold every byte: not two copies */
    q->mem = q->tiles = tiles;
    q->q = NULL;
    q->scale = NULL;
    return LP_OK;
}

lp_status lp_qweight_quantize_int8_tiles(lp_qweight *q, const float *w, int64_t rows, int64_t cols, const char *name)
{
    memset(q, 0, sizeof *q);
    if (rows > 0 && !lp_qweight_int8_tiles_nbytes(rows, cols))
        return lp_err(LP_STATUS_INVALID_ARG,
                      "i8gemm.c: %s: an int8 weight of %lld columns cannot be tiled (a multiple of 32, at most %d)",
                      name ? name : "weight", (long long)cols, LP_INT8_MAX_COLS);
    lp_status st = lp_k_qweight_quantize_int8(q, w, rows, cols, LP_INT8_TILE_QMAX, name);
    if (st == LP_OK && (st = pack_tiles(q)) != LP_OK)
        lp_qweight_free(q);
    return st;
}

static lp_status check(const lp_qweight *w, int64_t N, const char *op)
{
    if (!w || w->dtype != LP_DTYPE_INT8 || !w->tiles || !lp_qweight_int8_tiles_nbytes(w->rows, w->cols) || N < 0)
        return lp_err(LP_STATUS_INVALID_ARG, "i8gemm.c: %s needs an int8 weight packed into tiles", op);
    return LP_OK;
}

lp_status lp_k_int8_gemm_ref(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N)
{
    lp_status st = check(w, N, "int8_gemm_ref");
    if (st)
        return st;
    const int64_t C = w->cols, OC = w->rows;
    int8_t *xq = lp_alloc((size_t)C, LP_MEM_CATEGORY_TEMPORARY, "quantized activation row");
    if (!xq)
        return LP_STATUS_NO_MEMORY;
    for (int64_t i = 0; i < N; i++) {
        const float d = lp_k_quantize_i8(xq, inp + i * C, C, LP_INT8_ACT_QMAX, 0);
        for (int64_t o = 0; o < OC; o++) {
            int32_t s = 0;
            for (int64_t k = 0; k < C; k++)
                s += (int32_t)xq[k] * lp_k_int8_tile_q(w, o, k);
            out[i * OC + o] = fmaf((float)s, lp_k_int8_tile_scale(w, o) * d, bias ? bias[o] : 0.0f);
        }
    }
    lp_free(xq);
    return LP_OK;
}

#if defined(__AVX2__)

/* the 4 bytes of step g */
static inline int32_t word(const int8_t *q, int64_t g)
{
    int32_t v;
    memcpy(&v, q + 4 * g, 4);
    return v;
}

#include "tile_simd.h"

#if defined(LP_TILE_AVX512) && defined(__AVX512VNNI__)
#define I8_VNNI 1
/* acc += u8 a times s8 b, 4 at a time: as asm, since GCC 12-14 copy every accumulator of
 * the intrinsic twice per step (a register move chain on each dot product's dependency) */
#define VI_DPBUSD_ACC(acc, a, b) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b))
#elif !defined(LP_TILE_AVX512) && defined(__AVXVNNI__)
#define I8_VNNI 1
#define VI_DPBUSD_ACC(acc, a, b) ((acc) = _mm256_dpbusd_avx_epi32((acc), (a), (b)))
#endif

/* Keeps each accumulator's chain in order and in a register (GCC otherwise reassociates
 * the step adds and spills; see qgemm_ggml.c). */
#define IN_REG(x) __asm__("" : "+v"(x))

/* acc (int32 lanes) += the 8 products a lane of two steps, u8 a0 by s8 b0 and a1 by b1: two
 * vpdpbusd, or two pmaddubsw added in int16 (each pair of products is at most 2 * 127 * 63
 * = 16002, two of them 32004: both sides are 7-bit), pmaddwd by 1 and one add. */
#if defined(I8_VNNI)
#define I8_STEP2(acc, a0, b0, a1, b1)                                                                        \
    do {                                                                                                     \
        VI_DPBUSD_ACC(acc, a0, b0);                                                                          \
        VI_DPBUSD_ACC(acc, a1, b1);                                                                          \
    } while (0)
#else
#define I8_STEP2(acc, a0, b0, a1, b1)                                                                        \
    do {                                                                                                     \
        (acc) = VI_ADD32((acc), VI_MADD1(VI_ADD16(VI_MADDUBS((a0), (b0)), VI_MADDUBS((a1), (b1)))));         \
        IN_REG(acc);                                                                                         \
    } while (0)
#endif

/* Activation rows 0 .. mr-1 of x (quantized, C bytes apart; d their scales) against the nv
 * weight vectors starting at `base` (vector v's header and steps vs bytes after v - 1's):
 * out rows OC apart, ob[v] of vector v's VL outputs real. mr and nv are constants at every
 * call site (run_group). */
static inline __attribute__((always_inline)) void tile_rows(float *out, int64_t OC, const uint8_t *base, int64_t vs,
                                                            const int8_t *x, const float *d, int64_t C, int mr,
                                                            int nv, const vflt *bias, const int *ob)
{
    vint isum[NV][MR];
    _Pragma("GCC unroll 8")
    for (int v = 0; v < nv; v++)
        _Pragma("GCC unroll 8")
        for (int r = 0; r < mr; r++)
            isum[v][r] = VI_ZERO();
    const uint8_t *p = base + HDR;
    for (int64_t g = 0; g < C / 4; g += 2, p += 128) { /* two steps of 4 columns */
        vint w0[NV], w1[NV];
        _Pragma("GCC unroll 8")
        for (int v = 0; v < nv; v++) {
            w0[v] = VI_LOAD(p + v * vs);
            w1[v] = VI_LOAD(p + 64 + v * vs);
        }
        _Pragma("GCC unroll 8")
        for (int r = 0; r < mr; r++) { /* x + 64: unsigned */
            const vint x0 = VI_SET1(word(x + r * C, g)), x1 = VI_SET1(word(x + r * C, g + 1));
            _Pragma("GCC unroll 8")
            for (int v = 0; v < nv; v++)
                I8_STEP2(isum[v][r], x0, w0[v], x1, w1[v]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int v = 0; v < nv; v++) {
        const vflt sw = VF_LOAD((const float *)(base + v * vs));
        const vint corr = VI_SLLI32(VI_LOAD(base + 64 + v * vs), 6); /* 64 sum_k w */
        _Pragma("GCC unroll 8")
        for (int r = 0; r < mr; r++) {
            const vint s = VI_SUB32(isum[v][r], corr);
            lp_tile_store(out + r * OC + v * VL, VF_FMA(VI_CVT(s), VF_MUL(sw, VF_SET1(d[r])), bias[v]), ob[v]);
        }
    }
}

/* One function per (rows, vectors), each with both as constants: in one function with a
 * switch GCC kept the accumulators on the stack. */
typedef void (*rows_fn)(float *, int64_t, const uint8_t *, int64_t, const int8_t *, const float *, int64_t,
                        const vflt *, const int *);
#define ROWS_FN(mr_, nv_)                                                                                              \
    static void rows_##mr_##_##nv_(float *out, int64_t OC, const uint8_t *base, int64_t vs, const int8_t *x,         \
                                   const float *d, int64_t C, const vflt *bias, const int *ob)                        \
    {                                                                                                                  \
        tile_rows(out, OC, base, vs, x, d, C, (mr_) < MR ? (mr_) : MR, nv_, bias, ob);                                 \
    }
ROWS_FN(1, 1) ROWS_FN(2, 1) ROWS_FN(3, 1) ROWS_FN(4, 1) ROWS_FN(5, 1) ROWS_FN(6, 1)
ROWS_FN(1, 2) ROWS_FN(2, 2) ROWS_FN(3, 2) ROWS_FN(4, 2) ROWS_FN(5, 2) ROWS_FN(6, 2)
#undef ROWS_FN
static const rows_fn rows_fns[2][6] = {{rows_1_1, rows_2_1, rows_3_1, rows_4_1, rows_5_1, rows_6_1},
                                       {rows_1_2, rows_2_2, rows_3_2, rows_4_2, rows_5_2, rows_6_2}};
_Static_assert((int)MR <= 6 && (int)NV == 2, "rows_fns covers up to 6 rows and 1 or 2 vectors");

static inline void run_group(float *out, int64_t OC, const uint8_t *base, int64_t vs, const int8_t *x, const float *d,
                             int64_t C, int mr, int nv, const vflt *bias, const int *ob)
{
    rows_fns[nv - 1][mr - 1](out, OC, base, vs, x, d, C, bias, ob);
}

/* Threads take contiguous ranges of tiles; each walks the activations in chunks that stay
 * in L2 while a group of tiles (about 1 MiB) is reused from cache (as qgemm_ggml.c). */
static void gemm_tiles(float *out, const int8_t *xq, const float *xd, const lp_qweight *w, const float *bias, int64_t N,
                       bool par)
{
    const int64_t OC = w->rows, C = w->cols, ntiles = (OC + QT - 1) / QT;
    const size_t tb = lp_k_int8_tile_bytes(C);
    const int64_t group = tb >= ((size_t)1 << 20) ? 1 : (int64_t)(((size_t)1 << 20) / tb);
    int64_t chunk = ((int64_t)1 << 18) / C;
    chunk = chunk < MR ? MR : chunk - chunk % MR;
    const int GR = (int)NV * (int)VL;
    _Static_assert((int)NV * (int)VL <= (int)QT || (int)VL == (int)QT, "a group is whole tiles or halves of one");
    /* AVX-512: vector v is the next tile; AVX2: the tile's second half (32 bytes on) */
    const int64_t vs = (int)VL == (int)QT ? (int64_t)tb : 4 * VL;
    /* decode walks one tile at a time (one stream for the prefetchers, as qgemm_ggml.c) */
    const int gr = N == 1 ? (int)QT : GR;
#pragma omp parallel num_threads(par ? omp_get_max_threads() : 1)
    {
        int64_t lo, hi;
        lp_k_split(ntiles, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int64_t t0 = lo; t0 < hi; t0 += group) {
            const int64_t t1 = hi - t0 < group ? hi : t0 + group;
            const uint8_t *tiles = w->tiles + (size_t)t0 * tb;
            for (int64_t i0 = 0; i0 < N; i0 += chunk) {
                const int64_t i1 = N - i0 < chunk ? N : i0 + chunk;
                for (int64_t rel = 0; rel < (t1 - t0) * QT; rel += gr) {
                    const int64_t o0 = t0 * QT + rel;
                    if (o0 >= OC)
                        break;
                    const uint8_t *base = tiles + (size_t)(rel / QT) * tb + (size_t)(rel % QT / VL * 4 * VL);
                    const int64_t rows_left = (t1 - t0) * QT - rel < OC - o0 ? (t1 - t0) * QT - rel : OC - o0;
                    int ob[NV];
                    vflt vb[NV];
                    const int nv = lp_tile_group_bias(vb, ob, bias, o0, rows_left, gr);
                    int64_t i = i0;
                    for (; i + MR <= i1; i += MR)
                        run_group(out + i * OC + o0, OC, base, vs, xq + i * C, xd + i, C, MR, nv, vb, ob);
                    if (i < i1)
                        run_group(out + i * OC + o0, OC, base, vs, xq + i * C, xd + i, C, (int)(i1 - i), nv, vb, ob);
                }
            }
        }
    }
}

#else /* baseline: plain C over the tiles, 16 rows of a tile at a time */

static void gemm_tiles(float *out, const int8_t *xq, const float *xd, const lp_qweight *w, const float *bias, int64_t N,
                       bool par)
{
    const int64_t OC = w->rows, C = w->cols, ntiles = (OC + QT - 1) / QT;
    const size_t tb = lp_k_int8_tile_bytes(C);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t t = 0; t < ntiles; t++) {
        const uint8_t *tile = w->tiles + (size_t)t * tb;
        for (int64_t i = 0; i < N; i++) {
            const int8_t *x = xq + i * C;
            int32_t s[QT] = {0};
            for (int64_t g = 0; g < C / 4; g++) {
                const int8_t *q = (const int8_t *)(tile + HDR + 64 * g);
                for (int r = 0; r < QT; r++)
                    for (int j = 0; j < 4; j++)
                        s[r] += (int32_t)x[4 * g + j] * q[4 * r + j];
            }
            for (int r = 0; r < QT && t * QT + r < OC; r++) {
                const int64_t o = t * QT + r;
                float sw;
                memcpy(&sw, tile + 4 * r, 4);
                out[i * OC + o] = fmaf((float)s[r], sw * xd[i], bias ? bias[o] : 0.0f);
            }
        }
    }
}

#endif

lp_status lp_k_int8_gemm(float *out, const float *inp, const lp_qweight *w, const float *bias, int64_t N)
{
    lp_status st = check(w, N, "int8_gemm");
    if (st || N == 0)
        return st;
    const int64_t C = w->cols;
    /* one block: the row scales, then the rows' bytes */
    uint8_t *buf = lp_alloc(lp_k_int8_gemm_scratch_nbytes(N, C), LP_MEM_CATEGORY_TEMPORARY, "quantized activations");
    if (!buf)
        return LP_STATUS_NO_MEMORY;
    float *xd = (float *)buf;
    int8_t *xq = (int8_t *)(buf + (size_t)N * sizeof(float));
#if defined(__AVX2__)
    const uint8_t off = 64; /* vpdpbusd and pmaddubsw take the activations unsigned */
#else
    const uint8_t off = 0;
#endif
    const bool par = (double)w->rows * (double)C >= 65536.0;
#pragma omp parallel for schedule(static) if (par && N > 1)
    for (int64_t i = 0; i < N; i++)
        xd[i] = lp_k_quantize_i8(xq + i * C, inp + i * C, C, LP_INT8_ACT_QMAX, off);
    gemm_tiles(out, xq, xd, w, bias, N, par);
    lp_free(buf);
    return LP_OK;
}
