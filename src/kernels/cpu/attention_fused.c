/* Optimized fused attention (flash-attention style; the reference is attention_fused_ref.c):
 * the forward streams over key tiles with an online softmax (running max m, running sum l,
 * rescaled accumulator) and saves only the log-sum-exp per query row; the backward
 * recomputes each score tile from q, k and lse. No (B,H,T,T) buffer exists in either
 * direction. Work is in BQ x BK tiles: one (batch, head) per OpenMP task in the forward;
 * one (batch, kv head) in the backward (a kv head's dk and dv sum over its query heads: one
 * owner, no atomics), or one query head with its dk, dv summed afterwards when there are
 * too few kv heads to keep the threads busy. Key tiles that no query of a block can see
 * (above the causal diagonal, outside the sliding window) are skipped, not masked: causal
 * attention does about half the work of full attention.
 *
 * Dropout on the probabilities (lp_attn_dropout) never stores a mask either: each tile
 * row draws its keep factors (0 or 1/(1-p)) from the Philox counters lp_dropout_forward
 * would use for those elements, in the forward and again in the backward. The forward
 * adds the dropped p_ij to the output but the kept-or-not p_ij to the normalizer; the
 * backward uses dV += p~ dO, ds = p (z dp - D) with z the keep factor and D = rowsum(dO*O),
 * which still equals sum_j p~_ij dp_ij because O is the dropped output.
 *
 * A query that sees no key (left padding under a causal mask) gets out = 0 and
 * lse = -inf; the backward skips it (its p would be exp(-inf - -inf) = NaN). */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_kernels.h"
#include "simd.h"

#define BQ 32
#define BK LP_ATTN_KEY_TILE
#define TMAX LP_ATTN_TILE_MAX_D

/* The tile loops below take D (and the tiles' row stride) as arguments and are always
 * inlined into a switch on the common head sizes, so for D = 32/64/128 the compiler sees
 * constants and keeps row accumulators in vector registers; other sizes run the same code
 * generically. */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Copies rows [j0, j0+nk) of a (T,D) head slice with stride ld into Xp (nk, D; row stride ldx). */
ALWAYS_INLINE void pack_rows(float *Xp, int64_t ldx, const float *x, int64_t ld, int64_t j0, int64_t nk, int64_t D)
{
    for (int64_t c = 0; c < nk; c++)
        memcpy(Xp + c * ldx, x + (j0 + c) * ld, (size_t)D * sizeof(float));
}

/* p[0..n) = 0 in vector stores: GCC expands a memset of a constant 256 bytes (one row of
 * head size 64) into `rep stosq`, whose start-up cost on Zen 3 made the backward's row
 * clears 12 % of its time. */
ALWAYS_INLINE void zero_floats(float *p, int64_t n)
{
    int64_t i = 0;
#if defined(LP_HAVE_AVX2)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(p + i, _mm256_setzero_ps());
#endif
    for (; i < n; i++)
        p[i] = 0.0f;
}

/* Packs rows [j0, j0+nk) of a (T,D) head slice with stride ld as Dt (D, BK), zero-padded. */
ALWAYS_INLINE void pack_t(float (*Dt)[BK], const float *x, int64_t ld, int64_t j0, int64_t nk, int64_t D)
{
#if defined(LP_HAVE_AVX2)
    if (nk == BK && D % 8 == 0) { /* a whole tile: 8 x 8 transposes */
        for (int64_t c = 0; c < BK; c += 8)
            for (int64_t d = 0; d < D; d += 8)
                lp_transpose8x8(x + (j0 + c) * ld + d, ld, &Dt[d][c], BK);
        return;
    }
#endif
    for (int64_t c = 0; c < BK; c++) {
        if (c < nk) {
            const float *row = x + (j0 + c) * ld;
            for (int64_t d = 0; d < D; d++)
                Dt[d][c] = row[d];
        } else {
            for (int64_t d = 0; d < D; d++)
                Dt[d][c] = 0.0f;
        }
    }
}
/* An accumulator's start: the row's values, or zero (`zero`, a constant where these inline:
 * S = Q K^T needs no memset of S first). */
#define LD512(p) (zero ? _mm512_setzero_ps() : _mm512_loadu_ps(p))
#define LD256(p) (zero ? _mm256_setzero_ps() : _mm256_loadu_ps(p))

/* a[0..D) += sum_{c<n} w[c*ws] * X[c*ldx + 0..D) (with `zero`: a = the sum): the row
 * accumulations of Q@K^T, P@V, dS@K, P^T@dO and dS^T@Q. The accumulator row lives in
 * vector registers for the whole sum (a plain loop over a[] would load and store it once
 * per term). */
ALWAYS_INLINE void acc_rows(float *restrict a, const float *w, int64_t ws, const float *X, int64_t ldx, int64_t n,
                            int64_t D, bool zero)
{
    int64_t d0 = 0;
#if defined(__AVX512F__)
    for (; d0 + 64 <= D; d0 += 64) {
        __m512 a0 = LD512(a + d0), a1 = LD512(a + d0 + 16);
        __m512 a2 = LD512(a + d0 + 32), a3 = LD512(a + d0 + 48);
        for (int64_t c = 0; c < n; c++) {
            __m512 wv = _mm512_set1_ps(w[c * ws]);
            const float *x = X + c * ldx + d0;
            a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x), a0);
            a1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 16), a1);
            a2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 32), a2);
            a3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + 48), a3);
        }
        _mm512_storeu_ps(a + d0, a0), _mm512_storeu_ps(a + d0 + 16, a1);
        _mm512_storeu_ps(a + d0 + 32, a2), _mm512_storeu_ps(a + d0 + 48, a3);
    }
    for (; d0 + 16 <= D; d0 += 16) {
        __m512 a0 = LD512(a + d0);
        for (int64_t c = 0; c < n; c++)
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(w[c * ws]), _mm512_loadu_ps(X + c * ldx + d0), a0);
        _mm512_storeu_ps(a + d0, a0);
    }
#elif defined(LP_HAVE_AVX2)
    for (; d0 + 32 <= D; d0 += 32) {
        __m256 a0 = LD256(a + d0), a1 = LD256(a + d0 + 8);
        __m256 a2 = LD256(a + d0 + 16), a3 = LD256(a + d0 + 24);
        for (int64_t c = 0; c < n; c++) {
            __m256 wv = _mm256_set1_ps(w[c * ws]);
            const float *x = X + c * ldx + d0;
            a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x), a0);
            a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + 8), a1);
            a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + 16), a2);
            a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + 24), a3);
        }
        _mm256_storeu_ps(a + d0, a0), _mm256_storeu_ps(a + d0 + 8, a1);
        _mm256_storeu_ps(a + d0 + 16, a2), _mm256_storeu_ps(a + d0 + 24, a3);
    }
    /* head sizes 16 mod 32 (80, 112) and 8 mod 16: as AVX-512's one-vector loop */
    for (; d0 + 8 <= D; d0 += 8) {
        __m256 a0 = LD256(a + d0);
        for (int64_t c = 0; c < n; c++)
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(w[c * ws]), _mm256_loadu_ps(X + c * ldx + d0), a0);
        _mm256_storeu_ps(a + d0, a0);
    }
#endif
    for (; d0 < D; d0++) {
        float t = zero ? 0.0f : a[d0];
        for (int64_t c = 0; c < n; c++)
            t += w[c * ws] * X[c * ldx + d0];
        a[d0] = t;
    }
}

/* Four rows at once: a_i[0..D) += sum_{c<n} w_i[c*ws] * X[c*ldx + 0..D) for i < 4.
 * Sixteen (AVX-512; eight with AVX2) independent accumulators cover the FMA latency, and
 * each load of X feeds four FMAs. Tails narrower than a vector group go to acc_rows. */
ALWAYS_INLINE void acc_rows4(float *const a[4], const float *const w[4], int64_t ws, const float *X, int64_t ldx,
                             int64_t n, int64_t D, bool zero)
{
    int64_t d0 = 0;
#if defined(__AVX512F__)
    for (; d0 + 64 <= D; d0 += 64) {
        __m512 r[4][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                r[i][j] = LD512(a[i] + d0 + 16 * j);
        for (int64_t c = 0; c < n; c++) {
            const float *x = X + c * ldx + d0;
            __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
            __m512 x2 = _mm512_loadu_ps(x + 32), x3 = _mm512_loadu_ps(x + 48);
            for (int i = 0; i < 4; i++) {
                __m512 wv = _mm512_set1_ps(w[i][c * ws]);
                r[i][0] = _mm512_fmadd_ps(wv, x0, r[i][0]);
                r[i][1] = _mm512_fmadd_ps(wv, x1, r[i][1]);
                r[i][2] = _mm512_fmadd_ps(wv, x2, r[i][2]);
                r[i][3] = _mm512_fmadd_ps(wv, x3, r[i][3]);
            }
        }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                _mm512_storeu_ps(a[i] + d0 + 16 * j, r[i][j]);
    }
    /* head dim 32 (MiniLM): eight chains; acc_rows alone would run one FMA chain a row */
    for (; d0 + 32 <= D; d0 += 32) {
        __m512 r[4][2];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                r[i][j] = LD512(a[i] + d0 + 16 * j);
        for (int64_t c = 0; c < n; c++) {
            const float *x = X + c * ldx + d0;
            __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
            for (int i = 0; i < 4; i++) {
                __m512 wv = _mm512_set1_ps(w[i][c * ws]);
                r[i][0] = _mm512_fmadd_ps(wv, x0, r[i][0]);
                r[i][1] = _mm512_fmadd_ps(wv, x1, r[i][1]);
            }
        }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                _mm512_storeu_ps(a[i] + d0 + 16 * j, r[i][j]);
    }
#elif defined(LP_HAVE_AVX2)
    /* 16 ymm registers: 4 rows x 2 vectors of accumulators, 2 of X, 1 broadcast */
    for (; d0 + 16 <= D; d0 += 16) {
        __m256 r[4][2];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                r[i][j] = LD256(a[i] + d0 + 8 * j);
        for (int64_t c = 0; c < n; c++) {
            const float *x = X + c * ldx + d0;
            __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
            for (int i = 0; i < 4; i++) {
                __m256 wv = _mm256_set1_ps(w[i][c * ws]);
                r[i][0] = _mm256_fmadd_ps(wv, x0, r[i][0]);
                r[i][1] = _mm256_fmadd_ps(wv, x1, r[i][1]);
            }
        }
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                _mm256_storeu_ps(a[i] + d0 + 8 * j, r[i][j]);
    }
    /* an 8-wide rest (head size 8 mod 16): four chains, one load of X for four FMAs */
    for (; d0 + 8 <= D; d0 += 8) {
        __m256 r[4];
        for (int i = 0; i < 4; i++)
            r[i] = LD256(a[i] + d0);
        for (int64_t c = 0; c < n; c++) {
            __m256 x0 = _mm256_loadu_ps(X + c * ldx + d0);
            for (int i = 0; i < 4; i++)
                r[i] = _mm256_fmadd_ps(_mm256_set1_ps(w[i][c * ws]), x0, r[i]);
        }
        for (int i = 0; i < 4; i++)
            _mm256_storeu_ps(a[i] + d0, r[i]);
    }
#endif
    if (d0 < D)
        for (int i = 0; i < 4; i++)
            acc_rows(a[i] + d0, w[i], ws, X + d0, ldx, n, D - d0, zero);
}

/* Six rows at once (AVX2 only): a_i[0..D) += sum_{c<n} w_i[c*ws] * X[c*ldx + 0..D) for i < 6.
 * With 16 ymm registers acc_rows4 keeps 8 accumulators, exactly the FMAs in flight two pipes
 * of latency 4 need; 6 rows x 2 vectors keep 12 (and each load of X feeds six FMAs). Every
 * product of both directions goes through it (acc_block); tails go to acc_rows. */
ALWAYS_INLINE void acc_rows6(float *const a[6], const float *const w[6], int64_t ws, const float *X, int64_t ldx,
                             int64_t n, int64_t D, bool zero)
{
    int64_t d0 = 0;
#if defined(LP_HAVE_AVX2) && !defined(LP_HAVE_AVX512)
    for (; d0 + 16 <= D; d0 += 16) {
        __m256 r[6][2];
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 2; j++)
                r[i][j] = LD256(a[i] + d0 + 8 * j);
        for (int64_t c = 0; c < n; c++) {
            const float *x = X + c * ldx + d0;
            const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
            for (int i = 0; i < 6; i++) {
                const __m256 wv = _mm256_set1_ps(w[i][c * ws]);
                r[i][0] = _mm256_fmadd_ps(wv, x0, r[i][0]);
                r[i][1] = _mm256_fmadd_ps(wv, x1, r[i][1]);
            }
        }
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 2; j++)
                _mm256_storeu_ps(a[i] + d0 + 8 * j, r[i][j]);
    }
#endif
    if (d0 < D)
        for (int i = 0; i < 6; i++)
            acc_rows(a[i] + d0, w[i], ws, X + d0, ldx, n, D - d0, zero);
}

/* Rows of the AVX2 copy's six-row passes (acc_rows6); 0 where four-row passes serve. */
#if defined(LP_HAVE_AVX2) && !defined(LP_HAVE_AVX512)
#define ROWS6 6
#else
#define ROWS6 0
#endif

/* The row accumulation of a whole block: a_i[0..D) += sum_{c<n} w_i[c*ws] * X[c*ldx + 0..D)
 * for rows i < rows, with a_i = a + i*as and w_i = w + i*wst. Six-row passes (AVX2) as long
 * as the rest still splits into four-row passes (32 rows: 6+6+6+6+4+4, not 6*5 and two
 * one-row tails, each of whose FMA chains waits on the last), then four-row passes, then
 * single rows. */
ALWAYS_INLINE void acc_block(float *a, int64_t as, const float *w, int64_t wst, int64_t ws, const float *X,
                             int64_t ldx, int64_t n, int64_t rows, int64_t D, bool zero)
{
    int64_t six = ROWS6 ? rows / 6 : 0;
    if (six && rows % 2 == 0 && (rows - 6 * six) % 4)
        six--;
    int64_t i = 0;
    for (; i < 6 * six; i += 6) {
        float *dst[6];
        const float *src[6];
        for (int u = 0; u < 6; u++)
            dst[u] = a + (i + u) * as, src[u] = w + (i + u) * wst;
        acc_rows6(dst, src, ws, X, ldx, n, D, zero);
    }
    for (; i + 4 <= rows; i += 4) {
        float *dst[4];
        const float *src[4];
        for (int u = 0; u < 4; u++)
            dst[u] = a + (i + u) * as, src[u] = w + (i + u) * wst;
        acc_rows4(dst, src, ws, X, ldx, n, D, zero);
    }
    for (; i < rows; i++)
        acc_rows(a + i * as, w + i * wst, ws, X, ldx, n, D, zero);
}

/* S (nq,BK) = A (nq,D; row stride lda) @ Bt (D,BK), in row blocks (acc_block). */
ALWAYS_INLINE void tile_qkt(float (*S)[BK], const float *A, int64_t lda, const float (*Bt)[BK], int64_t nq,
                             int64_t D)
{
    acc_block(&S[0][0], BK, A, lda, 1, &Bt[0][0], BK, D, nq, BK, true);
}

/* s[c] += bias[c] over n entries; returns max(m, max_c s[c]). Vectorized: the scalar
 * max chain would cost as much as the tile's matrix products. */
static inline float bias_max(float *s, const float *bias, int64_t n, float m)
{
    int64_t c = 0;
#ifdef LP_HAVE_AVX512
    __m512 wm = _mm512_set1_ps(m);
    for (; c + 16 <= n; c += 16) {
        __m512 x = _mm512_add_ps(_mm512_loadu_ps(s + c), _mm512_loadu_ps(bias + c));
        _mm512_storeu_ps(s + c, x);
        wm = _mm512_max_ps(wm, x);
    }
    m = _mm512_reduce_max_ps(wm);
#endif
#ifdef LP_HAVE_AVX2
    __m256 vm = _mm256_set1_ps(m);
    for (; c + 8 <= n; c += 8) {
        __m256 x = _mm256_add_ps(_mm256_loadu_ps(s + c), _mm256_loadu_ps(bias + c));
        _mm256_storeu_ps(s + c, x);
        vm = _mm256_max_ps(vm, x);
    }
    m = fmaxf(m, lp_hmax256(vm));
#endif
    for (; c < n; c++) {
        s[c] += bias[c];
        m = s[c] > m ? s[c] : m;
    }
    return m;
}

/* max(m, max_c s[c]) over n entries (bias_max without a bias). */
static inline float row_max(const float *s, int64_t n, float m)
{
    int64_t c = 0;
#if defined(LP_HAVE_AVX512)
    __m512 wm = _mm512_set1_ps(m);
    for (; c + 16 <= n; c += 16)
        wm = _mm512_max_ps(wm, _mm512_loadu_ps(s + c));
    m = _mm512_reduce_max_ps(wm);
#elif defined(LP_HAVE_AVX2)
    __m256 vm = _mm256_set1_ps(m);
    for (; c + 8 <= n; c += 8)
        vm = _mm256_max_ps(vm, _mm256_loadu_ps(s + c));
    m = lp_hmax256(vm);
#endif
    for (; c < n; c++)
        m = s[c] > m ? s[c] : m;
    return m;
}

/* s[c] = exp(s[c] - mx) over n entries, mx >= every s[c] (the forward's running max);
 * returns the sum. */
static inline float exp_sum_max(float *s, int64_t n, float mx)
{
    int64_t c = 0;
    float sum = 0.0f;
#if defined(LP_HAVE_AVX512)
    __m512 ws = _mm512_setzero_ps(), wmx = _mm512_set1_ps(mx);
    for (; c + 16 <= n; c += 16) {
        __m512 e = lp_exp_nonpos512(_mm512_sub_ps(_mm512_loadu_ps(s + c), wmx));
        _mm512_storeu_ps(s + c, e);
        ws = _mm512_add_ps(ws, e);
    }
    sum = _mm512_reduce_add_ps(ws);
#elif defined(LP_HAVE_AVX2)
    __m256 vs = _mm256_setzero_ps(), vmx = _mm256_set1_ps(mx);
    for (; c + 8 <= n; c += 8) {
        __m256 e = lp_exp_nonpos256(_mm256_sub_ps(_mm256_loadu_ps(s + c), vmx));
        _mm256_storeu_ps(s + c, e);
        vs = _mm256_add_ps(vs, e);
    }
    sum = lp_hsum256(vs);
#endif
    for (; c < n; c++) {
        s[c] = expf(s[c] - mx);
        sum += s[c];
    }
    return sum;
}

/* s[c] = exp(s[c] * mul - sub) over n entries; returns the sum. */
static inline float exp_sum(float *s, int64_t n, float mul, float sub)
{
    int64_t c = 0;
    float sum = 0.0f;
#ifdef LP_HAVE_AVX512
    __m512 ws = _mm512_setzero_ps(), wmul = _mm512_set1_ps(mul), wsub = _mm512_set1_ps(sub);
    for (; c + 16 <= n; c += 16) {
        __m512 e = lp_exp_nonpos512(_mm512_fmsub_ps(_mm512_loadu_ps(s + c), wmul, wsub));
        _mm512_storeu_ps(s + c, e);
        ws = _mm512_add_ps(ws, e);
    }
    sum = _mm512_reduce_add_ps(ws);
#endif
#ifdef LP_HAVE_AVX2
    __m256 vs = _mm256_setzero_ps(), vmul = _mm256_set1_ps(mul), vsub = _mm256_set1_ps(sub);
    for (; c + 8 <= n; c += 8) {
        __m256 e = lp_exp_nonpos256(_mm256_fmsub_ps(_mm256_loadu_ps(s + c), vmul, vsub));
        _mm256_storeu_ps(s + c, e);
        vs = _mm256_add_ps(vs, e);
    }
    sum += lp_hsum256(vs);
#endif
    for (; c < n; c++) {
        s[c] = expf(s[c] * mul - sub);
        sum += s[c];
    }
    return sum;
}

/* Fills bias (0 or -inf) for key tile [j0, j0+nk) from the mask. */
static inline void tile_mask(float *bias, const int32_t *mb, int64_t j0, int64_t nk)
{
    for (int64_t c = 0; c < nk; c++)
        bias[c] = !mb || mb[j0 + c] ? 0.0f : -INFINITY;
}

/* The scratch of one thread. Query-row tiles (BQ, ldt), transposed key/value tiles (D, BK)
 * and the key/value row tile (BK, ldt) live in the thread's fixed tiles for
 * D <= TMAX, or in a heap slice sized by D (lp_attention_fused_tile_floats) above it. */
typedef struct fixed_tiles {
    float Qs[BQ][TMAX];   /* query tile (scaled in the forward) */
    float dO[BQ][TMAX];   /* dout tile (backward) */
    float acc[BQ][TMAX];  /* output accumulator (forward) */
    float Kt[TMAX][BK];   /* keys, transposed */
    float Vt[TMAX][BK];   /* values, transposed (backward) */
    float Xp[BK][TMAX];   /* values (forward) or keys (backward), rows packed: the token
                             stride (e.g. 3C floats) maps rows onto few L1 sets */
    float S[BQ][BK], P2[BQ][BK];
    float bias[BK];       /* the key tile's padding mask as 0 / -inf */
    float z[BK];          /* one row's dropout keep factors */
} fixed_tiles;

/* Per-thread tile storage: too large for a worker's stack under sanitizers, and reused
 * across the tasks of one thread. */
static _Thread_local fixed_tiles tiles_tls __attribute__((aligned(64)));

typedef struct tiles {
    float *Qs, *dO, *acc, *Xp; /* (BQ, ldt) x 3, (BK, ldt) */
    float (*Kt)[BK], (*Vt)[BK];
    float (*S)[BK], (*P2)[BK];
    float *bias, *z;
} tiles;

/* This thread's tiles: the fixed ones, or D-sized ones carved from heap (D > TMAX). */
static tiles tiles_bind(float *heap, int64_t D)
{
    fixed_tiles *f = &tiles_tls;
    tiles w = {&f->Qs[0][0], &f->dO[0][0], &f->acc[0][0], &f->Xp[0][0], f->Kt, f->Vt, f->S, f->P2, f->bias, f->z};
    if (heap) {
        const int64_t ldt = (D + 15) / 16 * 16;
        w.Qs = heap, w.dO = w.Qs + BQ * ldt, w.acc = w.dO + BQ * ldt, w.Xp = w.acc + BQ * ldt;
        w.Kt = (float(*)[BK])(w.Xp + BK * ldt);
        w.Vt = w.Kt + D;
    }
    return w;
}

/* Row-wise visibility inside one (query block, key tile): sets s[c] = -inf in row r of
 * block i0 for the keys j0+c the causal mask, the window or another sample (segments)
 * hides. Only tiles crossing the diagonal, the window's edge or a sample boundary need it
 * (tile_full says which); padding is the bias's job. */
static inline void hide_row(float *s, const lp_attn_geom *g, const int32_t *mb, int64_t i, int64_t j0, int64_t nk)
{
    int64_t lo, hi;
    lp_attn_key_range(g, i, &lo, &hi);
    if (!g->segments) { /* a range: no per-key test (the diagonal tile of every query block) */
        for (int64_t c = 0; c < nk && j0 + c < lo; c++)
            s[c] = -INFINITY;
        for (int64_t c = hi - j0 > 0 ? hi - j0 : 0; c < nk; c++)
            s[c] = -INFINITY;
        return;
    }
    for (int64_t c = 0; c < nk; c++)
        if (j0 + c < lo || j0 + c >= hi || (g->segments && mb[j0 + c] != mb[i]))
            s[c] = -INFINITY;
}

/* Whether the queries [i0, i0+nq) and the real keys of [j0, j0+nk) all belong to one
 * sample: O(nq + nk) compares against the tile's O(nq nk D) products, so a packed row
 * keeps the fast path everywhere but on the tiles astride a boundary. */
static inline bool tile_one_sample(const lp_attn_geom *g, const int32_t *mb, int64_t i0, int64_t nq, int64_t j0,
                                   int64_t nk)
{
    if (!g->segments)
        return true;
    const int32_t s = mb[i0];
    for (int64_t r = 1; r < nq; r++)
        if (mb[i0 + r] != s)
            return false;
    for (int64_t c = 0; c < nk; c++)
        if (mb[j0 + c] && mb[j0 + c] != s)
            return false;
    return true;
}

/* Whether every query of [i0, i0+nq) sees every key of [j0, j0+nk), but for padding. */
static inline bool tile_full(const lp_attn_geom *g, const int32_t *mb, int64_t i0, int64_t nq, int64_t j0, int64_t nk)
{
    if (!tile_one_sample(g, mb, i0, nq, j0, nk))
        return false;
    int64_t lo, hi;
    lp_attn_key_range(g, i0 + nq - 1, &lo, &hi); /* the last query: the window's far edge */
    if (j0 < lo)
        return false;
    lp_attn_key_range(g, i0, &lo, &hi); /* the first query: the diagonal */
    return j0 + nk <= hi;
}

/* Key tiles query block [i0, i0+nq) can see, as [*j_lo, *j_hi) aligned to BK. */
static inline void key_tiles(const lp_attn_geom *g, int64_t i0, int64_t nq, int64_t *j_lo, int64_t *j_hi)
{
    int64_t lo, hi, lo2, hi2;
    lp_attn_key_range(g, i0, &lo, &hi);
    lp_attn_key_range(g, i0 + nq - 1, &lo2, &hi2);
    *j_lo = lo / BK * BK;
    *j_hi = hi2;
}

/* Query rows that can see some key of tile [j0, j0+nk): [*i_lo, *i_hi), i_lo aligned to BQ. */
static inline void query_rows(const lp_attn_geom *g, int64_t j0, int64_t nk, int64_t *i_lo, int64_t *i_hi)
{
    *i_lo = g->causal ? j0 / BQ * BQ : 0;
    *i_hi = g->window > 0 && j0 + nk - 1 + g->window < g->T ? j0 + nk - 1 + g->window : g->T;
}

/* One (batch, head) of the forward. With `pack` (this thread's slice: nkt key tiles of
 * (D, BK), transposed, then the kv head's values as (T, D) rows) the kv head's keys and
 * values are packed once (and reused by the next query head of the same group on this
 * thread: repack false) and every query block streams over them; without it (no memory
 * for the slice) each key tile is packed again per query block into the thread's tiles. */
ALWAYS_INLINE void fwd_head(tiles *w, int64_t ldt, float *pack, bool repack, float *out, float *lse, const float *q,
                            const float *k, const float *v, const int32_t *mask, const lp_attn_geom *g, int64_t bh,
                            int64_t D, const lp_attn_dropout *drop)
{
    const int64_t T = g->T, H = g->H, C = H * D, ldq = g->ldq, ldkv = g->ldkv;
    const int64_t b = bh / H, h = bh % H, kv = h / (H / g->Hkv);
    const float scale = lp_attn_scale(g);
    const float *kb = k + b * T * ldkv + kv * D, *vb = v + b * T * ldkv + kv * D;
    const int32_t *mb = mask ? mask + b * T : NULL;
    const int64_t nkt = (T + BK - 1) / BK;
    float *Vp = pack ? pack + nkt * D * BK : NULL;
    if (pack && repack) {
        for (int64_t j0 = 0; j0 < T; j0 += BK)
            pack_t((float(*)[BK])(pack + (j0 / BK) * D * BK), kb, ldkv, j0, T - j0 < BK ? T - j0 : BK, D);
        for (int64_t j = 0; j < T; j++)
            memcpy(Vp + j * D, vb + j * ldkv, (size_t)D * sizeof(float));
    }
    for (int64_t i0 = 0; i0 < T; i0 += BQ) {
        int64_t nq = T - i0 < BQ ? T - i0 : BQ;
        float m[BQ], l[BQ];
        for (int64_t r = 0; r < nq; r++) {
            const float *qr = q + (b * T + i0 + r) * ldq + h * D;
            float *qs = w->Qs + r * ldt, *a = w->acc + r * ldt;
            for (int64_t d = 0; d < D; d++) {
                qs[d] = qr[d] * scale;
                a[d] = 0.0f;
            }
            m[r] = -INFINITY;
            l[r] = 0.0f;
        }
        int64_t j_lo, j_hi;
        key_tiles(g, i0, nq, &j_lo, &j_hi);
        for (int64_t j0 = j_lo; j0 < j_hi; j0 += BK) {
            /* the diagonal tile: keys past the block's last query are hidden from all of it,
             * so its softmax and P@V stop there (half the tile when BQ = BK/2) */
            int64_t nk = T - j0 < BK ? T - j0 : BK;
            nk = j_hi - j0 < nk ? j_hi - j0 : nk;
            const float(*Kt)[BK] = w->Kt;
            const float *V = w->Xp;
            int64_t ldv = ldt;
            if (pack) {
                Kt = (const float(*)[BK])(pack + (j0 / BK) * D * BK);
                V = Vp + j0 * D, ldv = D;
            } else {
                pack_t(w->Kt, kb, ldkv, j0, nk, D);
                pack_rows(w->Xp, ldt, vb, ldkv, j0, nk, D);
            }
            tile_qkt(w->S, w->Qs, ldt, Kt, nq, D);
            if (mb) /* no mask (a prefill's one sequence): no padding bias to add */
                tile_mask(w->bias, mb, j0, nk);
            const bool full = tile_full(g, mb, i0, nq, j0, nk);
            for (int64_t r = 0; r < nq; r++) {
                float *s = w->S[r];
                if (!full)
                    hide_row(s, g, mb, i0 + r, j0, nk);
                float mx = mb ? bias_max(s, w->bias, nk, m[r]) : row_max(s, nk, m[r]);
                if (mx == -INFINITY) { /* every key so far is hidden: nothing to add */
                    for (int64_t c = 0; c < nk; c++)
                        s[c] = 0.0f;
                    continue;
                }
                if (mx == m[r]) { /* the running max holds: nothing to rescale */
                    l[r] += exp_sum_max(s, nk, mx);
                    if (!drop)
                        continue;
                } else {
                    const float corr = expf(m[r] - mx);
                    l[r] = l[r] * corr + exp_sum_max(s, nk, mx);
                    m[r] = mx;
                    float *a = w->acc + r * ldt;
                    for (int64_t d = 0; d < D; d++)
                        a[d] *= corr;
                }
                if (drop) { /* the normalizer took every p; the output takes the kept ones */
                    lp_k_attn_drop_factors(w->z, drop, (bh * T + i0 + r) * T + j0, nk);
                    for (int64_t c = 0; c < nk; c++)
                        s[c] *= w->z[c];
                }
            }
            /* acc += p @ V */
            acc_block(w->acc, ldt, &w->S[0][0], BK, 1, V, ldv, nk, nq, D, false);
        }
        for (int64_t r = 0; r < nq; r++) {
            float *o = out + (b * T + i0 + r) * C + h * D;
            const float *a = w->acc + r * ldt;
            float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f; /* no visible key: out = 0 */
            for (int64_t d = 0; d < D; d++)
                o[d] = a[d] * inv;
            lse[bh * T + i0 + r] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
        }
    }
}

/* The specializations the head loops call: constant D for the common head sizes, a runtime
 * one otherwise (heap tiles above TMAX). The tiles' row stride ldt is D rounded up to 16
 * floats, not TMAX: rows TMAX floats (1 KB) apart use a quarter of a 32 KB 8-way L1's sets,
 * which the key rows alone (BK of them) overflowed (the Zen 3 backward 3 % faster with
 * ldt = D). Each is a function of its own, picked
 * once per call (fn_for): with every copy inlined into the one OpenMP region, GCC's register
 * dataflow over that giant function took 30-40 s per ISA level to compile this file, two
 * thirds of building loupe; one indirect call per (batch, head) is nothing next to its work. */
#define LP_ATTN_SPECIALIZATIONS(fn_, params_, args_)                                                       \
    typedef void fn_##_fn params_;                                                                       \
    static __attribute__((noinline)) void fn_##_32 params_ { const int64_t Dk = 32, ldt = 32; (void)D; fn_ args_; }    \
    static __attribute__((noinline)) void fn_##_64 params_ { const int64_t Dk = 64, ldt = 64; (void)D; fn_ args_; }    \
    static __attribute__((noinline)) void fn_##_128 params_ { const int64_t Dk = 128, ldt = 128; (void)D; fn_ args_; } \
    static __attribute__((noinline)) void fn_##_any params_ { const int64_t Dk = D, ldt = (D + 15) / 16 * 16; fn_ args_; } \
    static fn_##_fn *fn_##_for(int64_t D)                                                                 \
    {                                                                                                    \
        return D == 32 ? fn_##_32 : D == 64 ? fn_##_64 : D == 128 ? fn_##_128 : fn_##_any;               \
    }

LP_ATTN_SPECIALIZATIONS(fwd_head,
                        (tiles w, float *pack, bool repack, float *out, float *lse, const float *q, const float *k,
                         const float *v, const int32_t *mask, const lp_attn_geom *g, int64_t bh, int64_t D,
                         const lp_attn_dropout *drop),
                        (&w, ldt, pack, repack, out, lse, q, k, v, mask, g, bh, Dk, drop))

void lp_k_attention_fused_forward_opt(float *out, float *lse, const float *q, const float *k, const float *v,
                                      const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    const int64_t D = g->D, H = g->H, grp = H / g->Hkv;
    const int nthreads = omp_get_max_threads();
    const int64_t per = lp_attention_fused_pack_floats(g->T, D);
    float *pack = lp_alloc((size_t)nthreads * (size_t)per * sizeof(float), LP_MEM_CATEGORY_TEMPORARY,
                           "attention keys/values");
    if (!pack && D > TMAX) { /* no memory for the D-sized tiles: the reference needs none */
        lp_k_attention_fused_forward_ref(out, lse, q, k, v, mask, g, drop);
        return;
    }
    const int64_t tile_off = per - (D > TMAX ? lp_attention_fused_tile_floats(D) : 0);
    fwd_head_fn *head = fwd_head_for(D);
#pragma omp parallel
    {
        float *mine = pack ? pack + (size_t)omp_get_thread_num() * (size_t)per : NULL;
        tiles w = tiles_bind(D > TMAX ? mine + tile_off : NULL, D);
        int64_t packed = -1; /* the (batch, kv head) whose keys and values sit in `mine` */
#pragma omp for schedule(dynamic, 1)
        for (int64_t bh = 0; bh < g->B * H; bh++) {
            const int64_t bg = bh / grp; /* = b * Hkv + kv head */
            const bool repack = bg != packed;
            packed = bg;
            head(w, mine, repack, out, lse, q, k, v, mask, g, bh, D, drop);
        }
    }
    lp_free(pack);
}

/* Query heads [hh0, hh1) of one (batch, kv head) bg of the backward: dk and dv of a kv head
 * get contributions from every query block of each of its query heads, so with all of them
 * (hh0 = 0, hh1 = H/Hkv) this is the unit of work (no atomics); with one, dk and dv go to
 * that head's own slice of a scratch (dkv_ld, dkv_off) and are summed afterwards. Key
 * blocks are the outer loop so each key/value tile is packed once; dq accumulates in place
 * across them. */
ALWAYS_INLINE void bwd_group(tiles *w, int64_t ldt, float *dq, float *dk, float *dv, int64_t dkv_ld, int64_t dkv_off,
                             const float *dout, const float *out, const float *lse, const float *q, const float *k,
                             const float *v, const int32_t *mask, const lp_attn_geom *g, int64_t bg, int64_t hh0,
                             int64_t hh1, int64_t D, const lp_attn_dropout *drop)
{
    const int64_t T = g->T, H = g->H, Hkv = g->Hkv, grp = H / Hkv, C = H * D, ldq = g->ldq, ldkv = g->ldkv;
    const int64_t b = bg / Hkv, kv = bg % Hkv, kvo = b * T * ldkv + kv * D;
    const float scale = lp_attn_scale(g);
    const float *kb = k + kvo, *vb = v + kvo;
    float *dkb = dk + b * T * dkv_ld + dkv_off, *dvb = dv + b * T * dkv_ld + dkv_off;
    const int32_t *mb = mask ? mask + b * T : NULL;
    for (int64_t t = 0; t < T; t++) {
        zero_floats(dkb + t * dkv_ld, D);
        zero_floats(dvb + t * dkv_ld, D);
        for (int64_t hh = hh0; hh < hh1; hh++)
            zero_floats(dq + (b * T + t) * ldq + (kv * grp + hh) * D, D);
    }
    for (int64_t j0 = 0; j0 < T; j0 += BK) {
        int64_t nk = T - j0 < BK ? T - j0 : BK;
        pack_t(w->Kt, kb, ldkv, j0, nk, D);
        pack_t(w->Vt, vb, ldkv, j0, nk, D);
        pack_rows(w->Xp, ldt, kb, ldkv, j0, nk, D);
        tile_mask(w->bias, mb, j0, nk);
        int64_t i_lo, i_hi;
        query_rows(g, j0, nk, &i_lo, &i_hi);
        for (int64_t hh = hh0; hh < hh1; hh++) {
            const int64_t h = kv * grp + hh, bh = b * H + h;
            const float *qb = q + b * T * ldq + h * D;
            float *dqb = dq + b * T * ldq + h * D;
            for (int64_t i0 = i_lo; i0 < i_hi; i0 += BQ) {
                int64_t nq = T - i0 < BQ ? T - i0 : BQ;
                /* causal: the keys past the block's last query get nothing from it (dk, dv
                 * stay as they are, dq takes no term), so the block's products stop there */
                const int64_t nkb = g->causal && i0 + nq - j0 < nk ? i0 + nq - j0 : nk;
                float Di[BQ], L[BQ];
                for (int64_t r = 0; r < nq; r++) {
                    const float *dor = dout + (b * T + i0 + r) * C + h * D, *orow = out + (b * T + i0 + r) * C + h * D;
                    memcpy(w->Qs + r * ldt, qb + (i0 + r) * ldq, (size_t)D * sizeof(float));
                    memcpy(w->dO + r * ldt, dor, (size_t)D * sizeof(float));
                    float s = 0.0f;
#pragma omp simd reduction(+ : s)
                    for (int64_t d = 0; d < D; d++)
                        s += dor[d] * orow[d];
                    Di[r] = s;
                    L[r] = lse[bh * T + i0 + r];
                }
                tile_qkt(w->S, w->Qs, ldt, w->Kt, nq, D);  /* raw scores */
                tile_qkt(w->P2, w->dO, ldt, w->Vt, nq, D); /* dp = dout . v */
                const bool full = tile_full(g, mb, i0, nq, j0, nkb);
                for (int64_t r = 0; r < nq; r++) {
                    float *s = w->S[r], *dp = w->P2[r];
                    if (L[r] == -INFINITY) { /* the query sees no key: p = 0, ds = 0 */
                        memset(s, 0, BK * sizeof(float));
                        memset(dp, 0, BK * sizeof(float));
                        continue;
                    }
                    if (!full)
                        hide_row(s, g, mb, i0 + r, j0, nkb);
                    /* hidden keys: -inf before the exp, so p = 0. Zeroing p after the exp is
                     * not the same: a padded key's raw score is not bounded by lse (which
                     * counts visible keys only), and exp(s * scale - lse) = inf times 0 is NaN */
                    const float *bias = w->bias;
#pragma omp simd
                    for (int64_t c = 0; c < nkb; c++)
                        s[c] += bias[c];
                    (void)exp_sum(s, nkb, scale, L[r]); /* p = exp(s * scale - lse) */
                    float di = Di[r];
                    if (drop) { /* dV takes the dropped p, ds = p (z dp - D) */
                        lp_k_attn_drop_factors(w->z, drop, (bh * T + i0 + r) * T + j0, nkb);
                        const float *z = w->z;
#pragma omp simd
                        for (int64_t c = 0; c < nkb; c++) {
                            dp[c] = s[c] * (z[c] * dp[c] - di) * scale;
                            s[c] *= z[c];
                        }
                        continue;
                    }
#pragma omp simd
                    for (int64_t c = 0; c < nkb; c++)
                        dp[c] = s[c] * (dp[c] - di) * scale; /* ds */
                }
                /* dv_j += sum_r p_rj dout_r; dk_j += sum_r ds_rj q_r; dq_r += sum_j ds_rj k_j */
                acc_block(dvb + j0 * dkv_ld, dkv_ld, &w->S[0][0], 1, BK, w->dO, ldt, nq, nkb, D, false);
                acc_block(dkb + j0 * dkv_ld, dkv_ld, &w->P2[0][0], 1, BK, w->Qs, ldt, nq, nkb, D, false);
                acc_block(dqb + i0 * ldq, ldq, &w->P2[0][0], BK, 1, w->Xp, ldt, nkb, nq, D, false);
            }
        }
    }
}

LP_ATTN_SPECIALIZATIONS(bwd_group,
                        (tiles w, float *dq, float *dk, float *dv, int64_t dkv_ld, int64_t dkv_off, const float *dout,
                         const float *out, const float *lse, const float *q, const float *k, const float *v,
                         const int32_t *mask, const lp_attn_geom *g, int64_t bg, int64_t hh0, int64_t hh1, int64_t D,
                         const lp_attn_dropout *drop),
                        (&w, ldt, dq, dk, dv, dkv_ld, dkv_off, dout, out, lse, q, k, v, mask, g, bg, hh0, hh1, Dk, drop))

void lp_k_attention_fused_backward_opt(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                       const float *lse, const float *q, const float *k, const float *v,
                                       const int32_t *mask, const lp_attn_geom *g, const lp_attn_dropout *drop)
{
    const int64_t D = g->D, H = g->H, Hkv = g->Hkv, grp = H / Hkv, C = H * D;
    const int nthreads = omp_get_max_threads();
    const int64_t per = D > TMAX ? lp_attention_fused_tile_floats(D) : 0;
    float *heap = NULL;
    if (per) {
        heap = lp_alloc((size_t)nthreads * (size_t)per * sizeof(float), LP_MEM_CATEGORY_TEMPORARY, "attention tiles");
        if (!heap) { /* no memory for the D-sized tiles: the reference needs none */
            lp_k_attention_fused_backward_ref(dq, dk, dv, dout, out, lse, q, k, v, mask, g, drop);
            return;
        }
    }
    /* GQA with fewer (batch, kv head) units than twice the threads: one task per query head
     * instead, each head's dk, dv in a (B,T,H,D) scratch, summed over the groups after
     * (without the memory, the group tasks still give the same result) */
    float *part = NULL;
    if (grp > 1 && g->B * Hkv < 2 * (int64_t)nthreads)
        part = lp_alloc((size_t)lp_attention_fused_backward_scratch_floats(g) * sizeof(float),
                        LP_MEM_CATEGORY_TEMPORARY, "attention dk/dv per query head");
    bwd_group_fn *group = bwd_group_for(D);
#pragma omp parallel
    {
        tiles w = tiles_bind(heap ? heap + (size_t)omp_get_thread_num() * (size_t)per : NULL, D);
        if (part) {
            float *pk = part, *pv = part + g->B * g->T * C;
#pragma omp for schedule(dynamic, 1)
            for (int64_t bh = 0; bh < g->B * H; bh++) {
                const int64_t bg = bh / grp, hh = bh % grp, off = (bh % H) * D;
                group(w, dq, pk, pv, C, off, dout, out, lse, q, k, v, mask, g, bg, hh, hh + 1, D, drop);
            }
            /* dk, dv (B,T,Hkv,D) = the sums over each group's heads */
#pragma omp for schedule(static)
            for (int64_t bt = 0; bt < g->B * g->T; bt++)
                for (int64_t kv = 0; kv < Hkv; kv++) {
                    float *dkr = dk + bt * g->ldkv + kv * D, *dvr = dv + bt * g->ldkv + kv * D;
                    const float *sk = pk + bt * C + kv * grp * D, *sv = pv + bt * C + kv * grp * D;
                    for (int64_t d = 0; d < D; d++) {
                        float ak = 0.0f, av = 0.0f;
                        for (int64_t hh = 0; hh < grp; hh++)
                            ak += sk[hh * D + d], av += sv[hh * D + d];
                        dkr[d] = ak, dvr[d] = av;
                    }
                }
        } else {
#pragma omp for schedule(dynamic, 1)
            for (int64_t bg = 0; bg < g->B * Hkv; bg++)
                group(w, dq, dk, dv, g->ldkv, (bg % Hkv) * D, dout, out, lse, q, k, v, mask, g, bg, 0, grp, D, drop);
        }
    }
    lp_free(part);
    lp_free(heap);
}
