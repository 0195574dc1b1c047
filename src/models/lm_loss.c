/* A causal LM's head and loss in chunks of rows: the (B*T, V) logits and their gradient are
 * never held whole (for a 151936-token vocabulary at 1024 tokens they were 2 x 622 MB, the
 * largest tensors of a LoRA step). Each chunk of R rows of the head's input h (the family's
 * final norm, m->lm_in) goes through logits = h W^T (into m->lm_chunk, R x V), its loss terms
 * (per-row log-sum-exp into m->lse), the logits' gradient in place, and dh = dlogits W
 * (+ dW += dlogitsᵀ h when the head trains). The mean is over the batch's non-ignored rows
 * (-100, as transformers), so every chunk scales its gradient by 1 / that global count.
 *
 * When dh is computed. In training mode with a frozen head (LoRA, QLoRA) the loss forward
 * computes dh right after each chunk's loss, while the chunk's logits are at hand (two head
 * GEMMs a step, as an unchunked head); lp_model_backward then starts from it. So does a
 * trainable head's loss forward, dW included (three GEMMs), when the caller promised the
 * backward at the same scale (lp_model_set_head_grad_in_loss). Otherwise (a trainable head
 * without that promise, or a loss forward in eval mode that a backward may still follow)
 * the backward recomputes each chunk's logits, then dh and dW together: one GEMM more, no
 * gradient added before lp_model_backward is called.
 *
 * On a device the labels are counted in the batch's host shadow, each chunk's mean loss is
 * downloaded (a wait per chunk: a few a step) and everything else stays there. */
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

/* Default rows a chunk. Each chunk's two GEMMs read (and pack) all of W (V x C) again: at R
 * rows a chunk that is 2R flops a byte of W, and below a few hundred rows the repacking shows
 * (Qwen2.5-0.5B, 1024 tokens: 7 chunks of 147 rows made the LoRA step 15 % slower than one
 * whole-logits pass; 2 chunks of 512 cost about 1 %). So at least 512 rows, more while the
 * chunk stays under 96 MB (a small vocabulary). */
#define LM_CHUNK_BYTES ((int64_t)96 << 20)
#define LM_CHUNK_MIN 512

int64_t lp_model__lm_chunk_rows(const lp_model *m, int64_t rows)
{
    int64_t c = m->opt.lm_head_chunk;
    if (c <= 0) {
        c = LM_CHUNK_BYTES / (4 * (m->n_classes > 0 ? m->n_classes : 1));
        if (c < LM_CHUNK_MIN)
            c = LM_CHUNK_MIN;
        if (c < rows) { // as many chunks, of even sizes: no short GEMM at the end
            const int64_t k = (rows + c - 1) / c;
            c = (rows + k - 1) / k;
        }
    }
    return c < rows ? c : rows;
}

/* The targets where the host reads them (lp_model__in_host: the block itself on the CPU). */
static const int32_t *host_labels(const lp_model *m)
{
    return lp_model__in_host(m, m->labels);
}

static int64_t count_rows(const int32_t *labels, int64_t n)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        k += labels[i] != -100;
    return k;
}

/* dh rows [r0, r0+n) (and dW when with_dw) from the chunk's logits lg (n,V), its gradient
 * written to dl (may be lg). */
static void chunk_grad(lp_model *m, float *dh, float *dl, const float *lg, int64_t r0, int64_t n,
                       int64_t total, bool with_dw)
{
    const int64_t C = m->lm_head->in, V = m->n_classes;
    const int64_t k = count_rows(host_labels(m) + r0, n);
    lp_nn_linear head = *m->lm_head;
    if (!with_dw)
        head.dw = head.db = NULL;
    if (k == 0) { // every row ignored: no gradient flows through this chunk
        lp_kernels_memset(dh + r0 * C, 0, (size_t)(n * C) * sizeof(float));
        return;
    }
    // the kernel divides by the chunk's count k; the loss is a mean over all `total` rows
    lp_cross_entropy_backward(dl, lg, m->lse + r0, m->labels + r0, n, V, -100,
                              m->dloss_scale * (float)k / (float)total);
    lp_model__range_push(m->lm_bwd);
    lp_nn_linear_backward(&head, dh + r0 * C, dl, m->lm_in + r0 * C, n);
    lp_model__range_pop(m->lm_bwd);
}

lp_status lp_model__lm_logits(lp_model *m, float *logits)
{
    const int64_t N = m->B * m->T, R = lp_model__lm_chunk_rows(m, N), C = m->lm_head->in;
    lp_model__range_push(m->lm_fwd);
    if (logits) // the caller's buffer holds them all: one GEMM
        lp_nn_linear_forward(m->lm_head, logits, m->lm_in, N);
    else // nothing kept (a timed or profiled forward): the same work, chunk by chunk
        for (int64_t r0 = 0; r0 < N; r0 += R)
            lp_nn_linear_forward(m->lm_head, m->lm_chunk, m->lm_in + r0 * C, N - r0 < R ? N - r0 : R);
    lp_model__range_pop(m->lm_fwd);
    return m->pass_status;
}

lp_status lp_model__lm_loss(lp_model *m, float *logits, float *dh, float *loss)
{
    const int64_t N = m->B * m->T, V = m->n_classes, R = lp_model__lm_chunk_rows(m, N), C = m->lm_head->in;
    const int64_t total = count_rows(host_labels(m), N);
    double sum = 0.0;
    const bool with_dw = dh && m->lm_head->dw != NULL; // only under the caller's promise
    m->lm_dh_ok = m->lm_dw_done = false;
    for (int64_t r0 = 0; r0 < N; r0 += R) {
        const int64_t n = N - r0 < R ? N - r0 : R;
        // logits straight into the caller's buffer when it wants them (the gradient then goes
        // to the chunk buffer), else into the chunk buffer, the gradient over them in place
        float *lg = logits ? logits + r0 * V : m->lm_chunk;
        lp_model__range_push(m->lm_fwd);
        lp_nn_linear_forward(m->lm_head, lg, m->lm_in + r0 * C, n);
        float l; // on a device, a wait for the chunk
        lp_status st = lp_model__cross_entropy(m, &l, m->lse + r0, lg, m->labels + r0, n);
        lp_model__range_pop(m->lm_fwd);
        if (st != LP_OK) // the kernel counts rows from the chunk's first
            return lp_err_wrap(st, "LM head rows %lld..%lld", (long long)r0, (long long)(r0 + n - 1));
        if (m->pass_status != LP_OK)
            return m->pass_status;
        sum += (double)l * (double)count_rows(host_labels(m) + r0, n);
        if (dh)
            chunk_grad(m, dh, m->lm_chunk, lg, r0, n, total, with_dw);
    }
    if (dh) {
        m->lm_dh_ok = true;
        m->lm_dw_done = with_dw;
        m->lm_dh_scale = m->dloss_scale;
    }
    *loss = total ? (float)(sum / (double)total) : 0.0f;
    return m->pass_status;
}

lp_status lp_model__lm_token_losses(lp_model *m, float *tl)
{
    const int64_t N = m->B * m->T, V = m->n_classes, R = lp_model__lm_chunk_rows(m, N), C = m->lm_head->in;
    const int32_t *y = host_labels(m);
    // -log softmax(target) = lse - logit(target): the targets' logits gathered as rows of one
    // float (index i * V + y) where the chunk's logits are, then read on the host with lse
    int64_t *h_idx = lp_malloc((size_t)R * sizeof *h_idx);
    float *h_val = lp_malloc((size_t)R * 2 * sizeof *h_val), *h_lse = h_val + R;
    int64_t *idx =
        lp_model__blk_alloc(m, (size_t)R * sizeof *idx, LP_MEM_CATEGORY_TEMPORARY, "LM target index");
    float *val =
        lp_model__blk_alloc(m, (size_t)R * sizeof *val, LP_MEM_CATEGORY_TEMPORARY, "LM target logits");
    lp_status st =
        h_idx && h_val && idx && val ? LP_OK : lp_err(LP_STATUS_NO_MEMORY, "LM token losses: out of memory");
    for (int64_t r0 = 0; st == LP_OK && r0 < N; r0 += R) {
        const int64_t n = N - r0 < R ? N - r0 : R;
        lp_model__range_push(m->lm_fwd);
        lp_nn_linear_forward(m->lm_head, m->lm_chunk, m->lm_in + r0 * C, n);
        float l; /* the chunk's mean is not used: its per-row log-sum-exp (m->lse) is */
        st = lp_model__cross_entropy(m, &l, m->lse + r0, m->lm_chunk, m->labels + r0, n);
        lp_model__range_pop(m->lm_fwd);
        if (st != LP_OK) {
            st = lp_err_wrap(st, "LM head rows %lld..%lld", (long long)r0, (long long)(r0 + n - 1));
            break;
        }
        for (int64_t i = 0; i < n; i++)
            h_idx[i] = i * V + (y[r0 + i] == -100 ? 0 : y[r0 + i]);
        if ((st = lp_kernels_upload(idx, h_idx, (size_t)n * sizeof *idx)) != LP_OK)
            break;
        lp_rows_gather(val, m->lm_chunk, idx, n, 1);
        if ((st = lp_kernels_download(h_val, val, (size_t)n * sizeof *val)) != LP_OK ||
            (st = lp_kernels_download(h_lse, m->lse + r0, (size_t)n * sizeof *h_lse)) != LP_OK)
            break;
        if ((st = m->pass_status) != LP_OK)
            break;
        for (int64_t i = 0; i < n; i++)
            tl[r0 + i] = y[r0 + i] == -100 ? 0.0f : h_lse[i] - h_val[i];
    }
    lp_model__blk_free(m, idx);
    lp_model__blk_free(m, val);
    free(h_idx);
    free(h_val);
    return st;
}

void lp_model__lm_backward(lp_model *m, float *dh)
{
    const int64_t N = m->B * m->T, R = lp_model__lm_chunk_rows(m, N), C = m->lm_head->in;
    if (m->lm_dh_ok) { // the loss forward computed it, under the scale of that time
        if (m->lm_dh_scale != m->dloss_scale) // (rare: the loss scale changed in between)
            lp_kernels_active()->scale(dh, N * C,
                                       m->lm_dh_scale != 0.0f ? m->dloss_scale / m->lm_dh_scale : 0.0f);
        return;
    }
    const int64_t total = count_rows(host_labels(m), N);
    if (total == 0) {
        lp_kernels_memset(dh, 0, (size_t)(N * C) * sizeof(float));
        return;
    }
    for (int64_t r0 = 0; r0 < N; r0 += R) {
        const int64_t n = N - r0 < R ? N - r0 : R;
        if (count_rows(host_labels(m) + r0, n) == 0) { // nothing to recompute
            lp_kernels_memset(dh + r0 * C, 0, (size_t)(n * C) * sizeof(float));
            continue;
        }
        lp_model__range_push(m->lm_bwd);
        lp_nn_linear_forward(m->lm_head, m->lm_chunk, m->lm_in + r0 * C, n);
        lp_model__range_pop(m->lm_bwd);
        chunk_grad(m, dh, m->lm_chunk, m->lm_chunk, r0, n, total, true);
    }
}
