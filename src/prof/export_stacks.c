/* Collapsed stacks ("outer;inner;leaf <self us>") from per-thread range nesting, the
 * format flamegraph.pl and speedscope read. Like torch's export_stacks the value is self
 * CPU time in integer microseconds and frame characters ' ', ';', tab, newline become
 * '_'; unlike torch, identical stacks are merged before rounding (the tools would sum
 * them anyway) so sub-microsecond ranges are not lost. */
#include "prof_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct stk {
    char *path;
    uint64_t h;
    int64_t ns;
    struct stk *next;
} stk;

static void append_frame(char **buf, size_t *len, size_t *cap, const char *name, int first)
{
    size_t l = strlen(name);
    if (*len + l + 2 > *cap) {
        size_t nc = (*cap ? *cap : 256);
        while (nc < *len + l + 2)
            nc *= 2;
        char *nb = realloc(*buf, nc);
        if (!nb)
            return;
        *buf = nb;
        *cap = nc;
    }
    if (!first)
        (*buf)[(*len)++] = ';';
    for (size_t i = 0; i < l; i++) {
        char c = name[i];
        (*buf)[(*len)++] = (c == ' ' || c == ';' || c == '\t' || c == '\n') ? '_' : c;
    }
    (*buf)[*len] = '\0';
}

lp_status lp_prof_export_stacks(const lp_prof_events *ev, const char *path)
{
    lp_prof_node *nodes;
    size_t nn;
    lp_status st = lp_prof__nest(ev, lp_prof__is_cpu_range, &nodes, &nn);
    if (st != LP_OK)
        return st;
    size_t tab_cap = 4096;
    stk **tab = calloc(tab_cap, sizeof *tab);
    stk **order = malloc((nn ? nn : 1) * sizeof *order);
    long *chain = malloc(4096 * sizeof *chain);
    char *buf = NULL;
    size_t cap = 0, norder = 0;
    if (!tab || !order || !chain) {
        st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
        goto done;
    }
    for (size_t k = 0; k < nn; k++) {
        const lp_prof_event *e = lp_prof_events_get(ev, nodes[k].idx);
        int64_t self = e->dur_ns - nodes[k].child_ns;
        if (self <= 0)
            continue;
        size_t depth = 0;
        for (long p = (long)k; p >= 0 && depth < 4096; p = nodes[p].parent)
            chain[depth++] = p;
        size_t len = 0;
        for (size_t d = depth; d-- > 0;)
            append_frame(&buf, &len, &cap, lp_prof_events_get(ev, nodes[chain[d]].idx)->name,
                         d == depth - 1);
        if (!buf) {
            st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
            goto done;
        }
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < len; i++)
            h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
        stk *s = tab[h & (tab_cap - 1)];
        while (s && (s->h != h || strcmp(s->path, buf) != 0))
            s = s->next;
        if (!s) {
            s = malloc(sizeof *s);
            if (!s || !(s->path = strdup(buf))) {
                free(s);
                st = lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
                goto done;
            }
            s->h = h;
            s->ns = 0;
            s->next = tab[h & (tab_cap - 1)];
            tab[h & (tab_cap - 1)] = s;
            order[norder++] = s;
        }
        s->ns += self;
    }
    lp_prof_out *o;
    st = lp_prof_out_open(&o, path, 0);
    if (st == LP_OK) {
        for (size_t i = 0; i < norder; i++) {
            long long us = (long long)((order[i]->ns + 500) / 1000);
            if (us > 0)
                lp_prof_out_printf(o, "%s %lld\n", order[i]->path, us);
        }
        st = lp_prof_out_commit(o);
    }
done:
    for (size_t i = 0; i < norder; i++) {
        free(order[i]->path);
        free(order[i]);
    }
    free(order);
    free(tab);
    free(chain);
    free(buf);
    free(nodes);
    return st;
}
