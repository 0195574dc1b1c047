/* Checkpoint checksums: checksums.json beside a checkpoint's files holds zlib's crc32 of each
 * file (state.safetensors, trainer_state.json, steps.csv, epoch_results.csv) and of each
 * tensor's bytes in state.safetensors, computed from what is on disk before the checkpoint is
 * renamed into place. A resume verifies them, so bytes damaged on disk, by a copy or a partial
 * sync are reported (naming the file and tensor) instead of resuming to another loss curve. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cjson/cJSON.h>

#include "loupe/io.h"
#include "train_internal.h"

#define SUMS "checksums.json"
static const char *const files[] = {"state.safetensors", "trainer_state.json", "steps.csv",
                                    "epoch_results.csv"};
#define N_FILES (sizeof files / sizeof files[0])

/* crc32 of n bytes, fed to zlib in pieces its 32-bit length takes. */
static uint32_t crc_bytes(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n > 0) {
        uInt k = n > (1u << 30) ? 1u << 30 : (uInt)n;
        crc = (uint32_t)crc32(crc, p, k);
        p += k;
        n -= k;
    }
    return crc;
}

static lp_status crc_file(const char *path, uint32_t *out)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return lp_err(LP_STATUS_IO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char buf[1 << 16];
    uint32_t crc = (uint32_t)crc32(0, Z_NULL, 0);
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, fp)) > 0)
        crc = crc_bytes(crc, buf, n);
    int bad = ferror(fp);
    fclose(fp);
    if (bad)
        return lp_err(LP_STATUS_IO, "%s: read failed", path);
    *out = crc;
    return LP_OK;
}

static void hex(uint32_t v, char *b)
{
    snprintf(b, 9, "%08" PRIx32, v);
}

lp_status lp_ckpt_sum_write(const char *dir)
{
    char p[4200], b[9];
    cJSON *j = cJSON_CreateObject(), *fj = cJSON_CreateObject(), *tj = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "algorithm", "crc32");
    cJSON_AddItemToObject(j, "files", fj);
    cJSON_AddItemToObject(j, "tensors", tj);
    lp_status st = LP_OK;
    for (size_t i = 0; i < N_FILES && st == LP_OK; i++) {
        uint32_t crc;
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if ((st = crc_file(p, &crc)) == LP_OK) {
            hex(crc, b);
            cJSON_AddStringToObject(fj, files[i], b);
        }
    }
    lp_st_file *f = NULL;
    snprintf(p, sizeof p, "%s/state.safetensors", dir);
    if (st == LP_OK && (st = lp_st_open(p, &f)) == LP_OK) {
        for (size_t i = 0; i < lp_st_count(f); i++) {
            const lp_st_tensor *t = lp_st_at(f, i);
            hex(crc_bytes((uint32_t)crc32(0, Z_NULL, 0), t->data, t->nbytes), b);
            cJSON_AddStringToObject(tj, t->name, b);
        }
        lp_st_close(f);
    }
    snprintf(p, sizeof p, "%s/%s", dir, SUMS);
    if (st == LP_OK)
        return lp_json_write_file(p, j); /* takes j */
    cJSON_Delete(j);
    return st;
}

static const char *stored(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

lp_status lp_ckpt_sum_verify(const char *dir, bool *has_sums)
{
    char p[4200], b[9];
    *has_sums = false;
    snprintf(p, sizeof p, "%s/%s", dir, SUMS);
    FILE *probe = fopen(p, "rb");
    if (!probe)
        return LP_OK; /* a checkpoint from before checksums: nothing to verify */
    fclose(probe);
    *has_sums = true;
    char *text = NULL;
    size_t len = 0;
    lp_status st = lp_file_read_all(p, &text, &len);
    if (st != LP_OK)
        return st;
    bool oom;
    cJSON *j = lp_json_parse(text, len, NULL, &oom);
    free(text);
    if (oom) /* not damage: a resume must not fall back to an older checkpoint for this */
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", p);
    const cJSON *fj = cJSON_GetObjectItemCaseSensitive(j, "files");
    const cJSON *tj = cJSON_GetObjectItemCaseSensitive(j, "tensors");
    if (!cJSON_IsObject(fj) || !cJSON_IsObject(tj)) {
        cJSON_Delete(j);
        return lp_err(LP_STATUS_FORMAT, "%s: damaged (not the checksum list loupe writes)", p);
    }
    for (size_t i = 0; i < N_FILES && st == LP_OK; i++) {
        uint32_t crc;
        const char *want = stored(fj, files[i]);
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        if (!want)
            st = lp_err(LP_STATUS_FORMAT, "%s/%s: no checksum for %s", dir, SUMS, files[i]);
        else if ((st = crc_file(p, &crc)) == LP_OK) {
            hex(crc, b);
            if (strcmp(b, want))
                st = lp_err(LP_STATUS_FORMAT, "%s: damaged: crc32 %s, written as %s", p, b, want);
        }
    }
    /* the file's crc already failed or passed; per tensor names what is damaged */
    lp_st_file *f = NULL;
    char why[1024];
    snprintf(why, sizeof why, "%s", lp_err_msg());
    snprintf(p, sizeof p, "%s/state.safetensors", dir);
    lp_status ost = lp_st_open(p, &f);
    if (ost == LP_STATUS_NO_MEMORY && st == LP_OK) {
        st = ost; /* out of memory says nothing about damage */
    } else if (ost != LP_OK) {
        if (st != LP_OK) /* keep the crc's message: it says what is damaged */
            lp_err(st, "%s", why);
        else
            st = lp_err_wrap(LP_STATUS_FORMAT, "damaged");
    } else {
        size_t bad = 0;
        const char *first = NULL;
        for (size_t i = 0; i < lp_st_count(f); i++) {
            const lp_st_tensor *t = lp_st_at(f, i);
            hex(crc_bytes((uint32_t)crc32(0, Z_NULL, 0), t->data, t->nbytes), b);
            const char *want = stored(tj, t->name);
            if (!want || strcmp(b, want)) {
                bad++;
                first = first ? first : t->name;
            }
        }
        if (bad)
            st = lp_err(LP_STATUS_FORMAT, "%s: damaged: tensor '%s'%s fails its crc32 (%zu of %zu tensors)",
                        p, first, bad > 1 ? " and others" : "", bad, lp_st_count(f));
        lp_st_close(f);
    }
    cJSON_Delete(j);
    return st;
}
