/* loupe io: model files. safetensors read (mmap, validated like the reference
 * implementation, tensor views point into the mapping) and write (atomic), sharded
 * checkpoints, GGUF files (llama.cpp's format: reader, and the model and tokenizer they
 * hold seen as config.json + f32 weights + tokenizer.json), Hugging Face config.json, the map from checkpoint tensor names to the
 * engine's parameters, the memory estimate `loupe inspect` prints, and JSON files read and
 * written atomically for every layer above.
 *
 *   lp_st_set *w; lp_model_config cfg; lp_param_map map;
 *   if (lp_st_set_open_dir("models/minilm", &w) != LP_OK ||
 *       lp_hf_config_load("models/minilm/config.json", &cfg) != LP_OK)
 *       fprintf(stderr, "%s\n", lp_err_msg());
 *   else if (lp_param_map_build(&cfg, w, LP_MODEL_TASK_AUTO, &map) == LP_OK) {
 *       const lp_param_binding *q = lp_param_map_find(&map, LP_PARAM_ROLE_Q_W, 0);
 *       // q->tensor->data: [hidden, hidden] row-major, dtype q->tensor->dtype
 *       lp_param_map_free(&map);
 *   }
 *   lp_model_config_free(&cfg); lp_st_set_close(w);
 *
 * Depends on base, cJSON and kernels (GGUF block dequantization) only; dtypes here are
 * file-format dtypes.
 * Every error names the file, the tensor or key, and the problem (lp_err_msg()).
 */
#ifndef LOUPE_IO_H
#define LOUPE_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loupe/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- JSON files */

struct cJSON;
/* Writes j pretty-printed to path atomically and frees j (NULL j: NO_MEMORY, as from a
 * failed build). Errors: NO_MEMORY, IO naming path. */
LP_WARN_UNUSED lp_status lp_json_write_file(const char *path, struct cJSON *j);
/* Reads and parses path; *out (owned by the caller, cJSON_Delete) on success, NULL on
 * error. Errors: lp_file_read_all's, FORMAT "<path>: not valid JSON". */
LP_WARN_UNUSED lp_status lp_json_read_file(const char *path, struct cJSON **out);
/* cJSON_ParseWithLength (cJSON_ParseWithLengthOpts when end is not NULL: *end gets the
 * parse's stop) with cJSON's allocations counted by the allocation-failure torture mode
 * (lp_malloc); NULL with *oom true when an allocation failed, *oom false for malformed
 * text, so the caller reports NO_MEMORY and not "not valid JSON". */
struct cJSON *lp_json_parse(const char *text, size_t len, const char **end, bool *oom);
/* Readers' getters for optional fields: o[k] as a number (NaN when o is NULL or o[k] is
 * absent or not a number); o[k] copied into dst as a string ("?" likewise). */
double lp_json_num(const struct cJSON *o, const char *k);
void lp_json_str(char *dst, size_t cap, const struct cJSON *o, const char *k);

/* ---------------------------------------------------------------- safetensors */

/* Element types a safetensors file may hold that loupe reads. Names are the format's
 * own dtype strings ("F32", "BF16", ...). Sub-byte and 8-bit float types are
 * recognised and refused with LP_STATUS_UNSUPPORTED. */
typedef enum lp_st_dtype {
    LP_ST_DTYPE_F32 = 0,
    LP_ST_DTYPE_F16,
    LP_ST_DTYPE_BF16,
    LP_ST_DTYPE_F64,
    LP_ST_DTYPE_I8,
    LP_ST_DTYPE_U8,
    LP_ST_DTYPE_I16,
    LP_ST_DTYPE_U16,
    LP_ST_DTYPE_I32,
    LP_ST_DTYPE_U32,
    LP_ST_DTYPE_I64,
    LP_ST_DTYPE_U64,
    LP_ST_DTYPE_BOOL,
    LP_ST_DTYPE__COUNT
} lp_st_dtype;

/* "F32", "BF16", ...; "?" for an invalid value. */
const char *lp_st_dtype_name(lp_st_dtype dt);
/* Bytes per element (1, 2, 4 or 8); 0 for an invalid value. */
size_t lp_st_dtype_size(lp_st_dtype dt);
/* Parses a dtype string. LP_STATUS_UNSUPPORTED for a valid safetensors dtype loupe does
 * not read (F8_E4M3, F4, C64, ...), LP_STATUS_FORMAT for an unknown string. Sets the
 * message (without a file name). */
LP_WARN_UNUSED lp_status lp_st_dtype_parse(const char *s, lp_st_dtype *out);

#define LP_ST_MAX_DIMS 8                      /* more dims is refused (UNSUPPORTED) */
#define LP_ST_MAX_HEADER_SIZE 100000000ull    /* the reference implementation's limit */

/* One tensor of a file. All pointers are owned by the file and valid until it is
 * closed; data points into the mapped (or caller's) buffer, little-endian, row-major. */
typedef struct lp_st_tensor {
    const char *name;
    lp_st_dtype dtype;
    int32_t ndim;                    /* 0 = scalar */
    int64_t shape[LP_ST_MAX_DIMS];
    uint64_t numel;                  /* product of shape (1 for a scalar) */
    uint64_t nbytes;                 /* numel * dtype size */
    uint64_t offset;                 /* start within the data section */
    const void *data;                /* view, never a copy; 8-byte aligned if the header is */
    const char *file;                /* path (or label) of the file holding it */
    uint64_t file_pos;               /* where data starts in that file (8 + header + offset) */
} lp_st_tensor;

typedef struct lp_st_file lp_st_file;

/* Maps path read-only and validates header and offsets (see docs in safetensors_read.c):
 * file >= 8 bytes, header size <= 100 MB and within the file, UTF-8 JSON object starting
 * with '{', `__metadata__` a string->string map, known dtypes, shapes whose byte size
 * (overflow-checked) equals END-BEGIN, tensors contiguous, non-overlapping and covering
 * the data section exactly, no duplicate names. On success *out is owned by the caller
 * (lp_st_close). Errors: IO, FORMAT, UNSUPPORTED, NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_st_open(const char *path, lp_st_file **out);

/* Same validation over a caller's buffer (no copy: tensor data points into buf, which
 * must outlive the file). label names the buffer in error messages. The fuzz target's
 * entry point. */
LP_WARN_UNUSED lp_status lp_st_parse_buffer(const void *buf, size_t len, const char *label,
                                            lp_st_file **out);

/* Unmaps and frees; NULL is fine. */
void lp_st_close(lp_st_file *f);

size_t lp_st_count(const lp_st_file *f);
/* Tensors in data-offset order; i < lp_st_count. */
const lp_st_tensor *lp_st_at(const lp_st_file *f, size_t i);
/* By exact name; NULL if absent. O(log n). */
const lp_st_tensor *lp_st_find(const lp_st_file *f, const char *name);
/* `__metadata__` entries; NULL / 0 when absent. */
size_t lp_st_metadata_count(const lp_st_file *f);
void lp_st_metadata_at(const lp_st_file *f, size_t i, const char **key, const char **value);
const char *lp_st_metadata_get(const lp_st_file *f, const char *key);
const char *lp_st_path(const lp_st_file *f);
/* Whole file size in bytes (8 + header + data). */
uint64_t lp_st_file_size(const lp_st_file *f);

/* One tensor to write. shape has ndim entries; data holds numel*dtype size bytes
 * (may be NULL only when that is 0). Nothing is kept after the call. */
typedef struct lp_st_write_tensor {
    const char *name;
    lp_st_dtype dtype;
    int32_t ndim;
    const int64_t *shape;
    const void *data;
} lp_st_write_tensor;

/* Writes a safetensors file atomically (temp + rename: nothing appears at path on
 * failure), laid out as the reference writer does: tensors sorted by descending dtype
 * size then name, header padded with spaces to a multiple of 8. meta is n_meta
 * key/value pairs (meta[2i], meta[2i+1]) for `__metadata__`, or NULL. Errors:
 * INVALID_ARG (duplicate/empty name, bad dtype/shape), IO. */
LP_WARN_UNUSED lp_status lp_st_write(const char *path, const lp_st_write_tensor *tensors, size_t n,
                                     const char *const *meta, size_t n_meta);

/* A model's weights: one file or a sharded checkpoint, seen as one set of tensors. */
typedef struct lp_st_set lp_st_set;

/* Opens dir/model.safetensors.index.json (sharded: every shard named in weight_map is
 * opened; a tensor the index places in a shard must be there; a name in two shards is
 * an error) or else dir/model.safetensors. NOT_FOUND if neither exists. */
LP_WARN_UNUSED lp_status lp_st_set_open_dir(const char *dir, lp_st_set **out);
/* The weights of a model directory, or none: as lp_st_set_open_dir, but a directory with no
 * weights file at all is LP_OK with *out = NULL (a config-only directory, which the engine
 * initializes), and one holding only pytorch_model.bin (pickle) weights is UNSUPPORTED with
 * a message saying how to convert them. */
LP_WARN_UNUSED lp_status lp_st_set_open_weights(const char *dir, lp_st_set **out);
/* Opens one index file (.index.json) or one .safetensors file. */
LP_WARN_UNUSED lp_status lp_st_set_open(const char *path, lp_st_set **out);
void lp_st_set_close(lp_st_set *s);
size_t lp_st_set_count(const lp_st_set *s);
const lp_st_tensor *lp_st_set_at(const lp_st_set *s, size_t i);
const lp_st_tensor *lp_st_set_find(const lp_st_set *s, const char *name);
size_t lp_st_set_file_count(const lp_st_set *s);
const lp_st_file *lp_st_set_file(const lp_st_set *s, size_t i);
/* Sum of the files' sizes on disk. */
uint64_t lp_st_set_disk_bytes(const lp_st_set *s);

/* ---------------------------------------------------------------- GGUF */

/* llama.cpp's model file (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md),
 * versions 2 and 3: typed metadata, tensor infos, tensor data at general.alignment.
 *
 *   lp_gguf_file *g;
 *   if (lp_gguf_open("model.gguf", &g) == LP_OK) {
 *       const lp_gguf_value *a = lp_gguf_get(g, "general.architecture"); // STRING: a->str
 *       const lp_gguf_tensor *t = lp_gguf_find_tensor(g, "token_embd.weight");
 *       lp_gguf_close(g);
 *   }
 *
 * Opening validates everything a later read relies on: every count, length and offset is
 * bounds-checked (overflow-checked arithmetic) against the file, keys and tensor names
 * are unique, tensor types are ones ggml defines, each tensor's data lies inside the data
 * section at an aligned offset. Errors name the file and the problem in one line. */

typedef enum lp_gguf_type {
    LP_GGUF_TYPE_UINT8 = 0, LP_GGUF_TYPE_INT8, LP_GGUF_TYPE_UINT16, LP_GGUF_TYPE_INT16,
    LP_GGUF_TYPE_UINT32, LP_GGUF_TYPE_INT32, LP_GGUF_TYPE_FLOAT32, LP_GGUF_TYPE_BOOL,
    LP_GGUF_TYPE_STRING, LP_GGUF_TYPE_ARRAY, LP_GGUF_TYPE_UINT64, LP_GGUF_TYPE_INT64,
    LP_GGUF_TYPE_FLOAT64, LP_GGUF_TYPE__COUNT
} lp_gguf_type;
/* "uint8", ..., "array"; "?" for an invalid value. */
const char *lp_gguf_type_name(lp_gguf_type t);

/* A string inside the file: len bytes, not NUL-terminated (GGUF strings are not). */
typedef struct lp_gguf_str {
    const char *s;
    uint64_t len;
} lp_gguf_str;

/* A metadata value. Integers of every width are widened into u (unsigned types) or i
 * (signed), floats into f, bool into b. An array has elem_type and n elements: numbers
 * and bools stay in the file (raw, little-endian, unaligned: read them with
 * lp_gguf_array_i64 / _f64), strings are in strs, nested arrays in items. All pointers
 * are owned by the file. */
typedef struct lp_gguf_value {
    lp_gguf_type type;
    uint64_t u;
    int64_t i;
    double f;
    bool b;
    lp_gguf_str str;
    lp_gguf_type elem_type;
    uint64_t n;
    const uint8_t *raw;
    lp_gguf_str *strs;
    struct lp_gguf_value *items;
} lp_gguf_value;

typedef struct lp_gguf_kv {
    const char *key; /* NUL-terminated copy, owned by the file */
    lp_gguf_value v;
} lp_gguf_kv;

#define LP_GGUF_MAX_DIMS 4 /* ggml's GGML_MAX_DIMS */

/* A tensor info. ne[0] is the fastest-varying dimension (ggml's order: a PyTorch [out, in]
 * weight is ne = {in, out}). type is a ggml type number (lp_ggml_type in kernels.h). */
typedef struct lp_gguf_tensor {
    const char *name;  /* owned by the file */
    uint32_t ndim;
    int64_t ne[LP_GGUF_MAX_DIMS]; /* 1 beyond ndim */
    uint32_t type;
    uint64_t numel, nbytes;
    uint64_t offset;   /* within the data section */
    const void *data;  /* view into the mapping */
} lp_gguf_tensor;

typedef struct lp_gguf_file lp_gguf_file;

/* Maps path read-only and validates it (above). *out owned by the caller (lp_gguf_close).
 * Errors: IO, NOT_FOUND, FORMAT (truncated, bad magic, data past the end, unknown type,
 * overflowing counts, duplicates, wrong general.alignment type), UNSUPPORTED (version 1),
 * NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_gguf_open(const char *path, lp_gguf_file **out);
/* The same over a caller's buffer (not copied: it must outlive the file); label names it
 * in messages. The fuzz target's entry point. */
LP_WARN_UNUSED lp_status lp_gguf_parse_buffer(const void *buf, size_t len, const char *label,
                                              lp_gguf_file **out);
void lp_gguf_close(lp_gguf_file *g);
const char *lp_gguf_path(const lp_gguf_file *g);
uint32_t lp_gguf_version(const lp_gguf_file *g);
uint64_t lp_gguf_file_size(const lp_gguf_file *g);
size_t lp_gguf_kv_count(const lp_gguf_file *g);
const lp_gguf_kv *lp_gguf_kv_at(const lp_gguf_file *g, size_t i); /* file order */
/* By exact key; NULL if absent. */
const lp_gguf_value *lp_gguf_get(const lp_gguf_file *g, const char *key);
size_t lp_gguf_tensor_count(const lp_gguf_file *g);
const lp_gguf_tensor *lp_gguf_tensor_at(const lp_gguf_file *g, size_t i); /* file order */
const lp_gguf_tensor *lp_gguf_find_tensor(const lp_gguf_file *g, const char *name);
/* Element idx of a numeric or bool array as an integer / a double; false when v is not
 * such an array, idx >= n, or (i64) the element is a float or a uint64 above INT64_MAX. */
bool lp_gguf_array_i64(const lp_gguf_value *v, uint64_t idx, int64_t *out);
bool lp_gguf_array_f64(const lp_gguf_value *v, uint64_t idx, double *out);

/* ---- writing GGUF (gguf_write.c) ----
 *   lp_gguf_writer *w;
 *   lp_gguf_writer_init(&w, "out.gguf", 32);
 *   lp_gguf_writer_add_kv(w, kv->key, &kv->v);            // e.g. copied from an open file
 *   lp_gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", 2, ne, LP_GGML_TYPE_Q8_0, blocks, nbytes);
 *   lp_gguf_writer_finish(w);                             // "out.gguf.tmp", then renamed
 *   lp_gguf_writer_free(w);
 * Key-values keep the order added (a caller with an alignment other than 32, the
 * readers' default, adds general.alignment); tensor data are copied (owned by the writer), each at an offset
 * that is a multiple of alignment. Errors name the path: INVALID_ARG (alignment not a
 * positive multiple of 8, a value of no GGUF type, bytes that do not hold a tensor's shape
 * as its type), NO_MEMORY, IO (create, write or rename failed; no file is left behind). */
typedef struct lp_gguf_writer lp_gguf_writer;
LP_WARN_UNUSED lp_status lp_gguf_writer_init(lp_gguf_writer **out, const char *path, uint32_t alignment);
LP_WARN_UNUSED lp_status lp_gguf_writer_add_kv(lp_gguf_writer *w, const char *key, const lp_gguf_value *v);
LP_WARN_UNUSED lp_status lp_gguf_writer_add_u32(lp_gguf_writer *w, const char *key, uint32_t x);
LP_WARN_UNUSED lp_status lp_gguf_writer_add_str(lp_gguf_writer *w, const char *key, const char *s);
/* ne[0] is the innermost dimension (ggml's order); type a ggml type number. */
LP_WARN_UNUSED lp_status lp_gguf_writer_add_tensor(lp_gguf_writer *w, const char *name, uint32_t ndim,
                                                   const int64_t *ne, uint32_t type, const void *data,
                                                   uint64_t nbytes);
LP_WARN_UNUSED lp_status lp_gguf_writer_finish(lp_gguf_writer *w);
void lp_gguf_writer_free(lp_gguf_writer *w);

/* Adds the tokenizer of a Hugging Face directory (dir/tokenizer.json, a byte-level BPE;
 * tokenizer_config.json's chat_template and add_bos_token when present) as llama.cpp's
 * converter writes it: tokenizer.ggml.model "gpt2", .pre (named from the pre-tokenizer's
 * split regex: "qwen2", "llama-bpe", ...; "smollm" for individual digits; else "gpt-2"),
 * .tokens and .token_type padded to vocab_size ("[PAD<id>]", UNUSED), added special tokens
 * CONTROL and other added tokens USER_DEFINED, .merges as "a b", and the bos / eos /
 * padding ids that are >= 0. Errors name the file: IO / NOT_FOUND, FORMAT (not JSON, an id
 * outside vocab_size, a malformed merge), UNSUPPORTED (not a BPE model), NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_gguf_writer_add_hf_tokenizer(lp_gguf_writer *w, const char *dir, int64_t vocab_size,
                                                         int64_t bos, int64_t eos, int64_t pad);
/* The GGUF (llama.cpp) name of a llama-family Hugging Face tensor name
 * ("model.layers.3.self_attn.q_proj.bias" -> "blk.3.attn_q.bias"); false for a name that
 * has none. The inverse of the names lp_gguf_model_open gives GGUF tensors. */
bool lp_gguf_name_from_hf(const char *hf, char *out, size_t n);
/* llama.cpp's permute() of a q/k projection's rows for its rotary layout: Hugging Face keeps
 * head h's row s*D/2+j ([heads, 2, D/2]), llama.cpp's converter stores it at row 2j+s
 * ([heads, D/2, 2]). to_gguf: that permutation; else its inverse (what a reader undoes). w
 * holds rows x cols floats in place. Rows that do not split into heads of even size: `bad`
 * (LP_STATUS_FORMAT for a file read, INVALID_ARG for a model written) naming path and name. */
LP_WARN_UNUSED lp_status lp_gguf_permute_qk(float *w, int64_t rows, int64_t cols, int64_t heads, bool to_gguf,
                                            lp_status bad, const char *path, const char *name);

/* Writes to out a copy of the GGUF model at src with every 2-d tensor whose rows are
 * whole blocks re-encoded as type (LP_GGML_TYPE_Q8_0 or Q4_0, or every tensor as F32, through the f32 values:
 * exactly what the `gguf` package's quantize() makes of them); 1-d tensors (norms) as F32;
 * the metadata (tokenizer, chat template, hyperparameters) copied, general.file_type set
 * to llama.cpp's number for the type. What `loupe quantize` runs. Errors: lp_gguf_open's,
 * UNSUPPORTED (type; a source tensor loupe cannot dequantize), the writer's. */
LP_WARN_UNUSED lp_status lp_gguf_quantize_file(const char *src, const char *out, uint32_t type);

/* Typed lookups for readers of the metadata: NOT_FOUND when absent (message names the file
 * and key), FORMAT when the value has another type ("<file>: metadata 'k' is float32,
 * expected an integer"). _int accepts every integer type (uint64 above INT64_MAX: RANGE);
 * _float accepts float32/float64 and integers; _str copies into a fresh string (free()). */
LP_WARN_UNUSED lp_status lp_gguf_get_int(const lp_gguf_file *g, const char *key, int64_t *out);
LP_WARN_UNUSED lp_status lp_gguf_get_float(const lp_gguf_file *g, const char *key, double *out);
LP_WARN_UNUSED lp_status lp_gguf_get_bool(const lp_gguf_file *g, const char *key, bool *out);
LP_WARN_UNUSED lp_status lp_gguf_get_str(const lp_gguf_file *g, const char *key, char **out);

/* The model a GGUF file holds, as the engine reads models (gguf_model.c):
 * config.json text built from the metadata (general.architecture llama/qwen2/mistral and
 * its hyperparameters; lp_hf_config_parse accepts it), and every tensor dequantized to f32
 * under its Hugging Face name (token_embd -> model.embed_tokens.weight, blk.N.attn_q ->
 * model.layers.N.self_attn.q_proj.weight, ...), with llama.cpp's rotary row permutation of
 * attn_q/attn_k undone for llama-arch files, as transformers' GGUF loader does.
 * *config_json (free()) and *weights (lp_st_set_close) are owned by the caller; either
 * pointer may be NULL to skip that part. Errors: lp_gguf_open's; UNSUPPORTED (another
 * architecture, a tensor type loupe cannot dequantize), NOT_FOUND / FORMAT for missing or
 * mistyped keys, NO_MEMORY. */
LP_WARN_UNUSED lp_status lp_gguf_model_open(const char *path, char **config_json, lp_st_set **weights);
struct lp_qweight; /* kernels.h */
/* Weights kept in their stored format (lp_model_options.weights = STORED): the Linear
 * weight with Hugging Face name hf (model.layers.N.mlp.up_proj.weight, ...) of an open GGUF
 * model file as an lp_qweight of its own block type (a copy, category QUANTIZED_WEIGHT,
 * tagged label, which must outlive out), rows in Hugging Face order: llama.cpp's q/k row
 * permutation is undone on whole rows, which leaves every block as stored. Errors:
 * NOT_FOUND (no such 2-d tensor), UNSUPPORTED (a type lp_ggml_type_runnable refuses: the
 * caller keeps f32), FORMAT, NO_MEMORY; *out is zeroed on error. */
LP_WARN_UNUSED lp_status lp_gguf_model_qweight(const lp_gguf_file *g, const char *hf, struct lp_qweight *out,
                                               const char *label);
/* The ggml type number of the 2-d tensor behind hf, or -1 when there is none. */
int32_t lp_gguf_model_weight_type(const lp_gguf_file *g, const char *hf);
/* The config.json text alone, from an open file (what lp_gguf_model_open builds). */
LP_WARN_UNUSED lp_status lp_gguf_config_json(const lp_gguf_file *g, char **out);
/* true when path names a GGUF file (ends in ".gguf"). */
bool lp_path_is_gguf(const char *path);
/* The file's tokenizer as tokenizer.json text (free()) that lp_tokenizer_load_json accepts,
 * built as transformers' GGUF loader builds it: tokenizer.ggml.model "gpt2" (byte-level BPE;
 * others UNSUPPORTED), tokens re-spelled in the byte alphabet where llama.cpp stored raw
 * text, merges, control tokens (token_type 3) special, user-defined ones (4) added whole,
 * the split regex tokenizer.ggml.pre names (llama-bpe, qwen2, gpt-4o, ...; GPT-2's
 * otherwise, as for smollm), BOS/EOS added per tokenizer.ggml.add_bos/eos_token.
 * Errors: lp_gguf_open's; NOT_FOUND / FORMAT for missing or mistyped tokenizer keys. */
LP_WARN_UNUSED lp_status lp_gguf_tokenizer_json(const char *path, char **out);
/* The same from an open file. */
LP_WARN_UNUSED lp_status lp_gguf_tokenizer_json_of(const lp_gguf_file *g, char **out);
/* tokenizer.chat_template of the file as a fresh string (free()); NOT_FOUND when absent. */
LP_WARN_UNUSED lp_status lp_gguf_chat_template(const char *path, char **out);

/* ---------------------------------------------------------------- HF config */

typedef enum lp_model_family { LP_MODEL_FAMILY_BERT = 0, LP_MODEL_FAMILY_LLAMA } lp_model_family;

/* architectures[0] of config.json (or model_type when that is absent). */
typedef enum lp_hf_arch {
    LP_HF_ARCH_BERT_MODEL = 0,
    LP_HF_ARCH_BERT_SEQ_CLS,
    LP_HF_ARCH_BERT_MASKED_LM,       /* base checkpoint (bert-base-uncased); MLM head ignored */
    LP_HF_ARCH_DISTILBERT_MODEL,
    LP_HF_ARCH_DISTILBERT_SEQ_CLS,
    LP_HF_ARCH_DISTILBERT_MASKED_LM, /* distilbert-base-uncased */
    LP_HF_ARCH_LLAMA_CAUSAL_LM,
    LP_HF_ARCH_LLAMA_SEQ_CLS,
    LP_HF_ARCH_QWEN2_CAUSAL_LM,
    LP_HF_ARCH_QWEN2_SEQ_CLS,
    LP_HF_ARCH_MISTRAL_CAUSAL_LM,
    LP_HF_ARCH_MISTRAL_SEQ_CLS,
    LP_HF_ARCH__COUNT
} lp_hf_arch;

/* The class name ("BertModel", ...). */
const char *lp_hf_arch_name(lp_hf_arch a);

typedef enum lp_activation {
    LP_ACTIVATION_GELU = 0, /* exact erf GELU ("gelu") */
    LP_ACTIVATION_GELU_TANH, /* "gelu_new", "gelu_pytorch_tanh", "gelu_fast" */
    LP_ACTIVATION_SILU,      /* "silu", "swish" */
    LP_ACTIVATION_RELU
} lp_activation;
const char *lp_activation_name(lp_activation a);

/* What a checkpoint's config says about the model. Integers are -1 where a key does not
 * apply; strings and label arrays are owned (lp_model_config_free). */
typedef struct lp_model_config {
    lp_model_family family;
    lp_hf_arch arch;
    bool distilbert;            /* DistilBERT names and layout (no token types, no pooler) */
    char model_type[32];
    int64_t vocab_size;
    int64_t hidden_size;
    int64_t num_layers;
    int64_t num_heads;
    int64_t num_kv_heads;       /* = num_heads for bert */
    int64_t head_dim;           /* hidden_size / num_heads unless the config says */
    int64_t intermediate_size;
    int64_t max_position_embeddings;
    int64_t type_vocab_size;    /* bert only; 0 for DistilBERT and llama */
    double norm_eps;            /* LayerNorm eps (bert) or RMSNorm eps (llama) */
    double rope_theta;          /* llama only; 0 for bert */
    /* rope_scaling (or rope_parameters): rope_type "" / "default", "linear", "llama3", "yarn";
     * other types are refused at parse time. Absent numbers are 0. */
    char rope_type[16];
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor, rope_beta_fast, rope_beta_slow,
        rope_mscale, rope_mscale_all_dim, rope_attention_factor;
    int64_t rope_original_max_pos;
    bool rope_no_truncate;      /* yarn "truncate": false */
    int64_t sliding_window;     /* Mistral: keys within this many positions back; 0 = none */
    lp_activation activation;
    char activation_name[24];   /* as written in the config */
    bool tie_word_embeddings;   /* llama: lm_head shares embed_tokens */
    bool attention_qkv_bias;    /* bert: true; qwen2: true; llama: attention_bias */
    bool attention_out_bias;    /* bert: true; llama: attention_bias; qwen2: false */
    bool mlp_bias;
    bool sinusoidal_pos;        /* DistilBERT sinusoidal_pos_embds */
    int64_t pad_token_id;       /* -1 when absent */
    int64_t bos_token_id, eos_token_id; /* -1 when absent (first of a list) */
    double hidden_dropout;      /* bert hidden_dropout_prob / distilbert dropout */
    double attention_dropout;
    double classifier_dropout;  /* bert: classifier_dropout or hidden_dropout; distilbert: seq_classif_dropout */
    int64_t num_labels;
    char **id2label;            /* num_labels strings, index = class id */
    char torch_dtype[16];       /* "" when absent */
} lp_model_config;

/* Reads and validates config.json. Unknown architecture -> UNSUPPORTED naming the
 * supported ones; a missing size key -> FORMAT naming it; inconsistent values (hidden
 * not divisible by heads, id2label/label2id disagree) -> FORMAT. */
LP_WARN_UNUSED lp_status lp_hf_config_load(const char *path, lp_model_config *out);
/* Same from memory (json need not be NUL-terminated); label names it in errors. */
LP_WARN_UNUSED lp_status lp_hf_config_parse(const char *json, size_t len, const char *label,
                                            lp_model_config *out);
void lp_model_config_free(lp_model_config *c);

/* ---------------------------------------------------------------- parameter map */

/* The engine's parameters. "FFN_IN" is BERT's intermediate / DistilBERT's lin1 / llama's
 * up_proj; FFN_GATE is llama's gate_proj; FFN_OUT is output.dense / lin2 / down_proj.
 * ATTN_NORM is the norm after attention (BERT) or before it (llama input_layernorm);
 * FFN_NORM is output.LayerNorm / output_layer_norm / post_attention_layernorm. */
typedef enum lp_param_role {
    LP_PARAM_ROLE_WORD_EMB = 0,
    LP_PARAM_ROLE_POS_EMB,
    LP_PARAM_ROLE_TYPE_EMB,
    LP_PARAM_ROLE_EMB_NORM_W,
    LP_PARAM_ROLE_EMB_NORM_B,
    LP_PARAM_ROLE_Q_W, LP_PARAM_ROLE_Q_B,
    LP_PARAM_ROLE_K_W, LP_PARAM_ROLE_K_B,
    LP_PARAM_ROLE_V_W, LP_PARAM_ROLE_V_B,
    LP_PARAM_ROLE_O_W, LP_PARAM_ROLE_O_B,
    LP_PARAM_ROLE_ATTN_NORM_W, LP_PARAM_ROLE_ATTN_NORM_B,
    LP_PARAM_ROLE_FFN_GATE_W, LP_PARAM_ROLE_FFN_GATE_B,
    LP_PARAM_ROLE_FFN_IN_W, LP_PARAM_ROLE_FFN_IN_B,
    LP_PARAM_ROLE_FFN_OUT_W, LP_PARAM_ROLE_FFN_OUT_B,
    LP_PARAM_ROLE_FFN_NORM_W, LP_PARAM_ROLE_FFN_NORM_B,
    LP_PARAM_ROLE_FINAL_NORM_W,
    LP_PARAM_ROLE_POOLER_W, LP_PARAM_ROLE_POOLER_B,
    LP_PARAM_ROLE_PRE_CLS_W, LP_PARAM_ROLE_PRE_CLS_B,
    LP_PARAM_ROLE_CLS_W, LP_PARAM_ROLE_CLS_B, /* classifier / score (score has no bias) */
    LP_PARAM_ROLE_LM_HEAD_W,
    LP_PARAM_ROLE__COUNT
} lp_param_role;
const char *lp_param_role_name(lp_param_role r);

/* Which model to build from a checkpoint: AUTO follows the config's architecture. */
typedef enum lp_model_task {
    LP_MODEL_TASK_AUTO = 0,
    LP_MODEL_TASK_BASE,     /* encoder / decoder stack only (plus BERT's pooler) */
    LP_MODEL_TASK_SEQ_CLS,  /* + classification head */
    LP_MODEL_TASK_CAUSAL_LM /* llama family: + lm_head (or tied embeddings) */
} lp_model_task;

/* Where the group of a parameter falls in the counts `loupe inspect` prints. */
typedef enum lp_param_group {
    LP_PARAM_GROUP_EMBEDDINGS = 0,
    LP_PARAM_GROUP_LAYER,
    LP_PARAM_GROUP_FINAL_NORM,
    LP_PARAM_GROUP_HEAD /* pooler, pre_classifier, classifier/score, lm_head */
} lp_param_group;

typedef struct lp_param_binding {
    lp_param_role role;
    lp_param_group group;
    int32_t layer;               /* -1 outside the layer stack */
    int32_t ndim;                /* 1 or 2 */
    int64_t shape[2];            /* expected, [out, in] for weights */
    uint64_t numel;
    bool is_linear_weight;       /* a [out,in] matrix of a Linear (LoRA/NF4 candidates) */
    char name[128];              /* checkpoint name found, or the canonical one when missing */
    const lp_st_tensor *tensor;  /* view owned by the lp_st_set; NULL = missing (initialize) */
} lp_param_binding;

typedef struct lp_param_map {
    lp_model_task task;          /* resolved (never AUTO) */
    char prefix[32];             /* base prefix found: "", "bert.", "distilbert.", "model." */
    size_t n;
    lp_param_binding *params;    /* owned */
    size_t n_missing_head;       /* head params absent from the checkpoint (to initialize) */
    size_t n_unexpected;
    char **unexpected;           /* owned names present in the file but not used */
    size_t n_ignored;            /* known buffers skipped: position_ids, rotary inv_freq, tied lm_head */
} lp_param_map;

/* Binds every parameter the (config, task) model needs to a tensor of w, accepting the
 * usual prefixes and LayerNorm.gamma/beta. Errors: NOT_FOUND listing missing non-head
 * tensors, FORMAT for a shape mismatch (expected vs found) or a non-float weight.
 * Missing head parameters (pooler, pre_classifier, classifier/score) are not an error
 * (n_missing_head; the engine initializes them); a missing untied lm_head is.
 * w NULL: a config-only directory (the engine initializes every parameter): the layout
 * with every tensor NULL, under the prefix save_pretrained would write.
 * On success out is owned by the caller (lp_param_map_free). */
LP_WARN_UNUSED lp_status lp_param_map_build(const lp_model_config *cfg, const lp_st_set *w,
                                            lp_model_task task, lp_param_map *out);
void lp_param_map_free(lp_param_map *m);
/* The binding for role in layer (-1 outside the stack); NULL if the model has none. */
const lp_param_binding *lp_param_map_find(const lp_param_map *m, lp_param_role role, int32_t layer);

/* ---------------------------------------------------------------- memory estimate */

typedef enum lp_train_method { LP_TRAIN_METHOD_FULL = 0, LP_TRAIN_METHOD_LORA, LP_TRAIN_METHOD_QLORA } lp_train_method;

typedef struct lp_mem_estimate_opts {
    lp_train_method method;
    int64_t batch_size;
    int64_t seq_len;
    int64_t lora_rank;           /* LoRA/QLoRA; targets are query/value (q_proj/v_proj) */
    /* the engine's run settings (zero = loupe train's defaults): */
    bool eager;                  /* --exec eager (materialized attention probabilities); false: fused */
    bool grad_checkpointing;     /* keep each layer's input only, recompute the layer in backward */
    double lora_dropout;         /* LoRA dropout probability (masks and dropped-row scratch) */
    int32_t threads;             /* threads (per-thread LoRA-dropout scratch when fused; 0: 1) */
} lp_mem_estimate_opts;

/* Predicted peak bytes by category for training with AdamW in fp32, as loupe's engine
 * allocates them (lp_model_estimate in models.h computes it from the engine's own plan). All categories are live together
 * at the peak (the engine keeps its blocks between steps), so total is their sum. */
typedef struct lp_mem_estimate {
    uint64_t total_params, trainable_params, lora_params;
    uint64_t parameters, gradients, optimizer_state, activations, quantized_weights, temporary, input;
    uint64_t activations_per_layer;
    uint64_t temporary_transient; /* part of temporary: kernel scratch freed within a layer's pass */
    uint64_t total;
} lp_mem_estimate;



#ifdef __cplusplus
}
#endif
#endif /* LOUPE_IO_H */
