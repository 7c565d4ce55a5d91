/*
 * test_cuda_pdl.c - programmatic dependent launch (PDL): which CUDA contexts
 * launch their kernels with it, and that it changes nothing in what a model
 * computes.
 *
 * PDL lets a kernel start while the one before it drains; it is correct only
 * because every kernel waits (griddepcontrol.wait) before touching memory. A
 * kernel that forgot would race with its predecessor: on a GPU the outputs
 * would differ between PDL on and off now and then, and on the emulator the
 * launch stops the process (emu_sched.c). So the golden models run in eager
 * and static mode with PDL on and off and must agree to the bit; on the
 * emulator the PDL launches are also counted, so the "on" run is known to
 * have used it. Without a CUDA device those tests SKIP; the profiler's
 * accounting of overlapping kernels runs anywhere (synthetic records).
 */
#include "ft_golden.h"
#include "ft_test_env.h"
#include "ft_internal.h"
#include "profiler.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef FT_WITH_CUDA
#include "cuda_backend_internal.h"
#endif
#ifdef FT_CUDA_EMU
#include "emu/emu.h"
/* what FT_KERNEL_PROLOGUE is on the emulator (kernels/cuda/emu.cuh) */
#define FT_EMU_PROLOGUE_FOR_TEST() ft_emu_gdc_wait()
#endif

/* Kernels launched with PDL start while the one before them drains: per-op
 * device time counts each record from the end of the earlier work of its
 * stream, so overlapping time is counted once; busy is the union, and the
 * overlap is reported. Work on another stream is not clipped. */
static void test_pdl_overlap_counted_once(void) {
    ft_ctx *ctx = NULL;
    ft_profiler *p = NULL;
    CHECK_OK(ctx, ft_ctx_create(FT_DEVICE_CPU, &ctx));
    if (ctx) CHECK_OK(ctx, ft_profiler_create(ctx, NULL, &p));
    if (!p) {
        CHECK(0, "setup failed");
        ft_ctx_free(ctx);
        return;
    }
    ft_tensor a = {.op = FT_OP_LINEAR, .id = -1}, b = {.op = FT_OP_LAYERNORM, .id = -1},
              c = {.op = FT_OP_GELU, .id = -1};
    const ft_tensor *calls[3] = {&a, &b, &c};
    CHECK_OK(ctx, ft_profiler_start(p));
    for (int i = 0; i < 3; i++) {
        p->hooks.op_begin(p->hooks.user, calls[i]);
        p->hooks.op_end(p->hooks.user, calls[i], FT_OK);
    }
    CHECK_OK(ctx, ft_profiler_stop(p));
    /* stream 1: linear [100, 200), layernorm starts early [150, 260), gelu
     * inside layernorm's span [170, 250) (its own time: none); stream 2: a copy
     * [120, 140) beside them, not clipped */
    uint64_t t = p->t0;
    ft_gpu_rec r[4] = {
        {.start = t + 100, .end = t + 200, .op = 0, .correlation = 1, .stream = 1, .kind = FT_GPU_KERNEL},
        {.start = t + 150, .end = t + 260, .op = 1, .correlation = 2, .stream = 1, .kind = FT_GPU_KERNEL},
        {.start = t + 170, .end = t + 250, .op = 2, .correlation = 3, .stream = 1, .kind = FT_GPU_KERNEL},
        {.start = t + 120, .end = t + 140, .op = 2, .correlation = 4, .stream = 2, .kind = FT_GPU_MEMCPY}};
    free(p->gpu);
    p->gpu = (ft_gpu_rec *)calloc(8, sizeof *p->gpu);
    p->cap_gpu = p->gpu ? 8 : 0;
    p->cupti_window = 1;
    p->t1 = t + 1000;
    CHECK_OK(ctx, ft_prof_finish(p, r, 4, 0));
    ft_profile_summary s;
    ft_profiler_summary(p, &s);
    /* overlap: 50 (layernorm) + 80 (gelu, wholly inside) = 130 ns */
    CHECK(fabs(s.overlap_us * 1e3 - 130) < 1e-6 && fabs(s.busy_us * 1e3 - 160) < 1e-6 &&
              fabs(s.busy_sum_us * 1e3 - 310) < 1e-6,
          "overlap %.3f busy %.3f sum %.3f ns, want 130 160 310", s.overlap_us * 1e3, s.busy_us * 1e3,
          s.busy_sum_us * 1e3);
    const double want_ns[3] = {100, 60, 20}; /* gelu: only its copy on the other stream */
    for (int i = 0; i < 3 && ft_profiler_op_count(p) == 3; i++) {
        ft_profile_op o;
        ft_profiler_op(p, i, &o);
        CHECK(fabs(o.gpu_us * 1e3 - want_ns[i]) < 1e-6, "op %d (%s): %.3f ns of device time, want %.0f", i,
              o.name, o.gpu_us * 1e3, want_ns[i]);
    }
    ft_profiler_free(p);
    ft_ctx_free(ctx);
}

#ifdef FT_WITH_CUDA
/* PDL launches so far; the emulator counts them, a GPU does not say */
static long long pdl_launches(void) {
#ifdef FT_CUDA_EMU
    return (long long)ft_emu_pdl_launches();
#else
    return -1;
#endif
}

/* sm_90 and newer use PDL unless told not to; the device label says which */
static void test_cuda_pdl_default(void) {
    if (!ft_cuda_device_count()) {
        SKIP("no CUDA device");
        return;
    }
    ft_ctx *c = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_DISABLE_PDL", NULL);
    if (!c) return;
    const char *label = ft_ctx_device_label(c);
    if (ft_cuda_state_of(c)->sm_major >= 9)
        CHECK(ft_cuda_pdl(c) == 1 && strstr(label, "PDL on"), "sm_90+ without PDL: '%s'", label);
    else
        CHECK(ft_cuda_pdl(c) == 0 && strstr(label, "PDL off: needs sm_90"), "label '%s'", label);
    ft_ctx_free(c);
}

static void test_cuda_pdl_disabled_by_env(void) {
    if (!ft_cuda_device_count()) {
        SKIP("no CUDA device");
        return;
    }
    ft_ctx *c = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_DISABLE_PDL", "1");
    if (!c) return;
    const char *label = ft_ctx_device_label(c);
    CHECK(ft_cuda_pdl(c) == 0 && strstr(label, "PDL off: FT_DISABLE_PDL is set"), "label '%s'", label);
    ft_ctx_free(c);
}

/* A value outside FT_OPT_OFF..FT_OPT_ON is refused with a message, on any device. */
static void test_bad_launch_options(void) {
    char err[256] = "";
    ft_ctx_options o = ft_ctx_options_default();
    o.errbuf = err;
    o.errbuf_size = sizeof err;
    o.pdl = 2;
    ft_ctx *c = NULL;
    ft_status st = ft_ctx_create_ex(&o, &c);
    CHECK(st == FT_ERR_INVALID_ARG && !c && strstr(err, "pdl 2"), "pdl = 2: %s '%s'", ft_status_str(st),
          err);
    o.pdl = FT_OPT_DEFAULT;
    o.gemm_autotune = -7;
    err[0] = 0;
    st = ft_ctx_create_ex(&o, &c);
    CHECK(st == FT_ERR_INVALID_ARG && !c && strstr(err, "gemm_autotune -7"), "gemm_autotune = -7: %s '%s'",
          ft_status_str(st), err);
    ft_ctx_free(c);
}

/* ft_ctx_options.pdl overrides the environment both ways. */
static void test_cuda_pdl_option(void) {
    if (!ft_cuda_device_count()) {
        SKIP("no CUDA device");
        return;
    }
    ft_ctx_options o = ft_ctx_options_default();
    o.device = FT_DEVICE_CUDA;
    o.pdl = FT_OPT_OFF;
    ft_ctx *off = NULL, *on = NULL;
    CHECK_OK(off, ft_ctx_create_ex(&o, &off));
    if (off)
        CHECK(ft_cuda_pdl(off) == 0 && strstr(ft_ctx_device_label(off), "PDL off: ft_ctx_options.pdl"),
              "label '%s'", ft_ctx_device_label(off));
    setenv("FT_DISABLE_PDL", "1", 1);
    o.pdl = FT_OPT_ON;
    CHECK_OK(on, ft_ctx_create_ex(&o, &on));
    unsetenv("FT_DISABLE_PDL");
    if (on && ft_cuda_state_of(on)->sm_major >= 9)
        CHECK(ft_cuda_pdl(on) == 1, "FT_OPT_ON under FT_DISABLE_PDL=1: '%s'", ft_ctx_device_label(on));
    ft_ctx_free(off);
    ft_ctx_free(on);
}

/* The outputs of one forward, as f32, concatenated; NULL on failure. */
static float *forward_outputs(ft_ctx *ctx, const golden_case *gc, ft_mode mode, int64_t *n_out,
                              long long *pdl) {
    ft_model_options o = ft_model_options_default();
    o.mode = mode;
    ft_model *m = NULL;
    CHECK_OK(ctx, ft_model_load(ctx, gc->dir, &o, &m));
    if (!m) return NULL;
    float *all = NULL;
    int64_t total = 0;
    long long before = pdl_launches();
    /* twice: a static plan captures on the first forward and replays on the second */
    for (int rep = 0; rep < 2 && m; rep++) {
        if (ft_model_forward(m, gc->in, gc->n_in) != FT_OK) {
            CHECK(0, "%s %s forward: %s", gc->dir, ft_mode_name(mode), ft_ctx_errmsg(ctx));
            ft_model_free(m);
            m = NULL;
        }
    }
    *pdl = pdl_launches() - before;
    for (int i = 0; m && i < ft_model_output_count(m); i++) {
        ft_tensor *t = ft_model_output(m, i);
        int64_t k = ft_tensor_numel(t);
        float *grown = (float *)realloc(all, (size_t)(total + k + 1) * sizeof(float));
        if (!grown) break;
        all = grown;
        if (ft_tensor_to_host(ctx, t, FT_DTYPE_F32, all + total, (size_t)k * sizeof(float)) != FT_OK) {
            CHECK(0, "%s output %d: %s", gc->dir, i, ft_ctx_errmsg(ctx));
            break;
        }
        total += k;
    }
    ft_model_free(m);
    *n_out = total;
    return all;
}

/* The same bits with and without PDL, in eager mode (kernels after copies and
 * library GEMMs on a stream) and static mode (the same, captured in a graph). */
static void same_bits(const char *name) {
    if (!ft_cuda_device_count()) {
        SKIP("no CUDA device");
        return;
    }
    ft_ctx *on = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_DISABLE_PDL", NULL);
    ft_ctx *off = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_DISABLE_PDL", "1");
    golden_case gon, goff;
    int ok_on = on && golden_open(on, name, &gon) == 0, ok_off = off && golden_open(off, name, &goff) == 0;
    CHECK(ok_on && ok_off, "golden %s: %s", name, on ? ft_ctx_errmsg(on) : "no context");
    for (int mode = FT_MODE_EAGER; ok_on && ok_off && mode <= FT_MODE_STATIC; mode += FT_MODE_STATIC) {
        int64_t n_on = 0, n_off = 0;
        long long pdl_on = 0, pdl_off = 0;
        float *a = forward_outputs(on, &gon, (ft_mode)mode, &n_on, &pdl_on);
        float *b = forward_outputs(off, &goff, (ft_mode)mode, &n_off, &pdl_off);
        CHECK(a && b && n_on == n_off && n_on > 0, "%s %s: outputs missing", name, ft_mode_name((ft_mode)mode));
        if (a && b && n_on == n_off) {
            int64_t first = -1;
            for (int64_t i = 0; i < n_on && first < 0; i++)
                if (memcmp(&a[i], &b[i], sizeof *a)) first = i;
            CHECK(first < 0, "%s %s: PDL on and off differ at element %lld (%.9g vs %.9g)", name,
                  ft_mode_name((ft_mode)mode), (long long)first, first < 0 ? 0.0 : a[first],
                  first < 0 ? 0.0 : b[first]);
        }
        if (pdl_on >= 0 && ft_cuda_pdl(on))
            CHECK(pdl_on > 0 && pdl_off == 0, "%s %s: %lld PDL launches with PDL on, %lld with it off", name,
                  ft_mode_name((ft_mode)mode), pdl_on, pdl_off);
        free(a);
        free(b);
    }
    if (ok_on) golden_close(&gon);
    if (ok_off) golden_close(&goff);
    ft_ctx_free(on);
    ft_ctx_free(off);
}

static void test_cuda_pdl_same_bits_bert(void) { same_bits("bert"); }
static void test_cuda_pdl_same_bits_funnel(void) { same_bits("funnel"); }
static void test_cuda_pdl_same_bits_resnet(void) { same_bits("resnet"); }
static void test_cuda_pdl_same_bits_wavlm(void) { same_bits("wavlm"); }

/* A device older than Hopper never gets PDL launches, and still runs models
 * (only the emulator can pretend to be one). */
static void test_cuda_pdl_pre_hopper(void) {
#ifndef FT_CUDA_EMU
    SKIP("the emulator plays an sm_80 device; a GPU is what it is");
#else
    setenv("FT_EMU_CC", "80", 1);
    ft_ctx *c = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_DISABLE_PDL", NULL);
    golden_case gc;
    if (c && golden_open(c, "bert", &gc) == 0) {
        const char *label = ft_ctx_device_label(c);
        CHECK(ft_cuda_pdl(c) == 0 && strstr(label, "sm_80") && strstr(label, "PDL off: needs sm_90"),
              "label '%s'", label);
        int64_t n = 0;
        long long pdl = 0;
        float *out = forward_outputs(c, &gc, FT_MODE_STATIC, &n, &pdl);
        CHECK(out && n > 0 && pdl == 0, "sm_80: %lld PDL launches", pdl);
        free(out);
        golden_close(&gc);
    } else {
        CHECK(0, "golden bert on an sm_80 device: %s", c ? ft_ctx_errmsg(c) : "no context");
    }
    ft_ctx_free(c);
    unsetenv("FT_EMU_CC");
#endif
}
/* PDL needs kernels that wait, not only a device that can: a build for an
 * older architecture run on a Hopper GPU is JIT-compiled from its PTX, whose
 * prologue has no griddepcontrol.wait, so PDL must stay off there. The
 * emulator plays such a build (FT_EMU_PTX_ARCH=80 on its sm_90 device). On a
 * GPU the check reads the real kernels' versions: this build's must allow PDL. */
static void test_cuda_pdl_old_ptx(void) {
    if (!ft_cuda_device_count()) {
        SKIP("no CUDA device");
        return;
    }
#ifndef FT_CUDA_EMU
    ft_ctx *c = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_DISABLE_PDL", NULL);
    if (!c) return;
    int ptx = 0, bin = 0;
    CHECK_OK(c, ft_cuda_kernel_arch(c, &ptx, &bin));
    printf("    kernels: compute_%d PTX, sm_%d code; device sm_%d%d; %s\n", ptx, bin,
           ft_cuda_state_of(c)->sm_major, ft_cuda_state_of(c)->sm_minor, ft_ctx_device_label(c));
    CHECK(ft_cuda_pdl(c) == (ptx >= 90 && bin >= 90 && ft_cuda_state_of(c)->sm_major >= 9),
          "PDL %d with compute_%d PTX / sm_%d code: '%s'", ft_cuda_pdl(c), ptx, bin, ft_ctx_device_label(c));
    ft_ctx_free(c);
#else
    setenv("FT_EMU_PTX_ARCH", "80", 1);
    ft_ctx *c = ft_test_ctx_with_env(FT_DEVICE_CUDA, "FT_DISABLE_PDL", NULL);
    golden_case gc;
    if (c && golden_open(c, "bert", &gc) == 0) {
        int ptx = 0, bin = 0;
        CHECK_OK(c, ft_cuda_kernel_arch(c, &ptx, &bin));
        const char *label = ft_ctx_device_label(c);
        CHECK(ptx == 80 && bin == 90 && ft_cuda_pdl(c) == 0 && strstr(label, "sm_90") &&
                  strstr(label, "PDL off: kernels compiled from compute_80 PTX"),
              "compute_%d / sm_%d: label '%s'", ptx, bin, label);
        /* eager and static run, with no PDL launch (one would stop the emulator) */
        for (int mode = FT_MODE_EAGER; mode <= FT_MODE_STATIC; mode += FT_MODE_STATIC) {
            int64_t n = 0;
            long long pdl = 0;
            float *out = forward_outputs(c, &gc, (ft_mode)mode, &n, &pdl);
            CHECK(out && n > 0 && pdl == 0, "compute_80 kernels, %s: %lld PDL launches",
                  ft_mode_name((ft_mode)mode), pdl);
            free(out);
        }
        golden_close(&gc);
    } else {
        CHECK(0, "golden bert with compute_80 kernels: %s", c ? ft_ctx_errmsg(c) : "no context");
    }
    ft_ctx_free(c);
    unsetenv("FT_EMU_PTX_ARCH");
#endif
}

#ifdef FT_CUDA_EMU
static void wait_then_write(void *closure) {
    FT_EMU_PROLOGUE_FOR_TEST();
    *(int *)closure = 1;
}

/* One PDL launch of a kernel that runs the prologue, in a child process with
 * FT_EMU_PTX_ARCH=arch: its exit status (a signal is 128 + its number). */
static int pdl_launch_in_child(const char *arch) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(2); /* the emulator's message on a refused launch is expected here */
        setenv("FT_EMU_PTX_ARCH", arch, 1);
        cudaStream_t s = NULL;
        int *flag = NULL;
        if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
            cudaMalloc((void **)&flag, sizeof *flag) != cudaSuccess)
            _exit(3);
        cudaError_t e = ft_emu_launch(s, (dim3){1, 1, 1}, (dim3){32, 1, 1}, 0, wait_then_write, flag, NULL,
                                      "wait_then_write", 1);
        if (e != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess) _exit(4);
        _exit(0);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

/* The emulated compute_80 prologue is really empty: a PDL launch of such a
 * kernel stops the emulator, while the sm_90 build's runs. So an engine that
 * ignored the kernels' PTX would fail test_cuda_pdl_old_ptx. */
static void test_cuda_pdl_old_ptx_launch_is_caught(void) {
    int ok90 = pdl_launch_in_child("90"), ok80 = pdl_launch_in_child("80");
    CHECK(ok90 == 0, "a PDL launch of a waiting kernel (compute_90) ended with status %d", ok90);
    CHECK(ok80 == 128 + SIGABRT, "a PDL launch of a compute_80 kernel ended with status %d, want SIGABRT", ok80);
}
#endif
#else
static void test_cuda_pdl_unbuilt(void) { SKIP("built without CUDA"); }
#endif

int main(void) {
    RUN(test_pdl_overlap_counted_once);
    RUN(test_bad_launch_options);
#ifdef FT_WITH_CUDA
    RUN(test_cuda_pdl_default);
    RUN(test_cuda_pdl_disabled_by_env);
    RUN(test_cuda_pdl_option);
    RUN(test_cuda_pdl_pre_hopper);
    RUN(test_cuda_pdl_old_ptx);
#ifdef FT_CUDA_EMU
    RUN(test_cuda_pdl_old_ptx_launch_is_caught);
#endif
    RUN(test_cuda_pdl_same_bits_bert);
    RUN(test_cuda_pdl_same_bits_funnel);
    RUN(test_cuda_pdl_same_bits_resnet);
    RUN(test_cuda_pdl_same_bits_wavlm);
#else
    RUN(test_cuda_pdl_unbuilt);
#endif
    return ft_test_finish();
}
