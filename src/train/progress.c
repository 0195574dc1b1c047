/* Progress output of a training run: on a terminal one bar line redrawn in place (step,
 * loss, samples/s, ETA); otherwise plain lines every log_every steps, so logs stay readable. */
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "train_internal.h"

double lp_train_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void lp_progress_init(lp_progress *p, const lp_train_config *c, int64_t total, int64_t first_step)
{
    p->out = stderr;
    p->total = total;
    p->log_every = c->log_every > 0 ? c->log_every : 10;
    p->first_step = first_step;
    p->samples = 0;
    p->t0 = lp_train_now_s();
    if (c->quiet)
        p->mode = 0;
    else if (c->progress == 1 || (c->progress < 0 && isatty(fileno(stderr))))
        p->mode = 2;
    else
        p->mode = 1;
}

static void fmt_eta(char *buf, size_t cap, double s)
{
    if (!isfinite(s) || s < 0)
        s = 0;
    long t = (long)(s + 0.5);
    snprintf(buf, cap, "%02ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
}

void lp_progress_step(lp_progress *p, const lp_step_rec *r)
{
    if (!p->mode)
        return;
    p->samples += r->samples;
    double el = lp_train_now_s() - p->t0;
    int64_t done = r->step - p->first_step;
    double sps = el > 0 ? p->samples / el : 0.0;
    double eta = done > 0 ? el / done * (double)(p->total - r->step) : 0.0;
    char etas[32];
    fmt_eta(etas, sizeof etas, eta);
    if (p->mode == 2) {
        int width = 24, fill = p->total > 0 ? (int)(width * r->step / p->total) : 0;
        char bar[32];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = 0;
        fprintf(p->out, "\r[%s] step %lld/%lld  loss %.4f  %.1f samples/s  ETA %s ", bar, (long long)r->step,
                (long long)p->total, r->loss, sps, etas);
        fflush(p->out);
    } else if (r->step % p->log_every == 0 || r->step == p->total || r->step == p->first_step + 1) {
        fprintf(p->out, "step %lld/%lld epoch %lld loss %.4f lr %.3g %.1f samples/s eta %s\n", (long long)r->step,
                (long long)p->total, (long long)r->epoch + 1, r->loss, r->lr, sps, etas);
    }
}

void lp_progress_end(lp_progress *p)
{
    if (p->mode == 2) {
        fputc('\n', p->out);
        fflush(p->out);
    }
}
