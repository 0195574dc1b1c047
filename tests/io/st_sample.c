/* Helper for st_interop.py: `st_sample write FILE` writes one tensor of each dtype the
 * Python reference reads into numpy (element i holds i*3-5, cast); `st_sample read FILE`
 * prints each tensor as JSON lines {name, dtype, shape, values (as doubles)}. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loupe/io.h"

static double get(const lp_st_tensor *t, uint64_t i)
{
    const void *p = t->data;
    switch (t->dtype) {
    case LP_ST_DTYPE_F32: return ((const float *)p)[i];
    case LP_ST_DTYPE_F64: return ((const double *)p)[i];
    case LP_ST_DTYPE_I8: return ((const int8_t *)p)[i];
    case LP_ST_DTYPE_U8: return ((const uint8_t *)p)[i];
    case LP_ST_DTYPE_BOOL: return ((const uint8_t *)p)[i];
    case LP_ST_DTYPE_I16: return ((const int16_t *)p)[i];
    case LP_ST_DTYPE_U16: return ((const uint16_t *)p)[i];
    case LP_ST_DTYPE_I32: return ((const int32_t *)p)[i];
    case LP_ST_DTYPE_U32: return ((const uint32_t *)p)[i];
    case LP_ST_DTYPE_I64: return (double)((const int64_t *)p)[i];
    case LP_ST_DTYPE_U64: return (double)((const uint64_t *)p)[i];
    default: return 0; /* F16/BF16: not printed as values */
    }
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    if (!strcmp(argv[1], "read")) {
        lp_st_file *f;
        if (lp_st_open(argv[2], &f) != LP_OK) {
            fprintf(stderr, "%s\n", lp_err_msg());
            return 1;
        }
        for (size_t i = 0; i < lp_st_count(f); i++) {
            const lp_st_tensor *t = lp_st_at(f, i);
            printf("{\"name\": \"%s\", \"dtype\": \"%s\", \"shape\": [", t->name, lp_st_dtype_name(t->dtype));
            for (int d = 0; d < t->ndim; d++)
                printf("%s%" PRId64, d ? ", " : "", t->shape[d]);
            printf("], \"values\": [");
            for (uint64_t k = 0; k < t->numel; k++)
                printf("%s%.17g", k ? ", " : "", get(t, k));
            printf("]}\n");
        }
        lp_st_close(f);
        return 0;
    }
    static const lp_st_dtype dts[] = {LP_ST_DTYPE_F32, LP_ST_DTYPE_F64, LP_ST_DTYPE_I8,  LP_ST_DTYPE_U8,
                                      LP_ST_DTYPE_I16, LP_ST_DTYPE_I32, LP_ST_DTYPE_I64, LP_ST_DTYPE_BOOL};
    enum { N = sizeof dts / sizeof dts[0] };
    static const int64_t shape[2] = {2, 3};
    uint8_t data[N][6 * 8];
    lp_st_write_tensor t[N];
    char names[N][16];
    for (size_t i = 0; i < N; i++) {
        for (int k = 0; k < 6; k++) {
            double v = dts[i] == LP_ST_DTYPE_BOOL ? (k % 2) : dts[i] == LP_ST_DTYPE_U8 ? k * 3 : k * 3 - 5;
            uint8_t *p = data[i] + k * lp_st_dtype_size(dts[i]);
            switch (dts[i]) {
            case LP_ST_DTYPE_F32: { float x = (float)v + 0.25f; memcpy(p, &x, 4); break; }
            case LP_ST_DTYPE_F64: { double x = v + 0.125; memcpy(p, &x, 8); break; }
            case LP_ST_DTYPE_I8: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
            case LP_ST_DTYPE_U8: case LP_ST_DTYPE_BOOL: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
            case LP_ST_DTYPE_I16: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
            case LP_ST_DTYPE_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
            case LP_ST_DTYPE_I64: { int64_t x = (int64_t)v * 1000000007LL; memcpy(p, &x, 8); break; }
            default: break;
            }
        }
        snprintf(names[i], sizeof names[i], "t.%s", lp_st_dtype_name(dts[i]));
        t[i] = (lp_st_write_tensor){names[i], dts[i], 2, shape, data[i]};
    }
    const char *meta[] = {"format", "np"};
    if (lp_st_write(argv[2], t, N, meta, 1) != LP_OK) {
        fprintf(stderr, "%s\n", lp_err_msg());
        return 1;
    }
    return 0;
}
