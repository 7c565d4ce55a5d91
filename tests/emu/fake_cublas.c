/*
 * fake_cublas.c - host emulation of the cuBLAS / cuBLASLt calls the engine
 * makes (kernels/cuda/gemm.cu, engine/cuda_backend.c), for the CUDA emulator
 * of the tests (emu.h). Signatures come from the real headers; semantics from
 * the NVIDIA documentation and cublasLt.h, not from the engine's assumptions,
 * so that a misuse shows here as on a GPU, or louder (refusals other than
 * NOT_SUPPORTED say why on stderr).
 *
 * Column-major. A GEMM is validated at the call, then submitted as ONE work item
 * (ft_emu_submit) holding a snapshot of all it needs (dims, types, pointers,
 * alpha/beta, epilogue, bias), so a stream capture records what a graph would. f32 accumulation
 * in k order; TF32 inputs where the library may use them; results rounded to
 * nearest even. Not emulated (NOT_SUPPORTED): device pointer modes, AUX and
 * gradient epilogues, fp8 scaling, other orders, planar complex, pointer arrays.
 * The heuristic answers FT_EMU_LT_ALGOS algorithms (default 1) that differ
 * only in name; FT_EMU_LT_SLOW_ALGO=i makes answer i run 2 ms longer, so a
 * test can see an autotuner measure rather than guess, and FT_EMU_LT_FAIL_ALGO=i
 * makes cublasLtMatmul fail with answer i (EXECUTION_FAILED, nothing run), as a
 * candidate can fail on a GPU for reasons the heuristic did not foresee.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "emu.h"

/* ---- live objects: use after destroy is an error, not a crash ------------ */

enum { K_BLAS = 1, K_LT, K_DESC, K_LAYOUT, K_PREF };

/* Handles and descriptors alive now: a dead or foreign one is found without
 * touching what it points to. Scanned: a few thousand at most. */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct reg_ent {
    const void *p;
    int kind;
} * reg;
static size_t reg_n, reg_cap;

/* op > 0 adds o, op < 0 removes it, op == 0 asks; 1 when done / live */
static int reg_op(const void *o, int kind, int op) {
    int ok = 0;
    size_t i = 0;
    if (!o) return 0;
    pthread_mutex_lock(&reg_mu);
    while (i < reg_n && reg[i].p != o)
        i++;
    int live = i < reg_n && reg[i].kind == kind;
    if (op == 0 || (op < 0 && live)) ok = live;
    if (op < 0 && live) reg[i] = reg[--reg_n];
    if (op > 0 && i == reg_n) {
        struct reg_ent *nr = reg;
        if (reg_n == reg_cap && (nr = realloc(reg, (2 * reg_cap + 64) * sizeof *reg)))
            reg = nr, reg_cap = 2 * reg_cap + 64;
        if (reg_n < reg_cap) reg[reg_n++] = (struct reg_ent){o, kind}, ok = 1;
    }
    pthread_mutex_unlock(&reg_mu);
    return ok;
}

#define reg_has(o, kind) reg_op(o, kind, 0)

/* A handle or descriptor: calloc'd and registered, or NULL. */
static void *obj_new(size_t size, int kind) {
    void *o = calloc(1, size);
    if (o && !reg_op(o, kind, 1)) free(o), o = NULL;
    return o;
}

/* 0 when o was not a live object of that kind (so never freed twice) */
static int obj_free(void *o, int kind) {
    if (!reg_op(o, kind, -1)) return 0;
    free(o);
    return 1;
}

/* ---- status names and diagnostics ---------------------------------------- */

#define STATUS(x, text)                                                                            \
    { CUBLAS_STATUS_##x, "CUBLAS_STATUS_" #x, text }
static const struct {
    cublasStatus_t st;
    const char *name, *text;
} statuses[] = {
    STATUS(SUCCESS, "the operation completed successfully"),
    STATUS(NOT_INITIALIZED, "the library was not initialized"),
    STATUS(ALLOC_FAILED, "the resource allocation failed"),
    STATUS(INVALID_VALUE, "an invalid numeric value was used as an argument"),
    STATUS(ARCH_MISMATCH, "an absent device architectural feature is required"),
    STATUS(MAPPING_ERROR, "an access to GPU memory space failed"),
    STATUS(EXECUTION_FAILED, "the GPU program failed to execute"),
    STATUS(INTERNAL_ERROR, "an internal operation failed"),
    STATUS(NOT_SUPPORTED, "the functionality requested is not supported"),
    STATUS(LICENSE_ERROR, "an error was detected when checking the current licensing"),
    {(cublasStatus_t)-1, "CUBLAS_STATUS_UNKNOWN", "unknown error"}, /* the end */
};

static int status_at(cublasStatus_t s) {
    int i = 0;
    while (statuses[i].st != s && statuses[i].st != (cublasStatus_t)-1)
        i++;
    return i;
}

const char *cublasGetStatusName(cublasStatus_t s) {
    return statuses[status_at(s)].name;
}
const char *cublasGetStatusString(cublasStatus_t s) {
    return statuses[status_at(s)].text;
}
const char *cublasLtGetStatusName(cublasStatus_t s) {
    return cublasGetStatusName(s);
}
const char *cublasLtGetStatusString(cublasStatus_t s) {
    return cublasGetStatusString(s);
}

#define INVALID CUBLAS_STATUS_INVALID_VALUE
#define UNSUPPORTED CUBLAS_STATUS_NOT_SUPPORTED
#define EXEC_FAILED CUBLAS_STATUS_EXECUTION_FAILED
#define NOT_INIT CUBLAS_STATUS_NOT_INITIALIZED

/* A refusal, with its reason on stderr: a status alone rarely says which of a
 * dozen arguments was wrong. NOT_SUPPORTED stays quiet: the engine asks the
 * heuristic expecting it, and falls back. */
static cublasStatus_t fail(cublasStatus_t st, const char *fn, const char *fmt, ...) {
    va_list ap;
    if (st == UNSUPPORTED) return st;
    va_start(ap, fmt);
    fprintf(stderr, "ftengine CUDA emulator: %s: ", fn);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " -> %s\n", cublasGetStatusName(st));
    va_end(ap);
    return st;
}

#include "fake_numbers.h"

/* ---- the GEMM work item --------------------------------------------------- */

enum { ACT_NONE, ACT_RELU, ACT_GELU };

/* Everything one GEMM needs, taken at the call: what runs later (at once, or
 * at each launch of a captured graph) never looks at a descriptor again. */
typedef struct gemm_op {
    int64_t m, n, k, batch;
    int ta, tb;           /* op(A), op(B) transposed */
    int ab_type, cd_type; /* A and B type; C, D and bias type */
    int tf32;             /* round A and B elements to TF32 first */
    float alpha, beta;
    const void *a, *b, *c, *bias;
    void *d;
    int64_t lda, ldb, ldc, ldd, sa, sb, sc, sd, sbias; /* in elements */
    int has_bias, act;
    int slow; /* the algorithm FT_EMU_LT_SLOW_ALGO names: runs 2 ms longer */
} gemm_op;

static void gemm_run(void *arg) {
    const gemm_op *g = arg;
    if (g->slow) { /* time as an autotuner's events see it */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do clock_gettime(CLOCK_MONOTONIC, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 2000000L);
    }
    int64_t m = g->m, n = g->n, k = g->k, es = (int64_t)type_size(g->ab_type);
    /* op(A) as rows of k and op(B) as columns of k, in f32: contiguous dot
     * products in plain k order */
    float *af = malloc((size_t)(m * k) * sizeof *af), *bf = malloc((size_t)(n * k) * sizeof *bf);
    if (!af || !bf) {
        fprintf(stderr, "ftengine CUDA emulator: GEMM: out of host memory\n");
        abort();
    }
    for (int64_t bt = 0; bt < g->batch; bt++) {
        const char *a = (const char *)g->a + bt * g->sa * es;
        const char *b = (const char *)g->b + bt * g->sb * es;
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++) {
                float v = ld_elem(a, g->ab_type, g->ta ? p + i * g->lda : i + p * g->lda);
                af[i * k + p] = g->tf32 ? tf32_round(v) : v;
            }
        for (int64_t j = 0; j < n; j++)
            for (int64_t p = 0; p < k; p++) {
                float v = ld_elem(b, g->ab_type, g->tb ? j + p * g->ldb : p + j * g->ldb);
                bf[j * k + p] = g->tf32 ? tf32_round(v) : v;
            }
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < m; i++) {
                float acc = 0.0f;
                for (int64_t p = 0; p < k; p++)
                    acc = fmaf(af[i * k + p], bf[j * k + p], acc);
                float v = g->alpha * acc;
                /* beta == 0 does not read C (BLAS): garbage or NaN there stays out */
                if (g->beta != 0.0f)
                    v = fmaf(g->beta, ld_elem(g->c, g->cd_type, bt * g->sc + i + j * g->ldc), v);
                /* the bias (length m, broadcast over columns) goes in before the activation */
                if (g->has_bias) v += ld_elem(g->bias, g->cd_type, bt * g->sbias + i);
                if (g->act == ACT_RELU) v = v < 0.0f ? 0.0f : v; /* NaN passes */
                if (g->act == ACT_GELU) /* cuBLASLt's GELU is the tanh approximation */
                    v = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
                st_elem(g->d, g->cd_type, bt * g->sd + i + j * g->ldd, v);
            }
    }
    free(af);
    free(bf);
}

/* Submits a copy of g as one work item on stream s. */
static cublasStatus_t gemm_submit(const gemm_op *g, cudaStream_t s, const char *fn) {
    gemm_op *w = malloc(sizeof *w);
    if (!w) return CUBLAS_STATUS_ALLOC_FAILED;
    *w = *g;
    cudaError_t e = ft_emu_submit(s, (ft_emu_work){gemm_run, free, w, fn, 0, 0, 0}); /* frees w on error */
    if (e != cudaSuccess) /* refused, or a capture invalidated or unsupported */
        return fail(EXEC_FAILED, fn, "the stream refused it (cudaError %d)", e);
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- checks shared by both APIs ------------------------------------------ */

typedef struct {
    uintptr_t lo, hi;
} span;

/* The byte hull of a strided batch of column-major matrices must lie in one
 * live device allocation: a GPU faults on host or freed memory, where the
 * emulator would silently use it. */
static cublasStatus_t check_mem(const char *fn, const char *what, const void *p, size_t es,
                                int64_t rows, int64_t cols, int64_t ld, int64_t nb, int64_t stride,
                                span *out) {
    int64_t bspan, cspan, last;
    if (!p) return fail(INVALID, fn, "%s is NULL", what);
    if (__builtin_mul_overflow(nb - 1, stride, &bspan) ||
        __builtin_mul_overflow(cols - 1, ld, &cspan) ||
        __builtin_add_overflow(bspan > 0 ? bspan : 0, cspan, &last) ||
        __builtin_add_overflow(last, rows, &last))
        return fail(INVALID, fn, "%s: extent overflows", what);
    span s = {(uintptr_t)p + (uintptr_t)((bspan < 0 ? bspan : 0) * (int64_t)es),
              (uintptr_t)p + (uintptr_t)(last * (int64_t)es)};
    if (!ft_emu_is_device_ptr((const void *)s.lo, s.hi - s.lo))
        return fail(INVALID, fn,
                    "%s = %p: its %zu bytes (%lld x %lld, ld %lld, batch %lld, stride %lld) "
                    "are not in one device allocation",
                    what, p, (size_t)(s.hi - s.lo), (long long)rows, (long long)cols, (long long)ld,
                    (long long)nb, (long long)stride);
    if (out) *out = s;
    return CUBLAS_STATUS_SUCCESS;
}

/* The operands of g: in device memory; not overlapping D (a race on a GPU)
 * unless C is D itself; aligned to their element size (or a GPU faults). */
static cublasStatus_t check_operands(const char *fn, const gemm_op *g) {
    size_t es = type_size(g->ab_type), cs = type_size(g->cd_type);
    int64_t m = g->m, n = g->n, k = g->k, nb = g->batch;
    int reads_c = g->beta != 0.0f && g->c != g->d;
    span s[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}}; /* A, B, C, D */
    cublasStatus_t st;
    if ((k && (st = check_mem(fn, "A", g->a, es, g->ta ? k : m, g->ta ? m : k, g->lda, nb, g->sa,
                              &s[0]))) ||
        (k && (st = check_mem(fn, "B", g->b, es, g->tb ? n : k, g->tb ? k : n, g->ldb, nb, g->sb,
                              &s[1]))) ||
        (reads_c && (st = check_mem(fn, "C", g->c, cs, m, n, g->ldc, nb, g->sc, &s[2]))) ||
        (st = check_mem(fn, "D", g->d, cs, m, n, g->ldd, nb, g->sd, &s[3])) ||
        (g->has_bias && (st = check_mem(fn, "bias", g->bias, cs, m, 1, m, nb, g->sbias, NULL))))
        return st;
    for (int i = 0; i < 3; i++)
        if (s[i].lo < s[3].hi && s[3].lo < s[i].hi)
            return fail(INVALID, fn, "%c overlaps D", "ABC"[i]);
    if ((uintptr_t)g->a % es || (uintptr_t)g->b % es || (reads_c && (uintptr_t)g->c % cs) ||
        (uintptr_t)g->d % cs || (g->has_bias && (uintptr_t)g->bias % cs))
        return fail(EXEC_FAILED, fn, "misaligned address");
    return CUBLAS_STATUS_SUCCESS;
}

static uint32_t ptr_align(const void *p) {
    uint32_t al = 256;
    while (al > 1 && (uintptr_t)p % al)
        al >>= 1;
    return al;
}

/* The documented type rows emulated: CUBLAS_COMPUTE_32F(_PEDANTIC) with f32
 * in and out, or f16 / bf16 in and out in the same type or f32; _FAST_TF32
 * with f32 only. All with scale type f32. */
static int types_ok(int compute, int ab, int cd) {
    if (compute == CUBLAS_COMPUTE_32F_FAST_TF32) return ab == CUDA_R_32F && cd == CUDA_R_32F;
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC) return 0;
    return (ab == CUDA_R_32F && cd == CUDA_R_32F) ||
           ((ab == CUDA_R_16F || ab == CUDA_R_16BF) && (cd == ab || cd == CUDA_R_32F));
}

/* ---- cuBLAS --------------------------------------------------------------- */

typedef struct {
    cudaStream_t stream;
    void *ws;
    size_t ws_size;
    cublasMath_t math;
} blas_handle;

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
    if (!handle) return fail(INVALID, "cublasCreate", "handle is NULL");
    *handle = obj_new(sizeof(blas_handle), K_BLAS); /* math mode CUBLAS_DEFAULT_MATH (0) */
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

/* The docs: NOT_INITIALIZED "if the library was not initialized", which a
 * NULL or already destroyed handle is. */
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    if (obj_free(handle, K_BLAS)) return CUBLAS_STATUS_SUCCESS;
    return fail(NOT_INIT, "cublasDestroy", "%p is not live", (void *)handle);
}

static blas_handle *blas_of(cublasHandle_t handle, const char *fn) {
    if (reg_has(handle, K_BLAS)) return (blas_handle *)handle;
    fail(NOT_INIT, fn, "handle %p is not live", (void *)handle);
    return NULL;
}

/* The docs: cublasSetStream unconditionally resets the workspace to the
 * default pool, so a workspace set before it is forgotten. */
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    blas_handle *h = blas_of(handle, "cublasSetStream");
    if (!h) return NOT_INIT;
    h->stream = stream, h->ws = NULL, h->ws_size = 0;
    return CUBLAS_STATUS_SUCCESS;
}

/* The docs: aligned to at least 256 bytes. Only stored; each GEMM checks it
 * is still device memory. */
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t size) {
    blas_handle *h = blas_of(handle, "cublasSetWorkspace");
    if (!h) return NOT_INIT;
    if (size && (uintptr_t)workspace % 256)
        return fail(INVALID, "cublasSetWorkspace", "%p: not 256-aligned", workspace);
    h->ws = size ? workspace : NULL;
    h->ws_size = workspace ? size : 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    blas_handle *h = blas_of(handle, "cublasSetMathMode");
    if (!h) return NOT_INIT;
    h->math = mode; /* only CUBLAS_TF32_TENSOR_OP_MATH changes what the emulation does */
    return CUBLAS_STATUS_SUCCESS;
}

/* C(i) = alpha op(A(i)) op(B(i)) + beta C(i) with the classic conventions:
 * m, n, k after op, ld >= max(1, stored rows). alpha and beta are f32 on the
 * host (the engine never changes the handle's pointer mode from host). */
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    static const char fn[] = "cublasGemmStridedBatchedEx";
    blas_handle *h = blas_of(handle, fn);
    if (!h) return NOT_INIT;
    int ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N; /* OP_C is OP_T on real types */
    int ar = ta ? k : m, br = tb ? n : k;                       /* stored rows of A and B */
    if ((unsigned)transa > CUBLAS_OP_C || (unsigned)transb > CUBLAS_OP_C || m < 0 || n < 0 ||
        k < 0 || batchCount < 0 || lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) ||
        ldc < (m > 1 ? m : 1))
        return fail(INVALID, fn, "op %d/%d m=%d n=%d k=%d lda=%d ldb=%d ldc=%d batchCount=%d",
                    transa, transb, m, n, k, lda, ldb, ldc, batchCount);
    if (!(algo == CUBLAS_GEMM_DEFAULT || algo == CUBLAS_GEMM_DEFAULT_TENSOR_OP ||
          (algo >= CUBLAS_GEMM_ALGO0 && algo <= CUBLAS_GEMM_ALGO23) ||
          (algo >= CUBLAS_GEMM_ALGO0_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP)) ||
        Atype != Btype || !types_ok(computeType, Atype, Ctype))
        return fail(UNSUPPORTED, fn, "algo or types");
    if (!alpha || !beta) return fail(INVALID, fn, "alpha or beta is NULL");
    if (m == 0 || n == 0 || batchCount == 0) return CUBLAS_STATUS_SUCCESS; /* nothing to do */

    gemm_op g = {.m = m, .n = n, .k = k, .batch = batchCount, .ta = ta, .tb = tb};
    g.ab_type = Atype, g.cd_type = Ctype;
    /* TF32 where the docs allow it: the _FAST_TF32 compute type, or f32 work
     * under CUBLAS_TF32_TENSOR_OP_MATH (which _PEDANTIC ignores) */
    g.tf32 = computeType == CUBLAS_COMPUTE_32F_FAST_TF32 ||
             (computeType == CUBLAS_COMPUTE_32F && Atype == CUDA_R_32F &&
              ((int)h->math & 0xF) == CUBLAS_TF32_TENSOR_OP_MATH);
    /* host pointer mode: the values now, as a captured graph bakes them in */
    memcpy(&g.alpha, alpha, sizeof g.alpha);
    memcpy(&g.beta, beta, sizeof g.beta);
    g.a = A, g.b = B, g.c = C, g.d = C;
    g.lda = lda, g.ldb = ldb, g.ldc = ldc, g.ldd = ldc;
    g.sa = strideA, g.sb = strideB, g.sc = strideC, g.sd = strideC;
    cublasStatus_t st = check_operands(fn, &g);
    if (st) return st;
    if (h->ws_size && !ft_emu_is_device_ptr(h->ws, h->ws_size))
        return fail(EXEC_FAILED, fn, "workspace %p is no longer device memory", h->ws);
    return gemm_submit(&g, h->stream, fn);
}

/* ---- cuBLASLt handle and descriptors -------------------------------------- */

typedef struct {
    int32_t compute, scale, pointer_mode, transa, transb, transc, fill, sm_count, bias_type;
    uint32_t epilogue;
    const void *bias;
    int64_t bias_stride, alpha_vec_stride;
} lt_desc;

typedef struct {
    uint32_t type, batch_mode;
    int32_t order, batch;
    uint64_t rows, cols;
    int64_t ld, stride, plane;
} lt_layout;

typedef struct {
    uint32_t search, reduction_mask, align[4]; /* A, B, C, D */
    uint64_t max_ws, impl_mask;
    float max_waves;
} lt_pref;

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
    if (!handle) return fail(INVALID, "cublasLtCreate", "handle is NULL");
    *handle = obj_new(1, K_LT); /* holds nothing: the stream comes with each call */
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    if (obj_free(handle, K_LT)) return CUBLAS_STATUS_SUCCESS;
    return fail(NOT_INIT, "cublasLtDestroy", "%p is not live", (void *)handle);
}

/* Destroying NULL is a no-op (as free); a dead one an error, not a double free. */
#define LT_DESTROY(Name, Handle, kind)                                                             \
    cublasStatus_t Name##Destroy(Handle d) {                                                       \
        if (!d || obj_free(d, kind)) return CUBLAS_STATUS_SUCCESS;                                 \
        return fail(INVALID, #Name "Destroy", "%p is not live", (void *)d);                        \
    }
LT_DESTROY(cublasLtMatmulDesc, cublasLtMatmulDesc_t, K_DESC)
LT_DESTROY(cublasLtMatrixLayout, cublasLtMatrixLayout_t, K_LAYOUT)
LT_DESTROY(cublasLtMatmulPreference, cublasLtMatmulPreference_t, K_PREF)

/* Defaults as documented; compute and scale type are checked where used. */
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
    lt_desc *d = desc ? obj_new(sizeof *d, K_DESC) : NULL;
    if (!d) return desc ? CUBLAS_STATUS_ALLOC_FAILED : INVALID;
    d->compute = computeType, d->scale = scaleType, d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->transa = d->transb = d->transc = CUBLAS_OP_N, d->fill = CUBLAS_FILL_MODE_FULL;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT, d->bias_type = -1; /* -1: the bias has D's type */
    *desc = (cublasLtMatmulDesc_t)d;
    return CUBLAS_STATUS_SUCCESS;
}

/* Dims and ld are checked where used: C may legally have ld 0. */
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
    lt_layout *l = layout ? obj_new(sizeof *l, K_LAYOUT) : NULL;
    if (!l) return layout ? CUBLAS_STATUS_ALLOC_FAILED : INVALID;
    l->type = (uint32_t)type, l->rows = rows, l->cols = cols, l->ld = ld;
    l->order = CUBLASLT_ORDER_COL, l->batch = 1, l->batch_mode = CUBLASLT_BATCH_MODE_STRIDED;
    *layout = (cublasLtMatrixLayout_t)l;
    return CUBLAS_STATUS_SUCCESS;
}

/* Documented defaults: no workspace, any reduction scheme, alignments 256. */
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    lt_pref *p = pref ? obj_new(sizeof *p, K_PREF) : NULL;
    if (!p) return pref ? CUBLAS_STATUS_ALLOC_FAILED : INVALID;
    p->search = CUBLASLT_SEARCH_BEST_FIT, p->reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    p->align[0] = p->align[1] = p->align[2] = p->align[3] = 256;
    p->impl_mask = UINT64_MAX;
    *pref = (cublasLtMatmulPreference_t)p;
    return CUBLAS_STATUS_SUCCESS;
}

/* Attributes: where each lives, and its size, which the header documents per
 * attribute (the field types follow it). */
typedef struct {
    int attr;
    size_t off, size;
} attr_def;
#define ATTR(type, id, field)                                                                      \
    { id, offsetof(type, field), sizeof(((type *)0)->field) }

/* clang-format off */
#define DA(id, f) ATTR(lt_desc, CUBLASLT_MATMUL_DESC_##id, f)
static const attr_def desc_attrs[] = {
    DA(COMPUTE_TYPE, compute), DA(SCALE_TYPE, scale), DA(POINTER_MODE, pointer_mode),
    DA(TRANSA, transa), DA(TRANSB, transb), DA(TRANSC, transc), DA(FILL_MODE, fill),
    DA(EPILOGUE, epilogue), DA(BIAS_POINTER, bias), DA(BIAS_BATCH_STRIDE, bias_stride),
    DA(ALPHA_VECTOR_BATCH_STRIDE, alpha_vec_stride), DA(SM_COUNT_TARGET, sm_count),
    DA(BIAS_DATA_TYPE, bias_type)};
#define LA(id, f) ATTR(lt_layout, CUBLASLT_MATRIX_LAYOUT_##id, f)
static const attr_def layout_attrs[] = {
    LA(TYPE, type), LA(ORDER, order), LA(ROWS, rows), LA(COLS, cols), LA(LD, ld),
    LA(BATCH_COUNT, batch), LA(STRIDED_BATCH_OFFSET, stride), LA(PLANE_OFFSET, plane),
    LA(BATCH_MODE, batch_mode)};
#define PA(id, f) ATTR(lt_pref, CUBLASLT_MATMUL_PREF_##id, f)
static const attr_def pref_attrs[] = {
    PA(SEARCH_MODE, search), PA(MAX_WORKSPACE_BYTES, max_ws),
    PA(REDUCTION_SCHEME_MASK, reduction_mask), PA(MIN_ALIGNMENT_A_BYTES, align[0]),
    PA(MIN_ALIGNMENT_B_BYTES, align[1]), PA(MIN_ALIGNMENT_C_BYTES, align[2]),
    PA(MIN_ALIGNMENT_D_BYTES, align[3]), PA(MAX_WAVES_COUNT, max_waves),
    PA(IMPL_MASK, impl_mask)};
/* clang-format on */

/* Values refused at set time: anything but the default for what is not
 * emulated (NOT_SUPPORTED), and values outside the enums (INVALID_VALUE). */
static cublasStatus_t value_ok(const attr_def *t, int a, int64_t v, const char *fn) {
    int bad = 0, unemulated = 0;
    if (t == desc_attrs) {
        if (a == CUBLASLT_MATMUL_DESC_TRANSA || a == CUBLASLT_MATMUL_DESC_TRANSB)
            bad = v < CUBLAS_OP_N || v > CUBLAS_OP_C;
        if (a == CUBLASLT_MATMUL_DESC_POINTER_MODE) /* device pointers */
            unemulated = v != CUBLASLT_POINTER_MODE_HOST;
        if (a == CUBLASLT_MATMUL_DESC_TRANSC) /* "only CUBLAS_OP_N is supported" */
            unemulated = v != CUBLAS_OP_N;
        if (a == CUBLASLT_MATMUL_DESC_FILL_MODE) unemulated = v != CUBLAS_FILL_MODE_FULL;
        if (a == CUBLASLT_MATMUL_DESC_EPILOGUE) {
            bad = v != CUBLASLT_EPILOGUE_DEFAULT && v != CUBLASLT_EPILOGUE_RELU &&
                  v != CUBLASLT_EPILOGUE_BIAS && v != CUBLASLT_EPILOGUE_RELU_BIAS &&
                  v != CUBLASLT_EPILOGUE_GELU && v != CUBLASLT_EPILOGUE_GELU_BIAS;
            unemulated = bad && v > 0 && (v & (128 | 256 | 512)); /* AUX, gradients */
        }
    } else if (t == layout_attrs) {
        if (a == CUBLASLT_MATRIX_LAYOUT_ORDER) unemulated = v != CUBLASLT_ORDER_COL;
        if (a == CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET) unemulated = v != 0;
        if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_MODE) unemulated = v != CUBLASLT_BATCH_MODE_STRIDED;
    }
    if (unemulated || bad)
        return fail(unemulated ? UNSUPPORTED : INVALID, fn, "attribute %d = %lld", a, (long long)v);
    return CUBLAS_STATUS_SUCCESS;
}

/* The header's rules. Set: buf NULL, or a size not the attribute's ->
 * INVALID_VALUE. Get: size 0 asks for the size (into sizeWritten). Matmul
 * descriptor attributes in the header but not emulated (epilogue aux buffer,
 * fp8 scale and amax pointers, fast accumulation, scale modes, emulation
 * descriptor) -> NOT_SUPPORTED. */
static cublasStatus_t attr_access(void *obj, const attr_def *t, size_t n, int a, void *buf,
                                  size_t size, size_t *written, int set, const char *fn) {
    const attr_def *d = NULL;
    for (size_t i = 0; i < n && !d; i++)
        if (t[i].attr == a) d = &t[i];
    if (!d && t == desc_attrs &&
        ((a >= 11 && a <= 13) || (a >= 17 && a <= 25) || (a >= 31 && a <= 38)))
        return fail(UNSUPPORTED, fn, "attribute %d", a);
    if (!d) return fail(INVALID, fn, "unknown attribute %d", a);
    if (!set && size == 0 && written) return *written = d->size, CUBLAS_STATUS_SUCCESS;
    if (!buf || size != d->size)
        return fail(INVALID, fn, "attribute %d: buf %p, %zu bytes (not %zu)", a, buf, size,
                    d->size);
    if (!set) {
        memcpy(buf, (char *)obj + d->off, size);
        if (written) *written = size;
        return CUBLAS_STATUS_SUCCESS;
    }
    int64_t v = 0; /* signed: the enums, counts and offsets checked are */
    int32_t v32 = 0;
    memcpy(size == 4 ? (void *)&v32 : (void *)&v, buf, size == 4 ? 4 : 8);
    v = size == 4 ? v32 : v;
    cublasStatus_t st = value_ok(t, a, v, fn);
    if (!st) memcpy((char *)obj + d->off, buf, size);
    return st;
}

#define ATTR_FNS(Name, Handle, Attr, kind, table)                                                  \
    cublasStatus_t Name##SetAttribute(Handle h, Attr a, const void *buf, size_t size) {            \
        if (!reg_has(h, kind)) return fail(INVALID, #Name "SetAttribute", "dead descriptor");      \
        return attr_access(h, table, sizeof table / sizeof table[0], (int)a, (void *)buf, size,    \
                           NULL, 1, #Name "SetAttribute");                                         \
    }                                                                                              \
    cublasStatus_t Name##GetAttribute(Handle h, Attr a, void *buf, size_t size, size_t *written) { \
        if (!reg_has(h, kind)) return fail(INVALID, #Name "GetAttribute", "dead descriptor");      \
        return attr_access(h, table, sizeof table / sizeof table[0], (int)a, buf, size, written,   \
                           0, #Name "GetAttribute");                                               \
    }
ATTR_FNS(cublasLtMatmulDesc, cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, K_DESC,
         desc_attrs)
ATTR_FNS(cublasLtMatrixLayout, cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t, K_LAYOUT,
         layout_attrs)
ATTR_FNS(cublasLtMatmulPreference, cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
         K_PREF, pref_attrs)

/* ---- cuBLASLt: problem, heuristic, matmul -------------------------------- */

/* What the heuristic hands out: recognisable, and bound to what it was chosen
 * for. The A-D alignments are those the preference promised (the most an
 * algorithm may then assume); the bias one is that of the bias pointer,
 * which cublasLt.h says the heuristic reads from the descriptor's value. */
typedef struct {
    uint32_t magic;
    int32_t compute, scale, ab_type, cd_type;
    uint32_t align[4], bias_align;
    int32_t variant; /* which of the heuristic's answers: all compute the same */
} algo_rec;
#define ALGO_MAGIC 0x46544C54u /* "FTLT" */
_Static_assert(sizeof(algo_rec) <= sizeof(cublasLtMatmulAlgo_t), "algo record fits");

/* Checks the descriptor and layouts as cublasLtMatmul does, without the
 * pointers, and fills g with the problem. Cdesc NULL means Ddesc (documented). */
static cublasStatus_t lt_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Ad,
                                 cublasLtMatrixLayout_t Bd, cublasLtMatrixLayout_t Cd,
                                 cublasLtMatrixLayout_t Dd, gemm_op *g, const char *fn) {
    if (!Cd) Cd = Dd;
    if (!reg_has(desc, K_DESC) || !reg_has(Ad, K_LAYOUT) || !reg_has(Bd, K_LAYOUT) ||
        !reg_has(Cd, K_LAYOUT) || !reg_has(Dd, K_LAYOUT))
        return fail(INVALID, fn, "a descriptor is NULL or destroyed");
    const lt_desc *d = (const lt_desc *)desc;
    const lt_layout *a = (const lt_layout *)Ad, *b = (const lt_layout *)Bd;
    const lt_layout *c = (const lt_layout *)Cd, *o = (const lt_layout *)Dd;
    /* mixed A/B (or C/D) types, or a row the docs do not list */
    int has_bias = (d->epilogue & CUBLASLT_EPILOGUE_BIAS) != 0;
    if (d->scale != CUDA_R_32F || a->type != b->type || c->type != o->type ||
        !types_ok(d->compute, (int)a->type, (int)o->type) ||
        (has_bias && d->bias_type != -1 && d->bias_type != (int32_t)o->type))
        return fail(UNSUPPORTED, fn, "types");
    int ta = d->transa != CUBLAS_OP_N, tb = d->transb != CUBLAS_OP_N;
    uint64_t m = ta ? a->cols : a->rows, k = ta ? a->rows : a->cols;
    uint64_t kb = tb ? b->cols : b->rows, n = tb ? b->rows : b->cols;
    if (kb != k || o->rows != m || o->cols != n || c->rows != m || c->cols != n)
        return fail(INVALID, fn, "op(A) is %llux%llu, op(B) %llux%llu: C and D must be %llux%llu",
                    (unsigned long long)m, (unsigned long long)k, (unsigned long long)kb,
                    (unsigned long long)n, (unsigned long long)m, (unsigned long long)n);
    /* "usually only values that can be expressed as int32_t are supported";
     * empty problems are left to the caller (the engine never asks) */
    if (!m || !n || !k || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return fail(UNSUPPORTED, fn, "empty or huge problem");
    /* ld: non-negative, >= rows so that columns do not overlap; only C may
     * have ld 0, the documented row or column broadcast */
    const lt_layout *ls[4] = {a, b, c, o};
    for (int i = 0; i < 4; i++)
        if (ls[i]->ld < 0 || ((uint64_t)ls[i]->ld < ls[i]->rows && !(i == 2 && !ls[i]->ld)))
            return fail(INVALID, fn, "%c: ld below rows", "ABCD"[i]);
    /* the docs require C's batch count to be D's; A and B are held to it too */
    if (o->batch < 1 || a->batch != o->batch || b->batch != o->batch || c->batch != o->batch)
        return fail(INVALID, fn, "batch counts A %d B %d C %d D %d", a->batch, b->batch, c->batch,
                    o->batch);
    *g = (gemm_op){.m = (int64_t)m, .n = (int64_t)n, .k = (int64_t)k, .batch = o->batch};
    g->ta = ta, g->tb = tb, g->ab_type = (int)a->type, g->cd_type = (int)o->type;
    g->tf32 = d->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    g->lda = a->ld, g->ldb = b->ld, g->ldc = c->ld, g->ldd = o->ld;
    g->sa = a->stride, g->sb = b->stride, g->sc = c->stride, g->sd = o->stride;
    g->has_bias = has_bias, g->bias = d->bias, g->sbias = d->bias_stride;
    g->act = (d->epilogue & CUBLASLT_EPILOGUE_RELU) ? ACT_RELU : ACT_NONE;
    if (d->epilogue & CUBLASLT_EPILOGUE_GELU) g->act = ACT_GELU;
    return CUBLAS_STATUS_SUCCESS;
}

static cublasLtMatmulAlgo_t algo_make(const lt_desc *d, const gemm_op *g, const lt_pref *p) {
    algo_rec r = {.magic = ALGO_MAGIC, .compute = d->compute, .scale = d->scale};
    r.ab_type = g->ab_type, r.cd_type = g->cd_type;
    cublasLtMatmulAlgo_t out;
    for (int i = 0; i < 4; i++)
        r.align[i] = p ? p->align[i] : 256;
    r.bias_align = g->has_bias && d->bias ? ptr_align(d->bias) : 256;
    memset(&out, 0, sizeof out);
    memcpy(out.data, &r, sizeof r);
    return out;
}

/* One algorithm, no workspace, or NOT_SUPPORTED where the library has none. */
cublasStatus_t
cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                               cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                               cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                               cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                               cublasLtMatmulHeuristicResult_t results[], int *returnAlgoCount) {
    static const char fn[] = "cublasLtMatmulAlgoGetHeuristic";
    gemm_op g;
    cublasStatus_t st;
    if (!reg_has(handle, K_LT)) return fail(NOT_INIT, fn, "dead handle");
    if (requestedAlgoCount <= 0 || !results || !returnAlgoCount || !reg_has(preference, K_PREF))
        return fail(INVALID, fn, "count %d, results %p, preference %p", requestedAlgoCount,
                    (void *)results, (void *)preference);
    *returnAlgoCount = 0;
    if ((st = lt_problem(desc, Adesc, Bdesc, Cdesc, Ddesc, &g, fn))) return st;
    const lt_pref *p = (const lt_pref *)preference;
    const lt_desc *d = (const lt_desc *)desc;
    /* no kernel loads elements from addresses not aligned to their size */
    size_t es = type_size(g.ab_type), cs = type_size(g.cd_type);
    if (p->search != CUBLASLT_SEARCH_BEST_FIT || p->align[0] < es || p->align[1] < es ||
        p->align[2] < cs || p->align[3] < cs || (g.has_bias && d->bias && ptr_align(d->bias) < cs))
        return fail(UNSUPPORTED, fn, "search mode or alignments");
    /* FT_EMU_LT_NO_ALGO=all|epilogue: drives the engine onto its GEMM fallbacks */
    const char *na = getenv("FT_EMU_LT_NO_ALGO");
    if (na && (!strcmp(na, "all") || (!strcmp(na, "epilogue") && d->epilogue != CUBLASLT_EPILOGUE_DEFAULT)))
        return fail(UNSUPPORTED, fn, "FT_EMU_LT_NO_ALGO=%s", na);
    /* FT_EMU_LT_ALGOS answers (the library gives several, best guess first):
     * the same GEMM under different names, for the engine's autotuner. One by
     * default: timing candidates on the emulator costs minutes over the op
     * tests; the tests that check tuning ask for more (tests/run_tests.sh) */
    const char *na_s = getenv("FT_EMU_LT_ALGOS");
    int n_algos = na_s && atoi(na_s) > 0 ? atoi(na_s) : 1;
    if (n_algos > requestedAlgoCount) n_algos = requestedAlgoCount;
    for (int i = 0; i < n_algos; i++) {
        algo_rec r;
        memset(&results[i], 0, sizeof results[i]), results[i].algo = algo_make(d, &g, p);
        memcpy(&r, results[i].algo.data, sizeof r);
        r.variant = i;
        memcpy(results[i].algo.data, &r, sizeof r);
        results[i].state = CUBLAS_STATUS_SUCCESS, results[i].wavesCount = 1.0f;
    }
    *returnAlgoCount = n_algos;
    return CUBLAS_STATUS_SUCCESS;
}

/* The last accepted matmul (ft_emu_lt_last); the engine may call from several threads */
static pthread_mutex_t lt_last_mu = PTHREAD_MUTEX_INITIALIZER;
static ft_emu_lt_call lt_last;

static void lt_record(const lt_desc *d, const lt_layout *const ls[4], const void *const ptrs[4]) {
    pthread_mutex_lock(&lt_last_mu);
    ft_emu_lt_call *c = &lt_last;
    c->n++;
    c->epilogue = d->epilogue;
    for (int i = 0; i < 4; i++) {
        c->type[i] = (int)ls[i]->type, c->ld[i] = ls[i]->ld, c->stride[i] = ls[i]->stride, c->ptr[i] = ptrs[i];
        int64_t es = (int64_t)type_size((int)ls[i]->type);
        c->unaligned16[i] += es == 2 && ((ls[i]->ld * es) % 16 || (ls[i]->batch > 1 && (ls[i]->stride * es) % 16) ||
                                         (ptrs[i] && ptr_align(ptrs[i]) < 16));
    }
    pthread_mutex_unlock(&lt_last_mu);
}

ft_emu_lt_call ft_emu_lt_last(void) {
    pthread_mutex_lock(&lt_last_mu);
    ft_emu_lt_call c = lt_last;
    pthread_mutex_unlock(&lt_last_mu);
    return c;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
    static const char fn[] = "cublasLtMatmul";
    gemm_op g;
    cublasStatus_t st;
    if (!reg_has(handle, K_LT)) return fail(NOT_INIT, fn, "dead handle");
    if ((st = lt_problem(desc, Adesc, Bdesc, Cdesc, Ddesc, &g, fn))) return st;
    const lt_desc *d = (const lt_desc *)desc;
    const lt_layout *lc = (const lt_layout *)(Cdesc ? Cdesc : Ddesc),
                    *ld = (const lt_layout *)Ddesc;
    if (!alpha || !beta) return fail(INVALID, fn, "alpha or beta is NULL");

    /* NULL algo: "an implicit heuristics query with default search
     * preferences", which assume 256-byte aligned pointers */
    cublasLtMatmulAlgo_t implicit;
    if (!algo) implicit = algo_make(d, &g, NULL), algo = &implicit;
    algo_rec r;
    memcpy(&r, algo->data, sizeof r);
    if (r.magic != ALGO_MAGIC) return fail(INVALID, fn, "algo is not from the heuristic");
    if (r.compute != d->compute || r.scale != d->scale || r.ab_type != g.ab_type ||
        r.cd_type != g.cd_type)
        return fail(INVALID, fn, "algo was chosen for other types");
    /* host pointer mode: the values now, as a captured graph bakes them in */
    memcpy(&g.alpha, alpha, sizeof g.alpha);
    memcpy(&g.beta, beta, sizeof g.beta);
    g.a = A, g.b = B, g.c = C, g.d = D;

    /* the docs: in place is C == D with Cdesc == Ddesc; otherwise separate */
    if (C == D && (lc->type != ld->type || lc->ld != ld->ld || lc->stride != ld->stride))
        return fail(INVALID, fn, "C == D (in place) but Cdesc != Ddesc");
    if (g.has_bias && !d->bias) return fail(INVALID, fn, "bias epilogue without BIAS_POINTER");

    /* Pointers less aligned than the algorithm was chosen for: the library
     * refuses before launching (NOT_SUPPORTED, as reported in PyTorch #92201
     * and #97205). Not so the bias, which no preference covers: its kernel
     * faults with "misaligned address" (PyTorch #194497). C counts when read. */
    const void *ptrs[4] = {A, B, g.beta != 0.0f ? C : NULL, D};
    for (int i = 0; i < 4; i++)
        if (ptrs[i] && ptr_align(ptrs[i]) < r.align[i])
            return fail(UNSUPPORTED, fn, "%c less aligned than the algo's", "ABCD"[i]);
    if (g.has_bias && ptr_align(d->bias) < r.bias_align)
        return fail(EXEC_FAILED, fn, "misaligned address: bias %p below the %u bytes it had",
                    d->bias, r.bias_align);
    if ((st = check_operands(fn, &g))) return st;
    const char *bad = getenv("FT_EMU_LT_FAIL_ALGO");
    if (bad && *bad && atoi(bad) == r.variant)
        return fail(EXEC_FAILED, fn, "FT_EMU_LT_FAIL_ALGO=%d: this candidate fails", r.variant);
    const char *slow = getenv("FT_EMU_LT_SLOW_ALGO");
    g.slow = slow && *slow && atoi(slow) == r.variant;
    if (workspaceSizeInBytes &&
        ((uintptr_t)workspace % 256 || !ft_emu_is_device_ptr(workspace, workspaceSizeInBytes)))
        return fail(INVALID, fn, "workspace %p: not 256-aligned device memory", workspace);
    if ((st = gemm_submit(&g, stream, fn)) == CUBLAS_STATUS_SUCCESS)
        lt_record(d, (const lt_layout *[4]){(const lt_layout *)Adesc, (const lt_layout *)Bdesc, lc, ld},
                  (const void *[4]){A, B, C, D});
    return st;
}
