/*
 * resnet_ref.h - a naive double-precision ResNetModel forward for
 * tests/test_resnet_wavlm.c: it draws random HF-named weights for a config
 * (kept in a weight bag that the test writes as model.safetensors) and runs
 * conv + BatchNorm + ReLU, max-pool, basic or bottleneck layers with
 * projection shortcuts, and the global average pool, loop by loop.
 */
#ifndef FT_TEST_RESNET_REF_H
#define FT_TEST_RESNET_REF_H

#include "../engine/safetensors.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHP(...) (const int64_t[]){__VA_ARGS__}

typedef struct wbag {
    ft_st_tensor t[512];
    char name[512][128];
    float *data[512];
    int n;
    uint64_t rng;
} wbag;

static double urand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* kind: 0 conv weight (He-uniform), 1 BN gamma, 2 BN beta/mean, 3 BN var */
static const float *bag_add(wbag *b, int kind, int ndim, const int64_t *shape, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->name[b->n], sizeof b->name[0], fmt, ap);
    va_end(ap);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *d = (float *)malloc((size_t)n * sizeof *d);
    double fan = kind == 0 ? (double)n / shape[0] : 1;
    for (int64_t i = 0; i < n; i++) {
        double u = urand(&b->rng) * 2 - 1;
        d[i] = (float)(kind == 0 ? u * sqrt(6.0 / fan) : kind == 1 ? 1 + 0.4 * u : kind == 2 ? 0.3 * u : 1 + 0.5 * u);
    }
    ft_st_tensor *t = &b->t[b->n];
    memset(t, 0, sizeof *t);
    t->name = b->name[b->n];
    t->dtype = FT_DTYPE_F32;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->data = d;
    t->nbytes = (size_t)n * sizeof(float);
    b->data[b->n++] = d;
    return d;
}

static void bag_free(wbag *b) {
    for (int i = 0; i < b->n; i++) free(b->data[i]);
}

typedef struct img {
    int64_t b, c, h, w;
    double *d;
} img;

static img img_new(int64_t b, int64_t c, int64_t h, int64_t w) {
    img r = {b, c, h, w, (double *)calloc((size_t)(b * c * h * w), sizeof(double))};
    return r;
}
#define AT(x, n, ch, i, j) (x).d[(((n) * (x).c + (ch)) * (x).h + (i)) * (x).w + (j)]

/* conv (no bias) + BN + optional ReLU, weights added to the bag under HF names */
static img ref_conv_bn(wbag *bag, img x, int64_t cout, int k, int stride, int relu, const char *stem) {
    int pad = k / 2;
    const float *w = bag_add(bag, 0, 4, SHP(cout, x.c, k, k), "%s.convolution.weight", stem);
    const float *g = bag_add(bag, 1, 1, SHP(cout), "%s.normalization.weight", stem);
    const float *be = bag_add(bag, 2, 1, SHP(cout), "%s.normalization.bias", stem);
    const float *mu = bag_add(bag, 2, 1, SHP(cout), "%s.normalization.running_mean", stem);
    const float *var = bag_add(bag, 3, 1, SHP(cout), "%s.normalization.running_var", stem);
    img y = img_new(x.b, cout, (x.h + 2 * pad - k) / stride + 1, (x.w + 2 * pad - k) / stride + 1);
    for (int64_t n = 0; n < x.b; n++)
        for (int64_t o = 0; o < cout; o++)
            for (int64_t i = 0; i < y.h; i++)
                for (int64_t j = 0; j < y.w; j++) {
                    double s = 0;
                    for (int64_t c = 0; c < x.c; c++)
                        for (int a = 0; a < k; a++)
                            for (int e = 0; e < k; e++) {
                                int64_t ii = i * stride + a - pad, jj = j * stride + e - pad;
                                if (ii >= 0 && ii < x.h && jj >= 0 && jj < x.w)
                                    s += AT(x, n, c, ii, jj) * w[((o * x.c + c) * k + a) * k + e];
                            }
                    s = (s - mu[o]) / sqrt((double)var[o] + 1e-5) * g[o] + be[o];
                    AT(y, n, o, i, j) = relu && s < 0 ? 0 : s;
                }
    return y;
}

typedef struct rcfg {
    int bottleneck, down_first, down_bottleneck, n_stages, width_mult;
    int64_t embed, hidden[4], depth[4];
} rcfg;

/* Builds random HF-named weights for cfg and computes the forward on x in double. */
static img ref_resnet(wbag *bag, const rcfg *cfg, img x, img *pooled) {
    img h = ref_conv_bn(bag, x, cfg->embed, 7, 2, 1, "embedder.embedder");
    img p = img_new(h.b, h.c, (h.h + 2 - 3) / 2 + 1, (h.w + 2 - 3) / 2 + 1);
    for (int64_t n = 0; n < h.b; n++)
        for (int64_t c = 0; c < h.c; c++)
            for (int64_t i = 0; i < p.h; i++)
                for (int64_t j = 0; j < p.w; j++) {
                    double mx = -INFINITY;
                    for (int a = 0; a < 3; a++)
                        for (int e = 0; e < 3; e++) {
                            int64_t ii = i * 2 + a - 1, jj = j * 2 + e - 1;
                            if (ii >= 0 && ii < h.h && jj >= 0 && jj < h.w && AT(h, n, c, ii, jj) > mx)
                                mx = AT(h, n, c, ii, jj);
                        }
                    AT(p, n, c, i, j) = mx;
                }
    free(h.d);
    h = p;
    char stem[128];
    for (int s = 0; s < cfg->n_stages; s++)
        for (int l = 0; l < cfg->depth[s]; l++) {
            int64_t c = cfg->hidden[s];
            int stride = l ? 1 : (s || cfg->down_first) ? 2 : 1;
            img a, b, y;
            snprintf(stem, sizeof stem, "encoder.stages.%d.layers.%d.layer.0", s, l);
            if (cfg->bottleneck) {
                int64_t r = c / 4 * cfg->width_mult;
                a = ref_conv_bn(bag, h, r, 1, cfg->down_bottleneck ? stride : 1, 1, stem);
                snprintf(stem, sizeof stem, "encoder.stages.%d.layers.%d.layer.1", s, l);
                b = ref_conv_bn(bag, a, r, 3, cfg->down_bottleneck ? 1 : stride, 1, stem);
                free(a.d);
                snprintf(stem, sizeof stem, "encoder.stages.%d.layers.%d.layer.2", s, l);
                y = ref_conv_bn(bag, b, c, 1, 1, 0, stem);
                free(b.d);
            } else {
                a = ref_conv_bn(bag, h, c, 3, stride, 1, stem);
                snprintf(stem, sizeof stem, "encoder.stages.%d.layers.%d.layer.1", s, l);
                y = ref_conv_bn(bag, a, c, 3, 1, 0, stem);
                free(a.d);
            }
            img sc = h;
            if (h.c != c || stride != 1) {
                snprintf(stem, sizeof stem, "encoder.stages.%d.layers.%d.shortcut", s, l);
                sc = ref_conv_bn(bag, h, c, 1, stride, 0, stem);
            }
            int64_t n = y.b * y.c * y.h * y.w;
            for (int64_t i = 0; i < n; i++) y.d[i] = fmax(0, y.d[i] + sc.d[i]);
            if (sc.d != h.d) free(sc.d);
            free(h.d);
            h = y;
        }
    *pooled = img_new(h.b, h.c, 1, 1);
    for (int64_t n = 0; n < h.b; n++)
        for (int64_t c = 0; c < h.c; c++) {
            double s = 0;
            for (int64_t i = 0; i < h.h * h.w; i++) s += h.d[(n * h.c + c) * h.h * h.w + i];
            pooled->d[n * h.c + c] = s / (double)(h.h * h.w);
        }
    return h;
}

#endif /* FT_TEST_RESNET_REF_H */
