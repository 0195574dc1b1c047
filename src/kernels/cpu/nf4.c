/* NF4 (bitsandbytes layout): quantization bit-identical to bitsandbytes' CPU backend
 * (quantize_4bit blocksize 64, optional double quantization of the absmax), the block
 * scales as its dequantizer reconstructs them, and dequantization (reference + AVX2).
 * This file is compiled with -ffp-contract=off: every rounding below is one float32
 * operation, as in torch; an FMA would change the last bit of the scales. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "cpu_kernels.h"
#include "simd.h"

const float lp_nf4_code[16] = {
    -0x1p+0f,        -0x1.647362p-1f, -0x1.0cd66p-1f,  -0x1.94654p-2f,
    -0x1.23449ap-2f, -0x1.7a6a7ep-3f, -0x1.74f0e2p-4f, 0.0f,
    0x1.45f5fep-4f,  0x1.4995c6p-3f,  0x1.f809bap-3f,  0x1.5a0674p-2f,
    0x1.c3497p-2f,   0x1.200f56p-1f,  0x1.722766p-1f,  0x1p+0f,
};

/* create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), as float32. */
const float lp_nf4_dynamic_map[256] = {
    -0x1.fc6666p-1f,  -0x1.f53334p-1f,  -0x1.eep-1f,      -0x1.e6ccccp-1f,
    -0x1.df999ap-1f,  -0x1.d86666p-1f,  -0x1.d13334p-1f,  -0x1.cap-1f,
    -0x1.c2ccccp-1f,  -0x1.bb999ap-1f,  -0x1.b46666p-1f,  -0x1.ad3334p-1f,
    -0x1.a6p-1f,      -0x1.9eccccp-1f,  -0x1.97999ap-1f,  -0x1.906666p-1f,
    -0x1.893334p-1f,  -0x1.82p-1f,      -0x1.7accccp-1f,  -0x1.73999ap-1f,
    -0x1.6c6668p-1f,  -0x1.653334p-1f,  -0x1.5ep-1f,      -0x1.56ccccp-1f,
    -0x1.4f999ap-1f,  -0x1.486668p-1f,  -0x1.413334p-1f,  -0x1.3ap-1f,
    -0x1.32ccccp-1f,  -0x1.2b999ap-1f,  -0x1.246668p-1f,  -0x1.1d3334p-1f,
    -0x1.16p-1f,      -0x1.0eccccp-1f,  -0x1.079998p-1f,  -0x1.006666p-1f,
    -0x1.f26664p-2f,  -0x1.e4p-2f,      -0x1.d59998p-2f,  -0x1.c73334p-2f,
    -0x1.b8ccccp-2f,  -0x1.aa6666p-2f,  -0x1.9cp-2f,      -0x1.8d9998p-2f,
    -0x1.7f3334p-2f,  -0x1.70ccccp-2f,  -0x1.626666p-2f,  -0x1.54p-2f,
    -0x1.459998p-2f,  -0x1.373334p-2f,  -0x1.28ccccp-2f,  -0x1.1a6668p-2f,
    -0x1.0cp-2f,      -0x1.fb3332p-3f,  -0x1.de6666p-3f,  -0x1.c1999ap-3f,
    -0x1.a4ccccp-3f,  -0x1.88p-3f,      -0x1.6b3334p-3f,  -0x1.4e6666p-3f,
    -0x1.31999ap-3f,  -0x1.14ccccp-3f,  -0x1.fp-4f,       -0x1.b66668p-4f,
    -0x1.93d70ap-4f,  -0x1.8851eep-4f,  -0x1.7ccccep-4f,  -0x1.7147aep-4f,
    -0x1.65c29p-4f,   -0x1.5a3d7p-4f,   -0x1.4eb854p-4f,  -0x1.433334p-4f,
    -0x1.37ae14p-4f,  -0x1.2c28f6p-4f,  -0x1.20a3d6p-4f,  -0x1.151ebap-4f,
    -0x1.09999ap-4f,  -0x1.fc28f6p-5f,  -0x1.e51ebap-5f,  -0x1.ce147ap-5f,
    -0x1.b70a3ep-5f,  -0x1.ap-5f,       -0x1.88f5c2p-5f,  -0x1.71eb86p-5f,
    -0x1.5ae146p-5f,  -0x1.43d70ap-5f,  -0x1.2ccccep-5f,  -0x1.15c29p-5f,
    -0x1.fd70a4p-6f,  -0x1.cf5c2ap-6f,  -0x1.a147aep-6f,  -0x1.733334p-6f,
    -0x1.451ebap-6f,  -0x1.170a3ep-6f,  -0x1.d1eb86p-7f,  -0x1.75c29p-7f,
    -0x1.3e76c8p-7f,  -0x1.2c083p-7f,   -0x1.19999ap-7f,  -0x1.072b02p-7f,
    -0x1.e978d4p-8f,  -0x1.c49ba6p-8f,  -0x1.9fbe76p-8f,  -0x1.7ae148p-8f,
    -0x1.56041ap-8f,  -0x1.3126e8p-8f,  -0x1.0c49bap-8f,  -0x1.ced914p-9f,
    -0x1.851eb8p-9f,  -0x1.3b645ap-9f,  -0x1.e353f8p-10f, -0x1.4fdf3ap-10f,
    -0x1.eecbfep-11f, -0x1.b3d07cp-11f, -0x1.78d5p-11f,   -0x1.3dd982p-11f,
    -0x1.02de02p-11f, -0x1.8fc506p-12f, -0x1.19ce0ap-12f, -0x1.47ae16p-13f,
    -0x1.743e96p-14f, -0x1.15df66p-14f, -0x1.6f0068p-15f, -0x1.64840cp-16f,
    -0x1.040bfep-17f, -0x1.b43528p-19f, -0x1.27476ep-21f, 0.0f,
    0x1.27476ep-21f,  0x1.b43528p-19f,  0x1.040bfep-17f,  0x1.64840cp-16f,
    0x1.6f0068p-15f,  0x1.15df66p-14f,  0x1.743e96p-14f,  0x1.47ae16p-13f,
    0x1.19ce0ap-12f,  0x1.8fc506p-12f,  0x1.02de02p-11f,  0x1.3dd982p-11f,
    0x1.78d5p-11f,    0x1.b3d07cp-11f,  0x1.eecbfep-11f,  0x1.4fdf3ap-10f,
    0x1.e353f8p-10f,  0x1.3b645ap-9f,   0x1.851eb8p-9f,   0x1.ced914p-9f,
    0x1.0c49bap-8f,   0x1.3126e8p-8f,   0x1.56041ap-8f,   0x1.7ae148p-8f,
    0x1.9fbe76p-8f,   0x1.c49ba6p-8f,   0x1.e978d4p-8f,   0x1.072b02p-7f,
    0x1.19999ap-7f,   0x1.2c083p-7f,    0x1.3e76c8p-7f,   0x1.75c29p-7f,
    0x1.d1eb86p-7f,   0x1.170a3ep-6f,   0x1.451ebap-6f,   0x1.733334p-6f,
    0x1.a147aep-6f,   0x1.cf5c2ap-6f,   0x1.fd70a4p-6f,   0x1.15c29p-5f,
    0x1.2ccccep-5f,   0x1.43d70ap-5f,   0x1.5ae146p-5f,   0x1.71eb86p-5f,
    0x1.88f5c2p-5f,   0x1.ap-5f,        0x1.b70a3ep-5f,   0x1.ce147ap-5f,
    0x1.e51ebap-5f,   0x1.fc28f6p-5f,   0x1.09999ap-4f,   0x1.151ebap-4f,
    0x1.20a3d6p-4f,   0x1.2c28f6p-4f,   0x1.37ae14p-4f,   0x1.433334p-4f,
    0x1.4eb854p-4f,   0x1.5a3d7p-4f,    0x1.65c29p-4f,    0x1.7147aep-4f,
    0x1.7ccccep-4f,   0x1.8851eep-4f,   0x1.93d70ap-4f,   0x1.b66668p-4f,
    0x1.fp-4f,        0x1.14ccccp-3f,   0x1.31999ap-3f,   0x1.4e6666p-3f,
    0x1.6b3334p-3f,   0x1.88p-3f,       0x1.a4ccccp-3f,   0x1.c1999ap-3f,
    0x1.de6666p-3f,   0x1.fb3332p-3f,   0x1.0cp-2f,       0x1.1a6668p-2f,
    0x1.28ccccp-2f,   0x1.373334p-2f,   0x1.459998p-2f,   0x1.54p-2f,
    0x1.626666p-2f,   0x1.70ccccp-2f,   0x1.7f3334p-2f,   0x1.8d9998p-2f,
    0x1.9cp-2f,       0x1.aa6666p-2f,   0x1.b8ccccp-2f,   0x1.c73334p-2f,
    0x1.d59998p-2f,   0x1.e4p-2f,       0x1.f26664p-2f,   0x1.006666p-1f,
    0x1.079998p-1f,   0x1.0eccccp-1f,   0x1.16p-1f,       0x1.1d3334p-1f,
    0x1.246668p-1f,   0x1.2b999ap-1f,   0x1.32ccccp-1f,   0x1.3ap-1f,
    0x1.413334p-1f,   0x1.486668p-1f,   0x1.4f999ap-1f,   0x1.56ccccp-1f,
    0x1.5ep-1f,       0x1.653334p-1f,   0x1.6c6668p-1f,   0x1.73999ap-1f,
    0x1.7accccp-1f,   0x1.82p-1f,       0x1.893334p-1f,   0x1.906666p-1f,
    0x1.97999ap-1f,   0x1.9eccccp-1f,   0x1.a6p-1f,       0x1.ad3334p-1f,
    0x1.b46666p-1f,   0x1.bb999ap-1f,   0x1.c2ccccp-1f,   0x1.cap-1f,
    0x1.d13334p-1f,   0x1.d86666p-1f,   0x1.df999ap-1f,   0x1.e6ccccp-1f,
    0x1.eep-1f,       0x1.f53334p-1f,   0x1.fc6666p-1f,   0x1p+0f,
};

/* ---- torch.mean over a float32 vector, in torch's own summation order ------------------
 * bitsandbytes takes the double-quantization offset as absmax.mean(); on CPU torch computes
 * that as a float32 sum divided by n, the sum being ATen's cascade sum (SumKernel.cpp) over
 * 8-float vectors: vectors are grouped four per row, rows accumulate into 4 levels of
 * partial sums that cascade every 16 rows; the scalar tail is summed first, then the 8
 * lanes in order. Reproducing the order makes the offset bit-identical (a sequential or
 * double sum differs by an ulp on about half of all matrices). Checked against torch 2.15
 * (one thread) on random vectors of 3 to 40000 values: zero mismatches; with several
 * threads torch splits sums above 32768 values (over 2M weights) differently. */
#define TV 8 /* lanes */
#define TILP 4
#define TLEVELS 4

typedef struct {
    float v[TV];
} tvec;

static void tvec_add(tvec *a, const tvec *b)
{
    for (int l = 0; l < TV; l++)
        a->v[l] += b->v[l];
}

static int64_t ceil_log2(int64_t x)
{
    if (x <= 2)
        return 1;
    int64_t r = 0;
    for (uint64_t y = (uint64_t)(x - 1); y; y >>= 1)
        r++;
    return r;
}

static float torch_mean_f32(const float *x, int64_t n)
{
    int64_t nvec = n / TV;
    if (nvec == 0) {
        /* fewer values than one vector: torch's scalar path (4 interleaved partial sums) */
        float p[TILP] = {0};
        int64_t r4 = n / TILP;
        for (int64_t r = 0; r < r4; r++)
            for (int k = 0; k < TILP; k++)
                p[k] += x[r * TILP + k];
        for (int64_t t = r4 * TILP; t < n; t++)
            p[0] += x[t];
        for (int k = 1; k < TILP; k++)
            p[0] += p[k];
        return p[0] / (float)n;
    }
    const tvec *vx = (const tvec *)x;
    int64_t rows = nvec / TILP;
    int64_t level_power = ceil_log2(rows) / TLEVELS;
    if (level_power < 4)
        level_power = 4;
    int64_t level_step = (int64_t)1 << level_power, level_mask = level_step - 1;
    tvec acc[TLEVELS][TILP];
    memset(acc, 0, sizeof acc);
    int64_t i = 0;
    while (i + level_step <= rows) {
        for (int64_t j = 0; j < level_step; j++, i++)
            for (int k = 0; k < TILP; k++)
                tvec_add(&acc[0][k], &vx[i * TILP + k]);
        for (int j = 1; j < TLEVELS; j++) {
            for (int k = 0; k < TILP; k++) {
                tvec_add(&acc[j][k], &acc[j - 1][k]);
                memset(&acc[j - 1][k], 0, sizeof(tvec));
            }
            if ((i & (level_mask << (j * level_power))) != 0)
                break;
        }
    }
    for (; i < rows; i++)
        for (int k = 0; k < TILP; k++)
            tvec_add(&acc[0][k], &vx[i * TILP + k]);
    for (int j = 1; j < TLEVELS; j++)
        for (int k = 0; k < TILP; k++)
            tvec_add(&acc[0][k], &acc[j][k]);
    tvec part = acc[0][0];
    for (int64_t v = rows * TILP; v < nvec; v++)
        tvec_add(&part, &vx[v]);
    for (int k = 1; k < TILP; k++)
        tvec_add(&part, &acc[0][k]);
    float s = 0.0f;
    for (int64_t t = nvec * TV; t < n; t++)
        s += x[t];
    for (int l = 0; l < TV; l++)
        s += part.v[l];
    return s / (float)n;
}

/* ---- the native 8-bit blockwise quantizer's rounding ----------------------------------
 * bitsandbytes' CPU quantize_blockwise maps v in [-1, 1] to a 65536-point grid and reads
 * the code from a table built by nearest search on that grid (first minimum), not the
 * exact nearest code (see tests/golden/nf4/golden.json, double_quant.rounding_cpu). */
static uint8_t dq_lut[65536];
static pthread_once_t dq_lut_once = PTHREAD_ONCE_INIT;

static void dq_lut_build(void)
{
    /* plain search over all 256 codes (~20 ms once): a shortcut that starts from the
     * previous answer could miss a tie that float32 rounding makes in the distances */
    for (int j = 0; j < 65536; j++) {
        float g = ((float)j / 65535.0f) * 2.0f - 1.0f;
        float best = fabsf(g - lp_nf4_dynamic_map[0]);
        int bi = 0;
        for (int k = 1; k < 256; k++) {
            float d = fabsf(g - lp_nf4_dynamic_map[k]);
            if (d < best)
                best = d, bi = k;
        }
        dq_lut[j] = (uint8_t)bi;
    }
}

static uint8_t dq_code(float x, float nested)
{
    if (nested == 0.0f) /* 0/0: bitsandbytes stores code 0 (the scale is then just offset) */
        return 0;
    float v = x / nested;
    v = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
    float t = (v + 1.0f) * 0.5f;
    t = t * 65535.0f;
    t = t + 0.5f;
    return dq_lut[(uint32_t)t];
}

/* ---- quantize ---------------------------------------------------------------------- */

/* Code index = number of thresholds below s, the thresholds being the float32 midpoints
 * of neighbouring codes: a value exactly on one goes to the lower code (torch.bucketize). */
static int nf4_index(float s, const float *mids)
{
    int q = 0;
    for (int k = 0; k < 15; k++)
        q += mids[k] < s;
    return q;
}

void lp_k_nf4_quantize(lp_qweight *q, const float *w, float *absmax_scratch)
{
    float mids[15];
    for (int k = 0; k < 15; k++)
        mids[k] = (lp_nf4_code[k] + lp_nf4_code[k + 1]) / 2.0f;
    int64_t n = q->n, nb = q->n_blocks;
    float *am_all = q->double_quant ? absmax_scratch : q->absmax;
    memset(q->codes, 0, (size_t)((n + 1) / 2));
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * LP_NF4_BLOCK, hi = lo + LP_NF4_BLOCK < n ? lo + LP_NF4_BLOCK : n;
        float am = 0.0f;
        for (int64_t i = lo; i < hi; i++) {
            float a = fabsf(w[i]);
            am = a > am ? a : am;
        }
        am_all[b] = am;
        float den = am > 1e-38f ? am : 1e-38f;
        float rcp = 1.0f / den;
        bool full = hi - lo == LP_NF4_BLOCK;
        for (int64_t i = lo; i < hi; i++) {
            float s = full ? w[i] * rcp : w[i] / den;
            s = s < -1.0f ? -1.0f : s > 1.0f ? 1.0f : s;
            int c = nf4_index(s, mids);
            /* blocks hold an even count (64), so a byte never straddles two threads */
            q->codes[i >> 1] |= (uint8_t)((i & 1) ? c : c << 4);
        }
    }
    if (n & 1)
        q->codes[n >> 1] |= 7; /* padding element: scaled 0.0 -> code 7 */
    if (!q->double_quant)
        return;
    pthread_once(&dq_lut_once, dq_lut_build);
    float offset = torch_mean_f32(am_all, nb);
    q->offset = offset;
    for (int64_t c = 0; c < q->n_nested; c++) {
        int64_t lo = c * LP_NF4_NESTED_BLOCK,
                hi = lo + LP_NF4_NESTED_BLOCK < nb ? lo + LP_NF4_NESTED_BLOCK : nb;
        float m = 0.0f;
        for (int64_t b = lo; b < hi; b++) {
            float a = fabsf(am_all[b] - offset);
            m = a > m ? a : m;
        }
        q->nested_absmax[c] = m;
        for (int64_t b = lo; b < hi; b++)
            q->absmax_q[b] = dq_code(am_all[b] - offset, m);
    }
}

void lp_k_nf4_block_scales(const lp_qweight *w, int64_t b0, int64_t nb, float *scales)
{
    if (!w->double_quant) {
        memcpy(scales, w->absmax + b0, (size_t)nb * sizeof(float));
        return;
    }
    for (int64_t b = b0; b < b0 + nb; b++) {
        float t = lp_nf4_dynamic_map[w->absmax_q[b]] * w->nested_absmax[b / LP_NF4_NESTED_BLOCK];
        scales[b - b0] = t + w->offset; /* two roundings, never an FMA */
    }
}

/* ---- dequantize -------------------------------------------------------------------- */

static inline int nf4_at(const uint8_t *codes, int64_t i)
{
    return (i & 1) ? codes[i >> 1] & 15 : codes[i >> 1] >> 4;
}

/* The block whose scale element e uses, and the end of the run of elements from e on that
 * share it (capped at end). The layout is flat (block = e / 64); bitsandbytes' native CPU
 * dequantizer instead looks scales up per row when cols % 16 == 0 (its AVX-512 path:
 * block = row * (cols / 64) + col / 64), which differs when cols % 64 != 0; w->bnb_cpu_rows
 * reproduces that (see lp_qweight). */
static inline int64_t nf4_block_run(const lp_qweight *w, int64_t e, int64_t end, int64_t *stop)
{
    int64_t C = w->cols;
    if (!w->bnb_cpu_rows || C % 16 != 0 || C % LP_NF4_BLOCK == 0) {
        int64_t b = e / LP_NF4_BLOCK, s = (b + 1) * LP_NF4_BLOCK;
        *stop = s < end ? s : end;
        return b;
    }
    int64_t r = e / C, c = e % C, seg = c / LP_NF4_BLOCK;
    int64_t s = r * C + ((seg + 1) * LP_NF4_BLOCK < C ? (seg + 1) * LP_NF4_BLOCK : C);
    *stop = s < end ? s : end;
    return r * (C / LP_NF4_BLOCK) + seg;
}

void lp_k_nf4_dequantize_ref(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t e = start + i, stop;
        float sc;
        lp_k_nf4_block_scales(w, nf4_block_run(w, e, e + 1, &stop), 1, &sc);
        out[i] = lp_nf4_code[nf4_at(w->codes, e)] * sc;
    }
}

/* Elements [i0, i1) of one block, all with scale sc, into out[0 ..). */
static void nf4_span(float *out, const uint8_t *codes, int64_t i0, int64_t i1, float sc)
{
    int64_t i = i0;
    if ((i & 1) && i < i1)
        *out++ = lp_nf4_code[codes[i >> 1] & 15] * sc, i++;
#ifdef LP_HAVE_AVX2
    /* 8 codes (4 bytes) at a time: duplicate each byte, shift the even lanes by 4, mask,
     * look the 16-entry table up as two 8-lane permutes blended on bit 3 */
    const __m256 tlo = _mm256_loadu_ps(lp_nf4_code), thi = _mm256_loadu_ps(lp_nf4_code + 8);
    const __m256 vs = _mm256_set1_ps(sc);
    const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m256i sh = _mm256_setr_epi32(4, 0, 4, 0, 4, 0, 4, 0);
    const __m256i m15 = _mm256_set1_epi32(15);
    for (; i + 8 <= i1; i += 8, out += 8) {
        uint32_t four;
        memcpy(&four, codes + (i >> 1), 4);
        __m128i b = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)four), dup);
        __m256i idx = _mm256_and_si256(_mm256_srlv_epi32(_mm256_cvtepu8_epi32(b), sh), m15);
        __m256 lo = _mm256_permutevar8x32_ps(tlo, idx), hi = _mm256_permutevar8x32_ps(thi, idx);
        __m256 v = _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
        _mm256_storeu_ps(out, _mm256_mul_ps(v, vs));
    }
#endif
    for (; i < i1; i++)
        *out++ = lp_nf4_code[nf4_at(codes, i)] * sc;
}

void lp_k_nf4_dequantize_opt(float *out, const lp_qweight *w, int64_t start, int64_t n)
{
    int64_t end = start + n;
    for (int64_t e = start, stop; e < end; e = stop) {
        float sc;
        lp_k_nf4_block_scales(w, nf4_block_run(w, e, end, &stop), 1, &sc);
        nf4_span(out + (e - start), w->codes, e, stop, sc);
    }
}
