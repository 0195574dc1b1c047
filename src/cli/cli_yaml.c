/* The flat YAML config walker (see cli_yaml.h). libyaml's event stream: one mapping at the
 * top, scalar keys and scalar values; anything else is refused with its line. */
#include "cli_yaml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "cli.h"
#include "loupe/base.h"

static int refuse(const char *cmd, const char *path, const yaml_event_t *ev, const char *what)
{
    fprintf(stderr, "loupe %s: %s:%zu: %s\n", cmd, path, ev->start_mark.line + 1, what);
    return LP_EXIT_FAIL;
}

int lp_cli_yaml_each(const char *cmd, const char *path, lp_cli_yaml_fn fn, void *ctx)
{
    char *text = NULL;
    size_t len = 0;
    if (lp_file_read_all(path, &text, &len) != LP_OK) {
        fprintf(stderr, "loupe %s: config file %s\n", cmd, lp_err_msg());
        return LP_EXIT_FAIL;
    }
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        free(text);
        fprintf(stderr, "loupe %s: %s: out of memory\n", cmd, path);
        return LP_EXIT_FAIL;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int rc = 0, depth = 0, done = 0, have_key = 0;
    char key[256] = "";
    while (!done && rc == 0) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            fprintf(stderr, "loupe %s: %s:%zu: YAML error: %s\n", cmd, path, p.problem_mark.line + 1,
                    p.problem ? p.problem : "parse error");
            rc = LP_EXIT_FAIL;
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        case YAML_MAPPING_START_EVENT:
            if (++depth > 1)
                rc = refuse(cmd, path, &ev, "nested mappings are not supported (keys mirror the flags)");
            break;
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_ALIAS_EVENT:
            rc = refuse(cmd, path, &ev, "aliases (*name) are not supported; write the value");
            break;
        case YAML_SEQUENCE_START_EVENT:
            rc = refuse(cmd, path, &ev, "lists are not supported; write lists as one string (1,4,8)");
            break;
        case YAML_SCALAR_EVENT: {
            const char *s = (const char *)ev.data.scalar.value;
            if (depth != 1)
                rc = refuse(cmd, path, &ev, "the top level must be a mapping of flag: value");
            else if (!have_key) {
                snprintf(key, sizeof key, "%s", s);
                for (char *k = key; *k; k++)
                    if (*k == '_')
                        *k = '-';
                have_key = 1;
            } else {
                have_key = 0;
                rc = fn(ctx, key, s, ev.start_mark.line + 1);
            }
            break;
        }
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    free(text);
    return rc;
}
