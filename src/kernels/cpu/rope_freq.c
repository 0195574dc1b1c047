/* RoPE inverse frequencies, the float32 arithmetic of transformers' rope initializers
 * (modeling_rope_utils.py and LlamaRotaryEmbedding.compute_default_rope_parameters): every
 * tensor step is one float32 rounding, in torch's order, with a Python scalar operand cast to
 * float32 first; `scalar / tensor` is torch's reciprocal(tensor) * scalar; the scalar-only
 * steps (yarn's correction range and attention factor) are doubles, as Python computes them.
 * Compiled with -ffp-contract=off so no product and sum fuse into an FMA (src/kernels/
 * CMakeLists.txt). The one step that cannot match bit for bit is theta^(2i/D): torch's
 * vectorized float pow is not correctly rounded; this one is, so inv_freq can differ from
 * transformers' by one ulp (tests/golden/decoder_ops records how often). */
#include <math.h>

#include "cpu_kernels.h"

#define TWO_PI 6.283185307179586

/* theta^(2i/D) in float32: the exponent is the float32 quotient torch forms from
 * arange(0, D, 2).float() / D; base the float32 of theta. */
static float pos_freq(float base, int64_t i, int64_t D)
{
    float e = (float)(2 * i) / (float)D;
    return (float)pow((double)base, (double)e);
}

static void default_freqs(float *inv_freq, float base, int64_t D)
{
    for (int64_t i = 0; i < D / 2; i++)
        inv_freq[i] = (1.0f / pos_freq(base, i, D)) * 1.0f; /* 1.0 / t: reciprocal(t) * 1.0 */
}

static void llama3_freqs(float *inv_freq, const lp_rope_scaling *s, float base, int64_t D)
{
    default_freqs(inv_freq, base, D);
    double old_ctx = (double)s->original_max_pos;
    float low_wl = (float)(old_ctx / s->low_freq_factor), high_wl = (float)(old_ctx / s->high_freq_factor);
    float factor = (float)s->factor, lff = (float)s->low_freq_factor;
    float span = (float)(s->high_freq_factor - s->low_freq_factor);
    for (int64_t i = 0; i < D / 2; i++) {
        float inv = inv_freq[i];
        float wavelen = (1.0f / inv) * (float)TWO_PI;
        float inv_llama = wavelen > low_wl ? inv / factor : inv;
        float smooth = ((1.0f / wavelen) * (float)old_ctx - lff) / span;
        float smoothed = ((1.0f - smooth) * inv_llama) / factor + smooth * inv_llama;
        bool medium = !(wavelen < high_wl) && !(wavelen > low_wl);
        inv_freq[i] = medium ? smoothed : inv_llama;
    }
}

/* yarn's dimension at which a frequency makes num_rot rotations over max_pos positions */
static double correction_dim(double num_rot, int64_t D, double theta, double max_pos)
{
    return ((double)D * log(max_pos / (num_rot * TWO_PI))) / (2.0 * log(theta));
}

static double yarn_mscale(double scale, double m)
{
    return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

static double yarn_freqs(float *inv_freq, const lp_rope_scaling *s, double theta, float base, int64_t D)
{
    double factor = s->factor, af = s->attention_factor;
    if (af == 0.0)
        af = (s->mscale != 0.0 && s->mscale_all_dim != 0.0)
                 ? yarn_mscale(factor, s->mscale) / yarn_mscale(factor, s->mscale_all_dim)
                 : yarn_mscale(factor, 1.0);
    double beta_fast = s->beta_fast != 0.0 ? s->beta_fast : 32.0;
    double beta_slow = s->beta_slow != 0.0 ? s->beta_slow : 1.0;
    double low = correction_dim(beta_fast, D, theta, (double)s->original_max_pos);
    double high = correction_dim(beta_slow, D, theta, (double)s->original_max_pos);
    if (!s->no_truncate) {
        low = floor(low);
        high = ceil(high);
    }
    low = low > 0.0 ? low : 0.0;
    high = high < (double)(D - 1) ? high : (double)(D - 1);
    if (low == high)
        high += 0.001; /* transformers' guard against a zero-width ramp */
    float lo_f = (float)low, span = (float)(high - low), ff = (float)factor;
    for (int64_t i = 0; i < D / 2; i++) {
        float p = pos_freq(base, i, D);
        float extra = (1.0f / p) * 1.0f, inter = (1.0f / (ff * p)) * 1.0f;
        float ramp = ((float)i - lo_f) / span;
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        float ef = 1.0f - ramp; /* the share that keeps the extrapolated (unscaled) frequency */
        inv_freq[i] = inter * (1.0f - ef) + extra * ef;
    }
    return af;
}

static lp_status check_scaling(const lp_rope_scaling *s)
{
    static const char *names[] = {"default", "linear", "llama3", "yarn", "dynamic"};
    if ((unsigned)s->type > LP_ROPE_TYPE_DYNAMIC)
        return lp_err(LP_STATUS_INVALID_ARG, "rope_scaling: unknown rope type %d", (int)s->type);
    const char *t = names[s->type];
    if (s->type == LP_ROPE_TYPE_DYNAMIC)
        return lp_err(
            LP_STATUS_UNSUPPORTED,
            "rope_scaling: rope_type \"dynamic\" is not supported (its frequencies change with each batch's "
            "length); use \"linear\" or \"yarn\"");
    if (s->type == LP_ROPE_TYPE_DEFAULT)
        return LP_OK;
    if (!(s->factor > 0.0) || !isfinite(s->factor))
        return lp_err(LP_STATUS_INVALID_ARG, "rope_scaling (%s): factor %g must be finite and > 0", t,
                      s->factor);
    if (s->type == LP_ROPE_TYPE_LINEAR)
        return LP_OK;
    if (s->original_max_pos <= 0)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "rope_scaling (%s): original_max_position_embeddings %lld must be > 0", t,
                      (long long)s->original_max_pos);
    if (s->type == LP_ROPE_TYPE_LLAMA3) {
        if (!(s->low_freq_factor > 0.0) || !(s->high_freq_factor > 0.0))
            return lp_err(LP_STATUS_INVALID_ARG,
                          "rope_scaling (llama3): low_freq_factor %g and high_freq_factor %g "
                          "must be > 0",
                          s->low_freq_factor, s->high_freq_factor);
        if (s->high_freq_factor == s->low_freq_factor)
            return lp_err(LP_STATUS_INVALID_ARG,
                          "rope_scaling (llama3): high_freq_factor equals low_freq_factor (%g)",
                          s->low_freq_factor);
        return LP_OK;
    }
    if (s->beta_fast < 0.0 || s->beta_slow < 0.0 || s->mscale < 0.0 || s->mscale_all_dim < 0.0 ||
        s->attention_factor < 0.0)
        return lp_err(LP_STATUS_INVALID_ARG,
                      "rope_scaling (yarn): beta_fast, beta_slow, mscale, mscale_all_dim "
                      "and attention_factor must not be negative");
    return LP_OK;
}

lp_status lp_rope_inv_freq(float *inv_freq, int64_t D, double theta, const lp_rope_scaling *s,
                           float *attn_factor)
{
    static const lp_rope_scaling none = {.type = LP_ROPE_TYPE_DEFAULT};
    if (!s)
        s = &none;
    if (D < 2 || D % 2)
        return lp_err(LP_STATUS_INVALID_ARG, "rope: head size %lld must be even and positive", (long long)D);
    if (!(theta > 1.0) || !isfinite(theta))
        return lp_err(LP_STATUS_INVALID_ARG, "rope: rope_theta %g must be finite and > 1", theta);
    lp_status st = check_scaling(s);
    if (st != LP_OK)
        return st;
    float base = (float)theta;
    double af = 1.0;
    switch (s->type) {
    case LP_ROPE_TYPE_LINEAR:
        default_freqs(inv_freq, base, D);
        for (int64_t i = 0; i < D / 2; i++)
            inv_freq[i] /= (float)s->factor;
        break;
    case LP_ROPE_TYPE_LLAMA3:
        llama3_freqs(inv_freq, s, base, D);
        break;
    case LP_ROPE_TYPE_YARN:
        af = yarn_freqs(inv_freq, s, theta, base, D);
        break;
    default:
        default_freqs(inv_freq, base, D);
        break;
    }
    if (attn_factor)
        *attn_factor = (float)af;
    return LP_OK;
}
