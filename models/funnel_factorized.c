/*
 * funnel_factorized.c - Funnel Transformer attention_type "factorized" (HF's
 * FunnelAttentionStructure.get_position_embeds and
 * FunnelRelMultiheadAttention.relative_positional_attention, factorized
 * branches; the paper's appendix A.2.2).
 *
 * Instead of one sinusoid per relative distance, HF builds four absolute
 * tables over the positions 0..S-1, with s = sin(p f), c = cos(p f):
 *   phi = [s | s], pi = [c | c]  (query side)   psi = [c | s], omega = [-s | c]  (key side)
 * and scores query i against key j as
 *   sum_d qr[b, i, n, d] * (phi[i, d] psi[j, d] + pi[i, d] omega[j, d]),
 *   qr[b, i, n, :] = (q + r_r_bias)[b, i, n, :] . r_kernel[:, n, :]^T.
 * Pooling never rebuilds the tables: HF stride-selects their rows (phi, pi
 * before the pooling layer, psi, omega after it), i.e. every row keeps the
 * position of the original token it came from - the schedule's `orig` rows.
 * So the tables are weight-independent constants of the sequence length,
 * uploaded with the other per-length constants (funnel_sched.c), and the score
 * is one GEMM on the concatenation [qr*phi | qr*pi] . [psi | omega]^T.
 * The constants are used as they are, never through a view (see fk below).
 */
#include "funnel.h"

#include <math.h>
#include <stdlib.h>

/* position * inv_freq[k], inv_freq[k] = 1 / 10000^(k / half), in double like the
 * float64 reference; the tables are rounded to the model dtype once */
static double fz_angle(int64_t pos, int64_t k, int64_t half) {
    return (double)pos / pow(10000.0, (double)k / (double)half);
}

ft_status fn_fz_build_geom(ft_ctx *ctx, const funnel *f, const fn_sched *s, fn_consts *c, int g, ft_dtype dt) {
    const fn_geom *ge = &s->geom[g];
    const int64_t *oq = s->orig[ge->qlev], *ok = s->orig[ge->klev];
    int64_t lq = ge->lq, lk = ge->lk, D = f->d, half = f->d / 2;
    int64_t nq = lq * 2 * D, nk = lk * 2 * D;
    float *buf = (float *)malloc((size_t)(nq > nk ? nq : nk) * sizeof *buf);
    if (!buf) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    for (int64_t i = 0; i < lq; i++) { /* [Lq, 2, D]: phi row, then pi row */
        float *phi = buf + i * 2 * D, *pi = phi + D;
        for (int64_t k = 0; k < half; k++) {
            double a = fz_angle(oq[i], k, half);
            phi[k] = phi[half + k] = (float)sin(a);
            pi[k] = pi[half + k] = (float)cos(a);
        }
    }
    c->fq[g] = fn_upload_float(ctx, c, dt, 3, FT_SHAPE(lq, 2, D), buf, nq);
    /* [2D, Lk]: psi^T over omega^T, stored transposed because the graph planner
     * binds views before it uploads constants (a view of a constant would read NULL) */
    float *psi = buf, *omega = buf + D * lk;
    for (int64_t j = 0; j < lk; j++)
        for (int64_t k = 0; k < half; k++) {
            double a = fz_angle(ok[j], k, half);
            psi[k * lk + j] = omega[(half + k) * lk + j] = (float)cos(a);
            psi[(half + k) * lk + j] = (float)sin(a);
            omega[k * lk + j] = -(float)sin(a);
        }
    c->fk[g] = fn_upload_float(ctx, c, dt, 2, FT_SHAPE(2 * D, lk), buf, nk);
    free(buf);
    return ctx->status;
}

ft_tensor *fn_fz_positional(ft_ctx *ctx, const funnel *f, const fn_layer *L, ft_tensor *qr, int64_t B,
                            ft_tensor *fq, ft_tensor *fk, ft_tensor **base) {
    *base = NULL;
    if (!qr || !fq || !fk) return NULL;
    int64_t N = f->heads, D = f->d, Lq = ft_tensor_dim(fq, 0), Lk = ft_tensor_dim(fk, 1);
    /* einsum("binh,dnh->bind"): r_kernel [D, N, Dh] read as [N, Dh, D], a view */
    ft_tensor *wr = ft_permute(ctx, L->rk, (const int[]){1, 2, 0});
    ft_tensor *qd = ft_matmul(ctx, qr, wr, 1.0f); /* [N, B*Lq, D] */
    /* [N*B, Lq, 1, D] * [Lq, 2, D] -> [N*B, Lq, 2, D]: qr*phi and qr*pi side by side */
    ft_tensor *qd4 = ft_reshape(ctx, qd, 4, FT_SHAPE(N * B, Lq, 1, D));
    ft_tensor *qf = ft_mul(ctx, qd4, fq);
    ft_tensor_release(ctx, qd4);
    ft_tensor_release(ctx, qd);
    /* both einsum("bind,jd->bnij") terms and their sum in one GEMM over 2D */
    ft_tensor *qf2 = ft_reshape(ctx, qf, 2, FT_SHAPE(N * B * Lq, 2 * D));
    ft_tensor *p = ft_matmul(ctx, qf2, fk, 1.0f); /* [N*B*Lq, Lk] */
    ft_tensor_release(ctx, qf2);
    ft_tensor_release(ctx, qf);
    *base = p;
    return ft_permute(ctx, ft_reshape(ctx, p, 4, FT_SHAPE(N, B, Lq, Lk)), (const int[]){1, 0, 2, 3});
}
