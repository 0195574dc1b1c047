/* Dense peak FLOP/s of NVIDIA GPUs from (compute capability, SMs, clock): FLOP per clock
 * per SM per architecture, derived from NVIDIA's published dense (no sparsity) figures,
 * e.g. H100 SXM 989.4 TFLOP/s bf16 = 4096 x 132 SMs x 1830 MHz; A100 312 = 2048 x 108 x
 * 1410; L4 121 = 1024 x 58 x 2040; B200 2250 = 8192 x 148 x ~1855. Used for MFU. */
#include "prof_internal.h"

#include <string.h>

typedef struct arch {
    int major, minor; /* minor -1: any */
    const char *name;
    int per_clk[LP_GPU_PEAK__COUNT]; /* bf16, fp16, tf32, fp32, fp8; 0 = not supported */
} arch;

static const arch archs[] = {
    {7, 0, "Volta", {0, 1024, 0, 128, 0}},
    {7, 2, "Volta", {0, 1024, 0, 128, 0}},
    {7, 5, "Turing", {0, 1024, 0, 128, 0}},
    {8, 0, "Ampere GA100", {2048, 2048, 1024, 128, 0}},
    {8, 6, "Ampere GA10x", {1024, 1024, 512, 256, 0}},
    {8, 7, "Ampere GA10B", {1024, 1024, 512, 256, 0}},
    {8, 9, "Ada", {1024, 1024, 512, 256, 2048}},
    {9, 0, "Hopper", {4096, 4096, 2048, 256, 8192}},
    {10, -1, "Blackwell", {8192, 8192, 4096, 256, 16384}},
    {12, -1, "Blackwell GB20x", {1024, 1024, 512, 256, 2048}},
};

static const char *const dt_names[LP_GPU_PEAK__COUNT] = {"bf16", "fp16", "tf32", "fp32", "fp8"};

const char *lp_gpu_peak_dtype_name(lp_gpu_peak_dtype t)
{
    return (unsigned)t < LP_GPU_PEAK__COUNT ? dt_names[t] : "?";
}

lp_status lp_gpu_peak_flops(int cc_major, int cc_minor, int n_sms, double clock_mhz, lp_gpu_peak_dtype t,
                            double *flops, char *why, size_t cap)
{
    *flops = 0;
    if (why && cap)
        why[0] = '\0';
    if ((unsigned)t >= LP_GPU_PEAK__COUNT)
        return lp_err(LP_STATUS_INVALID_ARG, "GPU peak: dtype %d out of range", (int)t);
    if (n_sms <= 0 || !(clock_mhz > 0))
        return lp_err(LP_STATUS_INVALID_ARG, "GPU peak: needs SMs > 0 and a clock > 0 (got %d SMs, %g MHz)",
                      n_sms, clock_mhz);
    const arch *a = NULL;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (archs[i].major == cc_major && (archs[i].minor < 0 || archs[i].minor == cc_minor)) {
            a = &archs[i];
            break;
        }
    if (!a)
        return lp_err(LP_STATUS_UNSUPPORTED, "GPU peak: no FLOP/clock table for sm_%d%d", cc_major, cc_minor);
    int per = a->per_clk[t];
    if (!per)
        return lp_err(LP_STATUS_UNSUPPORTED, "GPU peak: sm_%d%d (%s) has no %s tensor cores", cc_major,
                      cc_minor, a->name, dt_names[t]);
    *flops = (double)per * n_sms * clock_mhz * 1e6;
    if (why && cap)
        snprintf(why, cap, "sm_%d%d (%s): %d dense %s FLOP/clk/SM x %d SMs x %.0f MHz = %.1f TFLOP/s",
                 cc_major, cc_minor, a->name, per, dt_names[t], n_sms, clock_mhz, *flops / 1e12);
    return LP_OK;
}

/* Cards whose published dense peaks use a clock below their max SM clock (NVML/CUDA report
 * the max, e.g. 1980 MHz on H100 SXM and H200, while NVIDIA quotes 989.4 TFLOP/s bf16 at
 * 1830): the clock the datasheet figure implies. Matched on the device name and SMs. */
static const struct {
    const char *name_part;
    int sms;
    int mhz;
} quoted[] = {
    {"H100 80GB HBM3", 132, 1830}, /* H100 SXM5 */
    {"H100 SXM", 132, 1830},       {"H200", 132, 1830},
    {"H100 PCIe", 114, 1620},      {"H100 NVL", 132, 1545}, /* 835 TFLOP/s bf16 dense */
};

lp_status lp_gpu_peak_for_device(const lp_gpu_device_props *d, lp_gpu_peak_dtype t, double *flops, char *why,
                                 size_t cap)
{
    int mhz = d->max_sm_clock_mhz;
    const char *src = "max SM clock";
    for (size_t i = 0; i < sizeof quoted / sizeof quoted[0]; i++)
        if (strstr(d->name, quoted[i].name_part) && d->num_sms == quoted[i].sms) {
            mhz = quoted[i].mhz;
            src = "NVIDIA's quoted clock for this card";
            break;
        }
    char base[200];
    lp_status st =
        lp_gpu_peak_flops(d->compute_major, d->compute_minor, d->num_sms, mhz, t, flops, base, sizeof base);
    if (st != LP_OK)
        return st;
    if (why && cap)
        snprintf(why, cap, "%s: %s (%s)", d->name, base, src);
    return LP_OK;
}
