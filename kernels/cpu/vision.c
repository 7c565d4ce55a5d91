/*
 * vision.c - CPU kernels of the channels-first LayerNorm (FT_OP_CHANNEL_NORM,
 * ConvNeXt's stem and downsampling norms) and of the squeeze-excitation gate
 * (FT_OP_SE_GATE, EfficientNet). Inputs are contiguous (the op API copies them).
 */
#include "cpu_common.h"
#include "cpu_kernels.h"
#include "nchwc.h"
#include "gemm.h"
#include "vrow.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
/* the f32 passes want the vectoriser */
#pragma GCC optimize("O3")
#endif

#define CN_BLOCK 32 /* positions normalised together: one vector lane each */

/*
 * x [B, C, P] normalised over C at each of the P positions, CN_BLOCK positions at
 * a time: their C x CN_BLOCK values are staged in f32 (rows of the block are
 * contiguous in x), the mean and the biased variance summed in double over C,
 * then y = norm * gamma[c] + beta[c]. As Hugging Face's ConvNextLayerNorm, the
 * normalised value is rounded to the tensor's dtype before gamma and beta.
 */
FT_CPU_KERNEL_DEF(channel_norm) {
    const ft_tensor *x = dst->src[0], *g = dst->src[1], *b = dst->src[2];
    const double eps = FT_PARAMS(dst, ft_params_norm)->eps;
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st || (st = ft_cpu_need_contiguous(ctx, x, "x"))) return st;
    const int64_t n = ft_numel(x), c = x->ne[1];
    if (n == 0) return FT_OK;
    const int64_t batch = x->ne[0], pos = n / (batch * c), nblk = (pos + CN_BLOCK - 1) / CN_BLOCK;
    const ft_dtype dt = x->dtype;
    ft_cpu_f32 fg = {0}, fb = {0};
    if ((g && ft_cpu_f32_get(g, g->nb[0] == 1, &fg)) || (b && ft_cpu_f32_get(b, b->nb[0] == 1, &fb))) {
        ft_cpu_f32_release(&fg);
        return ft_set_error(ctx, FT_ERR_OOM, "channel_norm: out of host memory for staging");
    }
    ft_cpu_scratch *sc = ft_cpu_scratch_cur();
    int failed = 0;
    const int64_t tasks = batch * nblk;
#pragma omp parallel num_threads(ft_cpu_threads()) if (n >= FT_CPU_PAR_MIN && tasks > 1) reduction(| : failed)
    {
        ft_cpu_buf bb;
        float *h = ft_cpu_buf_get(&bb, sc, FT_SCR_GEMM_B, (size_t)(c * CN_BLOCK) * sizeof(float));
        if (!h) failed = 1;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tasks; t++) {
            if (!h) continue;
            const int64_t bi = t / nblk, p0 = (t % nblk) * CN_BLOCK;
            const int64_t len = pos - p0 < CN_BLOCK ? pos - p0 : CN_BLOCK, base = bi * c * pos + p0;
            double mean[CN_BLOCK], var[CN_BLOCK];
            for (int64_t j = 0; j < len; j++) mean[j] = var[j] = 0.0;
            for (int64_t ci = 0; ci < c; ci++) {
                float *hr = h + ci * CN_BLOCK;
                ft_cpu_row_load(x->data, dt, base + ci * pos, 1, len, hr);
                for (int64_t j = 0; j < len; j++) mean[j] += hr[j];
            }
            for (int64_t j = 0; j < len; j++) mean[j] /= (double)c;
            for (int64_t ci = 0; ci < c; ci++)
                for (int64_t j = 0; j < len; j++) {
                    double dv = h[ci * CN_BLOCK + j] - mean[j];
                    var[j] += dv * dv;
                }
            float rstd[CN_BLOCK];
            for (int64_t j = 0; j < len; j++) rstd[j] = (float)(1.0 / sqrt(var[j] / (double)c + eps));
            for (int64_t ci = 0; ci < c; ci++) {
                float *hr = h + ci * CN_BLOCK;
                const float gc = fg.p ? fg.p[ci] : 1.0f, bc = fb.p ? fb.p[ci] : 0.0f;
                for (int64_t j = 0; j < len; j++) {
                    float v = ft_cpu_round(dt, (float)(hr[j] - mean[j]) * rstd[j]);
                    hr[j] = v * gc + bc;
                }
                ft_cpu_row_store(dst->data, dt, base + ci * pos, len, hr);
            }
        }
        ft_cpu_buf_put(&bb);
    }
    ft_cpu_f32_release(&fg);
    ft_cpu_f32_release(&fb);
    if (failed) return ft_set_error(ctx, FT_ERR_OOM, "channel_norm: out of host memory for its buffers");
    return FT_OK;
}

/*
 * y = x * sigmoid(w2 act(w1 mean_P(x) + b1) + b2), x [B, C, P] (or blocked, NCHWc,
 * in a CPU plan: the same passes over 16 channels at a time): the channel means
 * (f32 sums of chunks added in double, parallel over planes), the two small
 * matrix-vector products on one thread (at most a few hundred thousand
 * multiply-adds), the scaling pass parallel over planes again, all in one
 * parallel region; f32 tensors are read and written in place.
 */
FT_CPU_KERNEL_DEF(se_gate) {
    const ft_tensor *x = dst->src[0], *w1 = dst->src[1], *b1 = dst->src[2], *w2 = dst->src[3],
                    *b2 = dst->src[4];
    const int act = FT_PARAMS(dst, ft_params_se)->act;
    int st = ft_cpu_need_contiguous(ctx, dst, "output");
    if (st || (st = ft_cpu_need_contiguous(ctx, x, "x"))) return st;
    const int64_t n = ft_numel(x), batch = x->ne[0], c = x->ne[1], r = w1->ne[0];
    if (n == 0) return FT_OK;
    const int64_t pos = n / (batch * c), planes = batch * c;
    const ft_dtype dt = x->dtype;
    /* a graph plan's blocked-channel node (graph/pass_nchwc.c): x and y are
     * [B][C/16][P][16] f32, a channel's values 16 floats apart */
    const bool blk = (dst->flags & FT_TF_NCHWC) != 0;
    if (blk && (dt != FT_DTYPE_F32 || dst->dtype != FT_DTYPE_F32 || !(x->flags & FT_TF_NCHWC) || c % FT_NCHWC))
        return ft_set_error(ctx, FT_ERR_INTERNAL, "se_gate: a blocked-channel (NCHWc) node of an unsupported "
                                                  "tensor (%s)", dst->name);
    ft_cpu_f32 f1 = {0}, fb1 = {0}, f2 = {0}, fb2 = {0};
    ft_cpu_buf gb = {0};
    float *gate = NULL; /* [B, C] means, then gates */
    if (ft_cpu_f32_get(w1, true, &f1) || ft_cpu_f32_get(b1, b1->nb[0] == 1, &fb1) || ft_cpu_f32_get(w2, true, &f2) ||
        ft_cpu_f32_get(b2, b2->nb[0] == 1, &fb2) ||
        !(gate = ft_cpu_buf_get(&gb, ft_cpu_scratch_cur(), FT_SCR_STAGE, (size_t)(planes + r) * sizeof(float)))) {
        st = ft_set_error(ctx, FT_ERR_OOM, "se_gate: out of host memory for staging");
        goto done;
    }
    float *z = gate + planes; /* [R] of the image being gated */
#pragma omp parallel num_threads(ft_cpu_threads()) if (n >= FT_CPU_PAR_MIN)
    {
        float row[FT_CPU_CHUNK];
        if (blk) {
#pragma omp for schedule(static)
            for (int64_t cb = 0; cb < planes / FT_NCHWC; cb++) {
                /* 16 channels side by side: f32 sums of chunks of pixels, added in double */
                const float *src = (const float *)x->data + cb * pos * FT_NCHWC;
                double s16[FT_NCHWC] = {0};
                for (int64_t k0 = 0; k0 < pos; k0 += FT_CPU_CHUNK) {
                    const int64_t len = pos - k0 < FT_CPU_CHUNK ? pos - k0 : FT_CPU_CHUNK;
                    float cs[FT_NCHWC] = {0};
                    for (int64_t j = k0; j < k0 + len; j++)
#pragma omp simd
                        for (int k = 0; k < FT_NCHWC; k++) cs[k] += src[j * FT_NCHWC + k];
                    for (int k = 0; k < FT_NCHWC; k++) s16[k] += cs[k];
                }
                for (int k = 0; k < FT_NCHWC; k++) gate[cb * FT_NCHWC + k] = (float)(s16[k] / (double)pos);
            }
        } else
#pragma omp for schedule(static)
        for (int64_t pl = 0; pl < planes; pl++) {
            double s = 0.0; /* f32 sums of chunks, added in double */
            for (int64_t k0 = 0; k0 < pos; k0 += FT_CPU_CHUNK) {
                int64_t len = pos - k0 < FT_CPU_CHUNK ? pos - k0 : FT_CPU_CHUNK;
                const float *src = row;
                if (dt == FT_DTYPE_F32) src = (const float *)x->data + pl * pos + k0;
                else ft_cpu_row_load(x->data, dt, pl * pos + k0, 1, len, row);
                float cs = 0.0f;
#pragma omp simd reduction(+ : cs)
                for (int64_t j = 0; j < len; j++) cs += src[j];
                s += cs;
            }
            gate[pl] = (float)(s / (double)pos);
        }
#pragma omp single
        for (int64_t bi = 0; bi < batch; bi++) {
            const float *m = gate + bi * c;
            for (int64_t ri = 0; ri < r; ri++) {
                double a = fb1.p[ri];
                for (int64_t ci = 0; ci < c; ci++) a += (double)f1.p[ri * c + ci] * m[ci];
                z[ri] = ft_cpu_act(act, (float)a);
            }
            float *gt = gate + bi * c; /* the means of this image are consumed: overwrite */
            for (int64_t ci = 0; ci < c; ci++) {
                double a = fb2.p[ci];
                for (int64_t ri = 0; ri < r; ri++) a += (double)f2.p[ci * r + ri] * z[ri];
                gt[ci] = 1.0f / (1.0f + expf(-(float)a));
            }
        }
        if (blk) {
#pragma omp for schedule(static)
            for (int64_t cb = 0; cb < planes / FT_NCHWC; cb++) {
                const float *src = (const float *)x->data + cb * pos * FT_NCHWC, *gv = gate + cb * FT_NCHWC;
                float *y = (float *)dst->data + cb * pos * FT_NCHWC;
                for (int64_t j = 0; j < pos; j++)
#pragma omp simd
                    for (int k = 0; k < FT_NCHWC; k++) y[j * FT_NCHWC + k] = src[j * FT_NCHWC + k] * gv[k];
            }
        } else
#pragma omp for schedule(static)
        for (int64_t pl = 0; pl < planes; pl++) {
            const float gv = gate[pl];
            if (dt == FT_DTYPE_F32) {
                const float *src = (const float *)x->data + pl * pos;
                float *y = (float *)dst->data + pl * pos;
#pragma omp simd
                for (int64_t j = 0; j < pos; j++) y[j] = src[j] * gv;
                continue;
            }
            for (int64_t k0 = 0; k0 < pos; k0 += FT_CPU_CHUNK) {
                int64_t len = pos - k0 < FT_CPU_CHUNK ? pos - k0 : FT_CPU_CHUNK;
                ft_cpu_row_load(x->data, dt, pl * pos + k0, 1, len, row);
                ft_cpu_row_scale(row, len, gv, 0.0f);
                ft_cpu_row_store(dst->data, dt, pl * pos + k0, len, row);
            }
        }
    }
done:
    ft_cpu_buf_put(&gb);
    ft_cpu_f32_release(&f1);
    ft_cpu_f32_release(&fb1);
    ft_cpu_f32_release(&f2);
    ft_cpu_f32_release(&fb2);
    return st;
}
