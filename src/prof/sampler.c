/* Background sampler: a thread that records RSS and process CPU utilisation (from /proc)
 * and, when NVML loads, GPU 0's utilisation, memory used, power and SM clock every period
 * into memory, written as CSV atomically on stop. Without a GPU the GPU cells stay empty. */
#include "prof_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct sample {
    double t_s;
    int64_t rss;
    double cpu_pct;
    lp_gpu_sample gpu;
} sample;

struct lp_prof_sampler {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    int period_ms;
    char *path;
    sample *s;
    size_t n, cap;
    int oom;
    int64_t t0, prev_t, prev_c; /* start, and the previous sample's time and CPU ticks */
};

/* utime + stime of this process in clock ticks (/proc/self/stat fields 14, 15). */
static int64_t cpu_ticks(void)
{
    char buf[1024];
    FILE *fp = fopen("/proc/self/stat", "r");
    if (!fp)
        return -1;
    size_t k = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[k] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p)
        return -1;
    unsigned long long ut, st;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (int64_t)(ut + st);
}

/* Appends one sample (caller holds s->mu). */
static void add_sample(lp_prof_sampler *s, double t_s, int64_t rss, double pct, const lp_gpu_sample *g)
{
    sample *ns2 = lp_grow(s->s, &s->cap, s->n + 1, sizeof *ns2, 256);
    if (!ns2) {
        s->oom = 1;
        return;
    }
    s->s = ns2;
    s->s[s->n++] = (sample){t_s, rss, pct, *g};
}

/* Takes a sample: RSS now, CPU % since the previous sample (-1 for the first). */
static void take(lp_prof_sampler *s)
{
    double hz = (double)sysconf(_SC_CLK_TCK);
    int64_t now = lp_prof_now_ns(), c = cpu_ticks(), rss = -1, prss;
    if (lp_prof_rss(&rss, &prss) != LP_OK)
        rss = -1;
    double pct = -1;
    /* CPU time comes in clock ticks (10 ms at 100 Hz): over shorter spans the ratio is
     * noise, so leave the cell empty and let the next sample cover a longer span. */
    if (c < 0 || s->prev_c < 0 || (double)(now - s->prev_t) >= 2e9 / hz) {
        if (c >= 0 && s->prev_c >= 0)
            pct = (double)(c - s->prev_c) / hz / ((double)(now - s->prev_t) / 1e9) * 100.0;
        s->prev_t = now;
        s->prev_c = c;
    }
    lp_gpu_sample g;
    lp_prof_nvml_sample(&g); /* all -1 without NVML */
    pthread_mutex_lock(&s->mu);
    add_sample(s, (double)(now - s->t0) / 1e9, rss, pct, &g);
    pthread_mutex_unlock(&s->mu);
}

static void *run(void *arg)
{
    lp_prof_sampler *s = arg;
    lp_prof_set_thread_name("loupe-sampler");
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        int64_t ns = dl.tv_nsec + (int64_t)s->period_ms * 1000000;
        dl.tv_sec += ns / 1000000000;
        dl.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&s->cv, &s->mu, &dl);
        if (s->stop)
            break;
        pthread_mutex_unlock(&s->mu);
        take(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

lp_status lp_prof_sampler_start(const char *csv_path, int period_ms, lp_prof_sampler **out)
{
    *out = NULL;
    if (period_ms <= 0)
        return lp_err(LP_STATUS_INVALID_ARG, "sampler: period must be > 0 ms (got %d)", period_ms);
    lp_prof_sampler *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(csv_path))) {
        free(s);
        return lp_err(LP_STATUS_NO_MEMORY, "sampler: out of memory");
    }
    s->period_ms = period_ms;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->t0 = s->prev_t = lp_prof_now_ns();
    s->prev_c = -1; /* the first row has no CPU % (nothing to difference against) */
    take(s); /* a first row at t = 0, whatever the scheduler does */
    if (pthread_create(&s->th, NULL, run, s) != 0) {
        free(s->path);
        free(s);
        return lp_err(LP_STATUS_NO_MEMORY, "sampler: cannot start thread");
    }
    *out = s;
    return LP_OK;
}

lp_status lp_prof_sampler_stop(lp_prof_sampler *s)
{
    if (!s)
        return LP_OK;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    take(s); /* and a last one at stop */
    lp_prof_out *o;
    lp_status st = lp_prof_out_open(&o, s->path, 0);
    if (st == LP_OK) {
        lp_prof_out_puts(o, "time_s,rss_bytes,cpu_percent,gpu_util_percent,gpu_mem_bytes,gpu_power_w,"
                            "gpu_sm_clock_mhz\n");
        for (size_t i = 0; i < s->n; i++) {
            lp_prof_out_printf(o, "%.6f,", s->s[i].t_s);
            if (s->s[i].rss >= 0)
                lp_prof_out_printf(o, "%lld", (long long)s->s[i].rss);
            lp_prof_out_puts(o, ",");
            if (s->s[i].cpu_pct >= 0)
                lp_prof_out_printf(o, "%.1f", s->s[i].cpu_pct);
            const lp_gpu_sample *g = &s->s[i].gpu;
            lp_prof_out_puts(o, ",");
            if (g->util_pct >= 0)
                lp_prof_out_printf(o, "%.0f", g->util_pct);
            lp_prof_out_puts(o, ",");
            if (g->mem_used_bytes >= 0)
                lp_prof_out_printf(o, "%lld", (long long)g->mem_used_bytes);
            lp_prof_out_puts(o, ",");
            if (g->power_w >= 0)
                lp_prof_out_printf(o, "%.3f", g->power_w);
            lp_prof_out_puts(o, ",");
            if (g->sm_clock_mhz >= 0)
                lp_prof_out_printf(o, "%d", (int)g->sm_clock_mhz);
            lp_prof_out_puts(o, "\n");
        }
        st = lp_prof_out_commit(o);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->s);
    free(s->path);
    free(s);
    return st;
}
