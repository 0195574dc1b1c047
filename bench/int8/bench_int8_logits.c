/* The logits of a sequence classifier on given ids, loaded with the weights as `loupe bench
 * --dtype` loads them (src/bench/load.c): f32; int8 (a scale per weight row and per activation
 * row, int32 sums over the whole row: i8gemm.c); q8_0 (ggml Q8_0 blocks, activations quantized
 * per block). Both integer dot products: VNNI or AVX2 maddubs.
 * For bench/int8/run.py, which compares them with PyTorch's f32 and dynamic-int8 logits.
 *   bench_int8_logits MODEL_DIR f32|q8_0|int8 IDS.i32 B T THREADS OUT.f32
 * IDS.i32: B*T int32 ids, all real tokens (mask 1); OUT.f32: B*L float32 logits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/core.h"
#include "loupe/models.h"

int main(int argc, char **argv)
{
    if (argc != 8)
        return fprintf(stderr, "usage: bench_int8_logits MODEL_DIR f32|q8_0|int8 IDS.i32 B T THREADS OUT.f32\n"), 2;
    const char *dtype = argv[2];
    const int32_t B = atoi(argv[4]), T = atoi(argv[5]);
    char env[32];
    snprintf(env, sizeof env, "%s", argv[6]);
    setenv("LP_THREADS", env, 1);
    lp_threads_init();
    lp_model_options o;
    lp_model_options_init(&o);
    o.task = LP_MODEL_TASK_SEQ_CLS;
    o.no_grad = true;
    o.exec = LP_EXEC_MODE_FUSED;
    o.quiet = true;
    if ((strcmp(dtype, "q8_0") && strcmp(dtype, "int8") && strcmp(dtype, "f32")) ||
        lp_weight_format_parse(dtype, &o.weights) != LP_OK)
        return fprintf(stderr, "bench_int8_logits: dtype '%s' (f32, q8_0 or int8)\n", dtype), 2;
    lp_model *m = NULL;
    if (lp_model_load(argv[1], &o, &m) != LP_OK)
        return fprintf(stderr, "bench_int8_logits: %s\n", lp_err_msg()), 1;
    lp_model_info info;
    lp_model_info_get(m, &info);
    const int64_t L = info.num_labels, n = (int64_t)B * T;
    int32_t *ids = malloc((size_t)n * sizeof *ids), *mask = malloc((size_t)n * sizeof *mask);
    float *logits = malloc((size_t)(B * L) * sizeof *logits);
    FILE *f = fopen(argv[3], "rb");
    if (!f || fread(ids, sizeof *ids, (size_t)n, f) != (size_t)n)
        return fprintf(stderr, "bench_int8_logits: %s: cannot read %lld ids\n", argv[3], (long long)n), 1;
    fclose(f);
    for (int64_t i = 0; i < n; i++)
        mask[i] = 1;
    if (lp_model_forward(m, ids, mask, NULL, B, T, logits) != LP_OK)
        return fprintf(stderr, "bench_int8_logits: %s\n", lp_err_msg()), 1;
    f = fopen(argv[7], "wb");
    if (!f || fwrite(logits, sizeof *logits, (size_t)(B * L), f) != (size_t)(B * L))
        return fprintf(stderr, "bench_int8_logits: cannot write %s\n", argv[7]), 1;
    fclose(f);
    free(ids), free(mask), free(logits);
    lp_model_free(m);
    return 0;
}
