/* KV-cache decoding kernels: kv_write and attention_decode, reference against optimized over a
 * table of geometries (GQA and MQA, sliding windows, left and right padding holes, a query that
 * sees nothing, odd head sizes, f32 and f16 caches), with guard bytes and NaN-filled outputs,
 * and both against the prefill attention's last query row: decoding the token at column T-1
 * from the cache is the causal attention's row T-1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "kernel_test_util.h"
#include "loupe/core.h"

enum { PAD_NONE = 0, PAD_LEFT, PAD_RIGHT, PAD_HOLES, PAD_ALL_BUT_FIRST };

typedef struct dec_case {
    int64_t B, T, H, Hkv, D, window;
    int pad;
    bool f16;
} dec_case;

static const dec_case cases[] = {
    /* B, T, H, Hkv, D, window, padding, f16 */
    {1, 1, 1, 1, 8, 0, PAD_NONE, false},
    {1, 1, 1, 1, 8, 0, PAD_NONE, true},
    {2, 7, 4, 2, 8, 0, PAD_LEFT, false},
    {3, 33, 4, 1, 16, 0, PAD_RIGHT, false},     /* MQA; right padding: holes before the query */
    {3, 33, 4, 1, 16, 0, PAD_RIGHT, true},
    {2, 65, 9, 3, 64, 0, PAD_LEFT, false},      /* SmolLM2-135M's heads */
    {2, 65, 9, 3, 64, 0, PAD_LEFT, true},
    {2, 130, 14, 2, 64, 0, PAD_HOLES, false},   /* Qwen2.5-0.5B's heads */
    {2, 130, 14, 2, 64, 40, PAD_HOLES, true},   /* sliding window crossing chunks */
    {1, 200, 2, 2, 128, 70, PAD_NONE, false},
    {2, 17, 2, 1, 1, 5, PAD_RIGHT, false},      /* D = 1 */
    {2, 19, 6, 3, 34, 0, PAD_LEFT, true},       /* D not a multiple of 8: conversion tails */
    {2, 40, 4, 2, 32, 3, PAD_ALL_BUT_FIRST, false}, /* row 1: its only real key outside the window */
};

static int32_t *make_mask(const dec_case *c)
{
    int32_t *mask = kt_alloc((size_t)(c->B * c->T) * sizeof *mask);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t t = 0; t < c->T; t++) {
            int32_t v = 1;
            const int64_t pad = (b * 3) % (c->T > 1 ? c->T : 1); // rows differ in length
            if (c->pad == PAD_LEFT)
                v = t >= pad;
            else if (c->pad == PAD_RIGHT)
                v = t < c->T - pad || t == c->T - 1; // the query's own column is real
            else if (c->pad == PAD_HOLES)
                v = (t + b) % 5 != 2 || t == c->T - 1;
            else if (c->pad == PAD_ALL_BUT_FIRST)
                v = b == 0 || t == 0;
            mask[b * c->T + t] = v;
        }
    return mask;
}

static int run_case(const dec_case *c)
{
    const lp_kernel_table *R = lp_kernels_table(LP_KERNELS_IMPL_REF), *O = lp_kernels_table(LP_KERNELS_IMPL_OPT);
    const int64_t B = c->B, T = c->T, H = c->H, Hkv = c->Hkv, D = c->D, cap = T + 3;
    const int64_t QD = H * D, KD = Hkv * D, elem = c->f16 ? 2 : 4;
    float *q = kt_rand_f(B * T * QD, -2, 2), *k = kt_rand_f(B * T * KD, -2, 2), *v = kt_rand_f(B * T * KD, -1, 1);
    int32_t *mask = make_mask(c);
    lp_kv_geom g = {.B = B, .H = H, .Hkv = Hkv, .D = D, .cap = cap, .T = T, .window = c->window, .f16 = c->f16};
    /* the cache mask is (B, cap): the prompt's mask, the unused columns 0 */
    int32_t *cmask = kt_alloc((size_t)(B * cap) * sizeof *cmask);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < cap; j++)
            cmask[b * cap + j] = j < T ? mask[b * T + j] : 0;
    const size_t cbytes = (size_t)(B * Hkv * cap * D * elem);
    void *k0 = kt_alloc(cbytes), *v0 = kt_alloc(cbytes), *k1 = kt_alloc(cbytes), *v1 = kt_alloc(cbytes);
    memset(k0, 0, cbytes), memset(v0, 0, cbytes), memset(k1, 0, cbytes), memset(v1, 0, cbytes);
    /* written in two appends (a prefill, then one decode step): the same bytes either way */
    R->kv_write(k0, v0, k, v, &(lp_kv_geom){.B = B, .H = H, .Hkv = Hkv, .D = D, .cap = cap, .f16 = c->f16}, 0, T);
    float *kh = kt_alloc((size_t)(B * (T - 1 > 0 ? T - 1 : 1) * KD) * sizeof(float));
    float *vh = kt_alloc((size_t)(B * (T - 1 > 0 ? T - 1 : 1) * KD) * sizeof(float));
    float *kl = kt_alloc((size_t)(B * KD) * sizeof(float)), *vl = kt_alloc((size_t)(B * KD) * sizeof(float));
    for (int64_t b = 0; b < B; b++) {
        memcpy(kh + b * (T - 1) * KD, k + b * T * KD, (size_t)((T - 1) * KD) * sizeof(float));
        memcpy(vh + b * (T - 1) * KD, v + b * T * KD, (size_t)((T - 1) * KD) * sizeof(float));
        memcpy(kl + b * KD, k + (b * T + T - 1) * KD, (size_t)KD * sizeof(float));
        memcpy(vl + b * KD, v + (b * T + T - 1) * KD, (size_t)KD * sizeof(float));
    }
    if (T > 1)
        O->kv_write(k1, v1, kh, vh, &g, 0, T - 1);
    O->kv_write(k1, v1, kl, vl, &g, T - 1, 1);
    int f = memcmp(k0, k1, cbytes) != 0 || memcmp(v0, v1, cbytes) != 0;
    if (f)
        fprintf(stderr, "  kv_write: opt (two appends) differs from ref (one)\n");

    float *qlast = kt_alloc((size_t)(B * QD) * sizeof(float));
    for (int64_t b = 0; b < B; b++)
        memcpy(qlast + b * QD, q + (b * T + T - 1) * QD, (size_t)QD * sizeof(float));
    float *o0 = kt_nan(B * QD), *o1 = kt_nan(B * QD);
    R->attention_decode(o0, qlast, k0, v0, cmask, &g);
    O->attention_decode(o1, qlast, k1, v1, cmask, &g);
    /* float dot products and an online softmax against double: |v| <= 1, so a few 1e-7 */
    f += kt_close("decode opt vs ref", o1, o0, B * QD, 2e-6, 2e-5);

    /* the prefill attention's last row: causal over the whole (B,T) batch, same mask */
    lp_attn_geom pg = {.B = B, .T = T, .H = H, .Hkv = Hkv, .D = D, .ldq = QD, .ldkv = KD, .causal = true,
                       .window = c->window};
    float *full = kt_nan(B * T * QD), *att = kt_nan(B * H * T * T);
    R->attention_eager_forward(full, att, q, k, v, mask, &pg);
    float *want = kt_alloc((size_t)(B * QD) * sizeof(float));
    for (int64_t b = 0; b < B; b++)
        memcpy(want + b * QD, full + (b * T + T - 1) * QD, (size_t)QD * sizeof(float));
    /* f32 cache: the same math in another order (1e-5); f16 cache: keys and values rounded
     * to 11 bits (relative 2^-11 = 4.9e-4) through a softmax of scores up to |q||k|/sqrt(D)
     * ~ 10: a few 1e-3 of |v| <= 1 */
    const double tol = c->f16 ? 1e-2 : 1e-5;
    f += kt_close("decode vs prefill row", o1, want, B * QD, tol, tol);
    return f + kt_release("attention_decode");
}

static void test_decode_table(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const dec_case *c = &cases[i];
        int f = run_case(c);
        fprintf(stderr, "attention_decode B%lld T%lld H%lld Hkv%lld D%lld window=%lld pad=%d f16=%d %s\n",
                (long long)c->B, (long long)c->T, (long long)c->H, (long long)c->Hkv, (long long)c->D,
                (long long)c->window, c->pad, (int)c->f16, f ? "FAIL" : "ok");
        failed += f != 0;
    }
    assert_int_equal(failed, 0);
}

static void test_decode_table_one_thread(void **state)
{
    int saved = lp_threads_get();
    lp_threads_set(1);
    test_decode_table(state);
    lp_threads_set(saved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_table),
        cmocka_unit_test(test_decode_table_one_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
