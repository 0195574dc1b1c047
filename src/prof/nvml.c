/* NVML loaded at run time: dlopen("libnvidia-ml.so.1") (or $LP_NVML_LIB), so loupe has no
 * link dependency on the driver and runs unchanged where there is no GPU. Only the few
 * calls the sampler needs, declared here with NVML's C ABI (all stable since NVML 2). */
#include "prof_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

typedef int nvml_ret; /* nvmlReturn_t: 0 = NVML_SUCCESS */
typedef void *nvml_dev;
typedef struct {
    unsigned gpu, memory;
} nvml_util;
typedef struct {
    unsigned long long total, free, used;
} nvml_mem;
enum { NVML_CLOCK_SM = 1 };

static struct {
    pthread_once_t once;
    int ok;
    const char *why;
    nvml_dev dev;
    nvml_ret (*util)(nvml_dev, nvml_util *);
    nvml_ret (*mem)(nvml_dev, nvml_mem *);
    nvml_ret (*power)(nvml_dev, unsigned *);
    nvml_ret (*clock)(nvml_dev, int, unsigned *);
} N = {PTHREAD_ONCE_INIT, 0, "not probed", NULL, NULL, NULL, NULL, NULL};

static void probe(void)
{
    const char *lib = getenv("LP_NVML_LIB");
    void *h = dlopen(lib && *lib ? lib : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        N.why = "libnvidia-ml.so.1 not found (no NVIDIA driver)";
        return;
    }
    nvml_ret (*init)(void) = (nvml_ret(*)(void))dlsym(h, "nvmlInit_v2");
    nvml_ret (*count)(unsigned *) = (nvml_ret(*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
    nvml_ret (*get)(unsigned, nvml_dev *) =
        (nvml_ret(*)(unsigned, nvml_dev *))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    N.util = (nvml_ret(*)(nvml_dev, nvml_util *))dlsym(h, "nvmlDeviceGetUtilizationRates");
    N.mem = (nvml_ret(*)(nvml_dev, nvml_mem *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    N.power = (nvml_ret(*)(nvml_dev, unsigned *))dlsym(h, "nvmlDeviceGetPowerUsage");
    N.clock = (nvml_ret(*)(nvml_dev, int, unsigned *))dlsym(h, "nvmlDeviceGetClockInfo");
    unsigned n = 0;
    if (!init || !count || !get || !N.util || !N.mem || !N.power || !N.clock) {
        N.why = "libnvidia-ml.so.1 lacks the NVML calls loupe uses";
    } else if (init() != 0) {
        N.why = "nvmlInit failed (driver not loaded?)";
    } else if (count(&n) != 0 || n == 0) {
        N.why = "NVML sees no GPU";
    } else if (get(0, &N.dev) != 0) {
        N.why = "NVML cannot open GPU 0";
    } else {
        N.ok = 1;
        N.why = "";
        return; /* stays loaded for the process's life */
    }
    dlclose(h);
}

int lp_prof_nvml_available(const char **why)
{
    pthread_once(&N.once, probe);
    if (why)
        *why = N.why;
    return N.ok;
}

int lp_prof_nvml_sample(lp_gpu_sample *s)
{
    s->util_pct = -1;
    s->mem_used_bytes = -1;
    s->power_w = -1;
    s->sm_clock_mhz = -1;
    if (!lp_prof_nvml_available(NULL))
        return 0;
    nvml_util u;
    nvml_mem m;
    unsigned mw, mhz;
    if (N.util(N.dev, &u) == 0)
        s->util_pct = u.gpu;
    if (N.mem(N.dev, &m) == 0)
        s->mem_used_bytes = (int64_t)m.used;
    if (N.power(N.dev, &mw) == 0)
        s->power_w = mw / 1000.0;
    if (N.clock(N.dev, NVML_CLOCK_SM, &mhz) == 0)
        s->sm_clock_mhz = (int32_t)mhz;
    return 1;
}
