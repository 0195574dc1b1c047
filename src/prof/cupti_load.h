/* CUPTI's entry points, loaded at run time (cupti_load.c): lp_prof links no libcupti, so
 * every loupe binary starts on a machine without it, and only a profile that asks for GPU
 * activity needs it. The few calls the collector makes, with CUPTI's own prototypes'
 * types (cupti.h is used for its types only). */
#ifndef LP_PROF_CUPTI_LOAD_H
#define LP_PROF_CUPTI_LOAD_H

#include <cupti.h>

#include "loupe/base.h"

typedef struct lp_cupti_api {
    CUptiResult (*GetResultString)(CUptiResult, const char **);
    CUptiResult (*GetCallbackName)(CUpti_CallbackDomain, uint32_t, const char **);
    CUptiResult (*ActivityGetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*ActivityGetNumDroppedRecords)(CUcontext, uint32_t, size_t *);
    CUptiResult (*ActivityRegisterTimestampCallback)(CUpti_TimestampCallbackFunc);
    CUptiResult (*SetThreadIdType)(CUpti_ActivityThreadIdType);
    CUptiResult (*ActivityRegisterCallbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*GetTimestamp)(uint64_t *);
    CUptiResult (*ActivityEnable)(CUpti_ActivityKind);
    CUptiResult (*ActivityDisable)(CUpti_ActivityKind);
    CUptiResult (*ActivityFlushAll)(uint32_t);
} lp_cupti_api;

/* The loaded table (loads on first call; later calls return it). NULL with lp_err set,
 * naming every place tried, when CUPTI cannot be loaded. */
const lp_cupti_api *lp_prof__cupti_api(void);

#endif
