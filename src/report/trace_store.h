/* Small stores the trace model is built from (report layer only): interned strings (names,
 * shapes, threads and call paths each kept once) and an id map with a size bound that
 * forgets its oldest keys, so memory follows the distinct things a trace has, not its size. */
#ifndef LP_REPORT_TRACE_STORE_H
#define LP_REPORT_TRACE_STORE_H

#include <stddef.h>
#include <stdint.h>

/* Interned byte strings -> dense ids 0, 1, ... (copies kept until free). */
typedef struct lp_strtab {
    char **str;  /* (n) NUL-terminated copies */
    size_t *len; /* (n) byte lengths (strings may hold NUL for binary keys) */
    size_t n, cap;
    uint32_t *slot; /* open addressing: id + 1, 0 = empty */
    uint64_t *hash; /* (cap of str) */
    size_t nslot;
} lp_strtab;

/* The id of s[0..n) (added when new); -1 when out of memory. */
int64_t lp_strtab_intern(lp_strtab *t, const char *s, size_t n);
/* The id of s[0..n) when interned, else -1 (nothing added). */
int64_t lp_strtab_find(const lp_strtab *t, const char *s, size_t n);
void lp_strtab_free(lp_strtab *t);

/* int64 key -> payload (launch facts), bounded: past `limit` keys the oldest inserted
 * half is forgotten (keys of a trace grow: correlation ids, External ids). */
typedef struct lp_idmap_val {
    uint32_t path; /* interned call path (uint32 row ids, root first) */
    int32_t step;  /* step index of the launch, -1 outside steps */
    int64_t launch_ts;
    uint32_t launch_op; /* innermost host row id + 1 (0: none) */
    /* The deepest parent/child pair of same-named ops on the path, which torch folds into
     * one node when the child is the only one: the parent's node (thread, depth, serial)
     * and the child's index in the path; a_depth -1 when the path has none. */
    uint64_t a_serial;
    uint32_t a_thread, b_pos;
    int32_t a_depth;
    int64_t msg_bytes; /* the collective's message (record_param_comms around the launch); -1 */
} lp_idmap_val;

typedef struct lp_idmap {
    int64_t *keys; /* open addressing; INT64_MIN = empty */
    lp_idmap_val *vals;
    uint64_t *age; /* insertion counter per slot */
    size_t cap, n, limit;
    uint64_t clock;
} lp_idmap;

int lp_idmap_init(lp_idmap *m, size_t limit);
/* 0 when out of memory. */
int lp_idmap_put(lp_idmap *m, int64_t key, const lp_idmap_val *v);
const lp_idmap_val *lp_idmap_get(const lp_idmap *m, int64_t key);
void lp_idmap_free(lp_idmap *m);

#endif
