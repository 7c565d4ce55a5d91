/*
 * funnel_sched.c - the Funnel Transformer's length bookkeeping, worked out on
 * the host: sequence length and HF position of every row at each block, the
 * relative-distance tables HF builds (get_position_embeds / relative_pos) and
 * the index arithmetic of its relative-shift trick, turned into device
 * constants once per sequence length.
 *
 * HF builds, per attention geometry, sinusoids of the distances
 * max_dist, max_dist - stride, ... (T of them), projects them by r_kernel, scores
 * every query against all T and then reshapes [Lq, T] -> [T, Lq], drops `shift`
 * rows and reshapes to [Lq, T - shift]: query i, key j reads flat element
 * shift*Lq + i*(T - shift) + j. We gather exactly those elements, so the result
 * is HF's whatever the length, and the tables keep HF's sizes (MAC counts agree).
 */
#include "funnel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void fn_sched_free(fn_sched *s) {
    for (int b = 0; b < FN_MAX_BLOCKS; b++) {
        free(s->pos[b]);
        free(s->orig[b]);
        s->pos[b] = s->orig[b] = NULL;
    }
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* HF relative_pos(pos_k, stride, pooled_pos = pos_q, shift), scored by queries of
 * block qlev against keys of block klev */
static void geom_set(fn_sched *s, int g, int qlev, int klev, int64_t stride, int shift) {
    fn_geom *ge = &s->geom[g];
    const int64_t *pq = s->pos[qlev], *pk = s->pos[klev];
    ge->used = true;
    ge->qlev = qlev;
    ge->klev = klev;
    ge->shift = shift;
    ge->stride = stride;
    ge->lq = s->len[qlev];
    ge->lk = s->len[klev];
    int64_t ref = pq[0] - pk[0];
    ge->max_dist = ref + shift * s->npos[qlev] * stride;
    int64_t min_dist = pq[0] - pk[s->npos[klev] - 1];
    int64_t span = ge->max_dist - min_dist + 1;
    ge->T = span > 0 ? ceil_div(span, stride) : 0;
    int64_t left = ge->T - shift;
    ge->cols = left < ge->lk ? left : ge->lk;
}

ft_status fn_sched_build(ft_ctx *ctx, const funnel *f, int64_t S, fn_sched *s) {
    memset(s, 0, sizeof *s);
    s->S = S;
    if (S < 1) return ft_set_error(ctx, FT_ERR_SHAPE, "Funnel: empty sequence");
    for (int b = 0; b < f->n_blocks; b++) {
        int64_t L = b ? s->len[b - 1] : S, P = b ? s->npos[b - 1] : S;
        /* HF pools a block only while the hidden length exceeds 2 (1 without separate_cls) */
        s->pooled[b] = b > 0 && (b == 1 || s->pooled[b - 1]) && L > (f->separate_cls ? 2 : 1);
        int64_t n = !s->pooled[b] ? L : (f->separate_cls && !f->truncate_seq ? ceil_div(L + 1, 2) : ceil_div(L, 2));
        /* its position tables always assume pooling (stride_pool_pos) */
        int64_t np = b == 0 ? S
                     : f->separate_cls ? 1 + ceil_div(P - (f->truncate_seq ? 2 : 1) > 0 ? P - (f->truncate_seq ? 2 : 1) : 0, 2)
                                       : ceil_div(P, 2);
        s->len[b] = n;
        s->npos[b] = np;
        s->pos[b] = (int64_t *)malloc((size_t)np * sizeof(int64_t));
        s->orig[b] = (int64_t *)malloc((size_t)n * sizeof(int64_t));
        if (!s->pos[b] || !s->orig[b]) {
            fn_sched_free(s);
            return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
        }
        for (int64_t r = 0; r < np; r++) {
            if (b == 0) s->pos[b][r] = r;
            else if (f->separate_cls) /* <cls> at 1 - 2^b, then every other position from the 2nd on */
                s->pos[b][r] = r == 0 ? 1 - ((int64_t)1 << b) : s->pos[b - 1][2 * r - 1];
            else s->pos[b][r] = s->pos[b - 1][2 * r];
        }
        for (int64_t r = 0; r < n; r++) {
            if (b == 0) s->orig[b][r] = r;
            else if (!s->pooled[b]) s->orig[b][r] = s->orig[b - 1][r];
            else if (f->separate_cls) s->orig[b][r] = r == 0 ? s->orig[b - 1][0] : s->orig[b - 1][2 * r - 1];
            else s->orig[b][r] = s->orig[b - 1][2 * r];
        }
    }
    for (int b = 0; b < f->n_blocks; b++) {
        geom_set(s, FN_GEOM(b, 0), b, b, (int64_t)1 << b, 1);
        if (s->pooled[b] && f->pool_q_only) geom_set(s, FN_GEOM(b, 1), b, b - 1, (int64_t)1 << (b - 1), 2);
    }
    for (int g = 0; g < FN_MAX_GEOM; g++) {
        const fn_geom *ge = &s->geom[g];
        /* factorized attention has no relative shift: any length works */
        if (ge->used && !f->factorized && ge->cols != ge->lk && ge->cols != 1) {
            fn_sched_free(s);
            return ft_set_error(ctx, FT_ERR_SHAPE,
                                "Funnel: sequence length %lld gives block %d a relative table of %lld "
                                "distances for %lld keys (HF's relative shift cannot be broadcast either)",
                                (long long)S, g / 2, (long long)ge->T, (long long)ge->lk);
        }
    }
    s->up_stride = (int64_t)1 << (f->n_blocks - 1);
    if (!f->base && s->up_stride > 1 && S > 1) {
        int64_t lf = s->len[f->n_blocks - 1], rows;
        if (f->separate_cls)
            rows = 1 + (lf - 1) * s->up_stride + (f->truncate_seq ? s->up_stride - 1 : 0);
        else
            rows = lf * s->up_stride;
        if (rows < S) {
            fn_sched_free(s);
            return ft_set_error(ctx, FT_ERR_SHAPE,
                                "Funnel: sequence length %lld cannot be upsampled back from %lld tokens",
                                (long long)S, (long long)lf);
        }
    }
    return FT_OK;
}

/* ---- device constants ---- */

void fn_consts_free(fn_consts *c) {
    if (c->kept) {
        for (int g = 0; g < FN_MAX_GEOM; g++) {
            ft_tensor_free_persistent(c->idx[g]);
            ft_tensor_free_persistent(c->cls[g]);
            ft_tensor_free_persistent(c->R[g]);
            ft_tensor_free_persistent(c->fq[g]);
            ft_tensor_free_persistent(c->fk[g]);
        }
        for (int b = 0; b < FN_MAX_BLOCKS; b++) ft_tensor_free_persistent(c->sel[b]);
        ft_tensor_free_persistent(c->tt_v);
        ft_tensor_free_persistent(c->tt_w);
        for (int64_t i = 0; i < c->n_rk; i++) ft_tensor_free_persistent(c->rk[i]);
    }
    free(c->rk);
    memset(c, 0, sizeof *c);
}

/* A constant from host data; persistent if the constants are cached. */
static ft_tensor *upload(ft_ctx *ctx, fn_consts *c, ft_dtype dt, int ndim, const int64_t *shape,
                         const void *data) {
    ft_tensor *t = ft_tensor_from_host(ctx, dt, ndim, shape, data);
    if (!t || !c->kept) return t;
    return ft_tensor_keep(ctx, t);
}

ft_tensor *fn_upload_float(ft_ctx *ctx, fn_consts *c, ft_dtype dt, int ndim, const int64_t *shape,
                           float *data, int64_t n) {
    if (dt == FT_DTYPE_F32) return upload(ctx, c, dt, ndim, shape, data);
    void *tmp = malloc((size_t)(n ? n : 1) * ft_dtype_size(dt));
    if (!tmp) {
        ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
        return NULL;
    }
    ft_convert_host(dt, tmp, FT_DTYPE_F32, data, n);
    ft_tensor *t = upload(ctx, c, dt, ndim, shape, tmp);
    free(tmp);
    return t;
}

static ft_status build_geom(ft_ctx *ctx, const funnel *f, const fn_sched *s, fn_consts *c, int g,
                            ft_dtype dt) {
    const fn_geom *ge = &s->geom[g];
    /* factorized attention needs its phi/pi/psi/omega rows instead of the distance table */
    if (f->factorized && fn_fz_build_geom(ctx, f, s, c, g, dt)) return ctx->status;
    int64_t lq = ge->lq, lk = ge->lk, T = f->factorized ? 0 : ge->T, D = f->d, half = f->d / 2;
    size_t nidx = (size_t)(lq * lk), nr = (size_t)(T * D);
    int64_t *idx = (int64_t *)malloc(nidx * sizeof *idx);
    float *buf = (float *)malloc((nidx > nr ? nidx : nr) * sizeof *buf);
    if (!idx || !buf) {
        free(idx);
        free(buf);
        return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    }
    if (!f->factorized) {
        /* HF keeps `cols` key columns; a single one broadcasts over the keys */
        for (int64_t i = 0; i < lq; i++)
            for (int64_t j = 0; j < lk; j++)
                idx[i * lk + j] = ge->shift * lq + i * (T - ge->shift) + (ge->cols == 1 ? 0 : j);
        c->idx[g] = upload(ctx, c, FT_DTYPE_I64, 2, FT_SHAPE(1, lq * lk), idx);
        /* sinusoids [sin | cos] of each distance, in double like the float64 reference, then rounded */
        for (int64_t t = 0; t < T; t++) {
            double d = (double)(ge->max_dist - t * ge->stride);
            for (int64_t k = 0; k < half; k++) {
                double inv = 1.0 / pow(10000.0, (double)k / (double)half);
                buf[t * D + k] = (float)sin(d * inv);
                buf[t * D + half + k] = (float)cos(d * inv);
            }
        }
        c->R[g] = fn_upload_float(ctx, c, dt, 2, FT_SHAPE(T, D), buf, T * D);
    }
    if (f->separate_cls) {
        /* no positional or token-type term on the <cls> row and column */
        const int64_t *oq = s->orig[ge->qlev], *ok = s->orig[ge->klev];
        for (int64_t i = 0; i < lq; i++)
            for (int64_t j = 0; j < lk; j++) buf[i * lk + j] = (oq[i] != 0 && ok[j] != 0) ? 1.0f : 0.0f;
        c->cls[g] = fn_upload_float(ctx, c, dt, 2, FT_SHAPE(lq, lk), buf, lq * lk);
    }
    free(idx);
    free(buf);
    return ctx->status;
}

static ft_status build(ft_ctx *ctx, const funnel *f, const fn_sched *s, fn_consts *c, ft_dtype dt) {
    c->S = s->S;
    c->n_rk = (f->n_enc + f->n_dec) * 2;
    c->rk = (ft_tensor **)calloc((size_t)(c->n_rk ? c->n_rk : 1), sizeof *c->rk);
    if (!c->rk) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    for (int g = 0; g < FN_MAX_GEOM; g++)
        if (s->geom[g].used && build_geom(ctx, f, s, c, g, dt)) return ctx->status;
    int64_t K = f->type_vocab;
    for (int b = 1; b < f->n_blocks; b++) {
        int64_t L = s->len[b];
        int64_t *sel = (int64_t *)malloc((size_t)((K + 1) * L) * sizeof *sel);
        if (!sel) return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
        for (int64_t r = 0; r <= K; r++) memcpy(sel + r * L, s->orig[b], (size_t)L * sizeof *sel);
        c->sel[b] = upload(ctx, c, FT_DTYPE_I64, 2, FT_SHAPE(K + 1, L), sel);
        free(sel);
    }
    /* v(a) = a == 2 ? e0 : e(a+1), w(b) = b == 2 ? all ones : e0 + e(b+1): v(a).w(b) is 1 when
     * a == b or either is 2 (<cls>), else 0 - HF's token_type_ids_to_mat */
    float *v = (float *)calloc((size_t)(K * (K + 1)), sizeof *v), *w = (float *)calloc((size_t)(K * (K + 1)), sizeof *w);
    if (!v || !w) {
        free(v);
        free(w);
        return ft_set_error(ctx, FT_ERR_OOM, "out of host memory");
    }
    for (int64_t a = 0; a < K; a++) {
        if (a == 2) {
            v[a * (K + 1)] = 1.0f;
            for (int64_t k = 0; k <= K; k++) w[a * (K + 1) + k] = 1.0f;
        } else {
            v[a * (K + 1) + a + 1] = 1.0f;
            w[a * (K + 1)] = 1.0f;
            w[a * (K + 1) + a + 1] = 1.0f;
        }
    }
    c->tt_v = fn_upload_float(ctx, c, dt, 2, FT_SHAPE(K, K + 1), v, K * (K + 1));
    c->tt_w = fn_upload_float(ctx, c, dt, 2, FT_SHAPE(K, K + 1), w, K * (K + 1));
    free(v);
    free(w);
    return ctx->status;
}

fn_consts *fn_consts_get(ft_ctx *ctx, funnel *f, const fn_sched *s, ft_dtype dtype, fn_consts *local) {
    memset(local, 0, sizeof *local);
    if (ctx->exec == FT_EXEC_TRACE) {
        /* tracing: plain constants, folded by the graph at plan time */
        if (build(ctx, f, s, local, dtype)) {
            fn_consts_free(local);
            return NULL;
        }
        return local;
    }
    for (int i = 0; i < FN_CACHE; i++)
        if (f->cache[i].S == s->S) return &f->cache[i];
    fn_consts *c = &f->cache[f->cache_next];
    f->cache_next = (f->cache_next + 1) % FN_CACHE;
    fn_consts_free(c);
    c->kept = true;
    if (build(ctx, f, s, c, dtype)) {
        fn_consts_free(c);
        return NULL;
    }
    return c;
}

void fn_consts_put(funnel *f, fn_consts *c, fn_consts *local) {
    (void)f;
    if (c == local) fn_consts_free(local); /* not kept: only the bookkeeping is freed */
}

ft_tensor *fn_consts_rk(ft_ctx *ctx, const funnel *f, fn_consts *c, int64_t li, int g) {
    ft_tensor **slot = &c->rk[li * 2 + (g & 1)];
    if (*slot) return *slot;
    const fn_layer *L = &f->layer[li];
    /* einsum("td,dnh->tnh", R, r_kernel) */
    ft_tensor *w = ft_reshape(ctx, L->rk, 2, FT_SHAPE(f->d, f->heads * f->dh));
    ft_tensor *rk = ft_matmul(ctx, c->R[g], w, 1.0f); /* [T, N*Dh] */
    if (rk && c->kept) rk = ft_tensor_keep(ctx, rk);
    *slot = rk;
    return rk;
}
