/* The measured loops, compiled twice: with the profiler (LP_BENCH_SUFFIX=on) and with
 * LP_PROF_DISABLE (compiled_out), so the "off" cost can be compared with no code at all. */
#include "loupe/prof.h"

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define FN(name) CAT(name, CAT(_, LP_BENCH_SUFFIX))

/* n push/pop pairs with nothing inside. */
void FN(lp_bench_ranges)(int n)
{
    for (int i = 0; i < n; i++) {
        lp_prof_range_push("bench.range");
        __asm__ volatile("" ::: "memory"); /* keep the loop from being folded */
        lp_prof_range_pop();
    }
}

/* One synthetic step: n_ranges ranges nested two deep (layers of small ops), each op
 * doing `work` iterations of arithmetic. Returns a value so nothing is optimised away. */
double FN(lp_bench_step)(int n_ranges, int work)
{
    static const lp_prof_op_desc op = {"bench::op", LP_PROF_CAT_CPU_OP, 1, {2}, {"float"}};
    double acc = 0;
    int per_layer = 49; /* 1 layer range + 49 ops = 50 ranges */
    int layers = n_ranges / (per_layer + 1);
    for (int l = 0; l < layers; l++) {
        LP_PROF_SCOPE("bench.layer");
        for (int o = 0; o < per_layer; o++) {
            int64_t dims[2] = {l, o};
            LP_PROF_OP_SCOPE(&op, dims, (double)work, 0);
            double x = (double)o;
            for (int k = 0; k < work; k++)
                x = x * 1.0000001 + 1e-9;
            acc += x;
        }
    }
    return acc;
}
