/* loupe peak: this machine's ceilings, the denominators of MFU and bandwidth figures:
 * the f32 FMA peak (register-resident FMA chains on every thread, widest vectors and AVX2),
 * OpenBLAS sgemm at a large square size, and memory bandwidth (STREAM triad). Text table
 * or JSON (stdout, and --output FILE written atomically). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "loupe/kernels.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: loupe peak [--threads N] [--seconds S] [--size N] [--json] [--output FILE]\n\n"
            "Measure this machine's f32 FMA peak (per vector width), OpenBLAS sgemm GFLOP/s at a\n"
            "large square size, and memory bandwidth (STREAM triad). Each figure is the best of\n"
            "many short runs, so a busy machine reads low, never high. The FMA peak is that of\n"
            "the ISA level the kernels run at (LP_ISA=baseline|avx2|avx512|avx512bf16 forces one).\n\n"
            "  --threads N    threads (default: LP_THREADS, OMP_NUM_THREADS, else all cores)\n"
            "  --seconds S    time spent on each probe, 0.1..60 (default 1)\n"
            "  --size N       sgemm size N x N x N, 64..8192 (default 2048)\n"
            "  --json         print JSON instead of the table\n"
            "  --output FILE  also write the JSON to FILE (atomically)\n");
}

static cJSON *to_json(const lp_peak_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "threads", r->threads);
    cJSON_AddStringToObject(o, "isa", r->isa);
    cJSON_AddStringToObject(o, "isa_detected", lp_isa_name(lp_isa_detect()));
    cJSON_AddNumberToObject(o, "vector_bits", r->vector_bits);
    cJSON_AddNumberToObject(o, "fma_gflops", r->fma_gflops);
    cJSON_AddNumberToObject(o, "fma_gflops_1thread", r->fma_gflops_1t);
    cJSON_AddNumberToObject(o, "fma256_gflops", r->fma256_gflops);
    cJSON_AddNumberToObject(o, "sgemm_gflops", r->sgemm_gflops);
    cJSON_AddNumberToObject(o, "sgemm_n", (double)r->sgemm_n);
    cJSON_AddStringToObject(o, "blas_core", r->blas_core);
    cJSON_AddStringToObject(o, "blas_threading", lp_threads_blas_mode());
    cJSON_AddNumberToObject(o, "triad_gbs", r->triad_gbs);
    cJSON_AddNumberToObject(o, "triad_array_bytes", (double)r->triad_bytes);
    return o;
}

static void print_table(const lp_peak_result *r)
{
    const char *w = r->vector_bits == 512 ? "AVX-512" : r->vector_bits == 256 ? "AVX2" : "scalar";
    printf("loupe peak: %d thread%s, kernels %s (CPU runs up to %s), OpenBLAS %s (%s)\n\n", r->threads,
           r->threads == 1 ? "" : "s", r->isa, lp_isa_name(lp_isa_detect()), r->blas_core, lp_threads_blas_mode());
    printf("%-40s %12s %10s\n", "probe", "value", "of peak");
    char label[64];
    snprintf(label, sizeof label, "f32 FMA peak, %s, %d thread%s", w, r->threads, r->threads == 1 ? "" : "s");
    printf("%-40s %7.1f GFLOP/s %8s\n", label, r->fma_gflops, "100%");
    snprintf(label, sizeof label, "f32 FMA peak, %s, 1 thread", w);
    printf("%-40s %7.1f GFLOP/s %7.1f%%\n", label, r->fma_gflops_1t, 100.0 * r->fma_gflops_1t / r->fma_gflops);
    if (r->vector_bits > 256)
        printf("%-40s %7.1f GFLOP/s %7.1f%%\n", "f32 FMA peak, AVX2 (256-bit)", r->fma256_gflops,
               100.0 * r->fma256_gflops / r->fma_gflops);
    snprintf(label, sizeof label, "sgemm %lldx%lldx%lld", (long long)r->sgemm_n, (long long)r->sgemm_n,
             (long long)r->sgemm_n);
    printf("%-40s %7.1f GFLOP/s %7.1f%%\n", label, r->sgemm_gflops, 100.0 * r->sgemm_gflops / r->fma_gflops);
    printf("%-40s %7.1f GB/s\n", "memory bandwidth, STREAM triad", r->triad_gbs);
}

int lp_cmd_peak(int argc, char **argv)
{
    static const struct option opts[] = {
        {"threads", required_argument, NULL, 't'}, {"seconds", required_argument, NULL, 's'},
        {"size", required_argument, NULL, 'n'},    {"json", no_argument, NULL, 'j'},
        {"output", required_argument, NULL, 'o'},  {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long threads = 0, size = 2048;
    double seconds = 1.0;
    int json = 0;
    const char *output = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (lp_cli_parse_long("peak", "--threads", optarg, 1, 1024, &threads) != 0)
                return LP_EXIT_USAGE;
            break;
        case 's': {
            char *end;
            seconds = strtod(optarg, &end);
            if (end == optarg || *end || !(seconds >= 0.1 && seconds <= 60.0))
                return lp_cli_usage_error("peak", "--seconds must be a number in 0.1..60, got '%s'", optarg);
            break;
        }
        case 'n':
            if (lp_cli_parse_long("peak", "--size", optarg, 64, 8192, &size) != 0)
                return LP_EXIT_USAGE;
            break;
        case 'j': json = 1; break;
        case 'o': output = optarg; break;
        case 'h': usage(stdout); return LP_EXIT_OK;
        default: return lp_cli_usage_error("peak", "unknown option");
        }
    }
    if (optind < argc)
        return lp_cli_usage_error("peak", "unexpected argument '%s'", argv[optind]);

    lp_threads_init();
    if (threads > 0)
        lp_threads_set((int)threads);
    lp_peak_result r;
    if (lp_peak_measure(&r, seconds, size) != LP_OK)
        return lp_cli_fail("peak");

    cJSON *o = NULL;
    char *text = NULL;
    if (json || output) {
        o = to_json(&r);
        text = o ? cJSON_Print(o) : NULL;
        if (!text) {
            cJSON_Delete(o);
            fprintf(stderr, "loupe peak: out of memory formatting JSON\n");
            return LP_EXIT_FAIL;
        }
    }
    int rc = LP_EXIT_OK;
    if (output) {
        if (lp_file_write_atomic(output, text, strlen(text)) != LP_OK)
            rc = lp_cli_fail("peak");
    }
    if (json)
        printf("%s\n", text);
    else
        print_table(&r);
    cJSON_free(text);
    cJSON_Delete(o);
    return rc;
}
