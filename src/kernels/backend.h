/* The backend seam (DESIGN-NEXT change 2), private to kernels/: what a device offers the
 * neutral wrappers in cpu/dispatch.c (profiling, argument checks, compositions). Today one
 * backend, the CPU, with one instance per ISA level (its op table is that level's compiled
 * copy); a CUDA backend is another instance of the same struct, with its context (stream,
 * cuBLAS handle) and device buffers.
 *
 *   const lp_backend *be = lp_backend_cpu(lp_kernels_isa());
 *   float *x = be->alloc(be->ctx, n * sizeof(float), "activations");
 *   be->upload(be->ctx, x, host, n * sizeof(float));
 *   if (be->supports(be, LP_BACKEND_OP(gelu_forward)))
 *       be->ops->gelu_forward(x, x, n, LP_GELU_KIND_ERF);
 */
#ifndef LP_KERNELS_BACKEND_H
#define LP_KERNELS_BACKEND_H

#include <stddef.h>

#include "loupe/kernels.h"

/* An op, named by its entry in lp_kernel_table. */
#define LP_BACKEND_OP(name) offsetof(lp_kernel_table, name)

typedef struct lp_backend {
    const char *name;  /* "cpu" */
    const char *level; /* CPU: the ISA level (lp_isa_name) */
    void *ctx;         /* CPU: NULL (the OpenMP team is process-wide) */
    /* Buffers in the backend's memory. alloc: NULL and lp_err on failure (the caller owns
     * the buffer; release with free). upload / download copy host <-> backend, copy and
     * memset work inside the backend; all are ordered before the next op, and sync waits
     * for everything queued (CPU: they run at once, sync returns LP_OK). */
    void *(*alloc)(void *ctx, size_t bytes, const char *what);
    void (*free)(void *ctx, void *p);
    lp_status (*upload)(void *ctx, void *dst, const void *src, size_t bytes);
    lp_status (*download)(void *ctx, void *dst, const void *src, size_t bytes);
    lp_status (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    lp_status (*memset)(void *ctx, void *dst, int value, size_t bytes);
    lp_status (*sync)(void *ctx);
    /* Whether ops has the op at offset LP_BACKEND_OP(name): a device backend may leave
     * some to the CPU. */
    bool (*supports)(const struct lp_backend *b, size_t op);
    const lp_kernel_table *ops;
} lp_backend;

/* The CPU backend at `isa` (static storage, never NULL); its ops are
 * lp_kernels_table_isa(isa), so call only when lp_isa_missing(isa) is NULL. */
const lp_backend *lp_backend_cpu(lp_isa isa);

#endif
