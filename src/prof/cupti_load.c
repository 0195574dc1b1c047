/* CUPTI loaded with dlopen on first use (cupti_load.h). Where it is looked for, in order:
 * $LP_CUPTI_LIB alone when set (a file: the user's choice is not second-guessed); else
 * libcupti.so.13 then libcupti.so through the loader's path (LD_LIBRARY_PATH, ldconfig),
 * then in the toolkit's folders: the one CUPTI was found in at configure time,
 * $CUDA_HOME/{extras/CUPTI/lib64,lib64} and /usr/local/cuda's. A failure is not
 * remembered (the next profile may have the variable set); a success is, for the process. */
#define _GNU_SOURCE
#include "cupti_load.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LP_CUPTI_LIBDIR
#define LP_CUPTI_LIBDIR "/usr/local/cuda/lib64"
#endif

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static lp_cupti_api api;
static int loaded;
static char last_error[256]; /* dlerror() of the last candidate tried */

/* One symbol into the table; 0 when the library lacks it (not a CUPTI we can use). */
static int sym(void *h, const char *name, void *slot, size_t size)
{
    void *p = dlsym(h, name);
    if (!p)
        return 0;
    memcpy(slot, &p, size); /* object -> function pointer, as POSIX allows for dlsym */
    return 1;
}

static int fill(void *h, const char **missing)
{
#define S(field, name)                                                                                       \
    if (!sym(h, name, &api.field, sizeof api.field)) {                                                       \
        *missing = name;                                                                                     \
        return 0;                                                                                            \
    }
    S(GetResultString, "cuptiGetResultString")
    S(GetCallbackName, "cuptiGetCallbackName")
    S(ActivityGetNextRecord, "cuptiActivityGetNextRecord")
    S(ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords")
    S(ActivityRegisterTimestampCallback, "cuptiActivityRegisterTimestampCallback")
    S(SetThreadIdType, "cuptiSetThreadIdType")
    S(ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks")
    S(GetTimestamp, "cuptiGetTimestamp")
    S(ActivityEnable, "cuptiActivityEnable")
    S(ActivityDisable, "cuptiActivityDisable")
    S(ActivityFlushAll, "cuptiActivityFlushAll")
#undef S
    return 1;
}

/* dlopen one candidate; on failure appends "; <candidate>" to tried. */
static void *try_open(const char *path, char *tried, size_t cap)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(last_error, sizeof last_error, "%s", e ? e : "?");
        size_t n = strlen(tried);
        snprintf(tried + n, cap - n, "%s%s", n ? ", " : "", path);
    }
    return h;
}

static void *open_cupti(char *tried, size_t cap)
{
    static const char *const names[] = {"libcupti.so.13", "libcupti.so"};
    char path[1024];
    void *h;
    for (size_t i = 0; i < 2; i++)
        if ((h = try_open(names[i], tried, cap)))
            return h;
    const char *home = getenv("CUDA_HOME");
    const char *dirs[4] = {LP_CUPTI_LIBDIR, NULL, NULL, "/usr/local/cuda/extras/CUPTI/lib64"};
    char d1[512], d2[512];
    if (home && *home) {
        snprintf(d1, sizeof d1, "%s/extras/CUPTI/lib64", home);
        snprintf(d2, sizeof d2, "%s/lib64", home);
        dirs[1] = d1, dirs[2] = d2;
    }
    for (size_t d = 0; d < 4; d++)
        for (size_t i = 0; dirs[d] && i < 2; i++) {
            snprintf(path, sizeof path, "%s/%s", dirs[d], names[i]);
            if ((h = try_open(path, tried, cap)))
                return h;
        }
    return NULL;
}

const lp_cupti_api *lp_prof__cupti_api(void)
{
    pthread_mutex_lock(&load_mu);
    if (loaded) {
        pthread_mutex_unlock(&load_mu);
        return &api;
    }
    char tried[2048] = "";
    const char *env = getenv("LP_CUPTI_LIB");
    void *h = env && *env ? try_open(env, tried, sizeof tried) : open_cupti(tried, sizeof tried);
    const char *missing = NULL;
    if (!h) {
        pthread_mutex_unlock(&load_mu);
        lp_err(LP_STATUS_UNSUPPORTED,
               "profiler: GPU activity asked for but CUPTI could not be loaded (tried %s%s; last error: %s); "
               "install the CUDA toolkit's CUPTI or set LP_CUPTI_LIB to libcupti.so's path",
               tried, env && *env ? ", from $LP_CUPTI_LIB" : "", last_error);
        return NULL;
    }
    if (!fill(h, &missing)) {
        dlclose(h);
        pthread_mutex_unlock(&load_mu);
        lp_err(LP_STATUS_UNSUPPORTED, "profiler: the CUPTI library loaded lacks %s (CUPTI from CUDA 12.x/13 needed)",
               missing);
        return NULL;
    }
    loaded = 1; /* stays loaded for the process's life: CUPTI keeps callbacks into it */
    pthread_mutex_unlock(&load_mu);
    return &api;
}
