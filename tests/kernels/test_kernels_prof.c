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
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ops_recorded),
                                       cmocka_unit_test(test_attention_flops_visible)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
