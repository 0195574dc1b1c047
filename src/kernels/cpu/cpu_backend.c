/* The CPU backend (src/kernels/backend.h): host memory through the core allocator (so the
 * memory accounting sees it), and one instance per ISA level over that level's op table.
 * Compiled once, for the baseline. */
#include <pthread.h>
#include <string.h>

#include "../backend.h"

static void *cpu_alloc(void *ctx, size_t bytes, const char *what)
{
    (void)ctx;
    return lp_alloc(bytes, LP_MEM_CATEGORY_TEMPORARY, what);
}

static void *cpu_alloc_tagged(void *ctx, size_t bytes, lp_mem_category cat, const char *what)
{
    (void)ctx;
    return lp_alloc(bytes, cat, what);
}

static void cpu_free(void *ctx, void *p)
{
    (void)ctx;
    lp_free(p);
}

static lp_status cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memmove(dst, src, bytes);
    return LP_OK;
}

static lp_status cpu_copy_rows(void *ctx, void *dst, size_t dst_stride, const void *src, size_t src_stride,
                               size_t row_bytes, size_t rows)
{
    (void)ctx;
    for (size_t r = 0; r < rows && row_bytes; r++)
        memmove((char *)dst + r * dst_stride, (const char *)src + r * src_stride, row_bytes);
    return LP_OK;
}

static lp_status cpu_memset(void *ctx, void *dst, int value, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memset(dst, value, bytes);
    return LP_OK;
}

static lp_status cpu_sync(void *ctx)
{
    (void)ctx;
    return LP_OK;
}

bool lp_backend_table_supports(const lp_backend *b, size_t op)
{
    if (op < offsetof(lp_kernel_table, sgemm) || op + sizeof(void (*)(void)) > sizeof(lp_kernel_table))
        return false;
    void (*fn)(void);
    memcpy(&fn, (const char *)b->ops + op, sizeof fn);
    return fn != NULL;
}

#define CPU_BACKEND                                                                                          \
    {                                                                                                        \
        .name = "cpu", .alloc = cpu_alloc, .alloc_tagged = cpu_alloc_tagged, .free = cpu_free,               \
        .upload = cpu_copy, .download = cpu_copy, .copy = cpu_copy, .copy_rows = cpu_copy_rows,              \
        .memset = cpu_memset, .sync = cpu_sync, .supports = lp_backend_table_supports                        \
    }

static lp_backend cpu[LP_ISA_COUNT] = {CPU_BACKEND, CPU_BACKEND, CPU_BACKEND, CPU_BACKEND};
static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;

/* ops and level come from dispatch.c's tables (not constants here) */
static void cpu_fill(void)
{
    for (int i = 0; i < LP_ISA_COUNT; i++) {
        cpu[i].ops = lp_kernels_table_isa((lp_isa)i);
        cpu[i].level = lp_isa_name((lp_isa)i);
    }
}

const lp_backend *lp_backend_cpu(lp_isa isa)
{
    pthread_once(&cpu_once, cpu_fill);
    return &cpu[(unsigned)isa < LP_ISA_COUNT ? isa : LP_ISA_BASELINE];
}
