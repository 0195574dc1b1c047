/* cuBLASLt through dlopen (cuda_blaslt.h). */
#include <dlfcn.h>
#include <stdio.h>

#include "cuda_blaslt.h"

#define XSTR(x) #x
#define STR(x) XSTR(x)
#define SONAME "libcublasLt.so." STR(CUBLAS_VER_MAJOR)

lp_cublaslt_api lp_lt;

lp_status lp_cublaslt_load(void)
{
    if (lp_lt.Matmul)
        return LP_OK;
    void *h = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL);
#ifdef LP_CUDA_LIBDIR
    if (!h)
        h = dlopen(LP_CUDA_LIBDIR "/" SONAME, RTLD_NOW | RTLD_LOCAL);
#endif
    if (!h)
        return lp_err(LP_STATUS_UNSUPPORTED, "cuda: cannot load %s (%s); add the CUDA libraries' folder to "
                                             "LD_LIBRARY_PATH", SONAME, dlerror());
    lp_cublaslt_api a;
#define SYM(name)                                                                                               \
    do {                                                                                                        \
        *(void **)&a.name = dlsym(h, "cublasLt" #name);                                                        \
        if (!a.name)                                                                                            \
            return lp_err(LP_STATUS_UNSUPPORTED, "cuda: %s lacks cublasLt" #name, SONAME);                     \
    } while (0)
    SYM(Create);
    SYM(GetStatusString);
    SYM(MatmulDescCreate);
    SYM(MatmulDescDestroy);
    SYM(MatmulDescSetAttribute);
    SYM(MatrixLayoutCreate);
    SYM(MatrixLayoutDestroy);
    SYM(MatrixLayoutSetAttribute);
    SYM(MatmulPreferenceCreate);
    SYM(MatmulPreferenceDestroy);
    SYM(MatmulPreferenceSetAttribute);
    SYM(MatmulAlgoGetHeuristic);
    SYM(Matmul);
#undef SYM
    lp_lt = a; /* the handle stays open for the process */
    return LP_OK;
}

const char *lp_cublaslt_status(cublasStatus_t s)
{
    static _Thread_local char buf[32];
    if (lp_lt.GetStatusString)
        return lp_lt.GetStatusString(s);
    snprintf(buf, sizeof buf, "cuBLAS status %d", (int)s);
    return buf;
}
