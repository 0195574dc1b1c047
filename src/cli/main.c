/* loupe's entry point: picks the subcommand and hands it the remaining arguments.
 * Only this layer decides to stop the process; every library layer returns a status. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "loupe/core.h"
#include "loupe/kernels.h"

static const struct {
    const char *name;
    lp_cmd_fn fn;
    const char *summary;
} commands[] = {
    {"train", lp_cmd_train, "fine-tune a model (full, LoRA, QLoRA)"},
    {"eval", lp_cmd_eval, "loss, accuracy/F1 or perplexity of a model on a dataset"},
    {"profile", lp_cmd_profile, "a short training run with the profiler on"},
    {"bench", lp_cmd_bench, "inference benchmark: batch-size sweep, latency, throughput, memory"},
    {"report", lp_cmd_report, "re-render report.html and plots from a run directory"},
    {"compare", lp_cmd_compare, "compare runs side by side"},
    {"analyze", lp_cmd_analyze, "key averages and step breakdown of any Kineto trace"},
    {"inspect", lp_cmd_inspect, "architecture, parameters and predicted memory of a model"},
    {"peak", lp_cmd_peak, "this machine's FLOP/s and bandwidth ceilings"},
    {"tokenize", lp_cmd_tokenize, "print token ids for lines on stdin"},
    {"checkpoint", lp_cmd_checkpoint, "verify checkpoints against their checksums"},
    {"template", lp_cmd_template, "render conversations through a model's chat template"},
    {"generate", lp_cmd_generate, "generate text with a KV cache (greedy or sampled, streamed)"},
    {"bench-gen", lp_cmd_bench_gen, "generation speed as llama-bench measures it (pp/tg tokens/s, GB/s)"},
    {"quantize", lp_cmd_quantize, "write a GGUF (Q8_0, Q4_0, F32) from a GGUF or a qwen2/llama directory"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out,
            "usage: loupe <command> [options]\n"
            "       loupe --help | --version\n\n"
            "loupe fine-tunes and runs transformer models and profiles where the time and\n"
            "memory go.\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'loupe <command> --help' describes each command's options.\n");
}

int main(int argc, char **argv)
{
    /* first: may re-execute the program with a bounded OpenMP spin (see core.h) */
    lp_threads_bound_spin(argv);
    if (argc < 2) {
        usage(stderr);
        return LP_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return LP_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("%s\n", lp_cli_version());
        return LP_EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (!strcmp(cmd, commands[i].name)) {
            /* LP_ISA / LP_KERNELS: refuse a level this CPU lacks before any work starts */
            if (lp_kernels_init() != LP_OK) {
                fprintf(stderr, "loupe %s: %s\n", cmd, lp_err_msg());
                return LP_EXIT_USAGE;
            }
            /* the thread pool and OpenBLAS's kernel set for every command, before any BLAS
             * call (a command that missed it ran OpenBLAS's SSE3 fallback on CPUs it does not
             * know); commands may still set the count from their own flags */
            lp_threads_init();
            optind = 0; /* glibc: full reinitialisation of getopt for the subcommand */
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    if (cmd[0] == '-')
        fprintf(stderr, "loupe: unknown option '%s'\n", cmd);
    else
        fprintf(stderr, "loupe: unknown command '%s'\n", cmd);
    fprintf(stderr, "Try 'loupe --help'.\n");
    return LP_EXIT_USAGE;
}
