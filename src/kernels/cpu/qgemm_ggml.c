/* Prefill / batched forward of a Q8_0, Q4_0 or Q4_1 weight as a tiled integer GEMM:
 * out (N,OC) = act (N, C/32 quantized blocks, qact.c) @ W^T + bias.
 *
 * Why not the GEMV loop (one row_dot per (weight row, activation row) pair): every pair
 * re-loads and re-unpacks its weight block and ends in a horizontal sum. Here NR weight
 * rows (16 with AVX-512, 8 with AVX2: one int32 lane each) are packed into a tile, block
 * by block, so that one vector holds 4 consecutive bytes of each of the NR rows. One
 * `vpdpbusd` (or maddubs + madd) with 4 activation bytes broadcast then adds 4 products to
 * each of NR outputs; 8 such steps finish a 32-element block for NR outputs of one
 * activation row, the scales are applied per block in f32 and nothing is summed across
 * lanes: each lane is an output. Each weight vector is loaded once for MR activation
 * rows.
 *
 * Packed block (per tile, per 32-element block): f32 d[NR], f32 m[NR], u8 q[8][NR][4],
 * the weight value being d * q + m with q unsigned (the operand `vpdpbusd` and maddubs
 * take unsigned): Q4_0 q = nibble, m = -8 d; Q4_1 q = nibble, m = the block's min; Q8_0
 * with VNNI q = w + 128, m = -128 d. Without VNNI a Q8_0 q stays signed (q + 128 times
 * 127 would saturate maddubs' int16 pairs): |q| goes in unsigned, its sign onto the
 * activation, m = 0. So sum_k w x = sum_blocks d d_a sum(q q_a) + m (d_a sum(q_a)), the
 * last factor being the activation block's cached s.
 *
 * Tiles are packed per call, per thread, a group of tiles at a time (about 1 MiB): the
 * stored rows stay ggml's (the decode GEMV and the exact reference read them unchanged,
 * and no second copy of the weight lives in memory), and a packed tile is read N / MR
 * times, so its packing is paid once per (16 x 32) weights for N rows. Each thread takes a
 * contiguous range of tiles (of weight rows, as the GEMV does) and walks the activations
 * in chunks that stay in L2 while each packed tile sits in L1. */
#include <omp.h>
#include <string.h>

#include "qdot.h"

#if defined(__AVX2__)

#if defined(__AVX512F__) && defined(__AVX512BW__)
enum { NR = 16, MR = 8 };
typedef __m512i vint;
typedef __m512 vflt;
#define VI_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define VI_SET1(x) _mm512_set1_epi32(x)
#define VI_ZERO() _mm512_setzero_si512()
#define VI_ADD16 _mm512_add_epi16
#define VI_ADD32 _mm512_add_epi32
#define VI_MADDUBS _mm512_maddubs_epi16
#define VI_MADD1(x) _mm512_madd_epi16((x), _mm512_set1_epi16(1))
#define VI_ABS8 _mm512_abs_epi8
/* a with its bytes negated where w's are negative (w = 0 pairs with |w| = 0) */
#define VI_SIGN8(a, w) _mm512_mask_sub_epi8((a), _mm512_movepi8_mask(w), _mm512_setzero_si512(), (a))
#define VF_LOAD _mm512_loadu_ps
#define VF_SET1 _mm512_set1_ps
#define VF_ZERO _mm512_setzero_ps
#define VF_FMA _mm512_fmadd_ps
#define VF_MUL _mm512_mul_ps
#define VF_ADD _mm512_add_ps
#define VF_STORE _mm512_storeu_ps
#define VI_CVT _mm512_cvtepi32_ps
#if defined(__AVX512VNNI__)
#define QG_VNNI 1
#define VI_DPBUSD _mm512_dpbusd_epi32
#endif
#else
enum { NR = 8, MR = 4 };
typedef __m256i vint;
typedef __m256 vflt;
#define VI_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define VI_SET1(x) _mm256_set1_epi32(x)
#define VI_ZERO() _mm256_setzero_si256()
#define VI_ADD16 _mm256_add_epi16
#define VI_ADD32 _mm256_add_epi32
#define VI_MADDUBS _mm256_maddubs_epi16
#define VI_MADD1(x) _mm256_madd_epi16((x), _mm256_set1_epi16(1))
#define VI_ABS8 _mm256_abs_epi8
#define VI_SIGN8(a, w) _mm256_sign_epi8((a), (w))
#define VF_LOAD _mm256_loadu_ps
#define VF_SET1 _mm256_set1_ps
#define VF_ZERO _mm256_setzero_ps
#define VF_FMA _mm256_fmadd_ps
#define VF_MUL _mm256_mul_ps
#define VF_ADD _mm256_add_ps
#define VF_STORE _mm256_storeu_ps
#define VI_CVT _mm256_cvtepi32_ps
#if defined(__AVXVNNI__)
#define QG_VNNI 1
#define VI_DPBUSD _mm256_dpbusd_avx_epi32
#endif
#endif

enum { TB = 40 * NR }; /* bytes of one packed block of a tile: d, m (f32), 32 bytes per row */

typedef enum { Q_UNSIGNED, Q_SIGNED } qmode; /* packed q as u8, or as i8 (Q8_0 without VNNI) */

static qmode mode_of(lp_ggml_type t)
{
#if defined(QG_VNNI)
    (void)t;
    return Q_UNSIGNED;
#else
    return t == LP_GGML_TYPE_Q8_0 ? Q_SIGNED : Q_UNSIGNED;
#endif
}

/* Rows o0 .. o0+ob-1 (ob <= NR; the rest of the tile zero) of w packed into dst (nb * TB). */
static void pack_tile(uint8_t *dst, const lp_qweight *w, int64_t o0, int ob, int64_t nb)
{
    const lp_ggml_type t = w->gtype;
    const int64_t bytes = t == LP_GGML_TYPE_Q8_0 ? 34 : t == LP_GGML_TYPE_Q4_0 ? 18 : 20;
    if (ob < NR)
        memset(dst, 0, (size_t)(nb * TB));
    for (int r = 0; r < ob; r++) {
        const uint8_t *src = w->blocks + (o0 + r) * w->row_bytes;
        for (int64_t b = 0; b < nb; b++, src += bytes) {
            float *dm = (float *)(dst + b * TB);
            uint8_t *q = dst + b * TB + 8 * NR + 4 * r;
            const float d = lp_qd_f16(src);
            __m256i u;
            if (t == LP_GGML_TYPE_Q8_0) {
                u = _mm256_loadu_si256((const __m256i *)(src + 2));
#if defined(QG_VNNI)
                u = _mm256_xor_si256(u, _mm256_set1_epi8((char)0x80)); /* w + 128 */
                dm[NR + r] = -128.0f * d;
#else
                dm[NR + r] = 0.0f;
#endif
            } else if (t == LP_GGML_TYPE_Q4_0) {
                u = lp_qd_nibbles16(src + 2);
                dm[NR + r] = -8.0f * d;
            } else {
                u = lp_qd_nibbles16(src + 4);
                dm[NR + r] = lp_qd_f16(src + 2);
            }
            dm[r] = d;
            uint32_t words[8];
            _mm256_storeu_si256((__m256i *)words, u);
            for (int g = 0; g < 8; g++)
                memcpy(q + g * 4 * NR, &words[g], 4);
        }
    }
}

static inline int32_t word(const int8_t *q, int g)
{
    int32_t v;
    memcpy(&v, q + 4 * g, 4);
    return v;
}

/* acc[r] (NR outputs of activation row r < mr) over nb packed blocks of one tile. The
 * rows of a are nb blocks apart. mr is a constant at every call site (see run_tile). */
static inline __attribute__((always_inline)) void tile_kernel(vflt *acc, const uint8_t *tile, const lp_q8a *a,
                                                              int64_t nb, int mr, qmode mode)
{
    for (int r = 0; r < mr; r++)
        acc[r] = VF_ZERO();
    for (int64_t b = 0; b < nb; b++, tile += TB) {
        vint isum[MR];
        const uint8_t *q = tile + 8 * NR;
#if defined(QG_VNNI)
        (void)mode;
        for (int r = 0; r < mr; r++)
            isum[r] = VI_ZERO();
        for (int g = 0; g < 8; g++) {
            const vint u = VI_LOAD(q + g * 4 * NR);
            for (int r = 0; r < mr; r++)
                isum[r] = VI_DPBUSD(isum[r], u, VI_SET1(word(a[r * nb + b].q, g)));
        }
#else
        if (mode == Q_UNSIGNED) {
            /* nibbles: each int16 pair sum is at most 2 * 15 * 127, eight of them 30480,
             * so the 8 steps add up in int16 and widen once */
            for (int r = 0; r < mr; r++)
                isum[r] = VI_ZERO();
            for (int g = 0; g < 8; g++) {
                const vint u = VI_LOAD(q + g * 4 * NR);
                for (int r = 0; r < mr; r++)
                    isum[r] = VI_ADD16(isum[r], VI_MADDUBS(u, VI_SET1(word(a[r * nb + b].q, g))));
            }
            for (int r = 0; r < mr; r++)
                isum[r] = VI_MADD1(isum[r]);
        } else {
            /* signed Q8_0: |q| times x with q's sign, widened every step (2 * 128 * 127
             * fits int16, two of them do not) */
            for (int r = 0; r < mr; r++)
                isum[r] = VI_ZERO();
            for (int g = 0; g < 8; g++) {
                const vint s = VI_LOAD(q + g * 4 * NR), u = VI_ABS8(s);
                for (int r = 0; r < mr; r++)
                    isum[r] = VI_ADD32(
                        isum[r], VI_MADD1(VI_MADDUBS(u, VI_SIGN8(VI_SET1(word(a[r * nb + b].q, g)), s))));
            }
        }
#endif
        const vflt d = VF_LOAD((const float *)tile), m = VF_LOAD((const float *)tile + NR);
        for (int r = 0; r < mr; r++) {
            const lp_q8a *x = a + r * nb + b;
            acc[r] = VF_FMA(VI_CVT(isum[r]), VF_MUL(d, VF_SET1(x->d)), acc[r]);
            acc[r] = VF_FMA(m, VF_SET1(x->s), acc[r]);
        }
    }
}

/* Activation rows i .. i+mr-1 against one packed tile, into out (+ bias, both from the
 * tile's first column o0; ob columns of the tile are real). */
static inline __attribute__((always_inline)) void run_rows(float *out, int64_t OC, const uint8_t *tile,
                                                           const lp_q8a *a, int64_t nb, int mr, qmode mode,
                                                           vflt bias, int ob)
{
    vflt acc[MR];
    tile_kernel(acc, tile, a, nb, mr, mode);
    for (int r = 0; r < mr; r++) {
        const vflt v = VF_ADD(acc[r], bias);
        if (ob == NR) {
            VF_STORE(out + r * OC, v);
        } else {
            float tmp[NR];
            VF_STORE(tmp, v);
            memcpy(out + r * OC, tmp, (size_t)ob * sizeof(float));
        }
    }
}

/* mr (< MR, the rows left at the end) turned into a constant for tile_kernel's unrolling. */
static void run_tail(float *out, int64_t OC, const uint8_t *tile, const lp_q8a *a, int64_t nb, int mr, qmode mode,
                     vflt bias, int ob)
{
    switch (mr) {
#define TAIL(k)                                                                                                        \
    case k:                                                                                                            \
        if (k < MR)                                                                                                    \
            run_rows(out, OC, tile, a, nb, k < MR ? k : 1, mode, bias, ob);                                            \
        break;
        TAIL(1) TAIL(2) TAIL(3) TAIL(4) TAIL(5) TAIL(6) TAIL(7)
#undef TAIL
    default:
        break;
    }
}

static void run_full(float *out, int64_t OC, const uint8_t *tile, const lp_q8a *a, int64_t nb, qmode mode,
                     vflt bias, int ob)
{
    if (mode == Q_UNSIGNED)
        run_rows(out, OC, tile, a, nb, MR, Q_UNSIGNED, bias, ob);
    else
        run_rows(out, OC, tile, a, nb, MR, Q_SIGNED, bias, ob);
}

bool lp_k_qgemm_ggml_fits(const lp_qweight *w, int64_t N)
{
    const lp_ggml_type t = w->gtype;
    return N >= LP_QGEMM_MIN_ROWS &&
           (t == LP_GGML_TYPE_Q8_0 || t == LP_GGML_TYPE_Q4_0 || t == LP_GGML_TYPE_Q4_1);
}

lp_status lp_k_qgemm_ggml(float *out, const lp_q8a *act, const lp_qweight *w, const float *bias, int64_t N,
                          bool parallel)
{
    const int64_t OC = w->rows, nb = w->cols / 32, ntiles = (OC + NR - 1) / NR;
    const size_t tile_bytes = (size_t)(nb * TB);
    /* a group of packed tiles per thread: about 1 MiB (a tile of a very wide weight alone) */
    const int64_t group = tile_bytes >= ((size_t)1 << 20) ? 1 : (int64_t)(((size_t)1 << 20) / tile_bytes);
    /* activation rows per pass over a group: their blocks (nb * 40 bytes a row) about 256 KiB */
    int64_t chunk = ((int64_t)1 << 18) / (nb * (int64_t)sizeof(lp_q8a));
    chunk = chunk < MR ? MR : chunk - chunk % MR;
    const int nth = parallel ? omp_get_max_threads() : 1;
    const int64_t per = (ntiles + nth - 1) / nth < group ? (ntiles + nth - 1) / nth : group;
    uint8_t *buf = lp_alloc((size_t)nth * (size_t)per * tile_bytes, LP_MEM_CATEGORY_TEMPORARY, "packed weight tiles");
    if (!buf)
        return LP_STATUS_NO_MEMORY;
    const qmode mode = mode_of(w->gtype);
#pragma omp parallel num_threads(nth)
    {
        int64_t lo, hi;
        lp_k_split(ntiles, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        uint8_t *mine = buf + (size_t)omp_get_thread_num() * (size_t)per * tile_bytes;
        for (int64_t t0 = lo; t0 < hi; t0 += per) {
            const int64_t t1 = hi - t0 < per ? hi : t0 + per;
            for (int64_t t = t0; t < t1; t++) {
                const int64_t o0 = t * NR;
                pack_tile(mine + (size_t)(t - t0) * tile_bytes, w, o0, (int)(OC - o0 < NR ? OC - o0 : NR), nb);
            }
            for (int64_t i0 = 0; i0 < N; i0 += chunk) {
                const int64_t i1 = N - i0 < chunk ? N : i0 + chunk;
                for (int64_t t = t0; t < t1; t++) {
                    const int64_t o0 = t * NR;
                    const int ob = (int)(OC - o0 < NR ? OC - o0 : NR);
                    const uint8_t *tile = mine + (size_t)(t - t0) * tile_bytes;
                    float bb[NR] = {0};
                    if (bias)
                        memcpy(bb, bias + o0, (size_t)ob * sizeof(float));
                    const vflt vb = VF_LOAD(bb);
                    int64_t i = i0;
                    for (; i + MR <= i1; i += MR)
                        run_full(out + i * OC + o0, OC, tile, act + i * nb, nb, mode, vb, ob);
                    if (i < i1)
                        run_tail(out + i * OC + o0, OC, tile, act + i * nb, nb, (int)(i1 - i), mode, vb, ob);
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
