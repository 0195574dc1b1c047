/* bench_cuda_ops: loupe's CUDA backend on the shapes of bench/gpu/torch_ops.py (DistilBERT
 * batch 32 x seq 128, a Qwen2.5-0.5B-shaped decoder batch 8 x seq 512), timed with CUDA
 * events over the same repetitions (3 warm-ups, then --reps calls). One JSON object per line,
 * as torch_ops.py prints: {"op", "shape", "ms", "impl": "loupe", "gpu"[, "tflops"]};
 * bench/gpu/compare.py joins the two. Exit 77 without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "loupe/core.h"
#include "loupe/kernels.h"

static const lp_backend *be;
static int reps = 20;
static const char *gpu;

static void die(const char *what)
{
    fprintf(stderr, "bench_cuda_ops: %s: %s\n", what, lp_err_msg());
    exit(1);
}

static uint32_t seed = 12345;
static float frand(void)
{
    seed = seed * 1664525u + 1013904223u;
    return (float)(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
}

/* A device buffer of n floats filled with uniform [-1, 1) (or zeros). */
static float *dev_f32(int64_t n, bool zero)
{
    float *d = be->alloc(be->ctx, (size_t)n * sizeof(float), "bench");
    if (!d)
        die("alloc");
    if (zero) {
        if (be->memset(be->ctx, d, 0, (size_t)n * sizeof(float)) != LP_OK)
            die("memset");
        return d;
    }
    float *h = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        h[i] = frand();
    if (be->upload(be->ctx, d, h, (size_t)n * sizeof(float)) != LP_OK)
        die("upload");
    free(h);
    return d;
}

static uint16_t *dev_bf16(int64_t n)
{
    uint16_t *d = be->alloc(be->ctx, (size_t)n * 2, "bench"), *h = malloc((size_t)n * 2);
    if (!d)
        die("alloc");
    for (int64_t i = 0; i < n; i++)
        h[i] = lp_f32_to_bf16(frand());
    if (be->upload(be->ctx, d, h, (size_t)n * 2) != LP_OK)
        die("upload");
    free(h);
    return d;
}

static int32_t *dev_ids(int64_t n, int32_t hi)
{
    int32_t *d = be->alloc(be->ctx, (size_t)n * 4, "bench"), *h = malloc((size_t)n * 4);
    if (!d)
        die("alloc");
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        h[i] = (int32_t)((seed >> 8) % (uint32_t)hi);
    }
    if (be->upload(be->ctx, d, h, (size_t)n * 4) != LP_OK)
        die("upload");
    free(h);
    return d;
}

static void emit(const char *op, const char *shape, double ms, double flops)
{
    printf("{\"op\": \"%s\", \"shape\": \"%s\", \"ms\": %.5f, \"impl\": \"loupe\", \"gpu\": \"%s\"", op, shape, ms, gpu);
    if (flops > 0)
        printf(", \"tflops\": %.2f", flops / ms / 1e9);
    printf("}\n");
    fflush(stdout);
}

/* Times `call` (a statement queuing device work): 3 warm-ups, then reps calls between events. */
#define TIMED(ms, call)                                                                                       \
    do {                                                                                                      \
        for (int w_ = 0; w_ < 3; w_++) {                                                                      \
            call;                                                                                             \
        }                                                                                                     \
        if (be->sync(be->ctx) != LP_OK || lp_cuda_timer_start(be) != LP_OK)                                   \
            die("timer");                                                                                     \
        for (int r_ = 0; r_ < reps; r_++) {                                                                   \
            call;                                                                                             \
        }                                                                                                     \
        if (lp_cuda_timer_stop(be, &(ms)) != LP_OK)                                                           \
            die(#call);                                                                                       \
        (ms) /= reps;                                                                                         \
    } while (0)

static void gemms(void)
{
    static const int64_t shapes[][3] = {{4096, 768, 768},  {4096, 3072, 768}, {4096, 768, 3072}, {4096, 896, 896},
                                        {4096, 4864, 896}, {4096, 896, 4864}, {8192, 8192, 8192}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        char shape[64];
        snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
        double ms, flops = 2.0 * m * n * k;
        float *x = dev_f32(m * k, false), *w = dev_f32(n * k, false), *y = dev_f32(m * n, true);
        for (int tf32 = 0; tf32 < 2; tf32++) { /* y = x @ w^T, as nn.Linear */
            lp_cuda_set_tf32(be, tf32);
            TIMED(ms, be->ops->sgemm(false, true, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n));
            emit(tf32 ? "gemm_tf32" : "gemm_f32", shape, ms, flops);
        }
        lp_cuda_set_tf32(be, false);
        be->free(be->ctx, x);
        be->free(be->ctx, w);
        uint16_t *xb = dev_bf16(m * k), *wb = dev_bf16(n * k);
        TIMED(ms, if (lp_cuda_gemm_bf16(be, false, true, m, n, k, 1.0f, xb, k, wb, k, 0.0f, y, n) != LP_OK)
                      die("gemm_bf16"));
        emit("gemm_bf16", shape, ms, flops);
        be->free(be->ctx, xb);
        be->free(be->ctx, wb);
        be->free(be->ctx, y);
    }
}

static void rowwise(void)
{
    double ms;
    int64_t N = 4096, C = 768;
    float *x = dev_f32(N * C, false), *w = dev_f32(C, false), *b = dev_f32(C, false), *y = dev_f32(N * C, true);
    float *mean = dev_f32(N, true), *rstd = dev_f32(N, true), *dy = dev_f32(N * C, false);
    float *dx = dev_f32(N * C, true), *dw = dev_f32(C, true), *db = dev_f32(C, true);
    TIMED(ms, be->ops->layernorm_forward(y, mean, rstd, x, w, b, N, C, 1e-5f));
    emit("layernorm_forward", "4096x768", ms, 0);
    TIMED(ms, be->ops->layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C));
    emit("layernorm_backward", "4096x768", ms, 0);
    int64_t C2 = 896;
    float *x2 = dev_f32(N * C2, false), *w2 = dev_f32(C2, false), *y2 = dev_f32(N * C2, true);
    TIMED(ms, be->ops->rmsnorm_forward(y2, rstd, x2, w2, N, C2, 1e-6f));
    emit("rmsnorm_forward", "4096x896", ms, 0);
    float *h = dev_f32(N * 3072, false), *g = dev_f32(N * 3072, true);
    TIMED(ms, be->ops->gelu_forward(g, h, N * 3072, LP_GELU_ERF));
    emit("gelu_forward", "4096x3072", ms, 0);
    float *gate = dev_f32(N * 4864, false), *up = dev_f32(N * 4864, false), *a = dev_f32(N * 4864, true);
    TIMED(ms, be->ops->swiglu_forward(a, gate, up, N, 4864, 4864));
    emit("swiglu_forward", "4096x4864", ms, 0);
    float *s = dev_f32(49152 * 128, false), *p = dev_f32(49152 * 128, true);
    TIMED(ms, be->ops->softmax_forward(p, s, 49152, 128));
    emit("softmax_forward", "49152x128", ms, 0);
    static const int64_t vocabs[] = {32000, 151936};
    for (int i = 0; i < 2; i++) {
        int64_t V = vocabs[i];
        float *lg = dev_f32(4096 * V, false), *loss = dev_f32(4096, true), *lse = dev_f32(4096, true);
        int32_t *tg = dev_ids(4096, (int32_t)V);
        TIMED(ms, if (be->ops->cross_entropy_forward(loss, lse, lg, tg, 4096, V, -100) != LP_OK) die("ce"));
        char shape[32];
        snprintf(shape, sizeof shape, "4096x%lld", (long long)V);
        emit("cross_entropy_forward", shape, ms, 0);
        be->free(be->ctx, lg);
        be->free(be->ctx, loss);
        be->free(be->ctx, lse);
        be->free(be->ctx, tg);
    }
    if (be->sync(be->ctx) != LP_OK)
        die("row ops");
}

/* Attention at both workloads' shapes, by kernel: the fused f32 kernels on the CUDA cores
 * ("f32", LP_CUDA_ATTN_FUSED), attention as GEMMs on the tensor cores ("tf32": TF32 on, the
 * AUTO choice at these shapes) and the same GEMMs in f32 ("f32_gemm"); DistilBERT also with
 * its training's attention dropout (p 0.1, the Philox mask), as "<kind>_drop". */
static void attention(void)
{
    static const struct { int64_t B, T, H, Hkv, D; bool causal; const char *tag; } cases[] = {
        {32, 128, 12, 12, 64, false, "distilbert"}, {8, 512, 14, 2, 64, true, "qwen0.5b"}};
    static const struct { const char *name; lp_cuda_attn_mode mode; bool tf32; } kinds[] = {
        {"f32", LP_CUDA_ATTN_FUSED, false}, {"tf32", LP_CUDA_ATTN_AUTO, true}, {"f32_gemm", LP_CUDA_ATTN_GEMM, false}};
    for (int i = 0; i < 2; i++) {
        lp_attn_geom g = {.B = cases[i].B, .T = cases[i].T, .H = cases[i].H, .Hkv = cases[i].Hkv, .D = cases[i].D,
                          .ldq = cases[i].H * cases[i].D, .ldkv = cases[i].Hkv * cases[i].D, .causal = cases[i].causal};
        int64_t nq = g.B * g.T * g.H * g.D, nkv = g.B * g.T * g.Hkv * g.D;
        float *q = dev_f32(nq, false), *k = dev_f32(nkv, false), *v = dev_f32(nkv, false);
        float *o = dev_f32(nq, true), *lse = dev_f32(g.B * g.H * g.T, true), *dout = dev_f32(nq, false);
        float *dq = dev_f32(nq, true), *dk = dev_f32(nkv, true), *dv = dev_f32(nkv, true);
        const lp_attn_dropout drop = {.p = 0.1f, .seed = 1, .stream = 2, .offset = 0, .lane = 0};
        for (int d = 0; d < (i == 0 ? 2 : 1); d++)
            for (size_t kk = 0; kk < sizeof kinds / sizeof *kinds; kk++) {
                const lp_attn_dropout *dp = d ? &drop : NULL;
                lp_cuda_set_attention(be, kinds[kk].mode);
                lp_cuda_set_tf32(be, kinds[kk].tf32);
                if (kinds[kk].mode != LP_CUDA_ATTN_FUSED && !lp_cuda_attention_uses_gemm(be, &g)) {
                    fprintf(stderr, "bench_cuda_ops: attention %s at %s does not take the GEMM path\n", kinds[kk].name,
                            cases[i].tag);
                    exit(1);
                }
                char op[64];
                double ms;
                TIMED(ms, be->ops->attention_fused_forward(o, lse, q, k, v, NULL, &g, dp));
                snprintf(op, sizeof op, "attention_forward_%s%s", kinds[kk].name, d ? "_drop" : "");
                emit(op, cases[i].tag, ms, 0);
                TIMED(ms, be->ops->attention_fused_backward(dq, dk, dv, dout, o, lse, q, k, v, NULL, &g, dp));
                snprintf(op, sizeof op, "attention_backward_%s%s", kinds[kk].name, d ? "_drop" : "");
                emit(op, cases[i].tag, ms, 0);
            }
        lp_cuda_set_attention(be, LP_CUDA_ATTN_AUTO);
        lp_cuda_set_tf32(be, false);
        float *bufs[] = {q, k, v, o, lse, dout, dq, dk, dv};
        for (size_t j = 0; j < sizeof bufs / sizeof *bufs; j++)
            be->free(be->ctx, bufs[j]);
    }
    if (be->sync(be->ctx) != LP_OK)
        die("attention");
}

static void adamw(void)
{
    int64_t n = 66000000; /* DistilBERT's parameters as one flat tensor (torch: 100 tensors) */
    float *p = dev_f32(n, false), *gr = dev_f32(n, false), *m = dev_f32(n, true), *v = dev_f32(n, true);
    double ms;
    int64_t step = 1;
    TIMED(ms, be->ops->adamw_step(p, gr, m, v, n, 1e-4, 0.9, 0.999, 1e-8, 0.01, step++));
    emit("adamw_step", "66M", ms, 0);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_cuda_ops [--reps N]\n");
            return 2;
        }
    }
    if (lp_backend_cuda(&be) != LP_OK) {
        printf("skipped: %s\n", lp_err_msg());
        return 77;
    }
    gpu = lp_cuda_device_info_get(be)->name;
    gemms();
    rowwise();
    attention();
    adamw();
    return 0;
}
