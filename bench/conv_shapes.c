/*
 * conv_shapes.c - the CPU convolution kernel alone on every ResNet-50 and
 * WavLM-base convolution shape: one conv node (bias + ReLU epilogue) with its
 * weight packed as a graph plan packs it (ft_cpu_conv_prepack), called
 * --iters times through the CPU kernel; prints the minimum per call. By
 * default the time is the process's CPU time, which a busy shared host
 * disturbs far less than the wall clock (with 1 thread it is the latency;
 * with more it is the work of all threads); --wall times the wall clock.
 *
 *   build/bench/conv_shapes [--threads N] [--batch B] [--iters N] [--wall] [--nchwc] [--only NAME]
 *
 * --nchwc runs each 2-d convolution as a graph plan's blocked-channel node
 * (kernels/cpu/nchwc_conv.c: NCHWc output, NCHWc input when Cin is a multiple
 * of 16) with its weights packed for it.
 *
 * It uses only entry points that have long existed (ft_dispatch,
 * ft_cpu_conv_prepack, ft_cpu_conv1d/2d), so the same file built against an
 * older libftengine.a gives an A/B of the kernel (docs/results/).
 */
#include "../engine/ft_internal.h"
#include "../kernels/cpu/cpu_kernels.h"
#include "../kernels/cpu/gemm.h"
#include "../kernels/cpu/nchwc.h"
#include "bench_clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shape {
    const char *name;
    int64_t cin, h, w, cout, k;
    int stride, pad, groups;
    bool is1d;
    int count; /* how many of the model's convolutions have this shape */
} shape;

/* ResNet-50 at 224 x 224 (stride in the 3x3, HF/torchvision v1.5) and WavLM-base
 * on 32000 samples (the feature extractor's first layers, the positional conv) */
static const shape shapes[] = {
    {"r50.stem", 3, 224, 224, 64, 7, 2, 3, 1, false, 1},
    {"r50.l1.1x1a", 64, 56, 56, 64, 1, 1, 0, 1, false, 1},
    {"r50.l1.3x3", 64, 56, 56, 64, 3, 1, 1, 1, false, 3},
    {"r50.l1.1x1up", 64, 56, 56, 256, 1, 1, 0, 1, false, 4},
    {"r50.l1.1x1dn", 256, 56, 56, 64, 1, 1, 0, 1, false, 2},
    {"r50.l2.1x1a", 256, 56, 56, 128, 1, 1, 0, 1, false, 1},
    {"r50.l2.3x3s2", 128, 56, 56, 128, 3, 2, 1, 1, false, 1},
    {"r50.l2.ds", 256, 56, 56, 512, 1, 2, 0, 1, false, 1},
    {"r50.l2.1x1up", 128, 28, 28, 512, 1, 1, 0, 1, false, 4},
    {"r50.l2.1x1dn", 512, 28, 28, 128, 1, 1, 0, 1, false, 3},
    {"r50.l2.3x3", 128, 28, 28, 128, 3, 1, 1, 1, false, 3},
    {"r50.l3.1x1a", 512, 28, 28, 256, 1, 1, 0, 1, false, 1},
    {"r50.l3.3x3s2", 256, 28, 28, 256, 3, 2, 1, 1, false, 1},
    {"r50.l3.ds", 512, 28, 28, 1024, 1, 2, 0, 1, false, 1},
    {"r50.l3.1x1up", 256, 14, 14, 1024, 1, 1, 0, 1, false, 6},
    {"r50.l3.1x1dn", 1024, 14, 14, 256, 1, 1, 0, 1, false, 5},
    {"r50.l3.3x3", 256, 14, 14, 256, 3, 1, 1, 1, false, 5},
    {"r50.l4.1x1a", 1024, 14, 14, 512, 1, 1, 0, 1, false, 1},
    {"r50.l4.3x3s2", 512, 14, 14, 512, 3, 2, 1, 1, false, 1},
    {"r50.l4.ds", 1024, 14, 14, 2048, 1, 2, 0, 1, false, 1},
    {"r50.l4.1x1up", 512, 7, 7, 2048, 1, 1, 0, 1, false, 3},
    {"r50.l4.1x1dn", 2048, 7, 7, 512, 1, 1, 0, 1, false, 2},
    {"r50.l4.3x3", 512, 7, 7, 512, 3, 1, 1, 1, false, 2},
    {"wavlm.fe0", 1, 1, 32000, 512, 10, 5, 0, 1, true, 1},
    {"wavlm.fe1", 512, 1, 6399, 512, 3, 2, 0, 1, true, 1},
    {"wavlm.fe2", 512, 1, 3199, 512, 3, 2, 0, 1, true, 1},
    {"wavlm.fe3", 512, 1, 1599, 512, 3, 2, 0, 1, true, 1},
    {"wavlm.fe4", 512, 1, 799, 512, 3, 2, 0, 1, true, 1},
    {"wavlm.fe5", 512, 1, 399, 512, 2, 2, 0, 1, true, 1},
    {"wavlm.fe6", 512, 1, 199, 512, 2, 2, 0, 1, true, 1},
    {"wavlm.posconv", 768, 1, 99, 768, 128, 1, 64, 16, true, 1},
};

static double now_ms(bool wall) {
    struct timespec t;
    clock_gettime(wall ? CLOCK_MONOTONIC : CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* min ms per call of s at batch b, or a negative value when it could not run;
 * *packed: whether the plan's packing took the weight (a build that packs
 * only some convolutions at plan time packs the others per call) */
static double run_shape(ft_ctx *ctx, const shape *s, int64_t b, int iters, bool wall, bool nchwc, bool *packed) {
    int64_t cin_g = s->cin / s->groups, kh = s->is1d ? 1 : s->k;
    int64_t xs[4] = {b, s->cin, s->h, s->w}, ws[4] = {s->cout, cin_g, kh, s->k}, bs[1] = {s->cout};
    if (s->is1d) {
        xs[2] = s->w;
        ws[2] = s->k;
    }
    int nd = s->is1d ? 3 : 4;
    float *x = bench_filled(b * s->cin * s->h * s->w, 1), *w = bench_filled(s->cout * cin_g * kh * s->k, 2);
    float *bias = bench_filled(s->cout, 3);
    double best = -1;
    *packed = false;
    if (x && w && bias) {
        ft_tensor *src[4] = {ft_tensor_from_host(ctx, FT_DTYPE_F32, nd, xs, x),
                             ft_tensor_from_host(ctx, FT_DTYPE_F32, nd, ws, w),
                             ft_tensor_from_host(ctx, FT_DTYPE_F32, 1, bs, bias), NULL};
        ft_params_conv p = {.stride = s->stride, .padding = s->pad, .groups = s->groups,
                            .act = FT_ACT_RELU, .act_in = FT_ACT_NONE};
        ft_tensor *y = NULL;
        if (src[0] && src[1] && src[2]) {
            src[1]->flags |= FT_TF_WEIGHT;
            y = ft_dispatch(ctx, s->is1d ? FT_OP_CONV1D : FT_OP_CONV2D, src, 4, &p, sizeof p);
        }
        if (y && nchwc && !s->is1d && ft_cpu_nchwc_conv_ok(y)) {
            /* the graph plan's blocked layout: input (when its channels allow) and output NCHWc */
            if (s->cin % FT_NCHWC == 0) src[0]->flags |= FT_TF_NCHWC;
            y->flags |= FT_TF_NCHWC;
            *packed = ft_cpu_nchwc_conv_prepack(y);
        } else {
            *packed = y && ft_cpu_conv_prepack(ctx, y);
        }
        if (y) {
            for (int i = 0; i < iters + 1; i++) { /* the first call warms up */
                double t0 = now_ms(wall);
                int st = s->is1d ? ft_cpu_conv1d(ctx, y) : ft_cpu_conv2d(ctx, y);
                double t = now_ms(wall) - t0;
                if (st != FT_OK) {
                    best = -1;
                    break;
                }
                if (i > 0 && (best < 0 || t < best)) best = t;
            }
            ft_cpu_unpack(y);
        }
    }
    free(x);
    free(w);
    free(bias);
    ft_ctx_reset(ctx);
    return best;
}

int main(int argc, char **argv) {
    int threads = 1, iters = 8;
    int64_t batch = 1;
    bool wall = false, nchwc = false;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--wall")) {
            wall = true;
        } else if (!strcmp(argv[i], "--nchwc")) {
            nchwc = true;
        } else if (i + 1 < argc && !strcmp(argv[i], "--threads")) {
            threads = atoi(argv[++i]);
        } else if (i + 1 < argc && !strcmp(argv[i], "--batch")) {
            batch = atoll(argv[++i]);
        } else if (i + 1 < argc && !strcmp(argv[i], "--iters")) {
            iters = atoi(argv[++i]);
        } else if (i + 1 < argc && !strcmp(argv[i], "--only")) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--threads N] [--batch B] [--iters N] [--wall] [--nchwc] [--only NAME]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || batch < 1 || iters < 1) {
        fprintf(stderr, "conv_shapes: --threads, --batch and --iters must be positive\n");
        return 2;
    }
    ft_ctx_options o = ft_ctx_options_default();
    o.device = FT_DEVICE_CPU;
    o.cpu_threads = threads;
    ft_ctx *ctx = NULL;
    if (ft_ctx_create_ex(&o, &ctx) != FT_OK) {
        fprintf(stderr, "conv_shapes: cannot create a CPU context\n");
        return 1;
    }
    printf("# min ms per call (%s), %d threads, batch %lld, %d iters\n", wall ? "wall" : "CPU time",
           threads, (long long)batch, iters);
    printf("%-16s %5s %10s  %s\n", "shape", "count", "ms", "weight");
    int failed = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        if (only && !strstr(shapes[i].name, only)) continue;
        bool packed;
        double t = run_shape(ctx, &shapes[i], batch, iters, wall, nchwc, &packed);
        if (t < 0) {
            printf("%-16s %5d %10s (%s)\n", shapes[i].name, shapes[i].count, "failed", ft_ctx_errmsg(ctx));
            ft_ctx_clear_error(ctx);
            failed = 1;
        } else {
            printf("%-16s %5d %10.3f  %s\n", shapes[i].name, shapes[i].count, t,
                   packed ? "prepacked" : "packed per call");
        }
        fflush(stdout);
    }
    ft_ctx_free(ctx);
    return failed;
}
