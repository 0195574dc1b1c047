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

/* For code that builds a tree with cJSON_Add* / cJSON_Create* (which drop an item whose
 * allocation failed without a word): lp_json_oom_begin installs the counted allocator
 * (lp_malloc) as cJSON's and clears this thread's flag; lp_json_oom_end says whether a
 * cJSON allocation failed since, so the tree is checked once, before it is used. */
void lp_json_oom_begin(void);
bool lp_json_oom_end(void);
/* cJSON_AddItemToArray / cJSON_AddItemToObject / cJSON_ReplaceItemInObject that free the
 * item when it could not be attached (a NULL parent, the key's copy out of memory). */
void lp_json_arr_add(cJSON *arr, cJSON *item);
void lp_json_obj_add(cJSON *obj, const char *key, cJSON *item);
void lp_json_obj_replace(cJSON *obj, const char *key, cJSON *item);

/* "dir/name" in a fresh string (free()); NULL when out of memory. */
char *lp_io_path_join(const char *dir, const char *name);

/* model.safetensors.index.json as parsed (safetensors_set.c): the distinct shards of its
 * weight_map in first-seen order (plain, non-empty file names: no '/', not "." or "..") and
 * each entry's tensor name with the index of its shard; all strings owned. */
typedef struct lp_st_index {
    char **shards;
    size_t n_shards; /* >= 1 after a successful parse */
    char **tensors;
    size_t *shard_of; /* < n_shards */
    size_t n_tensors;
} lp_st_index;

/* Parses len bytes of index JSON (need not be NUL-terminated); path names it in messages.
 * Errors: FORMAT (bad JSON, no weight_map object, a value that is not a plain file name, an
 * empty map), NO_MEMORY; *ix is zeroed on error. */
lp_status lp_st_index_parse(const char *text, size_t len, const char *path, lp_st_index *ix);
void lp_st_index_free(lp_st_index *ix);

/* A file parsed by lp_st_parse_buffer takes ownership of its buffer (a malloc'd block that
 * lp_st_close frees): how a GGUF file's dequantized tensors become an lp_st_set. disk_len is
 * the size of the file the buffer was made from, which lp_st_file_size then reports. */
void lp_st_file_own_buffer(lp_st_file *f, uint64_t disk_len);

/* An lp_st_set of the one file f, which it takes over (closed with the set, also on error);
 * label names the set in messages. */
lp_status lp_st_set_from_file(lp_st_file *f, const char *label, lp_st_set **out);

/* The tokenizer.ggml.pre value whose split regex (as tokenizer.json spells it) is regex:
 * the first such name of the table gguf_tokenizer.c reads ("qwen2", "llama3", ...); NULL
 * when none. */
const char *lp_gguf__pre_of_regex(const char *regex);

#endif
