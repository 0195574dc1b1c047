/* The profiled pass: a few forwards at the best batch size under the profiler (one warm-up
 * step, then the active window), exported as the trainer's are (Kineto trace, key
 * averages, stacks, memory timeline, summary) into profiler/, and the top three ops by self
 * time set against `loupe peak`'s ceilings: achieved GFLOP/s and GB/s, arithmetic
 * intensity, and compute- or memory-bound by the roofline's ridge point. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench_internal.h"
#include "loupe/kernels.h"

typedef struct prof_ctx {
    lp_bench_state *s;
    lp_prof_config *cfg;
} prof_ctx;

/* Bytes moved and whether the name is an op (cat cpu_op), over every event of that name. */
static int op_facts(const lp_prof_events *ev, const char *name, double *bytes)
{
    int is_op = 0;
    *bytes = 0;
    for (size_t i = 0, n = lp_prof_events_count(ev); i < n; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->ph != 'X' || strcmp(e->name, name))
            continue;
        if (e->cat && !strcmp(e->cat, "cpu_op"))
            is_op = 1;
        if (e->bytes > 0)
            *bytes += e->bytes;
    }
    return is_op;
}

static void analyse(lp_bench_profile *bp, const lp_prof_events *ev)
{
    lp_prof_keyavg ka;
    lp_prof_keyavg_opts o;
    lp_prof_keyavg_opts_init(&o);
    if (lp_prof_keyavg_build(ev, &o, &ka) != LP_OK)
        return;
    bp->total_self_ms = ka.sum_self_cpu_us / 1000.0;
    bp->n_top = 0;
    for (size_t i = 0; i < ka.n && bp->n_top < 3; i++) {
        const lp_prof_keyavg_row *row = &ka.rows[i];
        double bytes;
        if (!op_facts(ev, row->key, &bytes))
            continue; // steps and module ranges are not ops
        lp_bench_op *op = &bp->top[bp->n_top++];
        snprintf(op->name, sizeof op->name, "%s", row->key);
        op->calls = row->count;
        op->self_ms = row->self_cpu_us / 1000.0;
        op->share = ka.sum_self_cpu_us > 0 ? row->self_cpu_us / ka.sum_self_cpu_us : NAN;
        double secs = row->cpu_total_us / 1e6;
        op->gflops = row->flops > 0 && secs > 0 ? row->flops / secs / 1e9 : NAN;
        op->gbs = bytes > 0 && secs > 0 ? bytes / secs / 1e9 : NAN;
        op->intensity = row->flops > 0 && bytes > 0 ? row->flops / bytes : NAN;
        if (isfinite(op->intensity) && isfinite(bp->ridge))
            op->bound = op->intensity < bp->ridge ? "memory" : "compute";
        else if (row->flops <= 0 && bytes > 0)
            op->bound = "memory"; // moves data, computes nothing recorded (copies, norms)
        else
            op->bound = "unknown";
    }
    lp_prof_keyavg_free(&ka);
}

static lp_status on_ready(const lp_prof_events *ev, void *user)
{
    prof_ctx *p = user;
    lp_status st = lp_prof_export_default(ev, p->cfg);
    if (st == LP_OK)
        analyse(&p->s->r->prof, ev);
    return st;
}

lp_status lp_bench__profile(lp_bench_state *s)
{
    const lp_bench_config *c = s->c;
    lp_bench_result *r = s->r;
    lp_bench_profile *bp = &r->prof;
    if (c->skip_profiling || r->best < 0 || lp_bench_stop_requested())
        return LP_OK;
    lp_peak_result pk;
    lp_status st = lp_peak_measure(&pk, 0.1, 256);
    if (st != LP_OK)
        return lp_err_wrap(st, "measuring the machine's ceilings");
    bp->peak_gflops = pk.fma_gflops;
    bp->peak_gbs = pk.triad_gbs;
    bp->ridge = pk.triad_gbs > 0 ? pk.fma_gflops / pk.triad_gbs : NAN;
    bp->batch_size = r->points[r->best].batch_size;
    bp->batches = c->profile_runs;

    char out[1200];
    snprintf(out, sizeof out, "%s/profiler", s->dir);
    lp_prof_config pc;
    lp_prof_config_init(&pc);
    pc.out_dir = out;
    pc.worker_name = "bench";
    pc.record_shapes = pc.profile_memory = pc.with_flops = pc.with_stack = 1;
    pc.use_schedule = 1;
    pc.schedule = (lp_prof_schedule){.wait = 0, .warmup = 1, .active = c->profile_runs, .repeat = 1};
    prof_ctx ctx = {.s = s, .cfg = &pc};
    pc.on_trace_ready = on_ready;
    pc.user = &ctx;
    if ((st = lp_prof_start(&pc)) != LP_OK)
        return st;
    lp_prof_set_thread_name("main");
    int64_t cursor = 0;
    for (int32_t i = 0; i < 1 + c->profile_runs && st == LP_OK; i++) {
        st = lp_bench__fill(s, s->pool, s->pool_n, cursor, bp->batch_size);
        cursor += bp->batch_size;
        if (st == LP_OK) {
            lp_prof_range_push("bench_forward");
            st = lp_model_forward(s->model, s->batch.input_ids, s->batch.attention_mask,
                                  s->batch.token_type_ids, s->batch.B, s->batch.T, s->logits);
            lp_prof_range_pop();
        }
        if (st == LP_OK)
            st = lp_prof_step();
    }
    lp_status stop = lp_prof_stop();
    if (st == LP_OK)
        st = stop;
    if (st != LP_OK)
        return lp_err_wrap(st, "profiled pass");
    bp->done = true;
    if (c->progress && bp->n_top > 0)
        fprintf(stderr, "bench: profiled %d batches of %d: top op %s (%.0f%% of self time, %s-bound)\n",
                bp->batches, bp->batch_size, bp->top[0].name, bp->top[0].share * 100, bp->top[0].bound);
    return LP_OK;
}
