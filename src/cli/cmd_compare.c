/* loupe compare: runs side by side from their summary.json (method, exec, trainable
 * parameters, step time, throughput, peak memory by category, final loss, eval accuracy,
 * top ops' self time), each number with its ratio to the first run; text or --json. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "loupe/report.h"

static void usage(void)
{
    printf("usage: loupe compare [--json] RUN_DIR RUN_DIR...\n\n"
           "Compares training runs (reports/<run_id>/ directories with a summary.json) side by side:\n"
           "method, exec, trainable parameters, step ms, samples/s, tokens/s, peak memory by category,\n"
           "final loss, eval accuracy and the top ops' self time, with ratios against the first run.\n\n"
           "  --json    print JSON instead of the table\n");
}

int lp_cmd_compare(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {0}};
    bool json = false;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+jh", opts, NULL)) != -1) {
        switch (c) {
        case 'j':
            json = true;
            break;
        case 'h':
            usage();
            return LP_EXIT_OK;
        default:
            return lp_cli_usage_error("compare", "unknown option '%s'", argv[optind - 1]);
        }
    }
    int n = argc - optind;
    if (n < 1)
        return lp_cli_usage_error("compare", "give one or more run directories");
    lp_run_summary *r = NULL;
    if (lp_compare_load((const char *const *)argv + optind, n, &r) != LP_OK)
        return lp_cli_fail("compare");
    int rc = LP_EXIT_OK;
    if (json) {
        char *text = lp_compare_json(r, n);
        if (text) {
            printf("%s\n", text);
            free(text);
        } else {
            fprintf(stderr, "loupe compare: out of memory\n");
            rc = LP_EXIT_FAIL;
        }
    } else {
        lp_compare_write_text(stdout, r, n);
    }
    free(r);
    return rc;
}
