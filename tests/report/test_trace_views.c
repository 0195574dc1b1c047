/* loupe analyze's call-stack rows and Memory events table (issue 15):
 *  - small traces whose answers are known by construction: stacks from "Call stack" args,
 *    from python_function frames, from a with_stack trace's ranges (loupe's); device time
 *    reaching the stack rows through correlation; the per-op cap folding later stacks into
 *    one row and counting them; the K largest allocations with lifetimes, the op open
 *    around each, addresses reused after a free, and the rest counted;
 *  - foreign traces (../shared/foreign-traces, written by PyTorch): an op's stack rows sum
 *    exactly (integer ns) to its key-average row, and the rows and the largest allocations
 *    equal tests/report/views_ref.py's recomputation from the JSON (committed as
 *    tests/report/data/foreign_views.json): exact, both sides count integer ns and bytes. */
#include "lp_test_util.h" /* first: it sets _GNU_SOURCE */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loupe/report.h"

static lp_trace_model *parse_opts(const char *text, const lp_trace_model_opts *o)
{
    lp_trace_model *m = NULL;
    lp_status st = lp_trace_model_parse("t.json", text, strlen(text), o, &m);
    if (st != LP_OK)
        fprintf(stderr, "%s\n", lp_err_msg());
    assert_int_equal(st, LP_OK);
    return m;
}

static const lp_trace_op_row *op_row(const lp_trace_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_ops; i++)
        if (!strcmp(m->ops[i].name, name) && !m->ops[i].is_device)
            return &m->ops[i];
    fail_msg("no row %s", name);
    return NULL;
}

/* The row of (name, frames joined by ';'); "" = the no-stack row, "*" = the folded row. */
static const lp_trace_stack_row *stack_row(const lp_trace_model *m, const char *name, const char *frames)
{
    for (size_t i = 0; i < m->n_stacks; i++) {
        const lp_trace_stack_row *r = &m->stacks[i];
        if (strcmp(r->name, name))
            continue;
        if (!strcmp(frames, "*")) {
            if (r->folded)
                return r;
            continue;
        }
        if (r->folded)
            continue;
        char buf[1024] = "";
        for (int32_t j = 0; j < r->n_frames; j++) {
            if (j)
                strcat(buf, ";");
            strncat(buf, r->frames[j], sizeof buf - strlen(buf) - 2);
        }
        if (!strcmp(buf, frames))
            return r;
    }
    fail_msg("no stack row %s [%s]", name, frames);
    return NULL;
}

/* Every host op's stack rows add up to its key-average row, exactly. Returns the mismatches. */
static int check_sums(const lp_trace_model *m)
{
    int bad = 0;
    for (size_t i = 0; i < m->n_ops && m->n_stacks; i++) {
        const lp_trace_op_row *o = &m->ops[i];
        if (o->is_device)
            continue;
        int64_t c = 0, sc = 0, tc = 0, sd = 0, td = 0;
        for (size_t k = 0; k < m->n_stacks; k++) {
            const lp_trace_stack_row *r = &m->stacks[k];
            if (r->name != o->name || r->kind != o->kind)
                continue;
            if (r->calls < 0 || r->self_cpu_ns < 0 || r->cpu_total_ns < 0 || r->device_total_ns < 0 ||
                r->self_device_ns < 0)
                bad++;
            c += r->calls, sc += r->self_cpu_ns, tc += r->cpu_total_ns, sd += r->self_device_ns;
            td += r->device_total_ns;
        }
        if (c != o->calls || sc != o->self_cpu_ns || tc != o->cpu_total_ns || sd != o->self_device_ns ||
            td != o->device_total_ns) {
            if (bad++ < 5)
                fprintf(stderr,
                        "%s: stacks sum to %lld calls, %lld/%lld cpu, %lld/%lld device; op row %lld, %lld/%lld, "
                        "%lld/%lld\n",
                        o->name, (long long)c, (long long)sc, (long long)tc, (long long)sd, (long long)td,
                        (long long)o->calls, (long long)o->self_cpu_ns, (long long)o->cpu_total_ns,
                        (long long)o->self_device_ns, (long long)o->device_total_ns);
        }
    }
    return bad;
}

/* ---- stacks, known by construction ------------------------------------------------------- */

/* aten::mm three times: twice under f1 (one of them launching a 7 us kernel through
 * correlation 5, with an aten::add child of 2 us), once under f2; once with no stack.
 * Two frames kept: "main" (the third frame) is cut. */
static void test_stacks_from_call_stack_args(void **state)
{
    (void)state;
    const char *t =
        "{\"traceEvents\": ["
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10,"
        "\"args\":{\"Call stack\":\"f1.py(3): f1;g.py(9): g;main.py(1): <module>\"}},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":2},"
        "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":4,\"dur\":1,"
        "\"args\":{\"correlation\":5}},"
        "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":6,\"dur\":7,"
        "\"args\":{\"correlation\":5}},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":20,\"dur\":4,"
        "\"args\":{\"Call stack\":\"f1.py(3): f1;g.py(9): g;other.py(2): h\"}},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":30,\"dur\":5,"
        "\"args\":{\"Call stack\":\"f2.py(4): f2;g.py(9): g\"}},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":40,\"dur\":6}"
        "]}";
    lp_trace_model_opts o;
    lp_trace_model_opts_init(&o);
    o.stack_frames = 2;
    lp_trace_model *m = parse_opts(t, &o);
    assert_int_equal(m->stack_source, LP_TRACE_STACK_ARG);
    assert_int_equal(m->stack_frames, 2);
    const lp_trace_stack_row *a = stack_row(m, "aten::mm", "f1.py(3): f1;g.py(9): g");
    assert_int_equal(a->calls, 2);
    assert_int_equal(a->cpu_total_ns, 14000);
    assert_int_equal(a->self_cpu_ns, 14000 - 2000 - 1000); /* less aten::add and the launch */
    assert_int_equal(a->self_device_ns, 7000);
    assert_int_equal(a->device_total_ns, 7000);
    const lp_trace_stack_row *b = stack_row(m, "aten::mm", "f2.py(4): f2;g.py(9): g");
    assert_int_equal(b->calls, 1);
    assert_int_equal(b->cpu_total_ns, 5000);
    assert_int_equal(b->device_total_ns, 0);
    const lp_trace_stack_row *c = stack_row(m, "aten::mm", "");
    assert_int_equal(c->calls, 1);
    assert_int_equal(c->cpu_total_ns, 6000);
    /* aten::add and the launch carry no stack: their whole rows are "no stack" rows */
    assert_int_equal(stack_row(m, "aten::add", "")->calls, 1);
    assert_int_equal(stack_row(m, "cudaLaunchKernel", "")->calls, 1);
    assert_int_equal(check_sums(m), 0);
    assert_int_equal(m->stack_folded_calls, 0);
    lp_trace_model_free(m);

    /* stacks off: no rows, the key averages unchanged */
    o.stack_frames = -1;
    m = parse_opts(t, &o);
    assert_int_equal(m->n_stacks, 0);
    assert_int_equal(op_row(m, "aten::mm")->calls, 4);
    assert_int_equal(op_row(m, "aten::mm")->device_total_ns, 7000);
    lp_trace_model_free(m);
}

/* PyTorch 2.x with_stack: python_function frames around the ops on the same thread, the
 * stack innermost first; an op after the frames closed has none. */
static void test_stacks_from_python_frames(void **state)
{
    (void)state;
    const char *t =
        "{\"with_stack\": 1, \"traceEvents\": ["
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"train.py(10): step\",\"pid\":1,\"tid\":1,\"ts\":0,"
        "\"dur\":100,\"args\":{\"Python id\":1,\"Python parent id\":0}},"
        "{\"ph\":\"X\",\"cat\":\"python_function\",\"name\":\"nn.Module: Linear_0\",\"pid\":1,\"tid\":1,\"ts\":5,"
        "\"dur\":50,\"args\":{\"Python id\":2,\"Python parent id\":1}},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::linear\",\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":30},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":12,\"dur\":20},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::relu\",\"pid\":1,\"tid\":1,\"ts\":60,\"dur\":10},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::relu\",\"pid\":1,\"tid\":2,\"ts\":60,\"dur\":10}"
        "]}";
    lp_trace_model *m = parse_opts(t, NULL);
    assert_int_equal(m->stack_source & LP_TRACE_STACK_PYTHON, LP_TRACE_STACK_PYTHON);
    assert_int_equal(m->stack_frames, LP_TRACE_STACK_FRAMES);
    const lp_trace_stack_row *r = stack_row(m, "aten::linear", "nn.Module: Linear_0;train.py(10): step");
    assert_int_equal(r->calls, 1);
    assert_int_equal(r->cpu_total_ns, 30000);
    assert_int_equal(r->self_cpu_ns, 10000);
    assert_int_equal(stack_row(m, "aten::mm", "nn.Module: Linear_0;train.py(10): step")->cpu_total_ns, 20000);
    assert_int_equal(stack_row(m, "aten::relu", "train.py(10): step")->calls, 1);
    /* thread 2 has no Python frames: the with_stack trace's ranges (none here) */
    assert_int_equal(stack_row(m, "aten::relu", "")->calls, 1);
    /* python_function events are not ops */
    for (size_t i = 0; i < m->n_ops; i++)
        assert_null(strstr(m->ops[i].name, "train.py"));
    assert_int_equal(check_sums(m), 0);
    lp_trace_model_free(m);
}

/* loupe's with_stack traces: the module ranges (user_annotation) around an op are its
 * stack, as in its stacks.txt. */
static void test_stacks_from_ranges(void **state)
{
    (void)state;
    const char *t =
        "{\"schemaVersion\": 1, \"with_stack\": 1, \"traceEvents\": ["
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#3\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":100},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"model.forward\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":90},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"model.layer0.forward\",\"pid\":1,\"tid\":1,\"ts\":2,"
        "\"dur\":40},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"lp::matmul\",\"pid\":1,\"tid\":1,\"ts\":3,\"dur\":30},"
        "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"model.layer1.forward\",\"pid\":1,\"tid\":1,\"ts\":50,"
        "\"dur\":40},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"lp::matmul\",\"pid\":1,\"tid\":1,\"ts\":51,\"dur\":20}"
        "]}";
    lp_trace_model_opts o;
    lp_trace_model_opts_init(&o);
    o.stack_frames = 2;
    lp_trace_model *m = parse_opts(t, &o);
    assert_int_equal(m->stack_source, LP_TRACE_STACK_RANGES);
    assert_int_equal(stack_row(m, "lp::matmul", "model.layer0.forward;model.forward")->cpu_total_ns, 30000);
    assert_int_equal(stack_row(m, "lp::matmul", "model.layer1.forward;model.forward")->cpu_total_ns, 20000);
    assert_int_equal(stack_row(m, "model.layer0.forward", "model.forward;ProfilerStep*")->calls, 1);
    assert_int_equal(stack_row(m, "ProfilerStep*", "")->calls, 1);
    assert_int_equal(check_sums(m), 0);
    lp_trace_model_free(m);

    /* the same trace without with_stack records no stacks */
    const char *u = strstr(t, "\"traceEvents\"");
    char *v = malloc(strlen(u) + 2);
    assert_non_null(v);
    sprintf(v, "{%s", u);
    m = parse_opts(v, NULL);
    assert_int_equal(m->n_stacks, 0);
    lp_trace_model_free(m);
    free(v);
}

/* One op with LP_TRACE_STACKS_PER_OP + 8 distinct stacks: the first ones keep a row each,
 * the 8 later ones are summed in the op's folded row and counted. */
static void test_stacks_capped_per_op(void **state)
{
    (void)state;
    size_t n = LP_TRACE_STACKS_PER_OP + 8, cap = 256 + n * 160;
    char *t = malloc(cap);
    assert_non_null(t);
    size_t at = (size_t)snprintf(t, cap, "{\"traceEvents\": [");
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(t + at, cap - at,
                               "%s{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::op\",\"pid\":1,\"tid\":1,"
                               "\"ts\":%zu,\"dur\":%zu,\"args\":{\"Call stack\":\"f%zu.py(1): f\"}}",
                               i ? "," : "", 10 * i, i + 1, i);
    snprintf(t + at, cap - at, "]}");
    lp_trace_model *m = parse_opts(t, NULL);
    free(t);
    assert_int_equal(m->n_stacks, LP_TRACE_STACKS_PER_OP + 1);
    const lp_trace_stack_row *f = stack_row(m, "aten::op", "*");
    assert_int_equal(f->calls, 8);
    int64_t want = 0; /* durations 33..40 us */
    for (size_t i = LP_TRACE_STACKS_PER_OP; i < n; i++)
        want += (int64_t)(i + 1) * 1000;
    assert_int_equal(f->cpu_total_ns, want);
    assert_int_equal(m->stack_folded_calls, 8);
    assert_int_equal(stack_row(m, "aten::op", "f0.py(1): f")->calls, 1);
    assert_int_equal(check_sums(m), 0);
    lp_trace_model_free(m);
}

/* torch folds an only child of the same name into its parent (_remove_dup_nodes): the
 * child's kernel time goes to the parent's stack row then, to the child's when a second
 * child keeps it. Device work lands after the parent closed (t=30) or while it is still
 * open (t=15, settled when the parent closes). */
static void test_stacks_with_folded_duplicates(void **state)
{
    (void)state;
    for (int second = 0; second < 2; second++)
        for (int late = 0; late < 2; late++) {
            char t[2048];
            snprintf(t, sizeof t,
                     "{\"traceEvents\": ["
                     "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::to\",\"pid\":1,\"tid\":1,\"ts\":0,"
                     "\"dur\":20,\"args\":{\"Call stack\":\"p.py(1): p\"}},"
                     "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::to\",\"pid\":1,\"tid\":1,\"ts\":1,"
                     "\"dur\":10,\"args\":{\"Call stack\":\"c.py(2): c\"}},"
                     "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemcpyAsync\",\"pid\":1,\"tid\":1,"
                     "\"ts\":2,\"dur\":5,\"args\":{\"correlation\":9}},"
                     "%s"
                     "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy HtoD\",\"pid\":0,\"tid\":7,"
                     "\"ts\":%d,\"dur\":4,\"args\":{\"correlation\":9}}]}",
                     second ? "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::empty\",\"pid\":1,\"tid\":1,"
                              "\"ts\":12,\"dur\":2},"
                            : "",
                     late ? 30 : 15);
            lp_trace_model *m = parse_opts(t, NULL);
            const lp_trace_op_row *o = op_row(m, "aten::to");
            const lp_trace_stack_row *p = stack_row(m, "aten::to", "p.py(1): p");
            assert_int_equal(p->calls, 1);
            assert_int_equal(p->device_total_ns, 4000);
            if (!second) { /* folded: one call, the kernel its own */
                assert_int_equal(o->calls, 1);
                assert_int_equal(p->self_device_ns, 4000);
                for (size_t i = 0; i < m->n_stacks; i++)
                    assert_false(m->stacks[i].n_frames == 1 && !strcmp(m->stacks[i].frames[0], "c.py(2): c"));
            } else {
                assert_int_equal(o->calls, 2);
                assert_int_equal(p->self_device_ns, 0);
                const lp_trace_stack_row *c = stack_row(m, "aten::to", "c.py(2): c");
                assert_int_equal(c->calls, 1);
                assert_int_equal(c->self_device_ns, 4000);
                assert_int_equal(c->device_total_ns, 4000);
            }
            assert_int_equal(check_sums(m), 0);
            lp_trace_model_free(m);
        }
}

/* ---- memory events, known by construction -------------------------------------------------- */

#define MEM(ts, bytes, addr, dev)                                                                             \
    "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":" #ts                          \
    ",\"args\":{\"Bytes\":" #bytes ",\"Addr\":" #addr ",\"Device Type\":" #dev ",\"Device Id\":" #dev "}}"

/* Five allocations; the K = 3 largest kept: 300 B at t=2 (freed at 9: 7 us), 300 B at t=6
 * at the address freed at 5 (the earlier 200 B block's, never freed again), 250 B on
 * cuda:1 whose free on the CPU at the same address is not its own. */
static void test_mem_events_known(void **state)
{
    (void)state;
    const char *t = "{\"traceEvents\": ["
                    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::empty\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":3},"
                    MEM(1, 200, 16, 0) "," MEM(2, 300, 32, 0) "," MEM(3, 250, 48, 1) "," MEM(4, 100, 64, 0) ","
                    MEM(5, -200, 16, 0) "," MEM(6, 300, 16, 0) "," MEM(7, -250, 48, 0) "," MEM(8, 50, 80, 0) ","
                    MEM(9, -300, 32, 0) "]}";
    lp_trace_model_opts o;
    lp_trace_model_opts_init(&o);
    o.mem_events = 3;
    lp_trace_model *m = parse_opts(t, &o);
    assert_int_equal(m->n_mem_top, 3);
    assert_int_equal(m->n_allocs, 6);
    assert_int_equal(m->alloc_total_bytes, 1200);
    assert_int_equal(m->n_frees, 3);
    assert_int_equal(m->free_total_bytes, 750);
    assert_true(m->mem_has_addr);
    const lp_trace_mem_event *e = m->mem_top;
    assert_int_equal(e[0].bytes, 300);
    assert_int_equal(e[0].ts_ns, 2000);
    assert_int_equal(e[0].lifetime_ns, 7000);
    assert_string_equal(e[0].op, "aten::empty");
    assert_int_equal(e[1].bytes, 300);
    assert_int_equal(e[1].ts_ns, 6000);
    assert_int_equal(e[1].lifetime_ns, -1); /* not freed in the trace */
    assert_string_equal(e[1].op, "");       /* after aten::empty ended */
    assert_int_equal(e[2].bytes, 250);
    assert_int_equal(e[2].device_type, 1);
    assert_int_equal(e[2].device_id, 1);
    assert_int_equal(e[2].lifetime_ns, -1); /* the CPU free is not its own */
    char dev[32];
    lp_trace_device_str(e[2].device_type, e[2].device_id, dev, sizeof dev);
    assert_string_equal(dev, "cuda:1");
    lp_trace_device_str(0, -1, dev, sizeof dev);
    assert_string_equal(dev, "cpu");
    lp_trace_model_free(m);
}

/* ---- text, CSV and page ------------------------------------------------------------------------ */

static char *slurp(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(lp_trace_read_text(path, &text, &len), LP_OK);
    return text;
}

/* The text, the CSVs and the page carry the same rows: a stack with its frames and times, the
 * no-stack row, the largest allocation with its lifetime and op, the rest counted. */
static void test_outputs_carry_the_rows(void **state)
{
    (void)state;
    const char *t =
        "{\"traceEvents\": ["
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10,"
        "\"args\":{\"Call stack\":\"f1.py(3): f1;g.py(9): g\"}},"
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":20,\"dur\":4},"
        MEM(1, 4096, 16, 0) "," MEM(2, 100, 32, 0) "," MEM(8, -4096, 16, 0) "]}";
    lp_trace_model_opts o;
    lp_trace_model_opts_init(&o);
    o.mem_events = 1;
    lp_trace_model *m = parse_opts(t, &o);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    lp_prof_keyavg_opts ko;
    lp_prof_keyavg_opts_init(&ko);
    assert_int_equal(lp_trace_model_write_text(f, m, &ko, 0), LP_OK);
    fclose(f);
    assert_non_null(strstr(text, "Key averages by call stack (5 frames, innermost first, from the ops' \"Call stack\""));
    assert_non_null(strstr(text, "  10.000        0.000        0.000          1  f1.py(3): f1\n"));
    assert_non_null(strstr(text, "g.py(9): g\n"));
    assert_non_null(strstr(text, "(no stack recorded)"));
    assert_non_null(strstr(text, "Largest allocations (1 of 2, 4096 of 4196 bytes allocated; 1 frees of 4096 bytes"));
    assert_non_null(strstr(text, "       0.001           4096        cpu        0.007  aten::mm\n"));
    assert_non_null(strstr(text, "the other 1 allocations: 100 bytes"));
    free(text);

    char dir[] = "/tmp/lp_views_XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(lp_trace_model_write_csv(m, dir), LP_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/stacks.csv", dir);
    char *csv = slurp(path);
    assert_non_null(strstr(csv, "\"aten::mm\",cpu_op,\"f1.py(3): f1;g.py(9): g\",2,0,1,10000,10000,0,0\n"));
    assert_non_null(strstr(csv, "\"aten::mm\",cpu_op,\"\",0,0,1,4000,4000,0,0\n"));
    free(csv);
    unlink(path);
    snprintf(path, sizeof path, "%s/memory_events.csv", dir);
    csv = slurp(path);
    assert_non_null(strstr(csv, "1,1000,4096,4096,0,0,cpu,7000,\"aten::mm\"\n"));
    assert_non_null(strstr(csv, "rest,,100,"));
    free(csv);
    unlink(path);
    snprintf(path, sizeof path, "%s/page.html", dir);
    assert_int_equal(lp_trace_html_write(m, NULL, path), LP_OK);
    char *page = slurp(path);
    assert_non_null(strstr(page, ">By operator and call stack<"));
    assert_non_null(strstr(page, "f1.py(3): f1 ; g.py(9): g"));
    assert_non_null(strstr(page, ">Largest allocations<"));
    assert_null(strstr(page, "not freed")); /* the 4096 B block was freed */
    free(page);
    unlink(path);
    lp_chart_release_caches();
    /* the other CSVs */
    const char *rest[] = {"ops.csv", "ops_by_shape.csv", "kernels.csv", "steps.csv", "gpu.csv", "memory.csv",
                          "collectives.csv"};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, rest[i]);
        unlink(path);
    }
    assert_int_equal(rmdir(dir), 0);
    lp_trace_model_free(m);
}

/* ---- foreign traces --------------------------------------------------------------------------- */

static const char *foreign_dir(void)
{
    const char *dir = getenv("LP_FOREIGN_TRACES") ? getenv("LP_FOREIGN_TRACES") : "../shared/foreign-traces";
    struct stat sb;
    return stat(dir, &sb) == 0 ? dir : NULL;
}

static cJSON *load_ref(void)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(lp_trace_read_text("tests/report/data/foreign_views.json", &text, &len), LP_OK);
    cJSON *ref = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(ref);
    return ref;
}

static int64_t num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    assert_non_null(v);
    return (int64_t)v->valuedouble; /* the values stay below 2^53 */
}

/* The Call stack rows of the PyTorch 1.9 ResNet-50 trace (N = 5) against the recomputation. */
static void test_foreign_stacks(void **state)
{
    (void)state;
    const char *dir = foreign_dir();
    if (!dir) {
        fprintf(stderr, "skip: ../shared/foreign-traces not found (set LP_FOREIGN_TRACES)\n");
        skip();
    }
    cJSON *ref = load_ref();
    const cJSON *t;
    int n_traces = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(ref, "traces"))
    {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, t->string);
        lp_trace_model *m = NULL;
        assert_int_equal(lp_trace_model_load(path, NULL, &m), LP_OK);
        assert_int_equal(check_sums(m), 0);
        const cJSON *st = cJSON_GetObjectItem(t, "stacks"), *x;
        int nref = 0, bad = 0;
        cJSON_ArrayForEach(x, st)
        {
            nref++;
            char frames[4096] = "";
            const cJSON *f;
            cJSON_ArrayForEach(f, cJSON_GetObjectItem(x, "frames"))
            {
                if (frames[0])
                    strcat(frames, ";");
                strncat(frames, f->valuestring, sizeof frames - strlen(frames) - 2);
            }
            const char *name = cJSON_GetObjectItem(x, "name")->valuestring;
            const lp_trace_stack_row *r = stack_row(m, name, frames);
            if (r->calls != num(x, "calls") || r->cpu_total_ns != num(x, "cpu_total_ns")) {
                if (bad++ < 5)
                    fprintf(stderr, "%s: %s [%s]: %lld calls %lld ns, recomputed %lld, %lld\n", t->string, name,
                            frames, (long long)r->calls, (long long)r->cpu_total_ns, (long long)num(x, "calls"),
                            (long long)num(x, "cpu_total_ns"));
            }
        }
        size_t with_frames = 0;
        for (size_t i = 0; i < m->n_stacks; i++)
            with_frames += m->stacks[i].n_frames > 0;
        fprintf(stderr, "%-44s %zu stack rows (%d with frames recomputed), %d differences\n", t->string,
                m->n_stacks, nref, bad);
        assert_int_equal(bad, 0);
        assert_int_equal(with_frames, (size_t)nref); /* none folded away, none extra */
        n_traces++;
        lp_trace_model_free(m);
    }
    assert_true(n_traces >= 2);
    cJSON_Delete(ref);
}

/* The 20 largest allocations of the two profile_memory traces against the recomputation. */
static void test_foreign_mem_events(void **state)
{
    (void)state;
    const char *dir = foreign_dir();
    if (!dir) {
        fprintf(stderr, "skip: ../shared/foreign-traces not found (set LP_FOREIGN_TRACES)\n");
        skip();
    }
    cJSON *ref = load_ref();
    const cJSON *t;
    int checked = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(ref, "traces"))
    {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, t->string);
        lp_trace_model *m = NULL;
        assert_int_equal(lp_trace_model_load(path, NULL, &m), LP_OK);
        const cJSON *top = cJSON_GetObjectItem(t, "mem_top"), *x;
        assert_int_equal(m->n_allocs, num(t, "n_allocs"));
        assert_int_equal(m->alloc_total_bytes, num(t, "alloc_bytes"));
        assert_int_equal(m->n_frees, num(t, "n_frees"));
        assert_int_equal(m->free_total_bytes, num(t, "free_bytes"));
        assert_int_equal(m->mem_has_addr, cJSON_IsTrue(cJSON_GetObjectItem(t, "has_addr")));
        assert_int_equal(m->n_mem_top, (size_t)cJSON_GetArraySize(top));
        size_t i = 0;
        int bad = 0;
        cJSON_ArrayForEach(x, top)
        {
            const lp_trace_mem_event *e = &m->mem_top[i++];
            const char *op = cJSON_GetObjectItem(x, "op")->valuestring;
            int64_t ts = atoll(cJSON_GetObjectItem(x, "ts_ns")->valuestring); /* epoch ns: text */
            if (e->ts_ns != ts || e->bytes != num(x, "bytes") || e->lifetime_ns != num(x, "lifetime_ns") ||
                e->device_type != num(x, "device_type") || e->device_id != num(x, "device_id") || strcmp(e->op, op)) {
                if (bad++ < 5)
                    fprintf(stderr, "%s #%zu: %lld ns %lld B life %lld dev %d:%d %s; recomputed %lld %lld %lld %s\n",
                            t->string, i, (long long)e->ts_ns, (long long)e->bytes, (long long)e->lifetime_ns,
                            (int)e->device_type, (int)e->device_id, e->op, (long long)ts,
                            (long long)num(x, "bytes"), (long long)num(x, "lifetime_ns"), op);
            }
        }
        fprintf(stderr, "%-44s %zu largest of %lld allocations: %d differences\n", t->string, m->n_mem_top,
                (long long)m->n_allocs, bad);
        assert_int_equal(bad, 0);
        checked += m->n_mem_top > 0;
        lp_trace_model_free(m);
    }
    assert_int_equal(checked, 2);
    cJSON_Delete(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stacks_from_call_stack_args),
        cmocka_unit_test(test_stacks_from_python_frames),
        cmocka_unit_test(test_stacks_from_ranges),
        cmocka_unit_test(test_stacks_capped_per_op),
        cmocka_unit_test(test_stacks_with_folded_duplicates),
        cmocka_unit_test(test_mem_events_known),
        cmocka_unit_test(test_outputs_carry_the_rows),
        cmocka_unit_test(test_foreign_stacks),
        cmocka_unit_test(test_foreign_mem_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
