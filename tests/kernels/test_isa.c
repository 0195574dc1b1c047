/* ISA levels: names parse both ways, detection agrees with the kernel's own reading of the
 * CPU (/proc/cpuinfo flags), every level the CPU runs can be selected and its table holds
 * the reference, a level it lacks is refused and leaves the table as it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "kernel_test_util.h"
#include "../../src/kernels/backend.h"
#include "loupe/kernels.h"

static void test_names(void **state)
{
    (void)state;
    for (int i = 0; i < LP_ISA_COUNT; i++) {
        lp_isa got = LP_ISA_COUNT;
        assert_int_equal(lp_isa_parse(lp_isa_name((lp_isa)i), "LP_ISA", &got), LP_OK);
        assert_int_equal(got, i);
    }
    lp_isa got = LP_ISA_AVX2;
    static const char *const bad[] = {"", "AVX2", "avx", "avx512f", "sse4", " avx2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(lp_isa_parse(bad[i], "LP_ISA", &got), LP_STATUS_INVALID_ARG);
        assert_non_null(strstr(lp_err_msg(), "LP_ISA"));
        assert_non_null(strstr(lp_err_msg(), "avx512bf16")); /* lists the valid names */
    }
    assert_int_equal(lp_isa_parse(NULL, "LP_ISA", &got), LP_STATUS_INVALID_ARG);
    assert_int_equal(got, LP_ISA_AVX2); /* untouched on error */
    assert_string_equal(lp_isa_name(LP_ISA_COUNT), "?");
}

/* True when every flag (space-separated) is on the "flags" line of /proc/cpuinfo. */
static bool cpuinfo_has(const char *flags)
{
    static char line[8192];
    static bool read;
    if (!read) {
        FILE *f = fopen("/proc/cpuinfo", "r");
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "flags", 5))
                break;
        if (f)
            fclose(f);
        read = true;
        line[strcspn(line, "\n")] = ' ';
    }
    char want[64], *save = NULL, copy[256];
    snprintf(copy, sizeof copy, "%s", flags);
    for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        snprintf(want, sizeof want, " %s ", w);
        if (!strstr(line, want))
            return false;
    }
    return true;
}

/* The kernel lists a flag only when the CPU has it and the OS enabled its state, so its
 * view is an independent check of CPUID + XGETBV. */
static void test_detect_matches_cpuinfo(void **state)
{
    (void)state;
    if (!cpuinfo_has("sse4_2"))
        skip(); /* not x86 Linux */
    lp_isa want = LP_ISA_BASELINE;
    if (cpuinfo_has("avx avx2 fma f16c bmi1 bmi2 movbe abm")) {
        want = LP_ISA_AVX2;
        if (cpuinfo_has("avx512f avx512bw avx512dq avx512vl avx512cd")) {
            want = LP_ISA_AVX512;
            if (cpuinfo_has("avx512_bf16 avx512_vnni"))
                want = LP_ISA_AVX512BF16;
        }
    }
    printf("detected %s, /proc/cpuinfo says %s\n", lp_isa_name(lp_isa_detect()), lp_isa_name(want));
    assert_int_equal(lp_isa_detect(), want);
    for (int i = 0; i < LP_ISA_COUNT; i++) {
        if (i <= (int)want)
            assert_null(lp_isa_missing((lp_isa)i));
        else
            assert_non_null(lp_isa_missing((lp_isa)i));
    }
}

/* gelu (tanh) and softmax through a level's table against the reference over odd sizes
 * (tails of every vector width). Bound: 1e-6 relative + 1e-7 absolute: the vector exp and
 * tanh are within ~2e-7 relative of libm's, and sums differ only in order. */
static void check_table(const lp_kernel_table *O, const lp_kernel_table *R)
{
    static const int64_t sizes[] = {1, 7, 15, 17, 33, 100};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int64_t n = sizes[si], N = 3;
        float *x = kt_rand_f(N * n, -6.0f, 6.0f), *a = kt_nan(N * n), *b = kt_nan(N * n);
        char what[64];
        snprintf(what, sizeof what, "%s gelu_tanh n=%lld", O->isa, (long long)n);
        O->gelu_forward(a, x, N * n, LP_GELU_KIND_TANH);
        R->gelu_forward(b, x, N * n, LP_GELU_KIND_TANH);
        assert_int_equal(kt_close(what, a, b, N * n, 1e-7, 1e-6), 0);
        snprintf(what, sizeof what, "%s softmax n=%lld", O->isa, (long long)n);
        O->softmax_forward(a, x, N, n);
        R->softmax_forward(b, x, N, n);
        assert_int_equal(kt_close(what, a, b, N * n, 1e-7, 1e-6), 0);
        assert_int_equal(kt_release(what), 0);
    }
}

static void test_select_each_level(void **state)
{
    (void)state;
    const lp_isa start = lp_kernels_isa();
    const lp_kernel_table *R = lp_kernels_table(LP_KERNELS_IMPL_REF);
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    for (int i = 0; i < LP_ISA_COUNT; i++) {
        const lp_isa isa = (lp_isa)i;
        const lp_kernel_table *T = lp_kernels_table_isa(isa);
        assert_string_equal(T->isa, lp_isa_name(isa));
        assert_string_equal(T->name, "opt");
        for (int j = 0; j < i; j++) /* each level is its own compiled copy */
            assert_ptr_not_equal((void *)T->gelu_forward, (void *)lp_kernels_table_isa((lp_isa)j)->gelu_forward);
        if (lp_isa_missing(isa)) {
            const lp_kernel_table *before = lp_kernels_active();
            assert_int_equal(lp_kernels_select_isa(isa), LP_STATUS_UNSUPPORTED);
            assert_non_null(strstr(lp_err_msg(), lp_isa_name(isa)));
            assert_ptr_equal(lp_kernels_active(), before);
            continue;
        }
        assert_int_equal(lp_kernels_select_isa(isa), LP_OK);
        assert_int_equal(lp_kernels_isa(), isa);
        assert_ptr_equal(lp_kernels_active(), T);
        assert_ptr_equal(lp_kernels_table(LP_KERNELS_IMPL_OPT), T);
        check_table(T, R);
    }
    /* with the reference active, a level change keeps the reference */
    lp_kernels_select(LP_KERNELS_IMPL_REF);
    assert_int_equal(lp_kernels_select_isa(LP_ISA_BASELINE), LP_OK);
    assert_ptr_equal(lp_kernels_active(), R);
    assert_int_equal(lp_kernels_select_isa(LP_ISA_COUNT), LP_STATUS_UNSUPPORTED);
    lp_kernels_select(LP_KERNELS_IMPL_OPT);
    assert_int_equal(lp_kernels_select_isa(start), LP_OK);
}

/* The CPU backend: one instance per level over that level's table; its buffers round-trip
 * bytes exactly; supports() answers by table entry. */
static void test_cpu_backend(void **state)
{
    (void)state;
    for (int i = 0; i < LP_ISA_COUNT; i++) {
        const lp_backend *be = lp_backend_cpu((lp_isa)i);
        assert_string_equal(be->name, "cpu");
        assert_string_equal(be->level, lp_isa_name((lp_isa)i));
        assert_ptr_equal(be->ops, lp_kernels_table_isa((lp_isa)i));
        assert_true(be->supports(be, LP_BACKEND_OP(sgemm)));
        assert_true(be->supports(be, LP_BACKEND_OP(lora_backward)));
        assert_false(be->supports(be, LP_BACKEND_OP(name))); /* not an op */
        assert_false(be->supports(be, sizeof(lp_kernel_table)));
    }
    const lp_backend *be = lp_backend_cpu(lp_kernels_isa());
    enum { N = 1000 };
    float host[N], back[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i * 0.25f - 3.0f;
    float *a = be->alloc(be->ctx, sizeof host, "backend test a"), *b = be->alloc(be->ctx, sizeof host, "b");
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(be->upload(be->ctx, a, host, sizeof host), LP_OK);
    assert_int_equal(be->copy(be->ctx, b, a, sizeof host), LP_OK);
    assert_int_equal(be->memset(be->ctx, a, 0, sizeof host / 2), LP_OK);
    assert_int_equal(be->sync(be->ctx), LP_OK);
    assert_int_equal(be->download(be->ctx, back, b, sizeof back), LP_OK);
    assert_memory_equal(back, host, sizeof host);
    assert_int_equal(be->download(be->ctx, back, a, sizeof back), LP_OK);
    for (int i = 0; i < N; i++)
        assert_true(i < N / 2 ? back[i] == 0.0f : back[i] == host[i]);
    /* copy_rows: rows 1, 4, 7 (stride 3 x 5 floats) of a, 5 floats each, gathered dense, then
     * scattered back to stride 2 x 5 through lp_kernels_copy_rows (the CPU device's) */
    assert_int_equal(be->upload(be->ctx, a, host, sizeof host), LP_OK);
    assert_int_equal(
        be->copy_rows(be->ctx, b, 5 * sizeof(float), a + 5, 15 * sizeof(float), 5 * sizeof(float), 3), LP_OK);
    assert_int_equal(be->download(be->ctx, back, b, 15 * sizeof(float)), LP_OK);
    for (int r = 0; r < 3; r++)
        assert_memory_equal(back + 5 * r, host + 5 + 15 * r, 5 * sizeof(float));
    lp_kernels_copy_rows(a, 10 * sizeof(float), b, 5 * sizeof(float), 5 * sizeof(float), 3);
    for (int r = 0; r < 3; r++)
        assert_memory_equal(a + 10 * r, host + 5 + 15 * r, 5 * sizeof(float));
    assert_memory_equal(a + 5, host + 5, 5 * sizeof(float)); /* between the rows: untouched */
    be->free(be->ctx, a);
    be->free(be->ctx, b);
}

int main(void)
{
    int isa_rc = kt_isa_init();
    if (isa_rc)
        return isa_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_detect_matches_cpuinfo),
        cmocka_unit_test(test_select_each_level),
        cmocka_unit_test(test_cpu_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
