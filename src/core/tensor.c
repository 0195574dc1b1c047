/* Tensors: a dtype, up to four dims with element strides, and a data pointer that is
 * either owned (from lp_alloc, category-tagged) or a view of someone else's memory. */
#include <string.h>

#include "loupe/core.h"

static lp_status check_shape(lp_dtype dt, int ndim, const int64_t *shape)
{
    if ((unsigned)dt >= LP_DTYPE__COUNT)
        return lp_err(LP_STATUS_INVALID_ARG, "tensor: unknown dtype %d", (int)dt);
    if (ndim < 1 || ndim > LP_MAX_DIMS)
        return lp_err(LP_STATUS_INVALID_ARG, "tensor: rank %d outside 1..%d", ndim, LP_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return lp_err(LP_STATUS_INVALID_ARG, "tensor: dimension %d is negative (%lld)", i, (long long)shape[i]);
        if (shape[i] && n > INT64_MAX / 8 / shape[i])
            return lp_err(LP_STATUS_INVALID_ARG, "tensor: element count overflows");
        n *= shape[i];
    }
    return LP_OK;
}

static void set_contiguous(lp_tensor *t, lp_dtype dt, int ndim, const int64_t *shape)
{
    t->dtype = dt;
    t->ndim = ndim;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->stride[i] = s;
        s *= shape[i];
    }
    for (int i = ndim; i < LP_MAX_DIMS; i++) {
        t->shape[i] = 1;
        t->stride[i] = 1;
    }
}

lp_status lp_tensor_alloc(lp_tensor *t, lp_dtype dt, int ndim, const int64_t *shape, lp_mem_category cat,
                          const char *name)
{
    memset(t, 0, sizeof *t);
    lp_status st = check_shape(dt, ndim, shape);
    if (st != LP_OK)
        return st;
    set_contiguous(t, dt, ndim, shape);
    t->data = lp_alloc(lp_dtype_nbytes(dt, lp_tensor_numel(t)), cat, name);
    if (!t->data) {
        memset(t, 0, sizeof *t);
        return LP_STATUS_NO_MEMORY; /* lp_alloc set the message */
    }
    t->owns = true;
    t->category = cat;
    t->name = name;
    return LP_OK;
}

lp_status lp_tensor_view(lp_tensor *t, lp_dtype dt, int ndim, const int64_t *shape, void *data)
{
    memset(t, 0, sizeof *t);
    lp_status st = check_shape(dt, ndim, shape);
    if (st != LP_OK)
        return st;
    set_contiguous(t, dt, ndim, shape);
    t->data = data;
    t->category = LP_MEM_CATEGORY_OTHER;
    return LP_OK;
}

void lp_tensor_free(lp_tensor *t)
{
    if (t->owns)
        lp_free(t->data);
    memset(t, 0, sizeof *t);
}

int64_t lp_tensor_numel(const lp_tensor *t)
{
    if (t->ndim <= 0)
        return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

size_t lp_tensor_nbytes(const lp_tensor *t) { return lp_dtype_nbytes(t->dtype, lp_tensor_numel(t)); }

bool lp_tensor_is_contiguous(const lp_tensor *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s)
            return false;
        s *= t->shape[i];
    }
    return true;
}

bool lp_tensor_same_shape(const lp_tensor *a, const lp_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

lp_status lp_tensor_reshape(lp_tensor *out, const lp_tensor *t, int ndim, const int64_t *shape)
{
    if (!lp_tensor_is_contiguous(t))
        return lp_err(LP_STATUS_INVALID_ARG, "tensor reshape: '%s' is not contiguous", t->name ? t->name : "");
    lp_tensor v;
    lp_status st = lp_tensor_view(&v, t->dtype, ndim, shape, t->data);
    if (st != LP_OK)
        return st;
    if (lp_tensor_numel(&v) != lp_tensor_numel(t))
        return lp_err(LP_STATUS_INVALID_ARG, "tensor reshape: %lld elements cannot become %lld",
                      (long long)lp_tensor_numel(t), (long long)lp_tensor_numel(&v));
    v.category = t->category;
    v.name = t->name;
    *out = v;
    return LP_OK;
}

lp_status lp_tensor_slice0(lp_tensor *out, const lp_tensor *t, int64_t start, int64_t len)
{
    if (start < 0 || len < 0 || start > t->shape[0] || len > t->shape[0] - start)
        return lp_err(LP_STATUS_RANGE, "tensor slice [%lld, %lld) outside dimension 0 of size %lld", (long long)start,
                      (long long)(start + len), (long long)t->shape[0]);
    if (t->dtype == LP_DTYPE_NF4 && (start * t->stride[0]) % 2)
        return lp_err(LP_STATUS_INVALID_ARG, "tensor slice: nf4 slice must start on a byte boundary");
    *out = *t;
    out->owns = false;
    out->shape[0] = len;
    out->data = (uint8_t *)t->data + lp_dtype_nbytes(t->dtype, start * t->stride[0]);
    return LP_OK;
}

void lp_tensor_zero(lp_tensor *t)
{
    if (t->data)
        memset(t->data, 0, lp_tensor_nbytes(t));
}

const char *lp_tensor_describe(const lp_tensor *t, char *buf, size_t cap)
{
    if (!cap)
        return buf;
    int n = snprintf(buf, cap, "%s[", lp_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && n >= 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    if (n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, "]");
    return buf;
}
