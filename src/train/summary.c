/* summary.json: the run's aggregates (throughput, step-time percentiles, memory by
 * category, top ops, MFU, final loss, last evaluation) and the profiler hook that collects
 * top ops and FLOPs from each saved window before the default exports run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "loupe/kernels.h"
#include "train_internal.h"

/* FLOPs of ops not nested in another op with FLOPs on the same thread (aten::linear
 * around aten::mm would otherwise count twice). Events are sorted parents first. */
static double outer_flops(const lp_prof_events *ev)
{
    size_t n = lp_prof_events_count(ev);
    double sum = 0.0;
    int64_t tids[64], ends[64];
    int nt = 0;
    for (size_t i = 0; i < n; i++) {
        const lp_prof_event *e = lp_prof_events_get(ev, i);
        if (e->ph != 'X' || e->flops <= 0)
            continue;
        int k = 0;
        while (k < nt && tids[k] != e->tid)
            k++;
        if (k == nt) {
            if (nt == 64)
                continue;
            tids[nt] = e->tid;
            ends[nt++] = INT64_MIN;
        }
        if (e->ts_ns < ends[k])
            continue;
        sum += e->flops;
        ends[k] = e->ts_ns + e->dur_ns;
    }
    return sum;
}

lp_status lp_train_on_trace_ready(const lp_prof_events *ev, void *user)
{
    lp_prof_facts *pf = user;
    lp_status st = lp_prof_export_default(ev, NULL);
    if (st != LP_OK)
        return st;
    /* sorted copy for the nesting walk */
    lp_prof_events *sorted;
    if ((st = lp_prof_events_new(&sorted)) != LP_OK)
        return st;
    for (size_t i = 0; i < lp_prof_events_count(ev) && st == LP_OK; i++)
        st = lp_prof_events_add(sorted, lp_prof_events_get(ev, i));
    if (st == LP_OK) {
        lp_prof_events_sort(sorted);
        pf->flops += outer_flops(sorted);
        const lp_prof_events_info *info = lp_prof_events_info_get(ev);
        pf->window_s += (double)(info->window_end_ns - info->window_start_ns) * 1e-9;
    }
    lp_prof_events_free(sorted);
    if (st != LP_OK)
        return st;
    lp_prof_keyavg_opts o;
    lp_prof_keyavg_opts_init(&o);
    lp_prof_keyavg ka;
    if ((st = lp_prof_keyavg_build(ev, &o, &ka)) != LP_OK)
        return st;
    /* top ops of the last window: cpu_op rows only (step and module ranges are not ops) */
    pf->n_top = 0;
    for (size_t i = 0; i < ka.n && pf->n_top < (int)(sizeof pf->top / sizeof *pf->top); i++) {
        const lp_prof_keyavg_row *r = &ka.rows[i];
        if (r->is_device || !strncmp(r->key, "ProfilerStep", 12) || strchr(r->key, '#') || strchr(r->key, '.'))
            continue;
        lp_top_op *t = &pf->top[pf->n_top++];
        snprintf(t->name, sizeof t->name, "%s", r->key);
        t->calls = r->count;
        t->self_ms = r->self_cpu_us / 1000.0;
        t->total_ms = r->cpu_total_us / 1000.0;
        t->flops = r->flops;
    }
    lp_prof_keyavg_free(&ka);
    pf->have = true;
    return LP_OK;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

lp_status lp_rundir_write_summary(const char *path, const lp_summary_in *in)
{
    const lp_history *h = in->h;
    const lp_train_config *c = in->c;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "run_id", in->run_id);
    cJSON_AddStringToObject(j, "method", lp_train_method_name(c->method));
    cJSON_AddStringToObject(j, "exec", lp_exec_mode_name(c->exec));
    cJSON_AddStringToObject(j, "isa", lp_isa_name(lp_kernels_isa())); /* the kernels' ISA level that ran */
    cJSON_AddStringToObject(j, "dtype", lp_dtype_name(c->dtype)); /* the Linears' GEMMs */
    if (c->dtype == LP_DTYPE_BF16)
        cJSON_AddStringToObject(j, "bf16_path", lp_bf16_gemm_path()); /* native vdpbf16ps or converted */
    cJSON_AddBoolToObject(j, "profiled", c->profile);
    cJSON_AddBoolToObject(j, "interrupted", in->interrupted);
    if (in->stop_reason)
        cJSON_AddStringToObject(j, "stop_reason", in->stop_reason);
    lp_model_info mi;
    lp_model_info_get(in->model, &mi);
    lp_lora_info li;
    lp_model_lora_info(in->model, &li);
    if (li.enabled) { /* where the frozen base lives: f32 (the parameter table), f32_packed, nf4, bf16 */
        const bool packed = li.base_dtype == LP_DTYPE_F32 && li.quantized_params > 0; /* LP_F32_PACK=1 */
        cJSON_AddStringToObject(j, "lora_base", packed ? "f32_packed" : lp_dtype_name(li.base_dtype));
    }
    cJSON *m = cJSON_AddObjectToObject(j, "model");
    const char *name = strrchr(c->model_dir, '/');
    name = name && name[1] ? name + 1 : c->model_dir;
    cJSON_AddStringToObject(m, "name", name);
    cJSON_AddStringToObject(m, "dir", c->model_dir);
    cJSON_AddStringToObject(m, "architecture", lp_hf_arch_name(mi.arch));
    cJSON_AddStringToObject(m, "task", lp_train_task_name(mi.task));
    cJSON_AddNumberToObject(m, "params_total", (double)mi.n_params);
    cJSON_AddNumberToObject(m, "params_trainable", (double)mi.n_trainable);
    cJSON_AddNumberToObject(j, "steps", (double)h->n_steps);
    cJSON_AddNumberToObject(j, "epochs_completed", 0);

    double samples = 0, tokens = 0, time_s = 0;
    double *ms = malloc((h->n_steps ? h->n_steps : 1) * sizeof *ms);
    if (!ms) {
        cJSON_Delete(j);
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", path);
    }
    for (size_t i = 0; i < h->n_steps; i++) {
        samples += (double)h->steps[i].samples;
        tokens += (double)h->steps[i].tokens;
        time_s += h->steps[i].step_ms / 1000.0;
        ms[i] = h->steps[i].step_ms;
    }
    int64_t done = 0;
    for (size_t i = 0; i < h->n_epochs; i++)
        done += h->epochs[i].complete;
    cJSON_SetNumberValue(cJSON_GetObjectItem(j, "epochs_completed"), (double)done);
    cJSON_AddNumberToObject(j, "samples", samples);
    cJSON_AddNumberToObject(j, "tokens", tokens);
    cJSON_AddNumberToObject(j, "train_time_s", time_s);
    cJSON_AddNumberToObject(j, "samples_per_s", time_s > 0 ? samples / time_s : 0.0);
    cJSON_AddNumberToObject(j, "tokens_per_s", time_s > 0 ? tokens / time_s : 0.0);
    cJSON *sm = cJSON_AddObjectToObject(j, "step_ms");
    size_t n = h->n_steps;
    qsort(ms, n, sizeof *ms, cmp_d);
    double mean = n ? time_s * 1000.0 / (double)n : 0.0;
    cJSON_AddNumberToObject(sm, "mean", mean);
    cJSON_AddNumberToObject(sm, "median", n ? (n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2])) : 0.0);
    cJSON_AddNumberToObject(sm, "p90", n ? ms[(size_t)ceil(0.9 * (double)n) - 1] : 0.0);
    cJSON_AddNumberToObject(sm, "min", n ? ms[0] : 0.0);
    cJSON_AddNumberToObject(sm, "max", n ? ms[n - 1] : 0.0);
    free(ms);

    lp_mem_stats st;
    lp_prof_mem_stats(&st);
    cJSON_AddNumberToObject(j, "peak_memory_bytes", (double)st.total_peak);
    cJSON *mc = cJSON_AddObjectToObject(j, "memory_by_category");
    for (int k = 0; k < LP_MEM_CATEGORY__COUNT; k++)
        cJSON_AddNumberToObject(mc, lp_mem_category_name((lp_mem_category)k), (double)st.peak[k]);
    /* a GPU run: the card, and its caching allocator's peaks per category (the host figures
     * above then hold only what stayed on the host: staging copies, the batch) */
    cJSON_AddStringToObject(j, "device", c->device == LP_DEVICE_CPU ? "cpu" : lp_device_name(c->device));
    if (c->device != LP_DEVICE_CPU) {
        const char *label = lp_kernels_device_label();
        cJSON_AddStringToObject(j, "device_name", label ? label : "?");
        cJSON_AddBoolToObject(j, "tf32", c->tf32);
        cJSON *dm = cJSON_AddObjectToObject(j, "device_memory");
        cJSON *pa = cJSON_AddObjectToObject(dm, "peak_allocated_by_category");
        cJSON *pr = cJSON_AddObjectToObject(dm, "peak_reserved_by_category");
        for (int k = 0; k < LP_MEM_CATEGORY__COUNT; k++) {
            lp_device_mem d;
            lp_kernels_device_mem((lp_mem_category)k, &d);
            cJSON_AddNumberToObject(pa, lp_mem_category_name((lp_mem_category)k), (double)d.peak_allocated);
            cJSON_AddNumberToObject(pr, lp_mem_category_name((lp_mem_category)k), (double)d.peak_reserved);
        }
        lp_device_mem t;
        lp_kernels_device_mem_total(&t);
        cJSON_AddNumberToObject(dm, "peak_allocated_bytes", (double)t.peak_allocated);
        cJSON_AddNumberToObject(dm, "peak_reserved_bytes", (double)t.peak_reserved);
    }
    int64_t rss = 0, peak_rss = 0;
    if (lp_prof_rss(&rss, &peak_rss) == LP_OK)
        cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)peak_rss);

    /* contention: the threads' CPU time over wall x threads; a share well under 1 for
     * several steps in a row means other processes held the cores (core.h) */
    if (in->busy) {
        cJSON *b = cJSON_AddObjectToObject(j, "contention");
        cJSON_AddNumberToObject(b, "cpu_share", lp_contention_cpu_share(in->busy));
        cJSON_AddNumberToObject(b, "steps_flagged", (double)in->busy->flagged);
        cJSON_AddNumberToObject(b, "steps", (double)in->busy->steps);
        cJSON_AddBoolToObject(b, "noticed", in->busy->noticed);
        cJSON_AddNumberToObject(b, "threads", in->busy->threads);
        cJSON_AddStringToObject(b, "wait_policy", lp_threads_spin_desc());
    }

    cJSON *top = cJSON_AddArrayToObject(j, "top_ops");
    for (int i = 0; in->pf && i < in->pf->n_top; i++) {
        const lp_top_op *t = &in->pf->top[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddNumberToObject(o, "calls", (double)t->calls);
        cJSON_AddNumberToObject(o, "self_ms", t->self_ms);
        cJSON_AddNumberToObject(o, "total_ms", t->total_ms);
        cJSON_AddNumberToObject(o, "flops", t->flops);
        cJSON_AddItemToArray(top, o);
    }
    /* MFU: achieved FLOP/s over the machine's f32 peak. From the profiler's op records
     * when a window was saved, else from the model's FLOP count (3x forward per sample). */
    double achieved = 0.0;
    const char *src = "model_estimate";
    if (in->pf && in->pf->have && in->pf->window_s > 0) {
        achieved = in->pf->flops / in->pf->window_s;
        src = "profiler_ops";
    } else if (time_s > 0) {
        double f = 0.0;
        for (size_t i = 0; i < h->n_steps; i++) /* tokens per sample vary: use the mean length */
            f += 3.0 * mi.forward_flops_per_token * (double)h->steps[i].tokens;
        achieved = f / time_s;
    }
    cJSON_AddNumberToObject(j, "achieved_gflops", achieved / 1e9);
    if (in->peak_gflops > 0)
        cJSON_AddNumberToObject(j, "mfu", achieved / (in->peak_gflops * 1e9));
    else
        cJSON_AddNullToObject(j, "mfu");
    cJSON_AddStringToObject(j, "mfu_flops_source", src);
    cJSON_AddNumberToObject(j, "peak_gflops", in->peak_gflops);
    cJSON_AddStringToObject(j, "peak_source", in->peak_source ? in->peak_source : "unknown");
    cJSON_AddNumberToObject(j, "final_loss", n ? h->steps[n - 1].loss : NAN);
    cJSON *e = cJSON_AddObjectToObject(j, "eval");
    const lp_epoch_rec *last = NULL;
    for (size_t i = 0; i < h->n_epochs; i++)
        if (!isnan(h->epochs[i].eval_loss))
            last = &h->epochs[i];
    cJSON_AddNumberToObject(e, "loss", last ? last->eval_loss : NAN);
    if (mi.task == LP_MODEL_TASK_CAUSAL_LM) { /* no accuracy or F1: absent keys, not 0 */
        cJSON_AddNumberToObject(e, "perplexity", last ? last->eval_perplexity : NAN);
    } else {
        cJSON_AddNumberToObject(e, "accuracy", last ? last->eval_accuracy : NAN);
        cJSON_AddNumberToObject(e, "macro_f1", last ? last->eval_f1 : NAN);
    }
    return lp_json_write_file(path, j);
}
