/* Helpers shared by the io layer's files; not part of the public API. */
#ifndef LP_IO_INTERNAL_H
#define LP_IO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "loupe/io.h"

/* Strict UTF-8 check (what Rust's str::from_utf8 accepts). */
bool lp_io_utf8_valid(const uint8_t *s, size_t n);

/* An exact non-negative integer JSON number up to 2^53 (cJSON numbers are doubles). */
bool lp_io_json_u64(const cJSON *v, uint64_t *out);

/* "dir/name" in a fresh string (free()); NULL when out of memory. */
char *lp_io_path_join(const char *dir, const char *name);

#endif
