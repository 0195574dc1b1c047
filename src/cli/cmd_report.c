/* loupe report RUN_DIR...: renders each run directory's report.html (and plots/) again from
 * what the run wrote: summary.json, steps.csv, epoch_results.csv, the profiler's trace, or
 * a bench run's baseline_metrics.json. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "loupe/base.h"

static void usage(void)
{
    printf("usage: loupe report [--quiet] RUN_DIR...\n\n"
           "Renders RUN_DIR/report.html and RUN_DIR/plots/*.png|svg again from a run directory that\n"
           "loupe train, profile or bench wrote: headline figures, loss and learning rate, the step\n"
           "split, throughput, memory by category, top ops and the diagnosis against this machine's\n"
           "ceilings (RUN_DIR/peak.json once measured). The page is self-contained: open it in a browser.\n\n"
           "  --quiet   print nothing on success\n");
}

int lp_cmd_report(int argc, char **argv)
{
    static const struct option opts[] = {{"quiet", no_argument, NULL, 'q'}, {"help", no_argument, NULL, 'h'}, {0}};
    int quiet = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+qh", opts, NULL)) != -1) {
        switch (c) {
        case 'q':
            quiet = 1;
            break;
        case 'h':
            usage();
            return LP_EXIT_OK;
        default:
            return lp_cli_usage_error("report", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return lp_cli_usage_error("report", "give one or more run directories");
    for (int i = optind; i < argc; i++)
        if (lp_cli_write_report(argv[i], quiet) != LP_EXIT_OK)
            return lp_cli_fail("report");
    return LP_EXIT_OK;
}
