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
    printf("usage: loupe compare [--json] [--html OUT.html] RUN_DIR RUN_DIR...\n\n"
           "Compares training runs (reports/<run_id>/ directories with a summary.json) side by side:\n"
           "method, exec, trainable parameters, step ms, samples/s, tokens/s, peak memory by category,\n"
           "final loss, eval accuracy and the top ops' self time, with ratios against the first run.\n\n"
           "  --json            print JSON instead of the table\n"
           "  --html OUT.html   also write the runs side by side as a self-contained page (charts of\n"
           "                    loss, step time, throughput, accuracy, memory and top ops; PNG and SVG\n"
           "                    copies in OUT-plots/)\n");
}

/* OUT.html's chart folder: OUT-plots beside it. */
static int write_html(const char *out, char **dirs, int n)
{
    lp_run_data *r[8] = {0};
    if (n > 8) {
        fprintf(stderr, "loupe compare: --html takes at most 8 runs, got %d\n", n);
        return LP_EXIT_USAGE;
    }
    int rc = LP_EXIT_OK;
    for (int i = 0; i < n && rc == LP_EXIT_OK; i++)
        if (lp_run_load(dirs[i], &r[i]) != LP_OK)
            rc = lp_cli_fail("compare");
    if (rc == LP_EXIT_OK) {
        char plots[4096];
        size_t len = strlen(out);
        int strip = len > 5 && strcmp(out + len - 5, ".html") == 0 ? 5 : 0;
        snprintf(plots, sizeof plots, "%.*s-plots", (int)(len - strip), out);
        if (lp_compare_html_write((const lp_run_data *const *)r, n, out, plots) != LP_OK)
            rc = lp_cli_fail("compare");
        else
            printf("compare page: %s\n", out);
        lp_chart_release_caches();
    }
    for (int i = 0; i < n; i++)
        lp_run_free(r[i]);
    return rc;
}

int lp_cmd_compare(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"html", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
        {0}};
    bool json = false;
    const char *html = NULL;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "jho:", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            html = optarg;
            break;
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
    if (rc == LP_EXIT_OK && html)
        rc = write_html(html, argv + optind, n);
    return rc;
}
