/* A 2 GB trace through the streaming model without a 2 GB file: a child process writes a
 * real trace's events over and over into a pipe (each copy shifted past the previous one
 * in time), the model reads the pipe once. Asserts what bounded memory means: peak RSS
 * under 300 MB; and that nothing was lost at that size: every key-average row is exactly
 * N times the one-copy row (counts and integer-ns times). Prints the rate (CPU time,
 * one core) for bench/README.md; the rate is not asserted (the machine is shared).
 *
 * The source trace: param-dlrm-8gpu-worker0 from ../shared/foreign-traces (GPU: runtime
 * calls, kernels, NCCL) when present, else the committed torch fixture (CPU only). */
#include "lp_test_util.h" /* first: it sets _GNU_SOURCE */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loupe/report.h"

#define TARGET_BYTES 2000000000ull /* "2 GB" */
#define RSS_LIMIT_KB (300 * 1024)

/* One event as text without its "ts", and its ts in ns relative to the trace's first. */
typedef struct piece {
    char *rest; /* the object's text after "{" (no ts key) */
    int64_t ts_ns;
} piece;

typedef struct source {
    piece *p;
    size_t n;
    int64_t span_ns;
    size_t copy_bytes;
} source;

static void source_load(source *s)
{
    const char *dir = getenv("LP_FOREIGN_TRACES") ? getenv("LP_FOREIGN_TRACES") : "../shared/foreign-traces";
    char path[1024];
    snprintf(path, sizeof path, "%s/param-dlrm-8gpu-worker0.pt.trace.json", dir);
    if (access(path, R_OK) != 0)
        snprintf(path, sizeof path, "tests/fixtures/torch_trace/worker0.pt.trace.json.gz");
    fprintf(stderr, "source trace: %s\n", path);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(lp_trace_read_text(path, &text, &len), LP_OK);
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(root);
    cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");
    assert_true(cJSON_IsArray(evs));
    double t0 = INFINITY, t1 = -INFINITY;
    cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        cJSON *ts = cJSON_GetObjectItem(e, "ts"), *dur = cJSON_GetObjectItem(e, "dur");
        if (cJSON_IsNumber(ts)) {
            t0 = fmin(t0, ts->valuedouble);
            t1 = fmax(t1, ts->valuedouble + (cJSON_IsNumber(dur) ? dur->valuedouble : 0));
        }
    }
    s->n = 0;
    s->copy_bytes = 0;
    s->p = calloc((size_t)cJSON_GetArraySize(evs), sizeof *s->p);
    assert_non_null(s->p);
    cJSON_ArrayForEach(e, evs)
    {
        cJSON *ts = cJSON_GetObjectItem(e, "ts");
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
        if (!cJSON_IsNumber(ts) || !ph || !strcmp(ph, "M"))
            continue;
        piece *q = &s->p[s->n++];
        /* relative µs rounded to ns once: every copy then nests exactly as the first */
        q->ts_ns = llround((ts->valuedouble - t0) * 1000.0);
        cJSON_DeleteItemFromObject(e, "ts");
        char *obj = cJSON_PrintUnformatted(e);
        assert_non_null(obj);
        q->rest = strdup(obj + 1);
        cJSON_free(obj);
        assert_non_null(q->rest);
        s->copy_bytes += strlen(q->rest) + 32;
    }
    s->span_ns = llround((t1 - t0) * 1000.0) + 1000000; /* copies 1 ms apart */
    cJSON_Delete(root);
}

/* Writes {"traceEvents": [copies of the source]} to fd. */
static void write_copies(const source *s, int fd, size_t copies)
{
    FILE *f = fdopen(fd, "w");
    if (!f)
        _exit(3);
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    fputs("{\"schemaVersion\": 1, \"traceEvents\": [\n", f);
    int first = 1;
    for (size_t c = 0; c < copies; c++) {
        int64_t off = (int64_t)c * s->span_ns;
        for (size_t i = 0; i < s->n; i++) {
            int64_t t = s->p[i].ts_ns + off;
            const char *rest = s->p[i].rest;
            if (fprintf(f, "%s{\"ts\":%lld.%03lld%s%s\n", first ? "" : ",", (long long)(t / 1000),
                        (long long)(t % 1000), rest[0] == '}' ? "" : ",", rest) < 0)
                _exit(4);
            first = 0;
        }
    }
    fputs("]}\n", f);
    fclose(f);
    _exit(0);
}

/* Analyses `copies` copies through a pipe; returns the model and the bytes read. */
static lp_trace_model *through_pipe(const source *s, size_t copies, uint64_t *bytes, double *cpu_s)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        write_copies(s, fds[1], copies);
    }
    close(fds[1]);
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", fds[0]);
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    lp_trace_model *m = NULL;
    lp_status st = lp_trace_model_load(path, NULL, &m);
    getrusage(RUSAGE_SELF, &r1);
    if (st != LP_OK)
        fprintf(stderr, "%s\n", lp_err_msg());
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    assert_int_equal(st, LP_OK);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    *bytes = m->bytes;
    *cpu_s = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
             (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6 +
             (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
             (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
    return m;
}

static void test_two_gb_through_a_pipe(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    source s;
    source_load(&s);
    uint64_t b1;
    double c1;
    lp_trace_model *one = through_pipe(&s, 1, &b1, &c1);
    size_t copies = (size_t)(TARGET_BYTES / b1) + 1;
    uint64_t bytes;
    double cpu;
    lp_trace_model *big = through_pipe(&s, copies, &bytes, &cpu);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr,
            "%zu copies, %.3f GB of JSON, %.1f s CPU: %.0f MB/s; peak RSS %.1f MB; %zu rows, %zu kernels\n",
            copies, bytes / 1e9, cpu, bytes / 1e6 / cpu, ru.ru_maxrss / 1024.0, big->n_ops, big->n_kernels);
    assert_true(bytes >= TARGET_BYTES);
    assert_true(ru.ru_maxrss < RSS_LIMIT_KB);
    assert_int_equal(big->n_late, 0);
    assert_int_equal(big->n_ops, one->n_ops);
    for (size_t i = 0; i < one->n_ops; i++) {
        const lp_trace_op_row *a = &one->ops[i], *b = &big->ops[i];
        assert_string_equal(a->name, b->name);
        assert_int_equal(b->calls, a->calls * (int64_t)copies);
        assert_int_equal(b->self_cpu_ns, a->self_cpu_ns * (int64_t)copies);
        assert_int_equal(b->cpu_total_ns, a->cpu_total_ns * (int64_t)copies);
        assert_int_equal(b->self_device_ns, a->self_device_ns * (int64_t)copies);
        assert_int_equal(b->device_total_ns, a->device_total_ns * (int64_t)copies);
    }
    if (one->has_steps)
        assert_int_equal(big->n_steps, one->n_steps * copies);
    lp_trace_model_free(one);
    lp_trace_model_free(big);
    for (size_t i = 0; i < s.n; i++)
        free(s.p[i].rest);
    free(s.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_gb_through_a_pipe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
