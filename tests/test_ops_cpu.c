/*
 * test_ops_cpu.c - the CPU reference kernels of data movement, elementwise ops,
 * reductions and normalisations, each against a naive double-precision formula
 * written here, on odd shapes and on non-contiguous views (transpose, slice,
 * expand), in f32 (1e-5 relative) and f16/bf16 (storage rounding), plus the
 * error paths the dispatcher reports ("op <name>(<shapes>): ...").
 *
 * Inputs live twice: as a device tensor and as a host "view" (shape, strides in
 * elements, offset into a host array of the values as stored). Every view op
 * applied to the tensor is mirrored on the host view, so the expected values
 * of a strided input are read back independently of the engine (helpers in
 * tests/ft_ops_ref.h).
 */
#include "ft_ops_ref.h"

/* ------------------------------------------------------------------------- */

static void test_copy_cast(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t ne[3] = {3, 17, 129};
        hv x = hv_transpose(mk(dt, 3, ne, -3, 3), 0, 2); /* [129, 17, 3] */
        expect("contiguous(transpose)", ft_contiguous(ctx, x.t), 3, x.ne, dense(x), dt);
        hv s = hv_slice(hv_transpose(x, 1, 2), 0, 5, 17); /* [17, 3, 17] */
        expect("contiguous(slice)", ft_contiguous(ctx, s.t), 3, s.ne, dense(s), dt);
        /* casts from this dtype to every float dtype round once */
        for (int j = 0; j < 3; j++) {
            ft_dtype to = float_dtypes[j];
            double *ref = dense(s);
            for (int64_t i = 0; i < 17 * 3 * 17; i++) ref[i] = round_to(to, ref[i]);
            expect("cast", ft_cast(ctx, s.t, to), 3, s.ne, ref, to);
        }
    }
    /* ints: i64 <-> i32 and ints to floats, through a transposed view */
    int64_t ne[2] = {17, 5};
    hv xi = hv_transpose(mk(FT_DTYPE_I64, 2, ne, -3000, 3000), 0, 1);
    double *ref = dense(xi);
    ft_tensor *i32 = ft_cast(ctx, xi.t, FT_DTYPE_I32);
    int32_t back[85];
    CHECK(i32 && ft_tensor_to_host(ctx, i32, FT_DTYPE_I32, back, sizeof back) == FT_OK, "i64->i32: %s",
          ft_ctx_errmsg(ctx));
    for (int i = 0; i < 85 && i32; i++) CHECK(back[i] == (int32_t)ref[i], "i32[%d] = %d", i, back[i]);
    int64_t back64[85];
    ft_tensor *i64 = ft_cast(ctx, i32, FT_DTYPE_I64);
    CHECK(i64 && ft_tensor_to_host(ctx, i64, FT_DTYPE_I64, back64, sizeof back64) == FT_OK,
          "i32->i64: %s", ft_ctx_errmsg(ctx));
    for (int i = 0; i < 85 && i64; i++) CHECK(back64[i] == (int64_t)ref[i], "i64[%d]", i);
    for (int j = 0; j < 3; j++) {
        double *r = dense(xi);
        for (int i = 0; i < 85; i++) r[i] = round_to(float_dtypes[j], r[i]);
        expect("i64->float", ft_cast(ctx, xi.t, float_dtypes[j]), 2, xi.ne, r, float_dtypes[j]);
        expect("i32->float", ft_cast(ctx, i32, float_dtypes[j]), 2, xi.ne, r, float_dtypes[j]);
    }
    hv xf = mk(FT_DTYPE_F32, 2, ne, -1, 1);
    expect_error("f32->i64", ft_cast(ctx, xf.t, FT_DTYPE_I64), "copy", "f32");
    end_test();
}

static void test_concat_pad(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t na[3] = {5, 4, 3}, nb[3] = {3, 17, 5};
        hv a = hv_transpose(mk(dt, 3, na, -2, 2), 0, 2); /* [3, 4, 5], strided */
        hv b = mk(dt, 3, nb, -2, 2);
        for (int d = 0; d < 3; d++) {
            /* b resized along d by slicing so the other dims match a */
            hv bb = b;
            for (int i = 0; i < 3; i++)
                if (i != d) bb = hv_slice(bb, i, 0, a.ne[i]);
            int64_t one[3];
            for (int i = 0; i < 3; i++) one[i] = i == d ? a.ne[i] + bb.ne[i] : a.ne[i];
            double *da = dense(a), *db = dense(bb), *ref = keep(malloc(sizeof(double) * 3 * 21 * 5 * 5));
            for (int64_t i = 0; i < numel_of(3, one); i++) {
                int64_t c[3], rem = i;
                for (int q = 2; q >= 0; q--) {
                    c[q] = rem % one[q];
                    rem /= one[q];
                }
                const hv *src = c[d] < a.ne[d] ? &a : &bb;
                if (c[d] >= a.ne[d]) c[d] -= a.ne[d];
                ref[i] = (src == &a ? da : db)[(c[0] * src->ne[1] + c[1]) * src->ne[2] + c[2]];
            }
            expect("concat", ft_concat(ctx, a.t, bb.t, d - 3), 3, one, ref, dt);
        }
        /* pad a strided [3, 17] view: dim 1 by (2, 3), dim 0 by (1, 0) */
        int64_t nx[2] = {3, 20};
        hv x = hv_slice(mk(dt, 2, nx, -2, 2), 1, 2, 17);
        double *dx = dense(x), ref1[3 * 22], ref0[4 * 17];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 22; j++)
                ref1[i * 22 + j] = (j < 2 || j >= 19) ? round_to(dt, -1.5) : dx[i * 17 + j - 2];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 17; j++) ref0[i * 17 + j] = i == 0 ? 0.25 : dx[(i - 1) * 17 + j];
        int64_t o1[2] = {3, 22}, o0[2] = {4, 17};
        expect("pad dim 1", ft_pad(ctx, x.t, 1, 2, 3, -1.5f), 2, o1, ref1, dt);
        expect("pad dim 0", ft_pad(ctx, x.t, -2, 1, 0, 0.25f), 2, o0, ref0, dt);
    }
    int64_t n1[2] = {3, 4}, n2[2] = {4, 4};
    hv a = mk(FT_DTYPE_F32, 2, n1, 0, 1), b = mk(FT_DTYPE_F32, 2, n2, 0, 1);
    expect_error("concat mismatch", ft_concat(ctx, a.t, b.t, 1), "concat", "[4,4]");
    expect_error("pad negative", ft_pad(ctx, a.t, 0, -1, 0, 0.0f), "pad", NULL);
    end_test();
}

static void test_embedding_gather(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t nt[2] = {17, 129}, ni[2] = {5, 3};
        hv tab = mk(dt, 2, nt, -1, 1);
        double *dtab = dense(tab);
        for (int it = 0; it < 2; it++) {
            ft_dtype idt = it ? FT_DTYPE_I32 : FT_DTYPE_I64;
            hv ids = hv_transpose(mk(idt, 2, ni, 0, 17), 0, 1); /* [3, 5], strided */
            double *di = dense(ids), *ref = keep(malloc(sizeof(double) * 15 * 129));
            for (int i = 0; i < 15; i++)
                for (int j = 0; j < 129; j++) ref[i * 129 + j] = dtab[(int64_t)di[i] * 129 + j];
            int64_t one[3] = {3, 5, 129};
            expect("embedding", ft_embedding(ctx, tab.t, ids.t), 3, one, ref, dt);
        }
        /* gather_last: x [2, 5, 7] strided, idx [5, 4] */
        int64_t nx[3] = {2, 7, 5}, nid[2] = {5, 4};
        hv x = hv_transpose(mk(dt, 3, nx, -1, 1), 1, 2);
        hv idx = mk(FT_DTYPE_I64, 2, nid, 0, 7);
        double *dx = dense(x), ref[2 * 5 * 4];
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 5; i++)
                for (int j = 0; j < 4; j++)
                    ref[(b * 5 + i) * 4 + j] = dx[(b * 5 + i) * 7 + (int64_t)idx.base[i * 4 + j]];
        int64_t one[3] = {2, 5, 4};
        expect("gather_last", ft_gather_last(ctx, x.t, idx.t), 3, one, ref, dt);
    }
    int64_t nt[2] = {17, 8}, n3[1] = {3}, ng[2] = {2, 3};
    hv tab = mk(FT_DTYPE_F32, 2, nt, -1, 1);
    double bad[3] = {1, 17, 2}, neg[3] = {0, 0, -1};
    hv ids = mk_vals(FT_DTYPE_I64, 1, n3, bad, 0, 0);
    expect_error("id too big", ft_embedding(ctx, tab.t, ids.t), "embedding", "17");
    ids = mk_vals(FT_DTYPE_I32, 1, n3, neg, 0, 0);
    expect_error("id negative", ft_embedding(ctx, tab.t, ids.t), "embedding", "-1");
    ids = mk(FT_DTYPE_F32, 1, n3, 0, 3);
    expect_error("float ids", ft_embedding(ctx, tab.t, ids.t), "embedding", "ids");
    hv x = mk(FT_DTYPE_F32, 2, ng, -1, 1);
    double gi[6] = {0, 1, 2, 2, 3, 0};
    hv gidx = mk_vals(FT_DTYPE_I64, 2, ng, gi, 0, 0);
    expect_error("gather out of range", ft_gather_last(ctx, x.t, gidx.t), "gather_last", "3");
    end_test();
}

/* RoBERTa's positions (i64 of ids' shape): per row of the last dim, pad + the count of
 * non-pad ids up to and including j for a non-pad id, pad for a pad id */
static void check_position_ids(const char *what, hv ids, int64_t pad, const int64_t *want) {
    int64_t n = numel_of(ids.nd, ids.ne), cols = ids.ne[ids.nd - 1], bad = -1;
    double *di = dense(ids);
    int64_t *ref = keep(malloc(sizeof(int64_t) * (size_t)n)), *got = keep(malloc(sizeof(int64_t) * (size_t)n));
    for (int64_t i = 0, c = 0; i < n; i++) {
        c = (i % cols ? c : 0) + ((int64_t)di[i] != pad);
        ref[i] = want ? want[i] : (int64_t)di[i] != pad ? pad + c : pad;
    }
    ft_tensor *y = ft_position_ids(ctx, ids.t, pad);
    CHECK(y && ft_tensor_dtype(y) == FT_DTYPE_I64 && ft_tensor_ndim(y) == ids.nd, "%s: %s", what, ft_ctx_errmsg(ctx));
    if (!y || ft_tensor_to_host(ctx, y, FT_DTYPE_I64, got, sizeof(int64_t) * (size_t)n) != FT_OK) return;
    for (int64_t i = 0; i < n && bad < 0; i++) bad = got[i] != ref[i] ? i : -1;
    CHECK(bad < 0, "%s: position %lld is %lld, expected %lld", what, (long long)bad, bad < 0 ? 0LL : (long long)got[bad],
          bad < 0 ? 0LL : (long long)ref[bad]);
}

static void test_position_ids(void) {
    int64_t n2[2] = {5, 3}, n3[3] = {2, 2, 129}, n1[2] = {1, 1}, n5[2] = {1, 5}, want[5] = {2, 3, 1, 4, 5};
    for (int it = 0; it < 2; it++) {
        ft_dtype idt = it ? FT_DTYPE_I32 : FT_DTYPE_I64;
        check_position_ids("transposed ids", hv_transpose(mk(idt, 2, n2, 0, 4), 0, 1), 1, NULL);
        check_position_ids("3-d ids, pad 0", mk(idt, 3, n3, 0, 3), 0, NULL);
        check_position_ids("one id", mk(idt, 2, n1, 0, 2), 1, NULL);
    }
    double ex[5] = {0, 5, 1, 6, 2}; /* RoBERTa's rule on one row: pad 1 gives [2, 3, 1, 4, 5] */
    check_position_ids("zoo.md example", mk_vals(FT_DTYPE_I64, 2, n5, ex, 0, 0), 1, want);
    expect_error("float ids", ft_position_ids(ctx, mk(FT_DTYPE_F32, 2, n2, 0, 3).t, 1), "position_ids", "ids");
    end_test();
}

/* a (op) b with broadcasting, checked against the naive formula */
static void check_binary(const char *what, int op, hv a, hv b, ft_dtype dt) {
    int ond;
    int64_t one[FT_MAX_DIMS];
    ond = a.nd > b.nd ? a.nd : b.nd;
    for (int i = 0; i < ond; i++) {
        int ia = i - (ond - a.nd), ib = i - (ond - b.nd);
        int64_t da = ia >= 0 ? a.ne[ia] : 1, db = ib >= 0 ? b.ne[ib] : 1;
        one[i] = da == 1 ? db : da;
    }
    int64_t n = numel_of(ond, one);
    double *da = dense(a), *db = dense(b), *ref = keep(malloc(sizeof(double) * (size_t)(n ? n : 1)));
    for (int64_t i = 0; i < n; i++) {
        double x = da[bidx(ond, one, i, a.nd, a.ne)], y = db[bidx(ond, one, i, b.nd, b.ne)];
        ref[i] = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
    }
    ft_tensor *(*fn[4])(ft_ctx *, ft_tensor *, ft_tensor *) = {ft_add, ft_sub, ft_mul, ft_div};
    expect(what, fn[op](ctx, a.t, b.t), ond, one, ref, dt);
}

static void test_binary(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        for (int op = 0; op < 4; op++) {
            int64_t n3[3] = {3, 17, 129}, nc[3] = {3, 17, 1}, nr[1] = {129};
            check_binary("same shape", op, mk(dt, 3, n3, -2, 2), mk(dt, 3, n3, 0.5, 2), dt);
            check_binary("broadcast", op, mk(dt, 3, nc, -2, 2), mk(dt, 1, nr, 0.5, 2), dt);
            /* strided a, stride-0 b, and b broadcasting a leading dim */
            int64_t nt[2] = {129, 17}, n1[2] = {1, 17}, ne[2] = {129, 17};
            hv a = hv_transpose(mk(dt, 2, nt, -2, 2), 0, 1); /* [17, 129] */
            hv b = hv_transpose(hv_expand(mk(dt, 2, n1, 0.5, 2), 2, ne), 0, 1);
            check_binary("transposed, expanded", op, a, b, dt);
            int64_t n4[3] = {1, 3, 20};
            hv c = hv_slice(mk(dt, 3, n4, 0.5, 2), 2, 1, 17); /* [1, 3, 17] */
            int64_t nr3[3] = {17, 3, 1};
            check_binary("sliced", op, c, mk(dt, 3, nr3, 0.5, 2), dt);
        }
    }
    int64_t n1[2] = {3, 17}, n2[2] = {4, 17};
    hv a = mk(FT_DTYPE_F32, 2, n1, 0, 1), b = mk(FT_DTYPE_F32, 2, n2, 0, 1);
    hv h = mk(FT_DTYPE_F16, 2, n1, 0, 1), i = mk(FT_DTYPE_I64, 2, n1, 0, 9);
    expect_error("bad broadcast", ft_add(ctx, a.t, b.t), "add", "[3,17] f32, [4,17] f32");
    expect_error("dtype mix", ft_mul(ctx, a.t, h.t), "mul", "f16");
    expect_error("int input", ft_sub(ctx, i.t, i.t), "sub", "float");
    end_test();
}

static double unary_ref(int which, double x) {
    switch (which) {
    case 0: return x * 0.37 + -1.25;
    case 1: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case 2: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case 3: return tanh(x);
    case 4: return x > 0 ? x : 0;
    default: return 1.0 / (1.0 + exp(-x));
    }
}

static ft_tensor *unary_run(int which, ft_tensor *x) {
    switch (which) {
    case 0: return ft_scale(ctx, x, 0.37f, -1.25f);
    case 1: return ft_gelu(ctx, x);
    case 2: return ft_gelu_tanh(ctx, x);
    case 3: return ft_tanh(ctx, x);
    case 4: return ft_relu(ctx, x);
    default: return ft_sigmoid(ctx, x);
    }
}

static void test_scale_unary(void) {
    static const char *names[6] = {"scale", "gelu", "gelu_tanh", "tanh", "relu", "sigmoid"};
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t ne[2] = {129, 17}, n1[1] = {1};
        hv xs[2] = {hv_transpose(mk(dt, 2, ne, -6, 6), 0, 1), mk(dt, 1, n1, -6, 6)};
        for (int v = 0; v < 2; v++)
            for (int w = 0; w < 6; w++) {
                hv x = xs[v];
                int64_t n = numel_of(x.nd, x.ne);
                double *ref = dense(x);
                for (int64_t i = 0; i < n; i++) ref[i] = unary_ref(w, ref[i]);
                expect(names[w], unary_run(w, x.t), x.nd, x.ne, ref, dt);
            }
    }
    int64_t n[1] = {3};
    hv i = mk(FT_DTYPE_I32, 1, n, 0, 5);
    expect_error("gelu of ints", ft_gelu(ctx, i.t), "gelu", "i32");
    expect_error("scale of ints", ft_scale(ctx, i.t, 1, 0), "scale", "i32");
    end_test();
}

static void test_sum_last(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t ne[3] = {3, 17, 140}, n1[2] = {5, 1};
        hv xs[3] = {hv_slice(mk(dt, 3, ne, -1, 1), 2, 3, 129), /* rows with a stride */
                    hv_transpose(mk(dt, 3, ne, -1, 1), 1, 2), mk(dt, 2, n1, -1, 1)};
        for (int v = 0; v < 3; v++) {
            hv x = xs[v];
            int64_t cols = x.ne[x.nd - 1], rows = numel_of(x.nd, x.ne) / cols, one[3];
            double *dx = dense(x), *ref = keep(malloc(sizeof(double) * (size_t)rows));
            for (int64_t r = 0; r < rows; r++) {
                ref[r] = 0;
                for (int64_t j = 0; j < cols; j++) ref[r] += dx[r * cols + j];
            }
            memcpy(one, x.ne, sizeof one);
            one[x.nd - 1] = 1;
            /* a sum of 140 values of |x| < 1 rounds to the output dtype once */
            expect("sum_last", ft_sum_last(ctx, x.t), x.nd, one, ref, dt);
        }
    }
    end_test();
}

/* softmax over the last dim of x * scale + mask (mask broadcast), reference in
 * double from the f32 logits (the masked sums are what PyTorch's f32 sees); causal:
 * HF GPT-2's logit finfo(f32).min at key j > i + Sk - Sq of row i, then + mask */
static void check_softmax_c(const char *what, hv x, hv *m, float scale, ft_dtype dt, int causal) {
    int64_t n = numel_of(x.nd, x.ne), cols = x.ne[x.nd - 1];
    double *dx = dense(x), *dm = m ? dense(*m) : NULL, *ref = keep(malloc(sizeof(double) * (size_t)n));
    for (int64_t r = 0; r < n / cols; r++) {
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < cols; j++) {
            int64_t i = r * cols + j;
            float l = (causal && j > r % x.ne[x.nd - 2] + cols - x.ne[x.nd - 2] ? -FLT_MAX : (float)dx[i] * scale) +
                      (m ? (float)dm[bidx(x.nd, x.ne, i, m->nd, m->ne)] : 0.0f);
            ref[i] = l;
            if (l > mx) mx = l;
        }
        for (int64_t j = 0; j < cols; j++) s += exp(ref[r * cols + j] - mx);
        for (int64_t j = 0; j < cols; j++) ref[r * cols + j] = exp(ref[r * cols + j] - mx) / s;
    }
    expect(what, causal ? ft_softmax_causal(ctx, x.t, m ? m->t : NULL, scale) : ft_softmax(ctx, x.t, m ? m->t : NULL, scale),
           x.nd, x.ne, ref, dt);
}

#define check_softmax(what, x, m, scale, dt) check_softmax_c(what, x, m, scale, dt, 0)

static void test_softmax(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t ne[4] = {2, 3, 5, 129}, nm[4] = {2, 1, 1, 129};
        hv x = mk(dt, 4, ne, -4, 4);
        check_softmax("plain", x, NULL, 1.0f, dt);
        /* HF-style additive mask: finfo(f32).min on padded keys; batch 1 fully masked */
        double *mv = keep(malloc(sizeof(double) * 2 * 129));
        for (int j = 0; j < 2 * 129; j++) mv[j] = (j >= 129 || j % 129 >= 100) ? -FLT_MAX : 0.0;
        hv m = mk_vals(FT_DTYPE_F32, 4, nm, mv, 0, 0);
        check_softmax("masked", x, &m, 0.125f, dt);
        /* a mask with stride 0 (expand) and a transposed one */
        int64_t n1[2] = {1, 129}, ne2[2] = {5, 129}, nt[2] = {129, 5};
        hv me = hv_expand(mk(FT_DTYPE_F32, 2, n1, -3, 0), 2, ne2);
        check_softmax("expanded mask", x, &me, 0.5f, dt);
        hv mt = hv_transpose(mk(FT_DTYPE_F32, 2, nt, -3, 0), 0, 1);
        check_softmax("transposed mask", x, &mt, 2.0f, dt);
        /* x a strided view; a row with -inf logits (not all) */
        int64_t nx[3] = {3, 17, 40};
        double *xv = keep(malloc(sizeof(double) * 3 * 17 * 40));
        for (int i = 0; i < 3 * 17 * 40; i++) xv[i] = (i < 40 && i % 3 == 0) ? -INFINITY : urand(-3, 3);
        hv xs = hv_slice(mk_vals(dt, 3, nx, xv, 0, 0), 2, 0, 33);
        check_softmax("sliced x with -inf", xs, NULL, 1.0f, dt);
        check_softmax("transposed x", hv_transpose(xs, 0, 1), NULL, 0.3f, dt);
        int64_t nq[4] = {2, 3, 129, 129}, nk[3] = {2, 5, 129}, nw[3] = {3, 40, 17}; /* GPT-2's causal softmax */
        check_softmax_c("causal masked", mk(dt, 4, nq, -4, 4), &m, 0.125f, dt, 1);
        check_softmax_c("causal keys > queries", x, &m, 0.5f, dt, 1);
        check_softmax_c("causal queries > keys", mk(dt, 3, nw, -4, 4), NULL, 1.0f, dt, 1);
        check_softmax_c("causal view", hv_transpose(mk(dt, 3, nk, -4, 4), 0, 1), NULL, 1.0f, dt, 1);
    }
    int64_t ne[2] = {3, 17}, nb[1] = {3};
    hv x = mk(FT_DTYPE_F32, 2, ne, 0, 1);
    hv mh = mk(FT_DTYPE_F16, 2, ne, 0, 1), mb = mk(FT_DTYPE_F32, 1, nb, 0, 1);
    expect_error("f16 mask", ft_softmax(ctx, x.t, mh.t, 1.0f), "softmax", "f32");
    expect_error("mask shape", ft_softmax(ctx, x.t, mb.t, 1.0f), "softmax", "[3] f32");
    end_test();
}

/* LayerNorm of x (+ res) over the last dim in double; h rounds to dt like the unfused add */
static double *ln_ref(hv x, hv *res, hv *g, hv *b, double eps, ft_dtype dt) {
    int64_t n = numel_of(x.nd, x.ne), d = x.ne[x.nd - 1];
    double *h = dense(x), *dr = res ? dense(*res) : NULL, *dg = g ? dense(*g) : NULL;
    double *db = b ? dense(*b) : NULL;
    if (res)
        for (int64_t i = 0; i < n; i++) h[i] = round_to(dt, (float)h[i] + (float)dr[i]);
    for (int64_t r = 0; r < n / d; r++) {
        double mean = 0, var = 0, *row = h + r * d;
        for (int64_t j = 0; j < d; j++) mean += row[j] / (double)d;
        for (int64_t j = 0; j < d; j++) var += (row[j] - mean) * (row[j] - mean) / (double)d;
        for (int64_t j = 0; j < d; j++)
            row[j] = (row[j] - mean) / sqrt(var + eps) * (g ? dg[j] : 1) + (b ? db[j] : 0);
    }
    return h;
}

static void test_layernorm(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t ne[3] = {3, 17, 129}, nd[1] = {129}, nw[3] = {3, 17, 140};
        /* a large DC offset with eps 1e-12: one-pass f32 statistics would fail here */
        hv x = mk(dt, 3, ne, 999, 1001), g = mk(dt, 1, nd, 0.5, 1.5), b = mk(dt, 1, nd, -1, 1);
        expect("affine", ft_layernorm(ctx, x.t, g.t, b.t, 1e-12f), 3, ne,
               ln_ref(x, NULL, &g, &b, 1e-12f, dt), dt);
        hv xs = hv_slice(mk(dt, 3, nw, -2, 2), 2, 5, 129);
        expect("no affine, sliced", ft_layernorm(ctx, xs.t, NULL, NULL, 1e-5f), 3, ne,
               ln_ref(xs, NULL, NULL, NULL, 1e-5f, dt), dt);
        hv xt = hv_transpose(mk(dt, 3, ne, -2, 2), 0, 1);
        expect("gamma only, transposed", ft_layernorm(ctx, xt.t, g.t, NULL, 1e-5f), 3, xt.ne,
               ln_ref(xt, NULL, &g, NULL, 1e-5f, dt), dt);
        /* the residual form (graph passes make it): src[3], any strides */
        int64_t nr[3] = {17, 3, 129};
        hv r = hv_transpose(mk(dt, 3, nr, -2, 2), 0, 1);
        ft_params_norm p = {1e-6f, 0};
        ft_tensor *src[4] = {xs.t, g.t, b.t, r.t};
        expect("residual", ft_dispatch(ctx, FT_OP_LAYERNORM, src, 4, &p, sizeof p), 3, ne,
               ln_ref(xs, &r, &g, &b, 1e-6f, dt), dt);
    }
    int64_t ne[2] = {3, 17}, n16[1] = {16}, n17[1] = {17};
    hv x = mk(FT_DTYPE_F32, 2, ne, 0, 1), g16 = mk(FT_DTYPE_F32, 1, n16, 0, 1);
    hv gh = mk(FT_DTYPE_F16, 1, n17, 0, 1);
    expect_error("gamma shape", ft_layernorm(ctx, x.t, g16.t, NULL, 1e-5f), "layernorm", "[17]");
    expect_error("gamma dtype", ft_layernorm(ctx, x.t, gh.t, NULL, 1e-5f), "layernorm", "f16");
    end_test();
}

static void test_group_batch_norm(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        /* groupnorm of a strided [2, 6, 17] (WavLM-like DC offset) with 3 and 6 groups */
        int64_t nt[3] = {2, 17, 6}, n6[1] = {6};
        hv x = hv_transpose(mk(dt, 3, nt, 499, 501), 1, 2);
        hv g = mk(dt, 1, n6, 0.5, 1.5), b = mk(dt, 1, n6, -1, 1);
        double *dx = dense(x);
        for (int groups = 3; groups <= 6; groups += 3) {
            double ref[2 * 6 * 17];
            int64_t per = 6 / groups * 17;
            for (int bg = 0; bg < 2 * groups; bg++) {
                double mean = 0, var = 0;
                const double *v = dx + bg * per;
                for (int64_t i = 0; i < per; i++) mean += v[i] / (double)per;
                for (int64_t i = 0; i < per; i++) var += (v[i] - mean) * (v[i] - mean) / (double)per;
                for (int64_t i = 0; i < per; i++) {
                    int c = (int)((bg * per + i) / 17 % 6);
                    ref[bg * per + i] = (v[i] - mean) / sqrt(var + 1e-5) * g.base[c] + b.base[c];
                }
            }
            expect("groupnorm", ft_groupnorm(ctx, x.t, groups, g.t, b.t, 1e-5f), 3, x.ne, ref, dt);
        }
        /* 4-d, no affine */
        int64_t n4[4] = {2, 4, 3, 5};
        hv y = mk(dt, 4, n4, -2, 2);
        double ref4[120];
        for (int bg = 0; bg < 4; bg++) {
            double mean = 0, var = 0;
            for (int i = 0; i < 30; i++) mean += y.base[bg * 30 + i] / 30;
            for (int i = 0; i < 30; i++) var += pow(y.base[bg * 30 + i] - mean, 2) / 30;
            for (int i = 0; i < 30; i++) ref4[bg * 30 + i] = (y.base[bg * 30 + i] - mean) / sqrt(var + 1e-6);
        }
        expect("groupnorm 4-d", ft_groupnorm(ctx, y.t, 2, NULL, NULL, 1e-6f), 4, n4, ref4, dt);
        /* batchnorm with a strided mean (a column of [4, 2]) */
        int64_t nm[2] = {4, 2}, n4c[1] = {4};
        hv mean = hv_transpose(mk(dt, 2, nm, -1, 1), 0, 1);
        mean.t = ft_select(ctx, mean.t, 0, 1);
        mean.off += mean.nb[0];
        mean.nd = 1;
        mean.ne[0] = 4;
        mean.nb[0] = mean.nb[1];
        hv var = mk(dt, 1, n4c, 0.5, 2), gg = mk(dt, 1, n4c, 0.5, 1.5), bb = mk(dt, 1, n4c, -1, 1);
        double *dm = dense(mean), refb[120];
        for (int i = 0; i < 120; i++) {
            int c = i / 15 % 4;
            refb[i] = (y.base[i] - dm[c]) / sqrt(var.base[c] + 1e-5) * gg.base[c] + bb.base[c];
        }
        expect("batchnorm", ft_batchnorm(ctx, y.t, mean.t, var.t, gg.t, bb.t, 1e-5f), 4, n4, refb, dt);
    }
    int64_t ne[3] = {2, 6, 5}, n5[1] = {5};
    hv x = mk(FT_DTYPE_F32, 3, ne, 0, 1), v5 = mk(FT_DTYPE_F32, 1, n5, 0, 1);
    expect_error("groups", ft_groupnorm(ctx, x.t, 4, NULL, NULL, 1e-5f), "groupnorm", "4 groups");
    expect_error("bn param", ft_batchnorm(ctx, x.t, v5.t, v5.t, v5.t, v5.t, 1e-5f), "batchnorm", "[6]");
    end_test();
}

static void test_pooling(void) {
    static const int kk[4][2] = {{2, 2}, {3, 2}, {4, 4}, {20, 1}}; /* kernel, stride */
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t nt[3] = {3, 5, 17};
        hv x = hv_transpose(mk(dt, 3, nt, -2, 2), 1, 2); /* [3, 17, 5] */
        double *dx = dense(x);
        for (int c = 0; c < 4; c++)
            for (int kind = 0; kind < 3; kind++) {
                int kn = kk[c][0], s = kk[c][1];
                int64_t lo = 17 <= kn ? 1 : (17 - kn + s - 1) / s + 1, one[3] = {3, lo, 5};
                double ref[3 * 17 * 5];
                for (int o = 0; o < 3; o++)
                    for (int w = 0; w < lo; w++)
                        for (int i = 0; i < 5; i++) {
                            int e = w * s + kn < 17 ? w * s + kn : 17;
                            double acc = kind == 0 ? 0 : dx[(o * 17 + w * s) * 5 + i];
                            for (int q = w * s; q < e; q++) {
                                double v = dx[(o * 17 + q) * 5 + i];
                                acc = kind == 0 ? acc + v : kind == 1 ? fmax(acc, v) : fmin(acc, v);
                            }
                            ref[(o * lo + w) * 5 + i] = kind == 0 ? acc / (e - w * s) : acc;
                        }
                expect("pool_dim", ft_pool_dim(ctx, x.t, -2, kind, kn, s), 3, one, ref, dt);
            }
        /* maxpool2d: all-negative input, so padding that acted as 0 would show */
        int64_t n4[4] = {2, 3, 9, 11};
        hv y = mk(dt, 4, n4, -5, -1);
        static const int mp[3][3] = {{3, 2, 1}, {2, 2, 0}, {3, 1, 1}};
        for (int c = 0; c < 3; c++) {
            int kn = mp[c][0], s = mp[c][1], pd = mp[c][2];
            int64_t ho = (9 + 2 * pd - kn) / s + 1, wo = (11 + 2 * pd - kn) / s + 1;
            int64_t one[4] = {2, 3, ho, wo};
            double *ref = keep(malloc(sizeof(double) * (size_t)(6 * ho * wo)));
            for (int pl = 0; pl < 6; pl++)
                for (int oy = 0; oy < ho; oy++)
                    for (int ox = 0; ox < wo; ox++) {
                        double m = -INFINITY;
                        for (int a = 0; a < kn; a++)
                            for (int bq = 0; bq < kn; bq++) {
                                int iy = oy * s - pd + a, ix = ox * s - pd + bq;
                                if (iy >= 0 && iy < 9 && ix >= 0 && ix < 11)
                                    m = fmax(m, y.base[(pl * 9 + iy) * 11 + ix]);
                            }
                        ref[(pl * ho + oy) * wo + ox] = m;
                    }
            expect("maxpool2d", ft_maxpool2d(ctx, y.t, kn, s, pd), 4, one, ref, dt);
        }
        /* global average pool of a strided 4-d and a 3-d tensor */
        hv yt = hv_transpose(y, 2, 3);
        double *dy = dense(yt), ref[6];
        for (int pl = 0; pl < 6; pl++) {
            ref[pl] = 0;
            for (int i = 0; i < 99; i++) ref[pl] += dy[pl * 99 + i] / 99;
        }
        int64_t o4[4] = {2, 3, 1, 1}, o3[3] = {2, 3, 1};
        expect("global_avgpool 4-d", ft_global_avgpool(ctx, yt.t), 4, o4, ref, dt);
        int64_t n3[3] = {2, 3, 17};
        hv z = mk(dt, 3, n3, 99, 101);
        for (int pl = 0; pl < 6; pl++) {
            ref[pl] = 0;
            for (int i = 0; i < 17; i++) ref[pl] += z.base[pl * 17 + i] / 17;
        }
        expect("global_avgpool 3-d", ft_global_avgpool(ctx, z.t), 3, o3, ref, dt);
    }
    int64_t ne[2] = {3, 5};
    hv x = mk(FT_DTYPE_F32, 2, ne, 0, 1);
    expect_error("pool kind", ft_pool_dim(ctx, x.t, 1, 3, 2, 2), "pool_dim", "kind 3");
    /* length 5, kernel 1, stride 3: PyTorch's ceil mode keeps windows at 0 and 3 only */
    ft_tensor *pw = ft_pool_dim(ctx, x.t, 1, 0, 1, 3);
    CHECK(pw && ft_tensor_dim(pw, 1) == 2, "pool kernel 1 stride 3 over 5: %lld outputs, want 2",
          (long long)ft_tensor_dim(pw, 1));
    ft_ctx_clear_error(ctx);
    expect_error("maxpool rank", ft_maxpool2d(ctx, x.t, 2, 2, 0), "maxpool2d", NULL);
    end_test();
}

static void test_weight_norm(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t nt[3] = {7, 4, 5};
        hv v = hv_transpose(mk(dt, 3, nt, -1, 1), 1, 2); /* [7, 5, 4] */
        double *dv = dense(v);
        int64_t gshape[3][3] = {{7, 1, 1}, {5, 1, 1}, {1, 1, 4}};
        for (int d = 0; d < 3; d++) {
            hv g = mk(dt, d == 0 ? 1 : 3, gshape[d], 0.5, 2);
            double norm[7] = {0}, ref[140];
            for (int i = 0; i < 140; i++) {
                int idx[3] = {i / 20, i / 4 % 5, i % 4};
                norm[idx[d]] += dv[i] * dv[i];
            }
            for (int i = 0; i < 140; i++) {
                int idx[3] = {i / 20, i / 4 % 5, i % 4};
                ref[i] = g.base[idx[d]] * dv[i] / sqrt(norm[idx[d]]);
            }
            expect("weight_norm", ft_weight_norm(ctx, g.t, v.t, d), 3, v.ne, ref, dt);
        }
    }
    int64_t nv[2] = {3, 4}, ng[1] = {5};
    hv v = mk(FT_DTYPE_F32, 2, nv, 0, 1), g = mk(FT_DTYPE_F32, 1, ng, 0, 1);
    expect_error("g size", ft_weight_norm(ctx, g.t, v.t, 1), "weight_norm", "4 elements");
    end_test();
}

/* A FUSED_ELTWISE node built as the graph pass builds it (dst shape set by the
 * pass, no shape inference), run through the node launcher. */
static ft_tensor *run_fused(ft_tensor **src, int n, int nd, const int64_t *ne,
                            const ft_params_fused_eltwise *p) {
    ft_tensor *node = ft_tensor_alloc_header(ctx);
    if (!node) return NULL;
    node->op = FT_OP_FUSED_ELTWISE;
    node->device = FT_DEVICE_CPU;
    node->dtype = src[0]->dtype;
    node->ndim = nd;
    for (int i = 0; i < n; i++) node->src[i] = src[i];
    for (int i = 0; i < nd; i++) node->ne[i] = ne[i];
    ft_tensor_set_contiguous_strides(node);
    memcpy(node->op_params, p, sizeof *p);
    if (ft_tensor_alloc_storage(ctx, node) || ft_node_launch(ctx, node)) return NULL;
    return node;
}

static void test_fused_eltwise(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t ne[3] = {3, 17, 129}, n1[1] = {129}, nc[3] = {3, 17, 1}, nt[2] = {129, 17};
        hv x = mk(dt, 1, n1, -2, 2); /* src0 broadcasts too */
        hv b = mk(dt, 1, n1, 0.5, 2), c = mk(dt, 3, nc, -2, 2);
        hv d = hv_transpose(mk(dt, 2, nt, -2, 2), 0, 1); /* [17, 129] strided */
        ft_tensor *src[4] = {x.t, b.t, c.t, d.t};
        double *dd = dense(d), *ref = keep(malloc(sizeof(double) * 3 * 17 * 129));
        /* d - gelu(c * (x + b) * 0.5 + 0.1): broadcast operands, a swapped mul and sub */
        ft_params_fused_eltwise p;
        memset(&p, 0, sizeof p);
        const int8_t ops[5] = {FT_OP_ADD, FT_OP_MUL, FT_OP_SCALE, FT_OP_GELU, FT_OP_SUB};
        const int8_t opd[5] = {1, 2, -1, -1, 3}, swp[5] = {0, 1, 0, 0, 1};
        p.n_steps = 5;
        for (int s = 0; s < 5; s++) {
            p.op[s] = ops[s];
            p.operand[s] = opd[s];
            p.swap[s] = swp[s];
        }
        p.alpha[2] = 0.5f;
        p.beta[2] = 0.1f;
        for (int64_t i = 0; i < 3 * 17 * 129; i++) {
            double xv = x.base[i % 129], bv = b.base[i % 129], cv = c.base[i / 129];
            double acc = unary_ref(1, cv * (xv + bv) * 0.5 + 0.1);
            ref[i] = dd[i % (17 * 129)] - acc;
        }
        expect("fused chain", run_fused(src, 4, 3, ne, &p), 3, ne, ref, dt);
        /* a division, then the other activations */
        const int8_t acts[5] = {FT_OP_DIV, FT_OP_RELU, FT_OP_TANH, FT_OP_SIGMOID, FT_OP_GELU_TANH};
        for (int s = 0; s < 5; s++) {
            p.op[s] = acts[s];
            p.operand[s] = s == 0 ? 1 : -1;
            p.swap[s] = 0;
        }
        for (int64_t i = 0; i < 3 * 17 * 129; i++)
            ref[i] = unary_ref(2, unary_ref(5, unary_ref(3, unary_ref(4, c.base[i / 129] / b.base[i % 129]))));
        ft_tensor *s2[2] = {c.t, b.t};
        expect("activations", run_fused(s2, 2, 3, ne, &p), 3, ne, ref, dt);
        p.op[0] = FT_OP_ADD;
        p.operand[0] = 3; /* no such source */
        ft_tensor *r = run_fused(s2, 2, 3, ne, &p);
        CHECK(r == NULL && strstr(ft_ctx_errmsg(ctx), "operand"), "missing operand: %s",
              ft_ctx_errmsg(ctx));
        ft_ctx_clear_error(ctx);
    }
    end_test();
}

/* Sizes above the kernels' OpenMP threshold, so the parallel paths run too. */
static void test_large_parallel(void) {
    ft_dtype dt = FT_DTYPE_F32;
    int64_t nt[2] = {1031, 64}, nr[1] = {1031}, ne[2] = {64, 1031};
    hv x = hv_transpose(mk(dt, 2, nt, -3, 3), 0, 1); /* [64, 1031] strided */
    check_binary("large add", 0, x, mk(dt, 1, nr, -1, 1), dt);
    double *ref = dense(x);
    for (int64_t i = 0; i < 64 * 1031; i++) ref[i] = unary_ref(1, ref[i]);
    expect("large gelu", ft_gelu(ctx, x.t), 2, ne, ref, dt);
    expect("large copy", ft_contiguous(ctx, x.t), 2, ne, dense(x), dt);
    hv m = mk(FT_DTYPE_F32, 1, nr, -2, 0);
    check_softmax("large softmax", x, &m, 0.7f, dt);
    expect("large layernorm", ft_layernorm(ctx, x.t, NULL, NULL, 1e-5f), 2, ne,
           ln_ref(x, NULL, NULL, NULL, 1e-5f, dt), dt);
    /* weight norm over a WavLM-like layout (dim 2) and groupnorm with groups = C */
    int64_t nv[3] = {40, 48, 32}, ng[3] = {1, 1, 32};
    hv v = mk(dt, 3, nv, -1, 1), g = mk(dt, 3, ng, 0.5, 2);
    double norm[32] = {0}, *wref = keep(malloc(sizeof(double) * 40 * 48 * 32));
    for (int i = 0; i < 40 * 48 * 32; i++) norm[i % 32] += v.base[i] * v.base[i];
    for (int i = 0; i < 40 * 48 * 32; i++) wref[i] = g.base[i % 32] * v.base[i] / sqrt(norm[i % 32]);
    expect("large weight_norm", ft_weight_norm(ctx, g.t, v.t, 2), 3, nv, wref, dt);
    double *gref = keep(malloc(sizeof(double) * 40 * 48 * 32));
    for (int r = 0; r < 40 * 48; r++) {
        double mean = 0, var = 0;
        for (int i = 0; i < 32; i++) mean += v.base[r * 32 + i] / 32;
        for (int i = 0; i < 32; i++) var += pow(v.base[r * 32 + i] - mean, 2) / 32;
        for (int i = 0; i < 32; i++) gref[r * 32 + i] = (v.base[r * 32 + i] - mean) / sqrt(var + 1e-5);
    }
    expect("large groupnorm", ft_groupnorm(ctx, v.t, 48, NULL, NULL, 1e-5f), 3, nv, gref, dt);
    end_test();
}

/* The weights-with-bias operand of a convolution (src[4], made by the graph for
 * CUDA's im2col GEMM) has rows of K + 1 padded to a multiple of 8 elements, so
 * 16-bit rows start 16-byte aligned; the op refuses the unpadded [Cout, K + 1]
 * and the CPU kernel computes the same convolution with the padded one. */
static void test_conv_bias_column_layout(void) {
    CHECK(ft_conv_wb_cols(147) == 152 && ft_conv_wb_cols(576) == 584 && ft_conv_wb_cols(7) == 8 &&
              ft_conv_wb_cols(15) == 16 && ft_conv_wb_cols(16) == 24,
          "ft_conv_wb_cols: 147 -> %lld, 576 -> %lld", (long long)ft_conv_wb_cols(147),
          (long long)ft_conv_wb_cols(576));
    int64_t xne[4] = {2, 3, 9, 10}, wne[4] = {4, 3, 7, 7}, bne[1] = {4}, bad[2] = {4, 148}, good[2] = {4, 152};
    hv x = mk(FT_DTYPE_F32, 4, xne, -1, 1), w = mk(FT_DTYPE_F32, 4, wne, -1, 1), b = mk(FT_DTYPE_F32, 1, bne, -1, 1);
    hv wb_bad = mk(FT_DTYPE_F32, 2, bad, -1, 1), wb_good = mk(FT_DTYPE_F32, 2, good, -1, 1);
    ft_params_conv p = {.stride = 2, .padding = 3, .groups = 1, .act = FT_ACT_NONE, .act_in = FT_ACT_NONE};
    ft_tensor *s_bad[5] = {x.t, w.t, b.t, NULL, wb_bad.t}, *s_good[5] = {x.t, w.t, b.t, NULL, wb_good.t};
    expect_error("conv2d with a [Cout, K + 1] bias column", ft_dispatch(ctx, FT_OP_CONV2D, s_bad, 5, &p, sizeof p),
                 "conv2d", "152");
    ft_ctx_clear_error(ctx);
    ft_tensor *ref = ft_conv2d(ctx, x.t, w.t, b.t, 2, 3, 1);
    ft_tensor *got = ft_dispatch(ctx, FT_OP_CONV2D, s_good, 5, &p, sizeof p);
    CHECK(ref && got, "conv2d with a padded bias column: %s", ft_ctx_errmsg(ctx));
    float r[2 * 4 * 5 * 5], g[2 * 4 * 5 * 5];
    if (ref && got && ft_numel(ref) == 200 && ft_numel(got) == 200 &&
        ft_tensor_to_host(ctx, ref, FT_DTYPE_F32, r, sizeof r) == FT_OK &&
        ft_tensor_to_host(ctx, got, FT_DTYPE_F32, g, sizeof g) == FT_OK)
        CHECK(!memcmp(r, g, sizeof r), "conv2d with the padded bias column differs from conv2d");
    else
        CHECK(0, "conv2d outputs: %s", ft_ctx_errmsg(ctx));
    end_test();
}

/* The vectorised paths' edges, in every float dtype: dims the elementwise engine
 * merges (partly and fully), rows longer than its 1024-element chunks with a
 * tail, the -6..6 activation range on a strided view, a softmax/LayerNorm row
 * and a GroupNorm group past the 4096-float stack buffer (heap path), rows of
 * length 1, and BatchNorm planes longer than a chunk. */
static void test_vector_paths(void) {
    for (int k = 0; k < 3; k++) {
        ft_dtype dt = float_dtypes[k];
        int64_t n4[4] = {2, 3, 1, 2500}, nb3[3] = {3, 1, 1}, nf[3] = {4, 5, 7};
        check_binary("merged dims, chunk tail", 0, mk(dt, 4, n4, -2, 2), mk(dt, 3, nb3, -1, 1), dt);
        check_binary("fully merged", 2, mk(dt, 3, nf, -2, 2), mk(dt, 3, nf, -1, 1), dt);
        int64_t nw[2] = {3, 2600};
        hv xs = hv_slice(mk(dt, 2, nw, -6, 6), 1, 7, 2590); /* rows with a gap */
        check_binary("sliced rows", 3, xs, mk(dt, 2, xs.ne, 0.5, 2), dt);
        hv xt = hv_transpose(mk(dt, 2, nw, -6, 6), 0, 1); /* inner stride 2600 */
        for (int w = 0; w < 6; w++) {
            hv x = w % 2 ? xt : xs;
            double *ref = dense(x);
            for (int64_t i = 0; i < numel_of(x.nd, x.ne); i++) ref[i] = unary_ref(w, ref[i]);
            expect("unary long rows", unary_run(w, x.t), x.nd, x.ne, ref, dt);
        }
        hv m = mk(FT_DTYPE_F32, 1, &xs.ne[1], -3, 0);
        check_softmax("softmax heap row", xs, &m, 0.4f, dt);
        int64_t n1[2] = {5, 1};
        check_softmax("softmax rows of 1", mk(dt, 2, n1, -3, 3), NULL, 1.0f, dt);
        expect("layernorm heap row", ft_layernorm(ctx, xs.t, NULL, NULL, 1e-5f), 2, xs.ne,
               ln_ref(xs, NULL, NULL, NULL, 1e-5f, dt), dt);
        hv r = mk(dt, 2, xs.ne, -1, 1), g = mk(dt, 1, &xs.ne[1], 0.5, 1.5), b = mk(dt, 1, &xs.ne[1], -1, 1);
        ft_params_norm p = {1e-6f, 0};
        ft_tensor *src[4] = {xs.t, g.t, b.t, r.t};
        expect("layernorm heap row, residual", ft_dispatch(ctx, FT_OP_LAYERNORM, src, 4, &p, sizeof p), 2,
               xs.ne, ln_ref(xs, &r, &g, &b, 1e-6f, dt), dt);
        expect("layernorm rows of 1", ft_layernorm(ctx, mk(dt, 2, n1, -3, 3).t, NULL, NULL, 1e-5f), 2, n1,
               ln_ref(mk(dt, 2, n1, 0, 0), NULL, NULL, NULL, 1e-5f, dt), dt);
        /* groupnorm: 2 groups of 2 x 2100 = 4200 floats; batchnorm planes of 2100 */
        int64_t ng[3] = {2, 4, 2100}, n4c[1] = {4};
        hv y = mk(dt, 3, ng, 5, 7), gg = mk(dt, 1, n4c, 0.5, 1.5), bb = mk(dt, 1, n4c, -1, 1);
        hv mean = mk(dt, 1, n4c, -1, 1), var = mk(dt, 1, n4c, 0.5, 2);
        double *gref = keep(malloc(sizeof(double) * 2 * 4 * 2100)), *bref = keep(malloc(sizeof(double) * 2 * 4 * 2100));
        for (int bg = 0; bg < 4; bg++) {
            const double *v = y.base + bg * 4200;
            double mu = 0, va = 0;
            for (int i = 0; i < 4200; i++) mu += v[i] / 4200;
            for (int i = 0; i < 4200; i++) va += (v[i] - mu) * (v[i] - mu) / 4200;
            for (int i = 0; i < 4200; i++) {
                int c = (bg % 2) * 2 + i / 2100;
                gref[bg * 4200 + i] = (v[i] - mu) / sqrt(va + 1e-5) * gg.base[c] + bb.base[c];
            }
        }
        for (int i = 0; i < 2 * 4 * 2100; i++) {
            int c = i / 2100 % 4;
            bref[i] = (y.base[i] - mean.base[c]) / sqrt(var.base[c] + 1e-5) * gg.base[c] + bb.base[c];
        }
        expect("groupnorm heap group", ft_groupnorm(ctx, y.t, 2, gg.t, bb.t, 1e-5f), 3, ng, gref, dt);
        expect("batchnorm long planes", ft_batchnorm(ctx, y.t, mean.t, var.t, gg.t, bb.t, 1e-5f), 3, ng, bref, dt);
    }
    end_test();
}

static void test_empty_and_sticky(void) {
    int64_t z[2] = {0, 5}, z2[2] = {3, 0}, one[2] = {3, 1};
    float dummy[1] = {0};
    ft_tensor *a = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, z, dummy);
    ft_tensor *e = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, z2, dummy);
    CHECK(ft_add(ctx, a, a) && ft_gelu(ctx, a) && ft_softmax(ctx, a, NULL, 1.0f) &&
              ft_layernorm(ctx, a, NULL, NULL, 1e-5f) && ft_contiguous(ctx, ft_transpose(ctx, a, 0, 1)),
          "ops on empty tensors: %s", ft_ctx_errmsg(ctx));
    double zeros[3] = {0, 0, 0};
    expect("sum over an empty dim", ft_sum_last(ctx, e), 2, one, zeros, FT_DTYPE_F32);
    /* errors are sticky until cleared, and the message names the op and shapes */
    int64_t n1[2] = {3, 17}, n2[2] = {4, 17};
    hv x = mk(FT_DTYPE_F32, 2, n1, 0, 1), y = mk(FT_DTYPE_F32, 2, n2, 0, 1);
    CHECK(ft_div(ctx, x.t, y.t) == NULL, "bad broadcast accepted");
    CHECK(ft_ctx_status(ctx) == FT_ERR_SHAPE, "status %s", ft_status_str(ft_ctx_status(ctx)));
    CHECK(!strcmp(ft_ctx_errmsg(ctx), "op div([3,17] f32, [4,17] f32): shapes cannot be broadcast together"),
          "message: %s", ft_ctx_errmsg(ctx));
    CHECK(ft_add(ctx, x.t, x.t) == NULL, "an op ran with an error pending");
    ft_ctx_clear_error(ctx);
    CHECK(ft_add(ctx, x.t, x.t) != NULL, "op failed after clear: %s", ft_ctx_errmsg(ctx));
    end_test();
}

int main(void) {
    (void)ft_test_golden_dir; /* the harness helper is not needed here */
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) {
        printf("could not create a CPU context\n");
        return 1;
    }
    RUN(test_copy_cast);
    RUN(test_concat_pad);
    RUN(test_embedding_gather);
    RUN(test_position_ids);
    RUN(test_binary);
    RUN(test_scale_unary);
    RUN(test_sum_last);
    RUN(test_softmax);
    RUN(test_layernorm);
    RUN(test_group_batch_norm);
    RUN(test_pooling);
    RUN(test_weight_norm);
    RUN(test_fused_eltwise);
    RUN(test_large_parallel);
    RUN(test_conv_bias_column_layout);
    RUN(test_vector_paths);
    RUN(test_empty_and_sticky);
    ft_ctx_free(ctx);
    return ft_test_finish();
}
