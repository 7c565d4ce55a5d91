/*
 * bert_forward.c - a user's experiment in miniature: link libftengine, load a
 * model (a checkpoint directory or a preset), run it on a few token ids,
 * read the output back and time a few forwards. Uses only ftengine.h.
 *
 *   build/examples/bert_forward [MODEL_DIR_OR_PRESET] [cpu|cuda]
 *
 * Without a model it takes $FT_GOLDEN_DIR/bert, else tests/golden/bert when run
 * from the repository root, else the bert-tiny preset: it works from any directory.
 */
#include <ftengine.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The small golden BERT where it can be found, else a preset that needs no file. */
static const char *default_model(char *buf, size_t size) {
    const char *dir = getenv("FT_GOLDEN_DIR");
    snprintf(buf, size, "%s/bert/config.json", dir && *dir ? dir : "tests/golden");
    FILE *f = fopen(buf, "r");
    if (!f) return "bert-tiny";
    fclose(f);
    buf[strlen(buf) - strlen("/config.json")] = '\0';
    return buf;
}

int main(int argc, char **argv) {
    char found[1024];
    const char *path = argc > 1 ? argv[1] : default_model(found, sizeof found);
    ft_device dev = argc > 2 && !strcmp(argv[2], "cuda") ? FT_DEVICE_CUDA : FT_DEVICE_CPU;
    ft_ctx *ctx = NULL;
    char why[512] = "";
    ft_ctx_options co = ft_ctx_options_default();
    co.device = dev;
    co.errbuf = why; /* the reason, since there is no context to ask */
    co.errbuf_size = sizeof why;
    if (ft_ctx_create_ex(&co, &ctx) != FT_OK) {
        fprintf(stderr, "bert_forward: cannot create a %s context: %s\n", ft_device_name(dev),
                why[0] ? why : "unknown reason");
        return 1;
    }
    ft_model *model = NULL;
    ft_model_options opt = ft_model_options_default();
    if (ft_model_load(ctx, path, &opt, &model) != FT_OK) {
        fprintf(stderr, "bert_forward: %s\n", ft_ctx_errmsg(ctx));
        ft_ctx_free(ctx);
        return 1;
    }
    /* two sequences of 8 tokens, the second padded after 5 */
    int64_t ids[2][8] = {{101, 7, 42, 99, 3, 17, 8, 102}, {101, 5, 6, 7, 102, 0, 0, 0}};
    int64_t mask[2][8] = {{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 0, 0, 0}};
    ft_host_tensor in[2] = {
        {"input_ids", FT_DTYPE_I64, 2, {2, 8}, ids},
        {"attention_mask", FT_DTYPE_I64, 2, {2, 8}, mask},
    };
    int rc = 0;
    double t0 = now_ms();
    const int runs = 5;
    for (int i = 0; i < runs && !rc; i++)
        if (ft_model_forward(model, in, 2) != FT_OK || ft_ctx_sync(ctx) != FT_OK) rc = 1;
    double ms = (now_ms() - t0) / runs;
    ft_tensor *h = rc ? NULL : ft_model_output_find(model, "last_hidden_state");
    if (!h) {
        fprintf(stderr, "bert_forward: %s\n", ft_ctx_errmsg(ctx));
        rc = 1;
    } else {
        int64_t n = ft_tensor_numel(h);
        float *buf = malloc((size_t)n * sizeof *buf);
        char shape[96];
        if (!buf || ft_tensor_to_host(ctx, h, FT_DTYPE_F32, buf, (size_t)n * sizeof *buf) != FT_OK) {
            fprintf(stderr, "bert_forward: %s\n", ft_ctx_errmsg(ctx));
            rc = 1;
        } else {
            printf("%s on %s: last_hidden_state %s, first values %.5f %.5f %.5f, %.3f ms per forward\n",
                   ft_model_arch(model), ft_device_name(dev), ft_tensor_describe(h, shape, sizeof shape),
                   buf[0], buf[1], buf[2], ms);
        }
        free(buf);
    }
    ft_model_free(model);
    ft_ctx_free(ctx);
    return rc;
}
