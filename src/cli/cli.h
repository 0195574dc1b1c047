/* Shared pieces of the loupe command line: the subcommand signature and the helpers
 * that keep error messages and exit codes uniform across subcommands.
 * Exit codes: 0 success, 1 the job failed (bad file, bad data, numeric failure),
 * 2 usage error (unknown flag, missing argument, subcommand not built yet). */
#ifndef LOUPE_CLI_H
#define LOUPE_CLI_H

#include <stdio.h>

#include "loupe/models.h"

#define LP_EXIT_OK 0
#define LP_EXIT_FAIL 1
#define LP_EXIT_USAGE 2

/* Every subcommand: argv[0] is the subcommand's name ("train"); getopt state is reset
 * before the call. Returns the process exit code. */
typedef int (*lp_cmd_fn)(int argc, char **argv);

int lp_cmd_train(int argc, char **argv);
int lp_cmd_eval(int argc, char **argv);
int lp_cmd_profile(int argc, char **argv);
int lp_cmd_bench(int argc, char **argv);
int lp_cmd_report(int argc, char **argv);
int lp_cmd_compare(int argc, char **argv);
int lp_cmd_analyze(int argc, char **argv);
int lp_cmd_inspect(int argc, char **argv);
int lp_cmd_peak(int argc, char **argv);
int lp_cmd_tokenize(int argc, char **argv);
int lp_cmd_checkpoint(int argc, char **argv);
int lp_cmd_template(int argc, char **argv);
int lp_cmd_generate(int argc, char **argv);
int lp_cmd_bench_gen(int argc, char **argv);
int lp_cmd_quantize(int argc, char **argv);

/* "loupe <cmd>: <message>" on stderr, then LP_EXIT_USAGE with a hint to --help. */
int lp_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* --quantize FMT (fmt: q8_0, q4_0, nf4, bf16, f32_packed or stored) or --dequantize (fmt NULL: f32) into *out;
 * non-zero after printing the usage error. */
int lp_cli_weights_flag(const char *cmd, const char *fmt, lp_weight_format *out);

/* "loupe <cmd>: <lp_err_msg()>" on stderr; returns LP_EXIT_FAIL. */
int lp_cli_fail(const char *cmd);

/* For subcommands whose engine is not built yet: says so plainly and returns 2. */
int lp_cli_not_built(const char *cmd, const char *what);

/* Parses a decimal integer flag value within [min, max]; prints a usage error naming
 * the flag and returns -1 on failure. */
int lp_cli_parse_long(const char *cmd, const char *flag, const char *text, long min, long max, long *out);

/* Writes dir/report.html and dir/plots/ for a run directory (cli_report.c), with the
 * machine's ceilings from dir/peak.json or measured and saved there; prints
 * "report: DIR/report.html" unless quiet. LP_EXIT_FAIL with lp_err_msg() set on error. */
int lp_cli_write_report(const char *dir, int quiet);

/* The version string: "loupe 0.1.0 (<git revision>)". */
const char *lp_cli_version(void);

#endif
