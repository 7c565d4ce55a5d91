/*
 * gemm.c - the CPU SGEMM core of the GEMM family, and the helpers linear,
 * matmul, attention and the convolutions share (f32 staging, rounding stores,
 * epilogues).
 *
 * The SGEMM is the classic blocked scheme: B is packed into KC x NR column
 * slivers, A into MR x KC row slivers (alpha folded in while packing), and a
 * register-tiled micro-kernel multiplies one A sliver with one or two B
 * slivers, all its accumulators in registers. The micro-kernels, the packing
 * and the blocking sizes (from the host's ISA and cache sizes, at run time)
 * are in gemm_micro.c; this file runs the loop nest, splits it over threads
 * and keeps operands packed once (weights).
 */
#include "gemm.h"
#include "../../engine/ft_checked.h"
#include "gemm_micro.h"
#include "scratch.h"
#include "vrow.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define NR FT_CPU_GEMM_NR /* columns of a packed B sliver */
#define MR_MAX FT_CPU_GEMM_MR_MAX

typedef const ft_cpu_gemm_kern *gemm_kernel;

static gemm_kernel pick_kernel(void) { return ft_cpu_gemm_kern_get(); }

typedef struct gemm_bufs {
    float *pa; /* [mc][kc] */
    float *pb; /* [kc][round_up(min(n, nc), NR)] */
    ft_cpu_buf ba, bb;
} gemm_bufs;

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* The calling OpenMP thread's packing buffers, from the kernel's scratch sc
 * (captured before the team forms: workers do not see the caller's current
 * scratch) or malloc'd without one. */
static int bufs_alloc(gemm_bufs *bf, ft_cpu_scratch *sc, int64_t n, int64_t k) {
    gemm_kernel kr = pick_kernel();
    int64_t kc = k < kr->kc ? k : kr->kc, nc = round_up(n < kr->nc ? n : kr->nc, NR);
    if (kc < 1) kc = 1;
    if (n == 0) nc = 1; /* B comes packed: no B buffer */
    bf->pa = ft_cpu_buf_get(&bf->ba, sc, FT_SCR_GEMM_A, (size_t)(kr->mc * kc) * sizeof(float));
    bf->pb = bf->pa ? ft_cpu_buf_get(&bf->bb, sc, FT_SCR_GEMM_B, (size_t)(kc * nc) * sizeof(float)) : NULL;
    if (!bf->pa || !bf->pb) {
        if (bf->pa) ft_cpu_buf_put(&bf->ba);
        bf->pa = bf->pb = NULL;
        return -1;
    }
    return 0;
}

static void bufs_free(gemm_bufs *bf) {
    ft_cpu_buf_put(&bf->ba);
    ft_cpu_buf_put(&bf->bb);
}

/* C = beta * C for the K == 0 product (beta == 0 clears, never reads). */
static void scale_c(int64_t m, int64_t n, float beta, float *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

/* The epilogue on the mr x nr tile of C at global row i0, column j0, right after
 * the micro-kernel stored its last depth block, while the tile is in L1. */
static void tile_ep(const ft_cpu_gemm_ep *ep, float *c, int64_t ldc, int64_t mr, int64_t nr,
                    int64_t i0, int64_t j0) {
    for (int64_t i = 0; i < mr; i++) {
        if (ep->bias_per_row)
            ft_cpu_row_bias_act(c + i * ldc, nr, NULL, ep->bias ? ep->bias[i0 + i] : 0.0f, ep->act);
        else
            ft_cpu_row_bias_act(c + i * ldc, nr, ep->bias ? ep->bias + j0 : NULL, 0.0f, ep->act);
    }
}

/* One thread's share: the whole blocked loop nest on its own buffers. (i0, j0):
 * where this block sits in the whole C, for the epilogue's bias index. */
/*
 * A micro-tile of a convolution's C, whose columns jg.. may run past the end of
 * one image's OH*OW columns into the next image's plane: computed in a local
 * tile (holding C's values when the product accumulates) and scattered back.
 */
static void conv_tile(gemm_kernel kr, const ft_cpu_conv_view *cv, int64_t kc, const float *pa,
                      const float *pb, float *c, int64_t ldc, float bt, int mr, int nr, int64_t jg,
                      const ft_cpu_gemm_ep *ep, int64_t ig) {
    enum { TW = FT_CPU_GEMM_NC_MAX };
    int64_t npi = cv->oh * cv->ow, off[TW];
    for (int j = 0; j < nr; j++) off[j] = (jg + j) / npi * cv->c_bstride + (jg + j) % npi;
    float t[MR_MAX * TW];
    if (bt != 0.0f)
        for (int i = 0; i < mr; i++)
            for (int j = 0; j < nr; j++) t[i * TW + j] = c[i * ldc + off[j]];
    (nr > NR ? kr->fn : kr->fn16)(kc, pa, pb, t, TW, bt, mr, nr);
    if (ep) tile_ep(ep, t, TW, mr, nr, ig, jg);
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) c[i * ldc + off[j]] = t[i * TW + j];
}

static void gemm_serial(gemm_kernel kr, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                        float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                        float beta, float *c, int64_t ldc, const gemm_bufs *bf,
                        const ft_cpu_gemm_ep *ep, int64_t i0, int64_t j0, const ft_cpu_packed_b *pre,
                        const ft_cpu_packed_b *prea, const ft_cpu_conv_view *cv) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        scale_c(m, n, beta, c, ldc);
        if (ep) tile_ep(ep, c, ldc, m, n, i0, j0);
        return;
    }
    const int64_t KC = kr->kc, MC = kr->mc, MR = kr->mr, TW = kr->ncols;
    /* a convolution's B panel is cut to stay in L2: its columns are rebuilt
     * from x per panel anyway, and with the batch as columns a whole-width panel
     * (kc x batch*OH*OW) would spill */
    const int64_t ncb = cv ? kr->conv_nc : kr->nc;
    for (int64_t jc = 0; jc < n; jc += ncb) {
        int64_t nc = n - jc < ncb ? n - jc : ncb;
        for (int64_t pc = 0; pc < k; pc += KC) {
            int64_t kc = k - pc < KC ? k - pc : KC;
            float bt = pc == 0 ? beta : 1.0f;
            bool last = ep && pc + kc == k;
            /* op(B)'s slivers for columns j0 + jc.., packed now or once beforehand */
            const float *pb = bf->pb;
            if (pre) pb = pre->data + pc * pre->npad + (j0 + jc) * kc;
            else if (cv) ft_cpu_pack_b_conv(cv, pc, j0 + jc, kc, nc, bf->pb);
            else ft_cpu_gemm_pack_b(tb, b, ldb, pc, jc, kc, nc, bf->pb);
            for (int64_t ic = 0; ic < m; ic += MC) {
                int64_t mc = m - ic < MC ? m - ic : MC;
                /* op(A)'s slivers for rows i0 + ic.., packed now or once beforehand */
                const float *pa = bf->pa;
                if (prea) pa = prea->data + pc * prea->npad + (i0 + ic) * kc;
                else ft_cpu_gemm_pack_a(ta, a, lda, ic, pc, mc, kc, alpha, (int)MR, bf->pa);
                /* tiles of TW columns (the last may be one NR sliver: fn16) */
                for (int64_t jr = 0; jr < nc; jr += TW) {
                    int nr = (int)(nc - jr < TW ? nc - jr : TW);
                    ft_cpu_micro_fn fn = nr > NR ? kr->fn : kr->fn16;
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        int mr = (int)(mc - ir < MR ? mc - ir : MR);
                        float *ct;
                        if (cv) {
                            /* C's columns are image planes: c + b * c_bstride, row stride OH*OW */
                            int64_t jg = j0 + jc + jr, npi = ldc, pos = jg % npi;
                            if (pos + nr > npi) {
                                conv_tile(kr, cv, kc, pa + ir * kc, pb + jr * kc, c + (ic + ir) * ldc,
                                          ldc, bt, mr, nr, jg, last ? ep : NULL, i0 + ic + ir);
                                continue;
                            }
                            ct = c + (ic + ir) * ldc + jg / npi * cv->c_bstride + pos;
                        } else {
                            ct = c + (ic + ir) * ldc + jc + jr;
                        }
                        fn(kc, pa + ir * kc, pb + jr * kc, ct, ldc, bt, mr, nr);
                        if (last) tile_ep(ep, ct, ldc, mr, nr, i0 + ic + ir, j0 + jc + jr);
                    }
                }
            }
        }
    }
}

/* Team size of the calling thread's current kernel (0: not set by a kernel entry,
 * e.g. a GEMM called directly by a test: the OpenMP default) */
static _Thread_local int cpu_threads_tls;
static _Thread_local int cpu_team_seen_tls;

void ft_cpu_set_threads(int n) { cpu_threads_tls = n; }
int ft_cpu_threads(void) { return cpu_threads_tls > 0 ? cpu_threads_tls : omp_get_max_threads(); }
int ft_cpu_team_seen(void) { return cpu_team_seen_tls; }
void ft_cpu_team_reset(void) { cpu_team_seen_tls = 0; }
/* called by thread 0 of a team, which is the thread that called the kernel */
void ft_cpu_team_note(int n) {
    if (n > cpu_team_seen_tls) cpu_team_seen_tls = n;
}

int ft_cpu_gemm_threads(void) { return omp_in_parallel() ? 1 : ft_cpu_threads(); }

/*
 * Splits C into a tm x tn grid of thread blocks. Each thread packs the A rows
 * and B columns of its block, so the split minimising total packing
 * (tn * M*K + tm * N*K) wins; blocks stay at least one micro-tile wide.
 */
static void choose_grid(int nt, int64_t m, int64_t n, int64_t k, int mr, int tw, int *tm, int *tn) {
    double best = -1;
    *tm = 1;
    *tn = 1;
    for (int d = 1; d <= nt; d++) {
        if (nt % d) continue;
        int cn = d, cm = nt / d;
        if ((n + tw - 1) / tw < cn || (m + mr - 1) / mr < cm) continue;
        double cost = (double)cn * (double)m * (double)k + (double)cm * (double)n * (double)k;
        if (best < 0 || cost < best) {
            best = cost;
            *tm = cm;
            *tn = cn;
        }
    }
}

int ft_cpu_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                 int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
    return ft_cpu_sgemm_ep(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL);
}

/*
 * The split of a product whose A is packed once for all (a convolution weight)
 * or whose B is read through the implicit im2col: a thread's time is its
 * largest share of micro-tiles (the micro-kernel costs the same for a partial
 * tile) times mr * NR * k FMAs, plus what it packs itself: its B columns (the
 * im2col view costs about twice a plain copy), its A rows unless A came packed.
 * Splitting the rows makes every thread pack the same B; splitting the columns
 * leaves a ragged last micro-tile (49 = 3 x 16 + 1 columns at ResNet's 7 x 7).
 */
static void choose_grid_tiles(int nt, int64_t m, int64_t n, int64_t k, int mr, int tw, bool a_packed,
                              bool b_view, int *tm, int *tn) {
    int64_t mt = (m + mr - 1) / mr, ntl = (n + tw - 1) / tw;
    double best = -1;
    *tm = 1;
    *tn = 1;
    for (int d = 1; d <= nt; d++) {
        if (nt % d) continue;
        int cn = d, cm = nt / d;
        if (ntl < cn || mt < cm) continue;
        double rt = (double)((mt + cm - 1) / cm), ct = (double)((ntl + cn - 1) / cn);
        double cost = rt * ct * mr * tw * (double)k / 16.0 + ct * tw * (double)k * (b_view ? 2.0 : 1.0) +
                      (a_packed ? 0.0 : rt * mr * (double)k);
        if (best < 0 || cost < best) {
            best = cost;
            *tm = cm;
            *tn = cn;
        }
    }
}

/*
 * A product with B packed once (a weight) on nt threads, robust to a thread
 * the OS takes away for a while (a busy host): each thread packs all of A once
 * (as the static column split does) and the columns are then taken in chunks
 * of whole tiles, dynamically, so the other thread finishes the work of one
 * that lost its core instead of waiting for it at the join. Same tiles, same
 * depth blocks, so the same result to the bit as the static split. Returns 1
 * (declined: the packed A would not fit the scratch budget, or too few tiles),
 * else 0 or -1 (out of memory).
 */
static int sgemm_dynamic(gemm_kernel kr, ft_cpu_scratch *sc, int nt, bool ta, int64_t m, int64_t n, int64_t k,
                         float alpha, const float *a, int64_t lda, float beta, float *c, int64_t ldc,
                         const ft_cpu_gemm_ep *ep, const ft_cpu_packed_b *pre) {
    const int64_t tw = kr->ncols, ntl = (n + tw - 1) / tw, mpad = round_up(m, kr->mr);
    const size_t abytes = (size_t)(mpad * k) * sizeof(float);
    if (ntl < 2 * nt || abytes > ((size_t)4 << 20)) return 1;
    const int64_t chunks = ntl < 4 * nt ? ntl : 4 * nt, KC = kr->kc, MC = kr->mc;
    int failed = 0;
#pragma omp parallel num_threads(nt) reduction(| : failed)
    {
        if (omp_get_thread_num() == 0) ft_cpu_team_note(omp_get_num_threads());
        ft_cpu_buf ab;
        float *ap = ft_cpu_buf_get(&ab, sc, FT_SCR_GEMM_AP, abytes);
        if (!ap) failed = 1;
        /* A's panels for every (depth, row) block, laid out as ft_cpu_pack_a's */
        for (int64_t pc = 0; ap && pc < k; pc += KC) {
            const int64_t kc = k - pc < KC ? k - pc : KC;
            for (int64_t ic = 0; ic < m; ic += MC)
                ft_cpu_gemm_pack_a(ta, a, lda, ic, pc, m - ic < MC ? m - ic : MC, kc, alpha, kr->mr,
                                   ap + pc * mpad + ic * kc);
        }
        ft_cpu_packed_b pa = {0, k, m, mpad, ap, NULL, kr->mr, 1, 0}; /* a view: never freed */
        gemm_bufs bf = {0}; /* both operands come packed: no packing buffers */
#pragma omp for schedule(dynamic, 1)
        for (int64_t ch = 0; ch < chunks; ch++) {
            if (!ap) continue;
            const int64_t j0 = ch * ntl / chunks * tw, j1 = (ch + 1) * ntl / chunks * tw;
            const int64_t nj = (j1 < n ? j1 : n) - j0;
            if (nj > 0)
                gemm_serial(kr, ta, false, m, nj, k, alpha, NULL, lda, NULL, 0, beta, c + j0, ldc, &bf, ep, 0, j0,
                            pre, &pa, NULL);
        }
        ft_cpu_buf_put(&ab);
    }
    return failed ? -1 : 0;
}

static int sgemm_impl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc,
                      const ft_cpu_gemm_ep *ep, const ft_cpu_packed_b *pre,
                      const ft_cpu_packed_b *prea, const ft_cpu_conv_view *cv) {
    if (m <= 0 || n <= 0) return 0;
    if (ep && !ep->bias && ep->act == FT_ACT_NONE) ep = NULL;
    gemm_kernel kr = pick_kernel();
    ft_cpu_scratch *sc = ft_cpu_scratch_cur();
    int nt = ft_cpu_gemm_threads();
    /* small products do not pay for waking the team */
    if ((double)m * (double)n * (double)k < 64.0 * 64.0 * 64.0) nt = 1;
    int tm = 1, tn = 1;
    if (nt > 1 && pre && (n + kr->ncols - 1) / kr->ncols >= nt)
        tn = nt; /* B packed once for all: split the columns; each thread packs all of
                  * A (the activations, small beside the weight). Measured against
                  * splitting the rows (no A packed twice): as fast in CPU time at
                  * BERT's batch 8, faster by the wall clock at batch 1, where half
                  * the rows would halve each B tile's reuse */
    else if (nt > 1 && (prea || cv))
        choose_grid_tiles(nt, m, n, k, kr->mr, kr->ncols, prea != NULL, cv != NULL, &tm, &tn);
    else if (nt > 1)
        choose_grid(nt, m, n, k, kr->mr, kr->ncols, &tm, &tn);
    if (nt > 1 && pre && !prea && !cv && tn == nt && k > 0) {
        int r = sgemm_dynamic(kr, sc, nt, ta, m, n, k, alpha, a, lda, beta, c, ldc, ep, pre);
        if (r != 1) return r;
    }
    if (tm * tn == 1) {
        gemm_bufs bf;
        if (bufs_alloc(&bf, sc, pre ? 0 : n, k)) return -1;
        gemm_serial(kr, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &bf, ep, 0, 0, pre,
                    prea, cv);
        bufs_free(&bf);
        return 0;
    }
    /* blocks of whole micro-tiles (no tile straddles two threads), as even as the
     * tile counts allow */
    const int64_t tw = kr->ncols;
    int64_t mt = (m + kr->mr - 1) / kr->mr, ntl = (n + tw - 1) / tw;
    int failed = 0;
#pragma omp parallel num_threads(tm * tn) reduction(| : failed)
    {
        int t = omp_get_thread_num();
        if (t == 0) ft_cpu_team_note(omp_get_num_threads());
        int64_t ti = t / tn, tj = t % tn;
        int64_t i0 = ti * mt / tm * kr->mr, i1 = (ti + 1) * mt / tm * kr->mr;
        int64_t j0 = tj * ntl / tn * tw, j1 = (tj + 1) * ntl / tn * tw;
        int64_t mi = (i1 < m ? i1 : m) - i0, nj = (j1 < n ? j1 : n) - j0;
        if (mi > 0 && nj > 0) {
            gemm_bufs bf;
            if (bufs_alloc(&bf, sc, pre ? 0 : nj, k)) {
                failed = 1;
            } else {
                const float *ab = prea ? NULL : ta ? a + i0 : a + i0 * lda;
                const float *bb = pre || cv ? NULL : tb ? b + j0 * ldb : b + j0;
                /* a view's C is addressed by global column (image planes) */
                float *cb = c + i0 * ldc + (cv ? 0 : j0);
                gemm_serial(kr, ta, tb, mi, nj, k, alpha, ab, lda, bb, ldb, beta, cb, ldc, &bf, ep,
                            i0, j0, pre, prea, cv);
                bufs_free(&bf);
            }
        }
    }
    return failed ? -1 : 0;
}

int ft_cpu_sgemm_ep(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                    int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc,
                    const ft_cpu_gemm_ep *ep) {
    return sgemm_impl(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ep, NULL, NULL, NULL);
}

#define PACKED_MAGIC 0x4b434150u /* "PACK" */

/* A packed operand of k x n (n padded to npad) with its data allocated, or NULL
 * (sizes past the checked range, out of memory). */
static ft_cpu_packed_b *packed_new(int64_t k, int64_t n, int64_t npad) {
    int64_t total;
    size_t bytes;
    if (!ft_mul_ok(npad, k, &total) || !ft_bytes_ok(total, sizeof(float), &bytes)) return NULL;
    ft_cpu_packed_b *p = calloc(1, sizeof *p);
    float *d = malloc(bytes);
    if (!p || !d) {
        free(p);
        free(d);
        return NULL;
    }
    *p = (ft_cpu_packed_b){PACKED_MAGIC, k, n, npad, d, NULL, 0, 1, 1};
    return p;
}

ft_cpu_packed_b *ft_cpu_pack_b(bool tb, int64_t k, int64_t n, const float *b, int64_t ldb) {
    return ft_cpu_pack_b_groups(1, tb, k, n, b, ldb, 0);
}

ft_cpu_packed_b *ft_cpu_pack_b_groups(int64_t groups, bool tb, int64_t k, int64_t n, const float *b,
                                      int64_t ldb, int64_t group_stride) {
    if (k <= 0 || n <= 0 || groups <= 0) return NULL;
    int64_t npad = round_up(n, NR), kg;
    if (!ft_mul_ok(k, groups, &kg)) return NULL;
    ft_cpu_packed_b *p = packed_new(kg, n, npad);
    if (!p) return NULL;
    p->k = k;
    p->groups = groups;
    float *d = p->data;
    /* depth block pc of a group holds [kc][npad] as NR-column slivers: exactly what
     * pack_b writes for the whole width, so the blocked loop reads it in place */
    const int64_t KC = pick_kernel()->kc, NC = pick_kernel()->nc;
    int64_t nkb = (k + KC - 1) / KC, ncb = (n + NC - 1) / NC, nb = groups * nkb * ncb;
#pragma omp parallel for num_threads(ft_cpu_threads()) if (nb > 1 && groups * k * n > 65536 && !omp_in_parallel())
    for (int64_t t = 0; t < nb; t++) {
        int64_t g = t / (nkb * ncb), r = t % (nkb * ncb);
        int64_t pc = (r / ncb) * KC, jc = (r % ncb) * NC;
        int64_t kc = k - pc < KC ? k - pc : KC, nc = n - jc < NC ? n - jc : NC;
        ft_cpu_gemm_pack_b(tb, b + g * group_stride, ldb, pc, jc, kc, nc, d + g * npad * k + pc * npad + jc * kc);
    }
    return p;
}

ft_cpu_packed_b ft_cpu_packed_b_group(const ft_cpu_packed_b *p, int64_t g) {
    ft_cpu_packed_b v = *p;
    v.data = p->data + g * p->npad * p->k;
    v.groups = 1;
    return v;
}

void ft_cpu_packed_b_free(ft_cpu_packed_b *p) {
    if (!p || p->magic != PACKED_MAGIC || --p->refs > 0) return;
    p->magic = 0;
    free(p->data);
    free(p);
}

int ft_cpu_sgemm_packed(bool ta, int64_t m, float alpha, const float *a, int64_t lda,
                        const ft_cpu_packed_b *pb, float beta, float *c, int64_t ldc,
                        const ft_cpu_gemm_ep *ep) {
    return sgemm_impl(ta, false, m, pb->n, pb->k, alpha, a, lda, NULL, 0, beta, c, ldc, ep, pb, NULL, NULL);
}

ft_cpu_packed_b *ft_cpu_pack_a_groups(int64_t groups, int64_t m, int64_t k, const float *a,
                                      int64_t lda) {
    if (k <= 0 || m <= 0 || groups <= 0) return NULL;
    const int mr = pick_kernel()->mr;
    const int64_t KC = pick_kernel()->kc, MC = pick_kernel()->mc;
    int64_t mpad = round_up(m, mr), kg;
    if (!ft_mul_ok(k, groups, &kg)) return NULL;
    ft_cpu_packed_b *p = packed_new(kg, m, mpad);
    if (!p) return NULL;
    p->k = k;
    p->mr = mr;
    p->groups = groups;
    /* depth block pc of a group holds [mpad][kc] as mr-row slivers [kc][mr]:
     * what pack_a writes for all the rows, so the blocked loop reads it in place */
    int64_t nkb = (k + KC - 1) / KC, nmb = (m + MC - 1) / MC, nb = groups * nkb * nmb;
#pragma omp parallel for num_threads(ft_cpu_threads()) if (nb > 1 && groups * k * m > 65536 && !omp_in_parallel())
    for (int64_t t = 0; t < nb; t++) {
        int64_t g = t / (nkb * nmb), r = t % (nkb * nmb);
        int64_t pc = (r / nmb) * KC, ic = (r % nmb) * MC;
        int64_t kc = k - pc < KC ? k - pc : KC, mc = m - ic < MC ? m - ic : MC;
        ft_cpu_gemm_pack_a(false, a + g * m * lda, lda, ic, pc, mc, kc, 1.0f, mr,
               p->data + g * mpad * k + pc * mpad + ic * kc);
    }
    return p;
}

ft_cpu_packed_b *ft_cpu_pack_a(int64_t m, int64_t k, const float *a, int64_t lda) {
    return ft_cpu_pack_a_groups(1, m, k, a, lda);
}

int ft_cpu_sgemm_packed_a(const ft_cpu_packed_b *pa, int64_t n, const float *b, int64_t ldb,
                          float beta, float *c, int64_t ldc, const ft_cpu_gemm_ep *ep) {
    /* the micro-kernel the panels were cut for (the CPU does not change) */
    if (pa->mr != pick_kernel()->mr) return -1;
    return sgemm_impl(false, false, pa->n, n, pa->k, 1.0f, NULL, 0, b, ldb, beta, c, ldc, ep, NULL, pa, NULL);
}

int ft_cpu_sgemm_conv(const ft_cpu_packed_b *pa, const float *a, int64_t lda, int64_t m,
                      const ft_cpu_conv_view *v, int64_t batch, float beta, float *c,
                      const ft_cpu_gemm_ep *ep) {
    int64_t k = v->cin_g * v->kh * v->kw, npi = v->oh * v->ow;
    if (k <= 0 || npi <= 0 || batch <= 0) return k <= 0 ? -1 : 0;
    if (pa) {
        if (pa->mr != pick_kernel()->mr || pa->k != k) return -1;
        m = pa->n;
    }
    return sgemm_impl(false, false, m, batch * npi, k, 1.0f, pa ? NULL : a, lda, NULL, 0, beta, c,
                      npi, ep, NULL, pa, v);
}

int ft_cpu_sgemm_batched(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, int64_t stride_a, const float *b,
                         int64_t ldb, int64_t stride_b, float beta, float *c, int64_t ldc,
                         int64_t stride_c, int64_t batch) {
    if (batch <= 0 || m <= 0 || n <= 0) return 0;
    int nt = ft_cpu_gemm_threads();
    double work = (double)m * (double)n * (double)(k > 0 ? k : 1);
    /* many small products: one per thread beats splitting each one */
    bool per_item = nt > 1 && batch >= nt && (batch >= 4 * nt || work < 256.0 * 256.0 * 256.0);
    if (!per_item) {
        for (int64_t i = 0; i < batch; i++)
            if (ft_cpu_sgemm(ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb,
                             beta, c + i * stride_c, ldc))
                return -1;
        return 0;
    }
    gemm_kernel kr = pick_kernel();
    ft_cpu_scratch *sc = ft_cpu_scratch_cur();
    int failed = 0;
#pragma omp parallel num_threads(ft_cpu_threads()) reduction(| : failed)
    {
        if (omp_get_thread_num() == 0) ft_cpu_team_note(omp_get_num_threads());
        gemm_bufs bf;
        int ok = bufs_alloc(&bf, sc, n, k) == 0;
        if (!ok) failed = 1;
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < batch; i++)
            if (ok)
                gemm_serial(kr, ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b,
                            ldb, beta, c + i * stride_c, ldc, &bf, NULL, 0, 0, NULL, NULL, NULL);
        if (ok) bufs_free(&bf);
    }
    return failed ? -1 : 0;
}

/* ------------------------------------------------------------------------- */
/* helpers shared by the GEMM family                                         */
/* ------------------------------------------------------------------------- */

static float load_f32(ft_dtype dt, const void *base, int64_t off) {
    switch (dt) {
    case FT_DTYPE_F16: return ft_f16_to_f32(((const uint16_t *)base)[off]);
    case FT_DTYPE_BF16: return ft_bf16_to_f32(((const uint16_t *)base)[off]);
    default: return ((const float *)base)[off];
    }
}

int ft_cpu_f32_get(const ft_tensor *t, bool ok_as_is, ft_cpu_f32 *out) {
    out->p = NULL;
    out->owned = false;
    memset(&out->buf, 0, sizeof out->buf);
    if (t->dtype == FT_DTYPE_F32 && ok_as_is) {
        out->p = (float *)t->data;
        return 0;
    }
    int64_t n = ft_numel(t);
    /* a staging buffer of the kernel's scratch (malloc'd outside a kernel) */
    float *buf = ft_cpu_buf_get(&out->buf, ft_cpu_scratch_cur(), FT_SCR_STAGE, (size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!buf) return -1;
    int nd = t->ndim;
    if (nd == 0) {
        buf[0] = load_f32(t->dtype, t->data, 0);
    } else {
        /* one row of the last dim per iteration, its offset decoded from the row index */
        int64_t inner = t->ne[nd - 1], is = t->nb[nd - 1];
        int64_t rows = inner > 0 ? n / inner : 0;
#pragma omp parallel for num_threads(ft_cpu_threads()) if (n > 65536 && !omp_in_parallel())
        for (int64_t r = 0; r < rows; r++) {
            int64_t off = 0, rem = r;
            for (int d = nd - 2; d >= 0; d--) {
                off += (rem % t->ne[d]) * t->nb[d];
                rem /= t->ne[d];
            }
            float *dst = buf + r * inner;
            if (t->dtype == FT_DTYPE_F32) {
                const float *src = (const float *)t->data + off;
                for (int64_t j = 0; j < inner; j++) dst[j] = src[j * is];
            } else {
                for (int64_t j = 0; j < inner; j++) dst[j] = load_f32(t->dtype, t->data, off + j * is);
            }
        }
    }
    out->p = buf;
    out->owned = true;
    return 0;
}

void ft_cpu_f32_release(ft_cpu_f32 *f) {
    if (f->owned && f->buf.p == f->p) ft_cpu_buf_put(&f->buf);
    else if (f->owned) free(f->p);
    memset(&f->buf, 0, sizeof f->buf);
    f->p = NULL;
    f->owned = false;
}

void ft_cpu_f32_store(ft_tensor *dst, const float *src, int64_t n) {
    if (dst->dtype == FT_DTYPE_F32) {
        if ((const void *)src != dst->data) memcpy(dst->data, src, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *d = dst->data;
    bool f16 = dst->dtype == FT_DTYPE_F16;
#pragma omp parallel for num_threads(ft_cpu_threads()) if (n > 65536 && !omp_in_parallel())
    for (int64_t i = 0; i < n; i++) d[i] = f16 ? ft_f32_to_f16(src[i]) : ft_f32_to_bf16(src[i]);
}

float ft_cpu_act(int act, float x) {
    switch (act) {
    case FT_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case FT_ACT_GELU_TANH: {
        float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + tanhf(u));
    }
    case FT_ACT_RELU: return x > 0.0f || x != x ? x : 0.0f; /* NaN stays NaN, as the RELU op and torch.relu */
    case FT_ACT_TANH: return tanhf(x);
    case FT_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case FT_ACT_RELU6: return x != x ? x : x < 0.0f ? 0.0f : x > 6.0f ? 6.0f : x; /* NaN stays NaN */
    case FT_ACT_SILU: return x / (1.0f + expf(-x));
    default: return x;
    }
}

void ft_cpu_epilogue(float *y, int64_t outer, int64_t ch, int64_t inner, const float *bias,
                     const float *res, int act) {
    if (!bias && !res && act == FT_ACT_NONE) return;
    if (inner == 1) {
        /* linear: the bias runs along each row */
#pragma omp parallel for num_threads(ft_cpu_threads()) if (outer * ch > 16384 && !omp_in_parallel())
        for (int64_t o = 0; o < outer; o++) {
            float *yr = y + o * ch;
            if (res) ft_cpu_row_binary(FT_OP_ADD, yr, res + o * ch, ch, 0);
            ft_cpu_row_bias_act(yr, ch, bias, 0.0f, act);
        }
        return;
    }
    /* convolutions: one bias value per channel row */
    int64_t rows = outer * ch;
#pragma omp parallel for num_threads(ft_cpu_threads()) if (rows * inner > 16384 && !omp_in_parallel())
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * inner;
        if (res) ft_cpu_row_binary(FT_OP_ADD, yr, res + r * inner, inner, 0);
        ft_cpu_row_bias_act(yr, inner, NULL, bias ? bias[r % ch] : 0.0f, act);
    }
}
