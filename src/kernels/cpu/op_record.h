/* Private to src/kernels/cpu: how the lp_* wrappers tell the profiler about an op. Each
 * call site keeps a static lp_prof_op_desc (name, one pseudo-input holding the op's key
 * dims) and opens an op range that closes when the wrapper returns; FLOPs and bytes moved
 * are this call's. With the profiler off this costs one predictable branch. */
#ifndef LP_OP_RECORD_H
#define LP_OP_RECORD_H

#include "loupe/core.h"

#define LP_OP_BEGIN(opname, flops, bytes, ndims, ...)                                                  \
    static const lp_prof_op_desc lp_op_desc_ = {opname, LP_PROF_CAT_CPU_OP, 1, {ndims}, {"float"}}; \
    const int64_t lp_op_dims_[] = {__VA_ARGS__};                                                     \
    LP_PROF_OP_SCOPE(&lp_op_desc_, lp_op_dims_, (double)(flops), (double)(bytes));                   \
    (void)lp_op_desc_, (void)lp_op_dims_
/* The range closes at the end of the enclosing block; this marks where, for readers. */
#define LP_OP_END() \
    do {            \
    } while (0)

#endif
