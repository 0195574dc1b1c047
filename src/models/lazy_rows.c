/* An inference load's token embedding read a row at a time (lp_model_options.lazy_embedding).
 * A classifier, or a decoder whose LM head is not the embedding, looks up only the rows of
 * the tokens it meets, so the table (Qwen2.5-0.5B: 151,936 x 896 floats, 545 MB of the
 * model's 1983 MB) need not be resident. The load hands the table's pages back to the
 * system (they read as zero and take no memory until written); each forward first reads the
 * rows of its ids not read yet with pread from the checkpoint, which stays open. The
 * parameter block keeps the table's place, so the memory plan is unchanged: what changes is
 * what is resident. lp_model__check_finite still checks every value of the table, from its
 * source. */
#define _GNU_SOURCE /* MADV_NOHUGEPAGE under -std=c11 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "models_internal.h"

typedef struct lp_lazy_rows {
    int fd;
    uint64_t pos; /* the table's first byte in the file */
    lp_st_dtype dtype;
    int64_t rows, cols;
    size_t row_bytes;
    float *table;  /* the parameter's data */
    uint8_t *have; /* (rows): 1 once read */
    void *buf;     /* one row as stored */
    char *file, *name;
} lp_lazy_rows;

bool lp_model__lazy_wanted(const lp_model *m, size_t i)
{
    const lp_model_pslot *s = &m->slots[i];
    return m->opt.lazy_embedding && m->opt.no_grad && !m->opt.lora.enabled && s->gather_only && s->src &&
           m->params[i].ndim == 2 && !lp_path_is_gguf(m->dir) && lp_kernels_device() == LP_DEVICE_CPU && !m->lazy;
}

lp_status lp_model__lazy_open(lp_model *m, size_t i)
{
    const lp_st_tensor *t = m->slots[i].src;
    const lp_model_param *p = &m->params[i];
    const int64_t rows = p->shape[0], cols = p->shape[1];
    lp_lazy_rows *z = lp_calloc(1, sizeof *z);
    if (!z)
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", m->dir);
    m->lazy = z;
    z->fd = -1;
    z->pos = t->file_pos;
    z->dtype = t->dtype;
    z->rows = rows;
    z->cols = cols;
    z->row_bytes = (size_t)cols * lp_st_dtype_size(t->dtype);
    z->table = p->data;
    if (!(z->have = lp_calloc((size_t)rows, 1)) || !(z->buf = lp_malloc(z->row_bytes)) ||
        !(z->file = lp_strdup(t->file)) || !(z->name = lp_strdup(t->name)))
        return lp_err(LP_STATUS_NO_MEMORY, "%s: out of memory", m->dir);
    if ((z->fd = open(t->file, O_RDONLY | O_CLOEXEC)) < 0)
        return lp_err(LP_STATUS_IO, "%s: cannot open it again to read '%s' as tokens appear: %s", t->file, t->name,
                      strerror(errno));
    /* the whole pages inside the table (lp_alloc zeroed them): back to the system, and off
     * 2 MiB pages, where the first row read would bring back 2 MiB of the table */
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)z->table;
    const uintptr_t lo = (a + page - 1) & ~(page - 1), hi = (a + (uintptr_t)(rows * cols) * sizeof(float)) & ~(page - 1);
    if (hi > lo) {
#if defined(MADV_NOHUGEPAGE)
        (void)madvise((void *)lo, hi - lo, MADV_NOHUGEPAGE);
#endif
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advice: if refused, the zeros stay resident */
    }
    return LP_OK;
}

lp_status lp_model__lazy_fetch(lp_model *m, const int32_t *ids, int64_t n)
{
    lp_lazy_rows *z = m->lazy;
    for (int64_t k = 0; z && k < n; k++) {
        const int32_t id = ids[k];
        if (id < 0 || id >= z->rows || z->have[id])
            continue;
        size_t got = 0;
        const off_t at = (off_t)(z->pos + (uint64_t)id * z->row_bytes);
        while (got < z->row_bytes) {
            const ssize_t r = pread(z->fd, (uint8_t *)z->buf + got, z->row_bytes - got, at + (off_t)got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return lp_err(LP_STATUS_IO, "%s: reading row %d of '%s' (the token embedding, read as tokens appear): %s",
                              z->file, id, z->name, r < 0 ? strerror(errno) : "the file is shorter than when it was loaded");
            got += (size_t)r;
        }
        float *row = z->table + (int64_t)id * z->cols;
        lp_model__convert_n(row, z->buf, z->dtype, z->cols);
        for (int64_t c = 0; c < z->cols; c++)
            if (!isfinite(row[c])) {
                memset(row, 0, (size_t)z->cols * sizeof(float));
                return lp_err(LP_STATUS_NUMERIC,
                              "%s: row %d of '%s' holds a non-finite value now (the file changed since it was loaded)",
                              z->file, id, z->name);
            }
        z->have[id] = 1;
    }
    return LP_OK;
}

void lp_model__lazy_free(lp_model *m)
{
    lp_lazy_rows *z = m->lazy;
    if (!z)
        return;
    if (z->fd >= 0)
        close(z->fd);
    free(z->have);
    free(z->buf);
    free(z->file);
    free(z->name);
    free(z);
    m->lazy = NULL;
}
