/* Prefill / batched forward of a Q8_0, Q4_0 or Q4_1 weight as a tiled integer GEMM:
 * out (N,OC) = act (N, C/32 quantized blocks, qact.c) @ W^T + bias.
 *
 * Why not the GEMV loop (one row_dot per (weight row, activation row) pair): every pair
 * re-loads and re-unpacks its weight block and ends in a horizontal sum. Here 16 weight
 * rows are interleaved in a tile, block by block, so that one vector holds 4 consecutive
 * bytes of each of its rows (16 with AVX-512, 8 with AVX2: half a tile; one int32 lane
 * each). One `vpdpbusd` (or maddubs + madd) with 4 activation bytes broadcast then adds 4
 * products to each of those outputs; 8 such steps finish a 32-element block for one
 * activation row, the scales are applied per block in f32 and nothing is summed across
 * lanes: each lane is an output. Each weight vector is loaded once for MR activation rows,
 * and each activation broadcast feeds NV weight vectors (two tiles with AVX-512, both
 * halves of one with AVX2).
 *
 * Tile layout (ISA-independent, so one packing at load serves every level), per block of
 * 32 elements: f32 d[16], for Q4_1 f32 m[16], then the quants, 64 bytes per step (4 bytes
 * of each of the 16 rows):
 * - Q8_0: 8 steps, the signed bytes as stored (element 4g..4g+3 of each row in step g);
 * - Q4_0 / Q4_1: 4 steps of nibble bytes as stored (bytes 4j..4j+3 of the row's 16): the
 *   low nibbles are elements 4j..4j+3, the high ones 16+4j..: one load and two masks give
 *   two steps, and the tile is as small as the blocks (20 / 24 bytes a row-block vs 18 / 20).
 * Padding rows of the last tile are zero (scale 0). The weight value is d * q + m with q
 * taken unsigned by `vpdpbusd` / maddubs: Q4_0 q = nibble, m = -8 d; Q4_1 q = nibble,
 * m = the block's min; Q8_0 with VNNI q = w + 128 (an xor at load), m = -128 d. Without
 * VNNI a Q8_0 q stays signed (q + 128 times 127 would saturate maddubs' int16 pairs): |q|
 * goes in unsigned, its sign onto the activation, m = 0. So sum_k w x = sum_blocks
 * d d_a sum(q q_a) + m (d_a sum(q_a)), the last factor being the activation block's s;
 * with m = c d that is d (d_a sum(q q_a) + c s): one multiply fewer per block and row.
 *
 * Tiles come packed at load (w->tiles, lp_qweight_ggml_pack_tiles) and then serve decode
 * too (N = 1: the same bytes streamed once, 2 more per row-block, but no horizontal sums and
 * nibbles unpacked once per 16 rows: ~20 % less CPU per Q4_0 token than the GEMV loop); a
 * weight without them (a quantized LM head, a test's) is packed per call at N >=
 * LP_QGEMM_MIN_ROWS, per thread, a group of tiles at a time. Each thread takes a contiguous range of tiles (of weight rows, as the GEMV does) and
 * walks the activations in chunks that stay in L2 while each tile sits in L1. */
#include <omp.h>
#include <string.h>

#include "qdot.h"

enum { QT = 16 }; /* rows of a tile */

static bool packable(lp_ggml_type t)
{
    return t == LP_GGML_TYPE_Q8_0 || t == LP_GGML_TYPE_Q4_0 || t == LP_GGML_TYPE_Q4_1;
}

/* Bytes of one block of a tile: scales, then the quant steps. */
static int64_t tile_block_bytes(lp_ggml_type t)
{
    return t == LP_GGML_TYPE_Q8_0 ? 64 + 8 * 64 : t == LP_GGML_TYPE_Q4_0 ? 64 + 4 * 64 : 128 + 4 * 64;
}

/* Rows o0 .. o0+ob-1 (ob <= QT; the rest of the tile zero) of w packed into dst (nb blocks).
 * Plain C: it runs once per weight at load (and per call for a weight without tiles). */
static void pack_tile(uint8_t *dst, const lp_qweight *w, int64_t o0, int ob, int64_t nb)
{
    const lp_ggml_type t = w->gtype;
    const int64_t tb = tile_block_bytes(t), bytes = t == LP_GGML_TYPE_Q8_0 ? 34 : t == LP_GGML_TYPE_Q4_0 ? 18 : 20;
    const int64_t qoff = t == LP_GGML_TYPE_Q4_1 ? 128 : 64;
    if (ob < QT)
        memset(dst, 0, (size_t)(nb * tb));
    for (int r = 0; r < ob; r++) {
        const uint8_t *src = w->blocks + (o0 + r) * w->row_bytes;
        for (int64_t b = 0; b < nb; b++, src += bytes) {
            uint8_t *blk = dst + b * tb, *q = blk + qoff;
            float *dm = (float *)blk;
            dm[r] = lp_qd_f16(src);
            if (t == LP_GGML_TYPE_Q8_0) {
                for (int g = 0; g < 8; g++)
                    memcpy(q + 64 * g + 4 * r, src + 2 + 4 * g, 4);
            } else {
                const uint8_t *nib = src + (t == LP_GGML_TYPE_Q4_1 ? 4 : 2);
                if (t == LP_GGML_TYPE_Q4_1)
                    dm[QT + r] = lp_qd_f16(src + 2);
                for (int j = 0; j < 4; j++)
                    memcpy(q + 64 * j + 4 * r, nib + 4 * j, 4);
            }
        }
    }
}

size_t lp_qweight_ggml_tiles_nbytes(lp_ggml_type t, int64_t rows, int64_t cols)
{
    if (!packable(t) || rows <= 0 || cols <= 0 || cols % 32)
        return 0;
    return (size_t)((rows + QT - 1) / QT) * (size_t)(cols / 32) * (size_t)tile_block_bytes(t);
}

bool lp_qweight_ggml_tiles_only(lp_ggml_type t)
{
    return packable(t) && lp_kernels_isa() >= LP_ISA_AVX2;
}

void lp_qweight_ggml_block_from_tiles(const lp_qweight *w, int64_t row, int64_t b, uint8_t *dst)
{
    const lp_ggml_type t = w->gtype;
    const int64_t tb = tile_block_bytes(t), qoff = t == LP_GGML_TYPE_Q4_1 ? 128 : 64;
    const int r = (int)(row % QT);
    const uint8_t *blk = w->tiles + ((row / QT) * (w->cols / 32) + b) * tb, *q = blk + qoff;
    float dm[2 * QT];
    memcpy(dm, blk, (size_t)(t == LP_GGML_TYPE_Q4_1 ? 2 : 1) * QT * sizeof(float));
    /* the scales came from f16: back to f16 exactly */
    uint16_t h = lp_f32_to_f16(dm[r]);
    memcpy(dst, &h, 2);
    if (t == LP_GGML_TYPE_Q8_0) {
        for (int g = 0; g < 8; g++)
            memcpy(dst + 2 + 4 * g, q + 64 * g + 4 * r, 4);
        return;
    }
    uint8_t *nib = dst + 2;
    if (t == LP_GGML_TYPE_Q4_1) {
        h = lp_f32_to_f16(dm[QT + r]);
        memcpy(dst + 2, &h, 2);
        nib = dst + 4;
    }
    for (int j = 0; j < 4; j++)
        memcpy(nib + 4 * j, q + 64 * j + 4 * r, 4);
}

lp_status lp_qweight_ggml_pack_tiles(lp_qweight *q)
{
    if (!q || q->dtype != LP_DTYPE_GGML || !q->blocks || !packable(q->gtype))
        return LP_OK;
    const size_t n = lp_qweight_ggml_tiles_nbytes(q->gtype, q->rows, q->cols);
    uint8_t *tiles = n ? lp_alloc(n, LP_MEM_CATEGORY_QUANTIZED_WEIGHT, "prefill tiles") : NULL;
    if (!tiles)
        return lp_err(LP_STATUS_NO_MEMORY, "qgemm_ggml.c: no memory for the %zu bytes of prefill tiles", n);
    const int64_t nb = q->cols / 32, tile_bytes = nb * tile_block_bytes(q->gtype), ntiles = (q->rows + QT - 1) / QT;
    for (int64_t t = 0; t < ntiles; t++)
        pack_tile(tiles + t * tile_bytes, q, t * QT, (int)(q->rows - t * QT < QT ? q->rows - t * QT : QT), nb);
    lp_free(q->tiles);
    q->tiles = tiles;
    if (lp_qweight_ggml_tiles_only(q->gtype)) { /* the tiles hold every byte: not two copies */
        lp_free(q->mem);
        q->mem = tiles; /* the weight's one allocation now */
        q->blocks = NULL;
    }
    return LP_OK;
}

#if defined(__AVX2__)

#include "tile_simd.h"

#if defined(LP_TILE_AVX512) && defined(__AVX512VNNI__)
#define QG_VNNI 1
#define VI_DPBUSD _mm512_dpbusd_epi32
#elif !defined(LP_TILE_AVX512) && defined(__AVXVNNI__)
#define QG_VNNI 1
#define VI_DPBUSD _mm256_dpbusd_avx_epi32
#endif

/* Bytes ahead of a decode's tile reads to prefetch (see tile_kernel). */
#define DEC_PF 4096

/* Q8U: Q8_0 made unsigned (VNNI); Q8S: Q8_0 signed (maddubs); Q40, Q41: nibbles */
typedef enum { K_Q8U, K_Q8S, K_Q40, K_Q41 } kind;

static kind kind_of(lp_ggml_type t)
{
    if (t == LP_GGML_TYPE_Q4_0)
        return K_Q40;
    if (t == LP_GGML_TYPE_Q4_1)
        return K_Q41;
#if defined(QG_VNNI)
    return K_Q8U;
#else
    return K_Q8S;
#endif
}

static inline int32_t word(const int8_t *q, int g)
{
    int32_t v;
    memcpy(&v, q + 4 * g, 4);
    return v;
}

/* GCC reassociates a block's 8 integer adds into a tree summed at the end, keeping every
 * step's products live: with MR x NV accumulators that spills them all to the stack (AVX2:
 * ~40 stores and reloads per block). An empty asm taking each accumulator in and out after
 * its add keeps the chain in order and the accumulators in registers. */
#define IN_REG(x) __asm__("" : "+v"(x))

/* isum[v][r] += u (unsigned step, weight vector v) times step g of activation row r's
 * block b: one broadcast feeds the nv weight vectors. */
#if defined(QG_VNNI)
#define STEP_U(isum, u, g)                                                                                             \
    for (int r = 0; r < mr; r++) {                                                                                     \
        const vint x_ = VI_SET1(word(a[r * nb + b].q, (g)));                                                           \
        for (int v = 0; v < nv; v++)                                                                                   \
            isum[v][r] = VI_DPBUSD(isum[v][r], (u)[v], x_);                                                            \
    }
#else
/* int16 sums: each maddubs pair is at most 2 * 15 * 127 for nibbles, so the 8 steps of a
 * block add up in int16 (30480) and widen once (see tile_kernel) */
#define STEP_U(isum, u, g)                                                                                             \
    for (int r = 0; r < mr; r++) {                                                                                     \
        const vint x_ = VI_SET1(word(a[r * nb + b].q, (g)));                                                           \
        for (int v = 0; v < nv; v++) {                                                                                 \
            isum[v][r] = VI_ADD16(isum[v][r], VI_MADDUBS((u)[v], x_));                                                 \
            IN_REG(isum[v][r]);                                                                                        \
        }                                                                                                              \
    }
#endif

/* acc[v][r] (VL outputs of activation row r < mr, weight vector v < nv) over nb blocks.
 * Vector v's quants and scales start vs * v bytes after the group's (tile) start: the next
 * tile (AVX-512) or the tile's second half (AVX2). The rows of a are nb blocks apart. mr,
 * nv and k are constants at every call site (see the KIND_FNS functions). */
static inline __attribute__((always_inline)) void tile_kernel(vflt acc[NV][MR], const uint8_t *tile, int64_t vs,
                                                              const lp_q8a *a, int64_t nb, int mr, int nv, kind k)
{
    const int64_t tb = k == K_Q8U || k == K_Q8S ? 64 + 8 * 64 : k == K_Q40 ? 64 + 4 * 64 : 128 + 4 * 64;
    const int64_t qoff = k == K_Q41 ? 128 : 64;
    for (int v = 0; v < nv; v++)
        for (int r = 0; r < mr; r++)
            acc[v][r] = VF_ZERO();
    for (int64_t b = 0; b < nb; b++) {
        vint isum[NV][MR];
        const uint8_t *blk = tile + b * tb;
        /* decode of a nibble weight (one activation row, one tile: see lp_k_qgemm_ggml)
         * spends more ops per byte than Q8_0, and the hardware prefetchers stop at each
         * 4 KiB page: asking for the tile's bytes DEC_PF ahead took ~5 % more off a Qwen2.5-0.5B
         * Q4_0 token on Zen 5 (bench_tg CPU time 9.4-9.6 -> 8.9-9.0 ms; 1.5 / 3 KiB ahead:
         * 9.6 / 9.2). Q8_0 lost 8 % with it; prefill reuses each tile from cache. */
        if (mr == 1 && (k == K_Q40 || k == K_Q41))
            for (int v = 0; v < ((int)VL == (int)QT ? nv : 1); v++) /* tiles streamed side by side */
                for (int64_t c = 0; c < tb; c += 64)
                    _mm_prefetch((const char *)(blk + v * vs + DEC_PF + c), _MM_HINT_T0);
        for (int v = 0; v < nv; v++)
            for (int r = 0; r < mr; r++)
                isum[v][r] = VI_ZERO();
        if (k == K_Q40 || k == K_Q41) {
            const vint m4 = VI_SET1_8(0x0F);
            for (int j = 0; j < 4; j++) {
                vint lo[NV], hi[NV];
                for (int v = 0; v < nv; v++) {
                    const vint p = VI_LOAD(blk + v * vs + qoff + 64 * j);
                    lo[v] = VI_AND(p, m4), hi[v] = VI_AND(VI_SRLI16(p, 4), m4);
                }
                STEP_U(isum, lo, j);
                STEP_U(isum, hi, j + 4);
            }
#if !defined(QG_VNNI)
            for (int v = 0; v < nv; v++)
                for (int r = 0; r < mr; r++)
                    isum[v][r] = VI_MADD1(isum[v][r]);
#endif
        } else if (k == K_Q8U) {
#if defined(QG_VNNI)
            for (int g = 0; g < 8; g++) {
                vint u[NV];
                for (int v = 0; v < nv; v++)
                    u[v] = VI_XOR(VI_LOAD(blk + v * vs + qoff + 64 * g), VI_SET1_8((char)0x80)); /* w + 128 */
                STEP_U(isum, u, g);
            }
#endif
        } else {
            /* signed Q8_0: |q| times x with q's sign, widened every step (2 * 128 * 127
             * fits int16, two of them do not) */
            for (int g = 0; g < 8; g++)
                for (int v = 0; v < nv; v++) {
                    const vint s = VI_LOAD(blk + v * vs + qoff + 64 * g), u = VI_ABS8(s);
                    const vneg neg = VI_NEGMASK8(s);
                    for (int r = 0; r < mr; r++) {
                        isum[v][r] = VI_ADD32(
                            isum[v][r], VI_MADD1(VI_MADDUBS(u, VI_FLIP8(VI_SET1(word(a[r * nb + b].q, g)), neg))));
                        IN_REG(isum[v][r]);
                    }
                }
        }
        for (int v = 0; v < nv; v++) {
            const float *dm = (const float *)(blk + v * vs);
            const vflt d = VF_LOAD(dm);
            if (k == K_Q41) {
                const vflt m = VF_LOAD(dm + QT);
                for (int r = 0; r < mr; r++) {
                    const lp_q8a *x = a + r * nb + b;
                    acc[v][r] = VF_FMA(VI_CVT(isum[v][r]), VF_MUL(d, VF_SET1(x->d)), acc[v][r]);
                    acc[v][r] = VF_FMA(m, VF_SET1(x->s), acc[v][r]);
                }
            } else if (k == K_Q8S) { /* m = 0 */
                for (int r = 0; r < mr; r++)
                    acc[v][r] = VF_FMA(VI_CVT(isum[v][r]), VF_MUL(d, VF_SET1(a[r * nb + b].d)), acc[v][r]);
            } else {
                /* m = c d: d (d_a sum(q q_a) + c s) */
                const float c = k == K_Q40 ? -8.0f : -128.0f;
                for (int r = 0; r < mr; r++) {
                    const lp_q8a *x = a + r * nb + b;
                    acc[v][r] = VF_FMA(d, VF_FMA(VI_CVT(isum[v][r]), VF_SET1(x->d), VF_SET1(c * x->s)), acc[v][r]);
                }
            }
        }
    }
}

/* Activation rows i .. i+mr-1 against the nv weight vectors of a group, into out (+ bias,
 * both from the group's first column; ob[v] of vector v's VL columns are real). */
static inline __attribute__((always_inline)) void run_rows(float *out, int64_t OC, const uint8_t *tile, int64_t vs,
                                                           const lp_q8a *a, int64_t nb, int mr, int nv, kind k,
                                                           const vflt *bias, const int *ob)
{
    vflt acc[NV][MR];
    tile_kernel(acc, tile, vs, a, nb, mr, nv, k);
    for (int v = 0; v < nv; v++)
        for (int r = 0; r < mr; r++)
            lp_tile_store(out + r * OC + v * VL, VF_ADD(acc[v][r], bias[v]), ob[v]);
}

/* Per kind: MR rows or the tail (mr < MR), over NV vectors or one (the last group), all
 * as constants. */
#define RUN(mr_, nv_, K) run_rows(out, OC, tile, vs, a, nb, (mr_) < MR ? (mr_) : 1, nv_, K, bias, ob)
#define KIND_FNS(K)                                                                                                    \
    static void group_##K(float *out, int64_t OC, const uint8_t *tile, int64_t vs, const lp_q8a *a, int64_t nb,      \
                          int mr, int nv, const vflt *bias, const int *ob)                                            \
    {                                                                                                                  \
        if (nv == NV && mr == MR) {                                                                                    \
            run_rows(out, OC, tile, vs, a, nb, MR, NV, K, bias, ob);                                                   \
            return;                                                                                                    \
        }                                                                                                              \
        if (mr == MR) {                                                                                                \
            run_rows(out, OC, tile, vs, a, nb, MR, 1, K, bias, ob);                                                    \
            return;                                                                                                    \
        }                                                                                                              \
        if (nv == NV) {                                                                                                \
            switch (mr) {                                                                                              \
            case 1: RUN(1, NV, K); break;                                                                              \
            case 2: RUN(2, NV, K); break;                                                                              \
            case 3: RUN(3, NV, K); break;                                                                              \
            case 4: RUN(4, NV, K); break;                                                                              \
            case 5: RUN(5, NV, K); break;                                                                              \
            case 6: RUN(6, NV, K); break;                                                                              \
            default: RUN(7, NV, K); break;                                                                             \
            }                                                                                                          \
            return;                                                                                                    \
        }                                                                                                              \
        switch (mr) {                                                                                                  \
        case 1: RUN(1, 1, K); break;                                                                                   \
        case 2: RUN(2, 1, K); break;                                                                                   \
        case 3: RUN(3, 1, K); break;                                                                                   \
        case 4: RUN(4, 1, K); break;                                                                                   \
        case 5: RUN(5, 1, K); break;                                                                                   \
        case 6: RUN(6, 1, K); break;                                                                                   \
        default: RUN(7, 1, K); break;                                                                                  \
        }                                                                                                              \
    }
#if defined(QG_VNNI)
KIND_FNS(K_Q8U)
#else
KIND_FNS(K_Q8S)
#endif
KIND_FNS(K_Q40)
KIND_FNS(K_Q41)
#undef RUN

typedef void (*group_fn)(float *, int64_t, const uint8_t *, int64_t, const lp_q8a *, int64_t, int, int, const vflt *,
                         const int *);

bool lp_k_qgemm_ggml_fits(const lp_qweight *w, int64_t N)
{
    return (N >= LP_QGEMM_MIN_ROWS || w->tiles) && packable(w->gtype);
}

lp_status lp_k_qgemm_ggml(float *out, const lp_q8a *act, const lp_qweight *w, const float *bias, int64_t N,
                          bool parallel)
{
    const int64_t OC = w->rows, nb = w->cols / 32, ntiles = (OC + QT - 1) / QT;
    const size_t tile_bytes = (size_t)(nb * tile_block_bytes(w->gtype));
    /* a group of tiles per pass over the activations: about 1 MiB (a tile of a very wide
     * weight alone); without w->tiles, each thread packs a group into its own buffer */
    const int64_t group = tile_bytes >= ((size_t)1 << 20) ? 1 : (int64_t)(((size_t)1 << 20) / tile_bytes);
    /* activation rows per pass over a group: their blocks (nb * 40 bytes a row) about 256 KiB */
    int64_t chunk = ((int64_t)1 << 18) / (nb * (int64_t)sizeof(lp_q8a));
    chunk = chunk < MR ? MR : chunk - chunk % MR;
    const int nth = parallel ? omp_get_max_threads() : 1;
    const int64_t per = (ntiles + nth - 1) / nth < group ? (ntiles + nth - 1) / nth : group;
    uint8_t *buf = NULL;
    if (!w->tiles &&
        !(buf = lp_alloc((size_t)nth * (size_t)per * tile_bytes, LP_MEM_CATEGORY_TEMPORARY, "packed weight tiles")))
        return LP_STATUS_NO_MEMORY;
    const kind k = kind_of(w->gtype);
    const group_fn run = k == K_Q40 ? group_K_Q40 : k == K_Q41 ? group_K_Q41 :
#if defined(QG_VNNI)
                                                                 group_K_Q8U;
#else
                                                                 group_K_Q8S;
#endif
    /* a group: NV vectors of VL rows (two tiles, or one AVX2 half-tile or two); vector v
     * starts vs bytes after vector v - 1 */
    const int GR = (int)NV * (int)VL;
    _Static_assert((int)MR <= 8, "the tail switch goes up to 7 rows");
    _Static_assert((int)NV * (int)VL <= (int)QT || (int)VL == (int)QT, "a group is whole tiles or halves of one");
    const int64_t vs = (int)VL == (int)QT ? (int64_t)tile_bytes : 4 * VL;
    /* decode (N = 1) walks one tile at a time: two tiles side by side (AVX-512's group) are
     * two streams a tile apart, which one core's prefetchers fed ~12-15 % slower than one
     * (bench_tg, Qwen2.5-0.5B on Zen 5, CPU time per token: Q4_0 10.6-11.1 -> 9.0-9.2 ms,
     * Q8_0 16.6-16.8 -> 14.6 ms); with one row the broadcast shared by two tiles saves
     * little. AVX2's group is one tile already. */
    const int gr = N == 1 ? (int)QT : GR;
#pragma omp parallel num_threads(nth)
    {
        int64_t lo, hi;
        lp_k_split(ntiles, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        uint8_t *mine = buf ? buf + (size_t)omp_get_thread_num() * (size_t)per * tile_bytes : NULL;
        for (int64_t t0 = lo; t0 < hi; t0 += per) {
            const int64_t t1 = hi - t0 < per ? hi : t0 + per;
            const uint8_t *base = w->tiles ? w->tiles + (size_t)t0 * tile_bytes : mine;
            if (!w->tiles)
                for (int64_t t = t0; t < t1; t++)
                    pack_tile(mine + (size_t)(t - t0) * tile_bytes, w, t * QT,
                              (int)(OC - t * QT < QT ? OC - t * QT : QT), nb);
            for (int64_t i0 = 0; i0 < N; i0 += chunk) {
                const int64_t i1 = N - i0 < chunk ? N : i0 + chunk;
                for (int64_t rel = 0; rel < (t1 - t0) * QT; rel += gr) {
                    const uint8_t *tile = base + (size_t)(rel / QT) * tile_bytes + (size_t)(rel % QT / VL * 4 * VL);
                    const int64_t o0 = t0 * QT + rel;
                    if (o0 >= OC)
                        break;
                    /* the vectors whose rows exist (this thread's tiles, the weight's rows) */
                    const int64_t rows_left = (t1 - t0) * QT - rel < OC - o0 ? (t1 - t0) * QT - rel : OC - o0;
                    int ob[NV];
                    vflt vb[NV];
                    const int nv = lp_tile_group_bias(vb, ob, bias, o0, rows_left, gr);
                    int64_t i = i0;
                    for (; i + MR <= i1; i += MR)
                        run(out + i * OC + o0, OC, tile, vs, act + i * nb, nb, MR, nv, vb, ob);
                    if (i < i1)
                        run(out + i * OC + o0, OC, tile, vs, act + i * nb, nb, (int)(i1 - i), nv, vb, ob);
                }
            }
        }
    }
    lp_free(buf);
    return LP_OK;
}

#else /* no AVX2: the GEMV loop serves every N */

bool lp_k_qgemm_ggml_fits(const lp_qweight *w, int64_t N)
{
    (void)w, (void)N;
    return false;
}

lp_status lp_k_qgemm_ggml(float *out, const lp_q8a *act, const lp_qweight *w, const float *bias, int64_t N,
                          bool parallel)
{
    (void)out, (void)act, (void)bias, (void)N, (void)parallel;
    return lp_err(LP_STATUS_UNSUPPORTED, "qgemm_ggml.c: the tiled GEMM of %s needs AVX2",
                  lp_ggml_type_traits_get((uint32_t)w->gtype)->name);
}

#endif
