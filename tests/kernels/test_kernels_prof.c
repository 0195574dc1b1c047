/* Every kernel wrapper records an op range with its shape and FLOPs, and every lp_alloc
 * shows up as a [memory] event with its category: checked by running a few ops inside a
 * profiler session and reading the saved event list back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "loupe/kernels.h"

typedef struct seen {
    int ln, gelu, mm, mem_param;
    double ln_flops, mm_flops;
    int64_t ln_dims[2];
} seen;

static lp_status on_ready(const lp_prof_events *ev, void *user)
{
    seen *s = user;
    for (size_t i = 0; i < lp_prof_events_count(ev); i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (!strcmp(e->name, "lp::layernorm_forward")) {
            s->ln++;
            s->ln_flops = e->flops;
            if (e->n_inputs == 1 && e->input_ranks[0] == 2)
                memcpy(s->ln_dims, e->input_dims, sizeof s->ln_dims);
        } else if (!strcmp(e->name, "lp::gelu_tanh_forward")) {
            s->gelu++;
        } else if (!strcmp(e->name, "lp::matmul_forward")) {
            s->mm++;
            s->mm_flops = e->flops;
        } else if (!strcmp(e->name, "[memory]") && e->mem_category == LP_MEM_CATEGORY_PARAMETER &&
                   e->mem_bytes == 3 * 5 * 4) {
            s->mem_param++;
        }
    }
    return LP_OK;
}

static void test_ops_recorded(void **state)
{
    (void)state;
    seen s = {0};
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.record_shapes = cfg.profile_memory = cfg.with_flops = 1;
    cfg.on_trace_ready = on_ready;
    cfg.user = &s;
    assert_int_equal(lp_prof_start(&cfg), LP_OK);

    enum { N = 3, C = 5 };
    float *w = lp_alloc(N * C * sizeof(float), LP_MEM_CATEGORY_PARAMETER, "w");
    assert_non_null(w);
    float x[N * C], y[N * C], g[C], b[C], mean[N], rstd[N], out[N * N];
    for (int i = 0; i < N * C; i++)
        x[i] = (float)i * 0.1f, w[i] = 0.01f * (float)i;
    for (int i = 0; i < C; i++)
        g[i] = 1.0f, b[i] = 0.0f;
    lp_layernorm_forward(y, mean, rstd, x, g, b, N, C, 1e-5f);
    lp_gelu_forward(y, y, N * C, LP_GELU_TANH);
    lp_matmul_forward(out, x, w, NULL, N, C, N);
    lp_free(w);
    assert_int_equal(lp_prof_stop(), LP_OK);

    assert_int_equal(s.ln, 1);
    assert_int_equal(s.gelu, 1);
    assert_int_equal(s.mm, 1);
    assert_int_equal(s.mem_param, 1); /* the allocation (the free is -60) */
    assert_float_equal(s.ln_flops, 8.0 * N * C, 0);
    assert_float_equal(s.mm_flops, 2.0 * N * C * N, 0);
    assert_int_equal(s.ln_dims[0], N);
    assert_int_equal(s.ln_dims[1], C);
}

/* The decoder ops: each wrapper one range, under its own name, with this call's FLOPs and
 * its key dims (rows first). */
static const char *const dec_names[] = {"lp::rmsnorm_forward", "lp::rmsnorm_backward", "lp::swiglu_forward",
                                        "lp::swiglu_backward", "lp::rope_cache",        "lp::rope_forward",
                                        "lp::rope_backward",   "lp::rows_gather",       "lp::rows_scatter_add"};
#define N_DEC (sizeof dec_names / sizeof dec_names[0])

typedef struct dec_seen {
    int count[N_DEC];
    double flops[N_DEC];
    int64_t dim0[N_DEC];
} dec_seen;

static lp_status on_ready_dec(const lp_prof_events *ev, void *user)
{
    dec_seen *s = user;
    for (size_t i = 0; i < lp_prof_events_count(ev); i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        for (size_t k = 0; k < N_DEC; k++)
            if (!strcmp(e->name, dec_names[k])) {
                s->count[k]++;
                s->flops[k] = e->flops;
                s->dim0[k] = e->n_inputs == 1 ? e->input_dims[0] : -1;
            }
    }
    return LP_OK;
}

/* Attention's op records count only the (query, key) pairs the geometry leaves visible
 * (the fused kernels skip the rest): T*T per head without a mask, T*(T+1)/2 causal, and
 * sum_i min(i+1, window) with a sliding window; dims are {B, H, Hkv, T, D}. */
typedef struct attn_seen {
    int n;
    double flops[3];
    int64_t dims[5];
} attn_seen;

static lp_status on_attn_ready(const lp_prof_events *ev, void *user)
{
    attn_seen *s = user;
    for (size_t i = 0; i < lp_prof_events_count(ev); i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (strcmp(e->name, "lp::attention_fused_forward") || s->n >= 3)
            continue;
        s->flops[s->n++] = e->flops;
        if (e->n_inputs == 1 && e->input_ranks[0] == 5)
            memcpy(s->dims, e->input_dims, sizeof s->dims);
    }
    return LP_OK;
}

static void test_decoder_ops_recorded(void **state)
{
    (void)state;
    dec_seen s = {0};
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.record_shapes = cfg.with_flops = 1;
    cfg.on_trace_ready = on_ready_dec;
    cfg.user = &s;
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
    enum { N = 3, C = 8, F = 4, H = 2, D = 4 };
    float x[N * C], y[N * C], w[C], r[N], dw[C], gu[N * 2 * F], a[N * F], inv[D / 2], cs[N * D / 2], sn[N * D / 2];
    int32_t pos[N] = {0, 1, 2};
    int64_t idx[2] = {2, 0};
    for (int i = 0; i < N * C; i++)
        x[i] = 0.1f * (float)i;
    for (int i = 0; i < C; i++)
        w[i] = 1.0f, dw[i] = 0.0f;
    for (int i = 0; i < N * 2 * F; i++)
        gu[i] = 0.05f * (float)i;
    lp_rmsnorm_forward(y, r, x, w, N, C, 1e-6f);
    lp_rmsnorm_backward(y, dw, y, x, w, r, N, C);
    lp_swiglu_forward(a, gu, gu + F, N, F, 2 * F);
    lp_swiglu_backward(gu, gu + F, a, gu, gu + F, N, F, 2 * F);
    assert_int_equal(lp_rope_inv_freq(inv, D, 10000.0, NULL, NULL), LP_OK);
    lp_rope_cache(cs, sn, pos, inv, 1.0f, N, D);
    lp_rope_forward(x, cs, sn, N, H, D, C);
    lp_rope_backward(x, cs, sn, N, H, D, C);
    lp_rows_gather(y, x, idx, 2, C);
    lp_rows_scatter_add(x, y, idx, 2, C);
    assert_int_equal(lp_prof_stop(), LP_OK);
    static const int64_t dim0[N_DEC] = {N, N, N, N, N, N, N, 2, 2};
    for (size_t k = 0; k < N_DEC; k++) {
        if (s.count[k] != 1 || s.dim0[k] != dim0[k])
            fprintf(stderr, "  %s: %d ranges, first dim %lld\n", dec_names[k], s.count[k], (long long)s.dim0[k]);
        assert_int_equal(s.count[k], 1);
        assert_int_equal(s.dim0[k], dim0[k]);
    }
    assert_float_equal(s.flops[0], 4.0 * N * C, 0);
    assert_float_equal(s.flops[2], 6.0 * N * F, 0);
    assert_float_equal(s.flops[5], 3.0 * N * H * D, 0);
    assert_float_equal(s.flops[7], 0.0, 0); /* a copy */
}

static void test_attention_flops_visible(void **state)
{
    (void)state;
    attn_seen s = {0};
    lp_prof_config cfg;
    lp_prof_config_init(&cfg);
    cfg.record_shapes = cfg.with_flops = 1;
    cfg.on_trace_ready = on_attn_ready;
    cfg.user = &s;
    enum { B = 2, T = 10, H = 4, Hkv = 2, D = 8 };
    static float q[B * T * H * D], k[B * T * Hkv * D], v[B * T * Hkv * D], out[B * T * H * D], lse[B * H * T];
    for (int i = 0; i < B * T * Hkv * D; i++)
        k[i] = v[i] = 0.01f * (float)(i % 17);
    lp_attn_geom g = {.B = B, .T = T, .H = H, .Hkv = Hkv, .D = D, .ldq = H * D, .ldkv = Hkv * D};
    assert_int_equal(lp_prof_start(&cfg), LP_OK);
    lp_attention_fused_forward(out, lse, q, k, v, NULL, &g, NULL);
    g.causal = true;
    lp_attention_fused_forward(out, lse, q, k, v, NULL, &g, NULL);
    g.window = 3;
    lp_attention_fused_forward(out, lse, q, k, v, NULL, &g, NULL);
    assert_int_equal(lp_prof_stop(), LP_OK);
    assert_int_equal(s.n, 3);
    const double per_pair = 4.0 * B * H * D;
    assert_float_equal(s.flops[0], per_pair * T * T, 0);
    assert_float_equal(s.flops[1], per_pair * T * (T + 1) / 2, 0);
    assert_float_equal(s.flops[2], per_pair * (1 + 2 + 3 * (T - 2)), 0);
    const int64_t want[5] = {B, H, Hkv, T, D};
    for (int i = 0; i < 5; i++)
        assert_int_equal(s.dims[i], want[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ops_recorded), cmocka_unit_test(test_decoder_ops_recorded),
                                       cmocka_unit_test(test_attention_flops_visible)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
