/* loupe base: status codes, the last-error message, and atomic file output.
 * Every layer (the profiler included) uses these; this header depends only on libc.
 *
 *   lp_status st = lp_file_read_all("config.json", &buf, &len);
 *   if (st != LP_OK) { fprintf(stderr, "loupe: %s\n", lp_err_msg()); return st; }
 *
 *   lp_atomic_file f;
 *   if (lp_atomic_open(&f, "out/summary.json") == LP_OK) {
 *       fprintf(f.fp, "{...}");
 *       st = lp_atomic_commit(&f);      // fsync + rename into place, or remove the temp
 *   }
 */
#ifndef LOUPE_BASE_H
#define LOUPE_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LP_WARN_UNUSED __attribute__((warn_unused_result))
#define LP_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))

/* Status of every fallible call. LP_OK is 0; the message naming the file and the
 * problem is in lp_err_msg() (per thread) after a failure. */
typedef enum lp_status {
    LP_OK = 0,
    LP_STATUS_IO,          /* a file could not be opened, read, written or renamed */
    LP_STATUS_FORMAT,      /* a file's contents are malformed */
    LP_STATUS_INVALID_ARG, /* a caller passed a value outside the contract */
    LP_STATUS_NO_MEMORY,   /* an allocation failed */
    LP_STATUS_UNSUPPORTED, /* valid input this build does not handle */
    LP_STATUS_NOT_FOUND,   /* a named file, tensor, column or key is missing */
    LP_STATUS_RANGE,       /* a value is out of its allowed range (label, index, size) */
    LP_STATUS_NUMERIC,     /* NaN or infinity where a finite number is required */
    LP_STATUS_INTERRUPTED, /* stopped by a signal */
    LP_STATUS__COUNT
} lp_status;

/* A short fixed name for a status ("io error", "format error", ...). Never NULL. */
const char *lp_status_str(lp_status st);

/* Sets this thread's error message (printf-style) and returns st, so a failing path
 * reads: return lp_err(LP_STATUS_FORMAT, "%s: header size %llu exceeds file", path, n); */
lp_status lp_err(lp_status st, const char *fmt, ...) LP_PRINTF(2, 3);

/* Prepends context to this thread's message ("while loading model: <old message>"). */
lp_status lp_err_wrap(lp_status st, const char *fmt, ...) LP_PRINTF(2, 3);

/* This thread's last error message; "" when none. Owned by the library; valid until
 * the next lp_err* call on this thread. */
const char *lp_err_msg(void);

/* Clears this thread's message. */
void lp_err_clear(void);

/* Reads a whole file into a fresh buffer (NUL-terminated for convenience; *len does not
 * count the NUL). Caller frees *out with free(). */
LP_WARN_UNUSED lp_status lp_file_read_all(const char *path, char **out, size_t *len);

/* Room for `need` elements of `size` bytes in the heap array v of capacity *cap (elements),
 * doubling from `first` (the first allocation's capacity). Returns the array to use (v when
 * it is already large enough) with *cap updated, or NULL when out of memory, leaving v and
 * *cap as they were. */
LP_WARN_UNUSED void *lp_grow(void *v, size_t *cap, size_t need, size_t size, size_t first);

/* malloc, calloc, realloc and strdup for library code that owns plain heap memory (freed
 * with free()), counted by the allocation-failure torture mode: lp_alloc_fail_set(n) makes
 * the nth allocation from now fail (NULL), whether it is one of these or an lp_alloc (core).
 * Loaders use these so that a test can fail each of their allocations in turn. */
void *lp_malloc(size_t n);
void *lp_calloc(size_t n, size_t size);
void *lp_realloc(void *p, size_t n);
char *lp_strdup(const char *s);
/* Sets the allocation to fail (1 = the next one; 0 = none; also read once from the
 * environment variable LP_ALLOC_FAIL_AT) and returns how many were counted since the last
 * call. lp_alloc_fail_at (core.h) is the same counter. */
uint64_t lp_alloc_fail_set(uint64_t nth);
/* Counts one allocation: its number when it is the one set to fail, else 0. */
uint64_t lp_alloc_tick(void);

/* Overflow-checked size arithmetic for every size that comes from outside data (configs,
 * tensor headers, tokenizers, datasets, traces, checkpoints) and for the memory plan built
 * from them. The overflow flag is sticky, so a formula is written once and checked once:
 *
 *   bool ovf = false;
 *   int64_t n = lp_size_add(&ovf, lp_size_mul(&ovf, V, H), lp_size_mul(&ovf, P, H));
 *   if (ovf) return lp_err(LP_STATUS_RANGE, "%s: \"vocab_size\" x \"hidden_size\" overflows", path);
 *
 * Sizes are non-negative int64 (the engine's index type): a negative operand or a result
 * above INT64_MAX sets *ovf and yields INT64_MAX, so a later comparison against a limit
 * still refuses. */
static inline int64_t lp_size_mul(bool *ovf, int64_t a, int64_t b)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) {
        *ovf = true;
        return INT64_MAX;
    }
    return r;
}

static inline int64_t lp_size_add(bool *ovf, int64_t a, int64_t b)
{
    int64_t r;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) {
        *ovf = true;
        return INT64_MAX;
    }
    return r;
}

/* n rounded up to a multiple of m (a power of two), checked. */
static inline int64_t lp_size_round_up(bool *ovf, int64_t n, int64_t m)
{
    return lp_size_add(ovf, n, m - 1) & ~(m - 1);
}

/* Whether count elements of elem bytes fit in a size_t allocation (and in int64). */
static inline bool lp_size_bytes_ok(int64_t count, size_t elem)
{
    bool ovf = false;
    int64_t b = lp_size_mul(&ovf, count, (int64_t)elem);
    return !ovf && (uint64_t)b <= (uint64_t)SIZE_MAX;
}

/* Output that appears under its final name only when complete: writes go to
 * "<path>.tmp.<pid>" in the same directory, lp_atomic_commit flushes, fsyncs and renames
 * it into place; lp_atomic_abort removes it. A full disk surfaces as LP_STATUS_IO from
 * commit, and the previous file at path (if any) is left untouched. */
typedef struct lp_atomic_file {
    FILE *fp;         /* write through this */
    char *path;       /* final name (owned) */
    char *tmp_path;   /* temporary name (owned) */
} lp_atomic_file;

LP_WARN_UNUSED lp_status lp_atomic_open(lp_atomic_file *f, const char *path);
LP_WARN_UNUSED lp_status lp_atomic_commit(lp_atomic_file *f);
void lp_atomic_abort(lp_atomic_file *f);

/* Writes len bytes to path atomically (open + write + commit). */
LP_WARN_UNUSED lp_status lp_file_write_atomic(const char *path, const void *data, size_t len);

/* Fills a directory so that a new one appears whole or not at all. When dir does not
 * exist, its parents are created, fill(ctx, tmp) writes into a temporary sibling
 * "<dir>.tmp.XXXXXX" (mode 0755) and that is renamed to dir; on failure the temporary
 * directory and the files in it are removed. When dir exists, fill(ctx, dir) writes in
 * place (each file should then be written atomically on its own). Returns fill's status,
 * or LP_STATUS_IO naming the directory. */
typedef lp_status (*lp_dir_fill_fn)(void *ctx, const char *dir);
LP_WARN_UNUSED lp_status lp_dir_write_atomic(const char *dir, lp_dir_fill_fn fill, void *ctx);

/* Creates a directory and its parents (mkdir -p). Existing directories are fine. */
LP_WARN_UNUSED lp_status lp_mkdir_p(const char *path);

/* SIGINT/SIGTERM for long-running commands: after lp_stop_signal_install, the first signal
 * sets the flag lp_stop_requested reads (the loop finishes its unit of work and writes what
 * it has); a second one kills the process as the default action would. lp_stop_request
 * sets the flag as a signal would (tests). Process-wide. */
void lp_stop_signal_install(void);
bool lp_stop_requested(void);
void lp_stop_request(void);

#ifdef __cplusplus
}
#endif
#endif /* LOUPE_BASE_H */
