/* Renders key averages as torch's _build_table text (same columns, widths, number
 * formats, separators and footer) and as a CSV of raw numbers. */
#include "prof_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *s, const char *str, size_t k)
{
    if (s->oom)
        return;
    char *np = lp_grow(s->p, &s->cap, s->n + k + 1, 1, 4096);
    if (!np) {
        s->oom = 1;
        return;
    }
    s->p = np;
    memcpy(s->p + s->n, str, k);
    s->n += k;
    s->p[s->n] = '\0';
}

static void sb_puts(sbuf *s, const char *str) { sb_put(s, str, strlen(str)); }

/* "{: >w}" then two spaces (torch's add_column). Longer text is not cut, like format(). */
static void cell(sbuf *s, const char *text, size_t w)
{
    size_t l = strlen(text);
    for (size_t i = l; i < w; i++)
        sb_put(s, " ", 1);
    sb_put(s, text, l);
    sb_put(s, "  ", 2);
}

static void fmt_time(char *b, size_t cap, double us, const char *unit)
{
    if (unit && strcmp(unit, "s") == 0)
        snprintf(b, cap, "%.3fs", us / 1e6);
    else if (unit && strcmp(unit, "ms") == 0)
        snprintf(b, cap, "%.3fms", us / 1e3);
    else if (unit && strcmp(unit, "us") == 0)
        snprintf(b, cap, "%.3fus", us);
    else if (us >= 1e6)
        snprintf(b, cap, "%.3fs", us / 1e6);
    else if (us >= 1e3)
        snprintf(b, cap, "%.3fms", us / 1e3);
    else
        snprintf(b, cap, "%.3fus", us);
}

static void fmt_share(char *b, size_t cap, double t, double total)
{
    if (total == 0)
        snprintf(b, cap, "NaN");
    else
        snprintf(b, cap, "%.2f%%", t * 100.0 / total);
}

static void fmt_mem(char *b, size_t cap, int64_t n)
{
    const double KB = 1024, MB = 1024 * KB, GB = 1024 * MB;
    double a = fabs((double)n);
    if (a >= GB)
        snprintf(b, cap, "%.2f GB", (double)n / GB);
    else if (a >= MB)
        snprintf(b, cap, "%.2f MB", (double)n / MB);
    else if (a >= KB)
        snprintf(b, cap, "%.2f KB", (double)n / KB);
    else
        snprintf(b, cap, "%lld B", (long long)n);
}

lp_status lp_prof_keyavg_table(const lp_prof_keyavg *ka, const lp_prof_keyavg_opts *o,
                               char **out)
{
    *out = NULL;
    sbuf s = {0};
    if (ka->n == 0) {
        *out = strdup("");
        return *out ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory");
    }
    const char *dev = o && o->device_name ? o->device_name : "CUDA";
    const char *unit = o ? o->time_unit : NULL;
    int64_t row_limit = o ? o->row_limit : 100;
    int top_only = o && o->top_level_only;
    int has_dev = ka->has_device_time, mem = ka->profile_memory;
    int dev_mem = mem && ka->has_device_mem;
    int shapes = ka->has_input_shapes, flops = ka->has_flops;

    size_t name_w = 0, shapes_w = 0;
    for (size_t i = 0; i < ka->n; i++) {
        size_t l = strlen(ka->rows[i].key);
        if (l > name_w)
            name_w = l;
        l = strlen(ka->rows[i].input_shapes);
        if (l > shapes_w)
            shapes_w = l;
    }
    name_w += 4;
    if (name_w > 55)
        name_w = 55;
    shapes_w += 4;
    if (shapes_w > 80)
        shapes_w = 80;

    const char *headers[24];
    size_t widths[24], nh = 0;
    char hbuf[6][48];
    headers[nh] = "Name", widths[nh++] = name_w;
    static const char *const base_h[] = {"Self CPU %", "Self CPU", "CPU total %", "CPU total",
                                         "CPU time avg"};
    for (int i = 0; i < 5; i++)
        headers[nh] = base_h[i], widths[nh++] = 12;
    if (has_dev) {
        snprintf(hbuf[0], 48, "Self %s", dev);
        snprintf(hbuf[1], 48, "Self %s %%", dev);
        snprintf(hbuf[2], 48, "%s total", dev);
        snprintf(hbuf[3], 48, "%s time avg", dev);
        for (int i = 0; i < 4; i++)
            headers[nh] = hbuf[i], widths[nh++] = 12;
    }
    if (mem) {
        headers[nh] = "CPU Mem", widths[nh++] = 12;
        headers[nh] = "Self CPU Mem", widths[nh++] = 12;
        if (dev_mem) {
            snprintf(hbuf[4], 48, "%s Mem", dev);
            snprintf(hbuf[5], 48, "Self %s Mem", dev);
            headers[nh] = hbuf[4], widths[nh++] = 12;
            headers[nh] = hbuf[5], widths[nh++] = 12;
        }
    }
    headers[nh] = "# of Calls", widths[nh++] = 12;
    if (shapes)
        headers[nh] = "Input Shapes", widths[nh++] = shapes_w;
    static const char *const fl_h[] = {"FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs",
                                       "PFLOPs"};
    char flops_header[32];
    double flops_scale = 1;
    if (flops) {
        double mn = INFINITY;
        for (size_t i = 0; i < ka->n; i++)
            if (ka->rows[i].flops > 0 && ka->rows[i].flops < mn)
                mn = ka->rows[i].flops;
        double lg = log10(mn) / 3;
        if (lg > 5)
            lg = 5;
        if (lg < 0)
            lg = 0;
        flops_scale = pow(10, floor(lg) * -3.0);
        snprintf(flops_header, sizeof flops_header, "Total %s", fl_h[(int)lg]);
        headers[nh] = flops_header, widths[nh++] = 12;
    }
    size_t line_len = 0;
    for (size_t i = 0; i < nh; i++)
        line_len += widths[i] + 2;
    line_len -= 2;

    char *sep = malloc(line_len + 16);
    if (!sep)
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory");
    size_t sp = 0;
    for (size_t i = 0; i < nh; i++) {
        memset(sep + sp, '-', widths[i]);
        sp += widths[i];
        sep[sp++] = ' ';
        sep[sp++] = ' ';
    }
    sep[sp++] = '\n';
    sep[sp] = '\0';

    if (top_only) {
        for (size_t i = 0; i < line_len; i++)
            sb_put(&s, "=", 1);
        sb_puts(&s, "\nThis report only display top-level ops statistics\n");
    }
    sb_puts(&s, sep);
    for (size_t i = 0; i < nh; i++)
        cell(&s, headers[i], widths[i]);
    sb_puts(&s, "\n");
    sb_puts(&s, sep);

    int64_t shown = 0;
    char v[96];
    for (size_t i = 0; i < ka->n; i++) {
        const lp_prof_keyavg_row *r = &ka->rows[i];
        if (row_limit > 0 && shown == row_limit)
            break;
        if (top_only && r->has_cpu_parent)
            continue;
        shown++;
        size_t c = 0;
        char name[64];
        if (strlen(r->key) >= 52) {
            snprintf(name, sizeof name, "%.52s...", r->key);
            cell(&s, name, widths[c++]);
        } else {
            cell(&s, r->key, widths[c++]);
        }
        fmt_share(v, sizeof v, r->self_cpu_us, ka->sum_self_cpu_us);
        cell(&s, v, widths[c++]);
        fmt_time(v, sizeof v, r->self_cpu_us, unit);
        cell(&s, v, widths[c++]);
        fmt_share(v, sizeof v, r->cpu_total_us, ka->sum_self_cpu_us);
        cell(&s, v, widths[c++]);
        fmt_time(v, sizeof v, r->cpu_total_us, unit);
        cell(&s, v, widths[c++]);
        fmt_time(v, sizeof v, r->count ? r->cpu_total_us / (double)r->count : 0, unit);
        cell(&s, v, widths[c++]);
        if (has_dev) {
            fmt_time(v, sizeof v, r->self_device_us, unit);
            cell(&s, v, widths[c++]);
            fmt_share(v, sizeof v, r->self_device_us, ka->sum_self_device_us);
            cell(&s, v, widths[c++]);
            fmt_time(v, sizeof v, r->device_total_us, unit);
            cell(&s, v, widths[c++]);
            fmt_time(v, sizeof v, r->count ? r->device_total_us / (double)r->count : 0, unit);
            cell(&s, v, widths[c++]);
        }
        if (mem) {
            fmt_mem(v, sizeof v, r->cpu_mem);
            cell(&s, v, widths[c++]);
            fmt_mem(v, sizeof v, r->self_cpu_mem);
            cell(&s, v, widths[c++]);
            if (dev_mem) {
                fmt_mem(v, sizeof v, r->device_mem);
                cell(&s, v, widths[c++]);
                fmt_mem(v, sizeof v, r->self_device_mem);
                cell(&s, v, widths[c++]);
            }
        }
        snprintf(v, sizeof v, "%lld", (long long)r->count);
        cell(&s, v, widths[c++]);
        if (shapes) {
            char sh[96];
            snprintf(sh, sizeof sh, "%.*s", (int)shapes_w, r->input_shapes);
            cell(&s, sh, widths[c++]);
        }
        if (flops) {
            if (r->flops <= 0)
                snprintf(v, sizeof v, "--");
            else
                snprintf(v, sizeof v, "%8.3f", r->flops * flops_scale);
            cell(&s, v, widths[c++]);
        }
        sb_puts(&s, "\n");
    }
    sb_puts(&s, sep);
    fmt_time(v, sizeof v, ka->sum_self_cpu_us, unit);
    sb_puts(&s, "Self CPU time total: ");
    sb_puts(&s, v);
    sb_puts(&s, "\n");
    if (has_dev) {
        fmt_time(v, sizeof v, ka->sum_self_device_us, unit);
        sb_puts(&s, "Self ");
        sb_puts(&s, dev);
        sb_puts(&s, " time total: ");
        sb_puts(&s, v);
        sb_puts(&s, "\n");
    }
    free(sep);
    if (s.oom) {
        free(s.p);
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory (table)");
    }
    *out = s.p;
    return LP_OK;
}

lp_status lp_prof_keyavg_write_table(const lp_prof_keyavg *ka, const lp_prof_keyavg_opts *o,
                                     const char *path)
{
    char *t;
    lp_status st = lp_prof_keyavg_table(ka, o, &t);
    if (st != LP_OK)
        return st;
    st = lp_file_write_atomic(path, t, strlen(t));
    free(t);
    return st;
}

static void csv_field(lp_prof_out *o, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        lp_prof_out_puts(o, s);
        return;
    }
    lp_prof_out_puts(o, "\"");
    for (; *s; s++) {
        if (*s == '"')
            lp_prof_out_puts(o, "\"");
        lp_prof_out_write(o, s, 1);
    }
    lp_prof_out_puts(o, "\"");
}

lp_status lp_prof_keyavg_write_csv(const lp_prof_keyavg *ka, const char *path)
{
    lp_prof_out *o;
    lp_status st = lp_prof_out_open(&o, path, 0);
    if (st != LP_OK)
        return st;
    lp_prof_out_puts(o, "name,input_shapes,calls,self_cpu_us,self_cpu_pct,cpu_total_us,"
                        "cpu_total_pct,cpu_avg_us,self_device_us,device_total_us,cpu_mem_bytes,"
                        "self_cpu_mem_bytes,device_mem_bytes,self_device_mem_bytes,total_flops\n");
    for (size_t i = 0; i < ka->n; i++) {
        const lp_prof_keyavg_row *r = &ka->rows[i];
        double tot = ka->sum_self_cpu_us;
        csv_field(o, r->key);
        lp_prof_out_puts(o, ",");
        csv_field(o, r->input_shapes);
        lp_prof_out_printf(o, ",%lld,%.3f,%.4f,%.3f,%.4f,%.3f,%.3f,%.3f,%lld,%lld,%lld,%lld,%.0f\n",
                           (long long)r->count, r->self_cpu_us,
                           tot > 0 ? r->self_cpu_us * 100 / tot : 0, r->cpu_total_us,
                           tot > 0 ? r->cpu_total_us * 100 / tot : 0,
                           r->count ? r->cpu_total_us / (double)r->count : 0, r->self_device_us,
                           r->device_total_us, (long long)r->cpu_mem, (long long)r->self_cpu_mem,
                           (long long)r->device_mem, (long long)r->self_device_mem, r->flops);
    }
    return lp_prof_out_commit(o);
}
