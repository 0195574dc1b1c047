/* The profiling session: torch.profiler.profile's step()/schedule state machine on top
 * of the recorder, with on_trace_ready after each saved window and a default handler
 * that writes every export into the configured directory. */
#define _GNU_SOURCE
#include "prof_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    int running;
    lp_prof_config cfg;
    char *out_dir, *worker;
    int64_t step_num;
    lp_prof_action action;
    int step_pushed;
    int window_open;
    int64_t t_start;
    lp_mem_stats base;
    lp_prof_events *pending; /* stopped window awaiting on_trace_ready */
    int64_t traces_saved;
    int hw_state;
    char last_trace[4096];
} S;

void lp_prof_config_init(lp_prof_config *c)
{
    memset(c, 0, sizeof *c);
    c->exports = LP_PROF_EXPORT_ALL;
    c->keyavg_sort = LP_PROF_SORT_SELF_CPU_TIME_TOTAL;
    c->keyavg_row_limit = 100;
}

int64_t lp_prof_step_num(void) { return S.running ? S.step_num : 0; }
lp_prof_action lp_prof_current_action(void) { return S.running ? S.action : LP_PROF_ACTION_NONE; }
int64_t lp_prof_traces_saved(void) { return S.traces_saved; }
const char *lp_prof_last_trace_path(void) { return S.last_trace; }

static void prepare_trace(void)
{
    __atomic_store_n(&lp_prof__mem_on, S.cfg.profile_memory ? 1 : 0, __ATOMIC_RELAXED);
    lp_prof__rec_enable(1); /* warm-up runs the recorder; its events are discarded */
}

static void start_trace(void)
{
    if (!LP_PROF__RECORDING())
        prepare_trace();
    lp_prof_mem_stats(&S.base);
    lp_prof__gpu_window_start(); /* before the window: its first launches are recorded */
    S.t_start = lp_prof__ticks();
    lp_prof__rec_window_start(S.t_start);
    S.window_open = 1;
}

static void process_name(char *buf, size_t cap)
{
    snprintf(buf, cap, "loupe");
    FILE *fp = fopen("/proc/self/comm", "r");
    if (fp) {
        if (fgets(buf, (int)cap, fp))
            buf[strcspn(buf, "\n")] = '\0';
        fclose(fp);
    }
}

static lp_status stop_trace(void)
{
    int64_t t_end = lp_prof__ticks();
    lp_prof__rec_enable(0);
    if (!S.window_open)
        return LP_OK;
    S.window_open = 0;
    lp_prof_events_free(S.pending);
    S.pending = NULL;
    lp_prof_events *ev;
    lp_status st = lp_prof_events_new(&ev);
    if (st != LP_OK)
        return st;
    lp_prof_tcal cal;
    lp_prof__tcal_get(&cal);
    st = lp_prof__rec_collect(ev, S.t_start, t_end, &cal);
    lp_prof_events_info *in = lp_prof_events_info_of(ev);
    int64_t start_ns = lp_prof__ticks_to_ns(&cal, S.t_start);
    in->base_time_ns = lp_prof_mono_to_unix_ns(start_ns);
    in->window_start_ns = 0;
    in->window_end_ns = lp_prof__ticks_to_ns(&cal, t_end) - start_ns;
    in->pid = (int64_t)getpid();
    in->record_shapes = S.cfg.record_shapes != 0;
    in->profile_memory = S.cfg.profile_memory != 0;
    in->with_flops = S.cfg.with_flops != 0;
    in->with_stack = S.cfg.with_stack != 0;
    in->hw_counters = S.hw_state;
    in->has_mem_baseline = 1;
    memcpy(in->mem_baseline, S.base.current, sizeof in->mem_baseline);
    in->trace_index = S.traces_saved;
    /* GPU records after the CPU ones, so External ids link to their ranges; the collector
     * is stopped even when collection failed */
    lp_status gst = lp_prof__gpu_window_stop(ev, start_ns, in->window_end_ns);
    if (st == LP_OK)
        st = gst;
    char pname[64];
    process_name(pname, sizeof pname);
    if (st == LP_OK)
        st = lp_prof_events_set_process_name(ev, in->pid, pname);
    if (st != LP_OK) {
        lp_prof_events_free(ev);
        return st;
    }
    S.pending = ev;
    return LP_OK;
}

static lp_status trace_ready(void)
{
    if (!S.pending)
        return LP_OK;
    lp_status st;
    if (S.cfg.on_trace_ready)
        st = S.cfg.on_trace_ready(S.pending, S.cfg.user);
    else
        st = lp_prof_export_default(S.pending, &S.cfg);
    S.traces_saved++;
    lp_prof_events_free(S.pending);
    S.pending = NULL;
    return st;
}

/* Runs torch's action list for prev -> next (next < 0: exit). */
static lp_status transit(lp_prof_action prev, int next)
{
    uint32_t ops = lp_prof_transition(prev, next);
    lp_status st = LP_OK;
    if (ops & LP_PROF_DO_WARN)
        fprintf(stderr, "loupe profiler: incorrect schedule: %s followed by %s\n",
                lp_prof_action_name(prev),
                next < 0 ? "exit" : lp_prof_action_name((lp_prof_action)next));
    if ((ops & LP_PROF_DO_START) && (ops & LP_PROF_DO_STOP) && !(ops & LP_PROF_DO_READY)) {
        /* WARMUP -> NONE / exit: start then stop, nothing saved */
        start_trace();
        st = stop_trace();
        lp_prof_events_free(S.pending);
        S.pending = NULL;
        return st;
    }
    if (ops & LP_PROF_DO_STOP) {
        st = stop_trace();
        if (!(ops & LP_PROF_DO_READY)) {
            lp_prof_events_free(S.pending);
            S.pending = NULL;
        }
    }
    if ((ops & LP_PROF_DO_READY) && st == LP_OK)
        st = trace_ready();
    if (ops & LP_PROF_DO_PREPARE)
        prepare_trace();
    if (ops & LP_PROF_DO_START)
        start_trace();
    return st;
}

static lp_prof_action action_for(int64_t step)
{
    return S.cfg.use_schedule ? lp_prof_schedule_action(&S.cfg.schedule, step)
                              : LP_PROF_ACTION_RECORD;
}

static void open_step(void)
{
    S.step_pushed = 0;
    if (!S.cfg.use_schedule)
        return;
    if (LP_PROF__RECORDING()) {
        lp_prof__step_push(S.step_num);
        S.step_pushed = 1;
    }
}

static void close_step(void)
{
    if (S.step_pushed)
        lp_prof__step_pop();
    S.step_pushed = 0;
}

static void free_cfg(void)
{
    free(S.out_dir);
    free(S.worker);
    S.out_dir = S.worker = NULL;
}

lp_status lp_prof_start(const lp_prof_config *cfg)
{
    if (S.running)
        return lp_err(LP_STATUS_INVALID_ARG, "profiler: a session is already running");
    lp_prof__tcal_init();
    if (cfg->use_schedule) {
        lp_status st = lp_prof_schedule_validate(&cfg->schedule);
        if (st != LP_OK)
            return st;
        if (cfg->schedule.warmup == 0)
            fprintf(stderr, "loupe profiler: warning: schedule without warmup can skew results\n");
    }
    S.cfg = *cfg;
    S.out_dir = cfg->out_dir ? strdup(cfg->out_dir) : NULL;
    if (!cfg->worker_name) {
        char host[256] = "localhost";
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        char w[300];
        snprintf(w, sizeof w, "%s_%ld", host, (long)getpid());
        S.worker = strdup(w);
    } else {
        S.worker = strdup(cfg->worker_name);
    }
    if ((cfg->out_dir && !S.out_dir) || !S.worker) {
        free_cfg();
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory");
    }
    S.cfg.out_dir = S.out_dir;
    S.cfg.worker_name = S.worker;
    S.hw_state = 0;
    if (cfg->hw_counters) {
        const char *why;
        S.hw_state = lp_prof_hw_available(&why) ? 1 : -1;
        if (S.hw_state < 0)
            fprintf(stderr, "loupe profiler: hardware counters unavailable: %s\n", why);
    }
    lp_prof__rec_set_flags(cfg->record_shapes != 0, S.hw_state == 1);
    S.traces_saved = 0;
    S.last_trace[0] = '\0';
    S.step_num = 0;
    S.window_open = 0;
    S.pending = NULL;
    S.running = 1;
    S.action = action_for(0);
    lp_status st = transit(LP_PROF_ACTION_NONE, (int)S.action);
    open_step();
    return st;
}

lp_status lp_prof_step(void)
{
    if (!S.running)
        return LP_OK;
    close_step();
    lp_prof_action prev = S.action;
    S.step_num++;
    S.action = action_for(S.step_num);
    lp_status st = transit(prev, (int)S.action);
    open_step();
    return st;
}

lp_status lp_prof_stop(void)
{
    if (!S.running)
        return LP_OK;
    close_step();
    lp_status st = transit(S.action, -1);
    lp_prof__rec_enable(0);
    __atomic_store_n(&lp_prof__mem_on, 0, __ATOMIC_RELAXED);
    lp_prof_events_free(S.pending);
    S.pending = NULL;
    S.running = 0;
    free_cfg();
    return st;
}

/* Default on_trace_ready: every export selected in cfg->exports, into cfg->out_dir. */
lp_status lp_prof_export_default(const lp_prof_events *ev, void *user)
{
    const lp_prof_config *cfg = user ? (const lp_prof_config *)user : &S.cfg;
    if (!cfg->out_dir)
        return LP_OK;
    lp_status st = lp_mkdir_p(cfg->out_dir);
    if (st != LP_OK)
        return st;
    uint32_t ex = cfg->exports ? cfg->exports : LP_PROF_EXPORT_ALL;
    size_t cap = strlen(cfg->out_dir) + 512;
    char *p = malloc(cap);
    if (!p)
        return lp_err(LP_STATUS_NO_MEMORY, "profiler: out of memory");
    const lp_prof_events_info *in = lp_prof_events_info_get(ev);
    const char *worker = cfg->worker_name ? cfg->worker_name : "loupe";
    if (st == LP_OK && (ex & LP_PROF_EXPORT_TRACE)) {
        snprintf(p, cap, "%s/%s.%lld.pt.trace.json%s", cfg->out_dir, worker,
                 (long long)lp_prof_mono_to_unix_ns(lp_prof_now_ns()), cfg->use_gzip ? ".gz" : "");
        st = lp_prof_export_chrome(ev, p);
        if (st == LP_OK)
            snprintf(S.last_trace, sizeof S.last_trace, "%s", p);
    }
    if (st == LP_OK && (ex & LP_PROF_EXPORT_KEYAVG)) {
        lp_prof_keyavg_opts o;
        lp_prof_keyavg_opts_init(&o);
        o.sort_by = cfg->keyavg_sort;
        o.row_limit = cfg->keyavg_row_limit;
        o.group_by_input_shape = 0;
        lp_prof_keyavg ka;
        st = lp_prof_keyavg_build(ev, &o, &ka);
        if (st == LP_OK) {
            snprintf(p, cap, "%s/key_averages.txt", cfg->out_dir);
            st = lp_prof_keyavg_write_table(&ka, &o, p);
            if (st == LP_OK) {
                snprintf(p, cap, "%s/key_averages.csv", cfg->out_dir);
                st = lp_prof_keyavg_write_csv(&ka, p);
            }
            lp_prof_keyavg_free(&ka);
        }
    }
    if (st == LP_OK && (ex & LP_PROF_EXPORT_STACKS)) {
        snprintf(p, cap, "%s/stacks.txt", cfg->out_dir);
        st = lp_prof_export_stacks(ev, p);
    }
    if (st == LP_OK && (ex & LP_PROF_EXPORT_MEMORY) && in->profile_memory) {
        snprintf(p, cap, "%s/memory_timeline.json", cfg->out_dir);
        st = lp_prof_export_memory_timeline(ev, p);
        if (st == LP_OK) {
            snprintf(p, cap, "%s/memory_timeline.html", cfg->out_dir);
            st = lp_prof_export_memory_timeline(ev, p);
        }
    }
    if (st == LP_OK && (ex & LP_PROF_EXPORT_SUMMARY)) {
        snprintf(p, cap, "%s/summary.json", cfg->out_dir);
        st = lp_prof_export_summary(ev, p);
    }
    free(p);
    return st;
}
