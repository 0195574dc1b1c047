/* loupe peak: this machine's ceilings, the denominators of MFU and bandwidth figures:
 * the f32 FMA peak (register-resident FMA chains on every thread, widest vectors and AVX2),
 * OpenBLAS sgemm at a large square size, and memory bandwidth (STREAM triad). Text table
 * or JSON (stdout, and --output FILE written atomically). --device cuda: the GPU's cuBLASLt
 * GEMM throughput (bf16, TF32, f32) and device-to-device copy bandwidth instead. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "loupe/kernels.h"
#include "loupe/prof.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: loupe peak [--device cpu|cuda] [--threads N] [--seconds S] [--size N] [--json]\n"
            "                  [--output FILE]\n\n"
            "Measure this machine's f32 FMA peak (per vector width), OpenBLAS sgemm GFLOP/s at a\n"
            "large square size, and memory bandwidth (STREAM triad). Each figure is the best of\n"
            "many short runs, so a busy machine reads low, never high. The FMA peak is that of\n"
            "the ISA level the kernels run at (LP_ISA=baseline|avx2|avx512|avx512bf16 forces one).\n"
            "With --device cuda: cuBLASLt GEMM TFLOP/s at N x N x N on random data (bf16 inputs\n"
            "with f32 accumulation, TF32, f32; the mean of 10 products after 2 warm-ups) and\n"
            "device-to-device copy bandwidth, on the GPU LP_CUDA_DEVICE names (default 0).\n\n"
            "  --device D     cpu (default) or cuda\n"
            "  --threads N    threads (default: LP_THREADS, OMP_NUM_THREADS, else all cores)\n"
            "  --seconds S    time spent on each probe, 0.1..60 (default 1)\n"
            "  --size N       sgemm size N x N x N, 64..8192 (default 2048; cuda: 256..16384,\n"
            "                 default 8192)\n"
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

/* The card's dense bf16 peak (lp_gpu_peak_for_device: NVIDIA's quoted clock where the
 * datasheet uses one) for the bf16 GEMM's MFU; 0 with *why saying why when unknown. */
static double cuda_bf16_peak(const lp_cuda_peak_result *r, char *why, size_t cap)
{
    lp_gpu_device_props d;
    memset(&d, 0, sizeof d);
    memcpy(d.name, r->device, sizeof d.name - 1); /* names are short; d.name[127] stays 0 */
    d.compute_major = r->cc_major, d.compute_minor = r->cc_minor;
    d.num_sms = r->sm_count, d.max_sm_clock_mhz = r->sm_clock_mhz;
    double f = 0;
    if (lp_gpu_peak_for_device(&d, LP_GPU_PEAK_BF16, &f, why, cap) != LP_OK) {
        snprintf(why, cap, "unknown: %s", lp_err_msg());
        return 0;
    }
    return f;
}

static cJSON *cuda_json(const lp_cuda_peak_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", r->cc_major, r->cc_minor);
    cJSON_AddStringToObject(o, "device", r->device);
    cJSON_AddStringToObject(o, "compute_capability", cc);
    cJSON_AddNumberToObject(o, "sm_count", r->sm_count);
    cJSON_AddNumberToObject(o, "sm_clock_mhz", r->sm_clock_mhz);
    cJSON_AddNumberToObject(o, "memory_gib", r->memory_gib);
    cJSON_AddNumberToObject(o, "cuda_driver", r->driver_version);
    cJSON_AddNumberToObject(o, "cuda_runtime", r->runtime_version);
    cJSON_AddNumberToObject(o, "gemm_n", (double)r->gemm_n);
    cJSON_AddNumberToObject(o, "bf16_tflops", r->bf16_tflops);
    cJSON_AddNumberToObject(o, "tf32_tflops", r->tf32_tflops);
    cJSON_AddNumberToObject(o, "f32_tflops", r->f32_tflops);
    cJSON_AddNumberToObject(o, "copy_gbs", r->copy_gbs);
    cJSON_AddNumberToObject(o, "copy_bytes", (double)r->copy_bytes);
    char why[256];
    double peak = cuda_bf16_peak(r, why, sizeof why);
    if (peak > 0) {
        cJSON_AddNumberToObject(o, "bf16_dense_peak_tflops", peak / 1e12);
        cJSON_AddNumberToObject(o, "bf16_gemm_mfu", r->bf16_tflops * 1e12 / peak);
    }
    cJSON_AddStringToObject(o, "bf16_dense_peak_source", why);
    return o;
}

static void cuda_table(const lp_cuda_peak_result *r)
{
    printf("loupe peak --device cuda: %s (sm_%d%d, %d SMs, %d MHz, %.1f GiB), CUDA driver %d.%d, runtime %d.%d\n\n",
           r->device, r->cc_major, r->cc_minor, r->sm_count, r->sm_clock_mhz, r->memory_gib, r->driver_version / 1000,
           r->driver_version % 1000 / 10, r->runtime_version / 1000, r->runtime_version % 1000 / 10);
    printf("%-44s %12s\n", "probe", "value");
    char label[64];
    long long n = (long long)r->gemm_n;
    snprintf(label, sizeof label, "bf16 GEMM %lldx%lldx%lld (f32 accumulate)", n, n, n);
    printf("%-44s %7.1f TFLOP/s\n", label, r->bf16_tflops);
    snprintf(label, sizeof label, "tf32 GEMM %lldx%lldx%lld", n, n, n);
    printf("%-44s %7.1f TFLOP/s\n", label, r->tf32_tflops);
    snprintf(label, sizeof label, "f32 GEMM %lldx%lldx%lld", n, n, n);
    printf("%-44s %7.1f TFLOP/s\n", label, r->f32_tflops);
    snprintf(label, sizeof label, "device-to-device copy, %.0f MiB", r->copy_bytes / 1048576.0);
    printf("%-44s %7.0f GB/s (read + write)\n", label, r->copy_gbs);
    char why[256];
    double peak = cuda_bf16_peak(r, why, sizeof why);
    printf("\ndense bf16 peak used for MFU: %s\n", why);
    if (peak > 0)
        printf("bf16 GEMM: %.1f %% of that peak (MFU)\n", 100.0 * r->bf16_tflops * 1e12 / peak);
}

static void print_table(const lp_peak_result *r)
{
    const char *w = r->vector_bits == 512 ? "AVX-512" : r->vector_bits == 256 ? "AVX2" : r->vector_bits == 128 ? "SSE mul+add" : "scalar";
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
        {"device", required_argument, NULL, 'd'},  {NULL, 0, NULL, 0},
    };
    long threads = 0, size = 0;
    double seconds = 1.0;
    int json = 0, cuda = 0;
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
            if (lp_cli_parse_long("peak", "--size", optarg, 64, 16384, &size) != 0)
                return LP_EXIT_USAGE;
            break;
        case 'd':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda"))
                return lp_cli_usage_error("peak", "--device must be cpu or cuda, got '%s'", optarg);
            cuda = !strcmp(optarg, "cuda");
            break;
        case 'j': json = 1; break;
        case 'o': output = optarg; break;
        case 'h': usage(stdout); return LP_EXIT_OK;
        default: return lp_cli_usage_error("peak", "unknown option");
        }
    }
    if (optind < argc)
        return lp_cli_usage_error("peak", "unexpected argument '%s'", argv[optind]);
    if (cuda && size && size < 256)
        return lp_cli_usage_error("peak", "--size with --device cuda must be in 256..16384, got %ld", size);
    if (!cuda && size > 8192)
        return lp_cli_usage_error("peak", "--size must be in 64..8192, got %ld", size);

    cJSON *o = NULL;
    char *text = NULL;
    lp_cuda_peak_result cr;
    lp_peak_result r;
    if (cuda) {
        if (lp_cuda_peak_measure(&cr, size ? size : 8192, 10) != LP_OK)
            return lp_cli_fail("peak");
        o = json || output ? cuda_json(&cr) : NULL;
    } else {
        lp_threads_init();
        if (threads > 0)
            lp_threads_set((int)threads);
        if (lp_peak_measure(&r, seconds, size ? size : 2048) != LP_OK)
            return lp_cli_fail("peak");
        o = json || output ? to_json(&r) : NULL;
    }

    if (json || output) {
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
    else if (cuda)
        cuda_table(&cr);
    else
        print_table(&r);
    cJSON_free(text);
    cJSON_Delete(o);
    return rc;
}
