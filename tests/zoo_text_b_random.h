/*
 * zoo_text_b_random.h - part of tests/test_zoo_text_b.c (included once, after
 * its helpers): random checkpoints of SqueezeBERT and DeBERTa configurations the
 * golden cases leave out, run in every mode on the CPU and on CUDA and compared
 * with CPU eager mode (HF itself is checked on such configurations by the
 * variants of tests/golden/variants), and the kernels per layer eager vs graph.
 */

typedef struct wspec {
    char name[128];
    int nd;
    int64_t ne[3];
} wspec;

typedef struct wlist {
    wspec w[160];
    int n;
} wlist;

static void wadd(wlist *l, int nd, int64_t a, int64_t b, const char *fmt, int layer) {
    if (l->n == 160) return;
    wspec *s = &l->w[l->n++];
    snprintf(s->name, sizeof s->name, fmt, layer);
    s->nd = nd;
    s->ne[0] = a;
    s->ne[1] = b;
    s->ne[2] = 1;
}

static uint64_t wseed = 0x2545f4914f6cdd1dull;
static float wrand(void) {
    wseed ^= wseed << 13, wseed ^= wseed >> 7, wseed ^= wseed << 17;
    return (float)((double)(wseed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* config.json and random weights for the listed tensors: norm scales near 1,
 * everything else uniform in +-0.3 (embeddings +-1) */
static int write_random(ft_ctx *ctx, const char *dir, const char *cfg, const wlist *l) {
    char path[600];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (write_text(path, cfg)) return -1;
    ft_st_tensor *t = calloc((size_t)l->n, sizeof *t);
    float **data = calloc((size_t)l->n, sizeof *data);
    for (int i = 0; i < l->n; i++) {
        const wspec *s = &l->w[i];
        int64_t n = s->ne[0] * (s->nd > 1 ? s->ne[1] : 1) * (s->nd > 2 ? s->ne[2] : 1);
        data[i] = malloc((size_t)n * sizeof(float));
        bool norm = strstr(s->name, "orm.weight") != NULL;
        float amp = strstr(s->name, "embeddings.") ? 1.0f : 0.3f;
        for (int64_t j = 0; j < n; j++) data[i][j] = norm ? 1.0f + 0.2f * wrand() : amp * wrand();
        t[i] = (ft_st_tensor){s->name, FT_DTYPE_F32, s->nd, {s->ne[0], s->ne[1], s->ne[2]}, data[i],
                              (size_t)n * sizeof(float)};
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ft_status st = ft_st_write(ctx, path, t, l->n);
    for (int i = 0; i < l->n; i++) free(data[i]);
    free(data);
    free(t);
    return st == FT_OK ? 0 : -1;
}

typedef struct rcfg {
    const char *tag, *json;
    bool deberta;
    /* DeBERTa: hidden, heads, inter, layers, vocab, max_pos, 2 * rel table rows (0: none), emb size,
     * type vocab, flags; SqueezeBERT: the group counts q, k, v, post, inter, out */
    int64_t d, heads, inter, layers, vocab, max_pos, rel_rows, emb, types;
    bool c2p, p2c, pos_input, talking;
    int64_t g[6];
    int64_t batch, seq;
    const char *want_detail; /* a plan step detail graph mode must show, or NULL */
} rcfg;

static void weights_of(const rcfg *c, wlist *l) {
    l->n = 0;
    int64_t D = c->d, I = c->inter, E = c->emb ? c->emb : D;
    if (c->deberta) {
        wadd(l, 2, c->vocab, E, "embeddings.word_embeddings.weight", 0);
        if (c->pos_input) wadd(l, 2, c->max_pos, E, "embeddings.position_embeddings.weight", 0);
        if (c->types) wadd(l, 2, c->types, E, "embeddings.token_type_embeddings.weight", 0);
        if (E != D) wadd(l, 2, D, E, "embeddings.embed_proj.weight", 0);
        if (c->rel_rows) wadd(l, 2, c->rel_rows, D, "encoder.rel_embeddings.weight", 0);
    } else {
        wadd(l, 2, c->vocab, D, "embeddings.word_embeddings.weight", 0);
        wadd(l, 2, c->max_pos, D, "embeddings.position_embeddings.weight", 0);
        wadd(l, 2, 2, D, "embeddings.token_type_embeddings.weight", 0);
        wadd(l, 2, D, D, "pooler.dense.weight", 0);
        wadd(l, 1, D, 0, "pooler.dense.bias", 0);
    }
    wadd(l, 1, D, 0, "embeddings.LayerNorm.weight", 0);
    wadd(l, 1, D, 0, "embeddings.LayerNorm.bias", 0);
    for (int i = 0; i < (int)c->layers; i++) {
        if (c->deberta) {
            wadd(l, 2, 3 * D, D, "encoder.layer.%d.attention.self.in_proj.weight", i);
            wadd(l, 1, D, 0, "encoder.layer.%d.attention.self.q_bias", i);
            wadd(l, 1, D, 0, "encoder.layer.%d.attention.self.v_bias", i);
            if (c->c2p) wadd(l, 2, D, D, "encoder.layer.%d.attention.self.pos_proj.weight", i);
            if (c->p2c) {
                wadd(l, 2, D, D, "encoder.layer.%d.attention.self.pos_q_proj.weight", i);
                wadd(l, 1, D, 0, "encoder.layer.%d.attention.self.pos_q_proj.bias", i);
            }
            if (c->talking) {
                wadd(l, 2, c->heads, c->heads, "encoder.layer.%d.attention.self.head_logits_proj.weight", i);
                wadd(l, 2, c->heads, c->heads, "encoder.layer.%d.attention.self.head_weights_proj.weight", i);
            }
            static const char *const lin[4][2] = {{"attention.output.dense", "D"}, {"intermediate.dense", "I"},
                                                  {"output.dense", "O"}, {NULL, NULL}};
            for (int k = 0; lin[k][0]; k++) {
                char f[128];
                int64_t out = k == 1 ? I : D, in = k == 2 ? I : D;
                snprintf(f, sizeof f, "encoder.layer.%%d.%s.weight", lin[k][0]);
                wadd(l, 2, out, in, f, i);
                snprintf(f, sizeof f, "encoder.layer.%%d.%s.bias", lin[k][0]);
                wadd(l, 1, out, 0, f, i);
            }
            wadd(l, 1, D, 0, "encoder.layer.%d.attention.output.LayerNorm.weight", i);
            wadd(l, 1, D, 0, "encoder.layer.%d.attention.output.LayerNorm.bias", i);
            wadd(l, 1, D, 0, "encoder.layer.%d.output.LayerNorm.weight", i);
            wadd(l, 1, D, 0, "encoder.layer.%d.output.LayerNorm.bias", i);
        } else {
            static const char *const conv[6] = {"attention.query", "attention.key", "attention.value",
                                                "post_attention.conv1d", "intermediate.conv1d", "output.conv1d"};
            for (int k = 0; k < 6; k++) {
                char f[128];
                int64_t out = k == 4 ? I : D, in = k == 5 ? I : D;
                snprintf(f, sizeof f, "encoder.layers.%%d.%s.weight", conv[k]);
                wadd(l, 3, out, in / c->g[k], f, i);
                snprintf(f, sizeof f, "encoder.layers.%%d.%s.bias", conv[k]);
                wadd(l, 1, out, 0, f, i);
            }
            wadd(l, 1, D, 0, "encoder.layers.%d.post_attention.layernorm.weight", i);
            wadd(l, 1, D, 0, "encoder.layers.%d.post_attention.layernorm.bias", i);
            wadd(l, 1, D, 0, "encoder.layers.%d.output.layernorm.weight", i);
            wadd(l, 1, D, 0, "encoder.layers.%d.output.layernorm.bias", i);
        }
    }
}

static const rcfg rcfgs[] = {
    {"deberta span 5, batch 3", "{\"model_type\": \"deberta\", \"vocab_size\": 100, \"hidden_size\": 48,"
     " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 96, \"max_position_embeddings\": 40,"
     " \"relative_attention\": true, \"max_relative_positions\": 5, \"pos_att_type\": \"c2p|p2c\","
     " \"position_biased_input\": false, \"type_vocab_size\": 0}",
     true, 48, 4, 96, 2, 100, 40, 10, 0, 0, true, true, false, false, {0}, 3, 13, "mask+c2p+p2c+row scale"},
    {"deberta p2c only", "{\"model_type\": \"deberta\", \"vocab_size\": 100, \"hidden_size\": 48,"
     " \"num_hidden_layers\": 1, \"num_attention_heads\": 3, \"intermediate_size\": 64, \"max_position_embeddings\": 40,"
     " \"relative_attention\": true, \"pos_att_type\": \" P2C \", \"position_biased_input\": false,"
     " \"type_vocab_size\": 0, \"hidden_act\": \"gelu_new\"}",
     true, 48, 3, 64, 1, 100, 40, 80, 0, 0, false, true, false, false, {0}, 2, 11, "mask+p2c+row scale"},
    {"deberta c2p, positions, types, embed_proj", "{\"model_type\": \"deberta\", \"vocab_size\": 100,"
     " \"hidden_size\": 48, \"embedding_size\": 32, \"num_hidden_layers\": 2, \"num_attention_heads\": 2,"
     " \"intermediate_size\": 64, \"max_position_embeddings\": 20, \"relative_attention\": true,"
     " \"max_relative_positions\": 3, \"pos_att_type\": [\"c2p\"], \"type_vocab_size\": 2}",
     true, 48, 2, 64, 2, 100, 20, 6, 32, 2, true, false, true, false, {0}, 3, 9, "mask+c2p+row scale"},
    {"deberta no relative attention", "{\"model_type\": \"deberta\", \"vocab_size\": 100, \"hidden_size\": 32,"
     " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 64,"
     " \"max_position_embeddings\": 16, \"pos_att_type\": \"c2p|p2c\", \"position_biased_input\": false}",
     true, 32, 4, 64, 1, 100, 16, 0, 0, 0, false, false, false, false, {0}, 2, 7, "mask+row scale"},
    {"deberta talking heads", "{\"model_type\": \"deberta\", \"vocab_size\": 100, \"hidden_size\": 32,"
     " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"intermediate_size\": 64,"
     " \"max_position_embeddings\": 16, \"relative_attention\": true, \"pos_att_type\": \"c2p|p2c\","
     " \"position_biased_input\": false, \"talking_head\": true}",
     true, 32, 4, 64, 1, 100, 16, 32, 0, 0, true, true, false, true, {0}, 2, 6, NULL},
    {"squeezebert groups 2/4/3/2/4/6", "{\"model_type\": \"squeezebert\", \"vocab_size\": 100, \"hidden_size\": 48,"
     " \"embedding_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 96,"
     " \"max_position_embeddings\": 40, \"q_groups\": 2, \"k_groups\": 4, \"v_groups\": 3,"
     " \"post_attention_groups\": 2, \"intermediate_groups\": 4, \"output_groups\": 6, \"layer_norm_eps\": 1e-5}",
     false, 48, 4, 96, 2, 100, 40, 0, 0, 0, false, false, false, false, {2, 4, 3, 2, 4, 6}, 3, 13, "groups 6"},
    {"squeezebert dense", "{\"model_type\": \"squeezebert\", \"vocab_size\": 100, \"hidden_size\": 48,"
     " \"embedding_size\": 48, \"num_hidden_layers\": 1, \"num_attention_heads\": 3, \"intermediate_size\": 64,"
     " \"max_position_embeddings\": 40, \"q_groups\": 1, \"k_groups\": 1, \"v_groups\": 1,"
     " \"post_attention_groups\": 1, \"intermediate_groups\": 1, \"output_groups\": 1}",
     false, 48, 3, 64, 1, 100, 40, 0, 0, 0, false, false, false, false, {1, 1, 1, 1, 1, 1}, 1, 17, NULL},
    {"squeezebert groups 3 merged", "{\"model_type\": \"squeezebert\", \"vocab_size\": 100, \"hidden_size\": 48,"
     " \"embedding_size\": 48, \"num_hidden_layers\": 1, \"num_attention_heads\": 6, \"intermediate_size\": 96,"
     " \"max_position_embeddings\": 40, \"q_groups\": 3, \"k_groups\": 3, \"v_groups\": 3,"
     " \"post_attention_groups\": 3, \"intermediate_groups\": 6, \"output_groups\": 2}",
     false, 48, 6, 96, 1, 100, 40, 0, 0, 0, false, false, false, false, {3, 3, 3, 3, 6, 2}, 2, 5,
     "groups 3 (3 stacked)"},
};

/* inputs: ids, a mask (row 0 full, then rows padded to fewer tokens), token types */
static int make_inputs(const rcfg *c, int64_t *ids, int64_t *mask, int64_t *tt, ft_host_tensor *in) {
    int64_t B = c->batch, S = c->seq;
    for (int64_t i = 0; i < B * S; i++) {
        ids[i] = (i * 37 + 5) % c->vocab;
        int64_t b = i / S, s = i % S;
        mask[i] = s < S - b * (S / 2); /* row 1 keeps about half, row 2 one token */
        tt[i] = (s * 3 + b) % 2;
    }
    in[0] = (ft_host_tensor){"input_ids", FT_DTYPE_I64, 2, {B, S}, ids};
    in[1] = (ft_host_tensor){"attention_mask", FT_DTYPE_I64, 2, {B, S}, mask};
    in[2] = (ft_host_tensor){"token_type_ids", FT_DTYPE_I64, 2, {B, S}, tt};
    return c->deberta && !c->types ? 2 : 3;
}

static const char *const rnd_outputs[] = {"last_hidden_state", "pooler_output", "hidden_states.1"};

static void random_configs(ft_device dev) {
    ft_ctx *cpu = NULL, *ctx = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &cpu) != FT_OK || ft_ctx_create(dev, &ctx) != FT_OK) {
        CHECK(0, "contexts");
        ft_ctx_free(cpu);
        return;
    }
    ft_test_tmpdir_make("zoo_b_rnd");
    for (size_t i = 0; i < sizeof rcfgs / sizeof rcfgs[0]; i++) {
        const rcfg *c = &rcfgs[i];
        char dir[400];
        snprintf(dir, sizeof dir, "%s/c%zu", tmpdir, i);
        wlist l;
        weights_of(c, &l);
        CHECK(write_random(cpu, dir, c->json, &l) == 0, "%s: writing", c->tag);
        int64_t ids[64], mask[64], tt[64];
        ft_host_tensor in[3];
        int n_in = make_inputs(c, ids, mask, tt, in);
        ft_model_options o = ft_model_options_default();
        o.output_hidden_states = 1;
        ft_model *ref = NULL;
        if (ft_model_load(cpu, dir, &o, &ref) != FT_OK || ft_model_forward(ref, in, n_in) != FT_OK) {
            CHECK(0, "%s: CPU eager: %s", c->tag, ft_ctx_errmsg(cpu));
            ft_ctx_clear_error(cpu);
            ft_model_free(ref);
            continue;
        }
        for (int mode = dev == FT_DEVICE_CPU ? 1 : 0; mode < 3; mode++) {
            o.mode = all_modes[mode];
            ft_model *m = NULL;
            if (ft_model_load(ctx, dir, &o, &m) != FT_OK || ft_model_forward(m, in, n_in) != FT_OK) {
                CHECK(0, "%s: %s %s: %s", c->tag, ft_device_name(dev), ft_mode_name(o.mode), ft_ctx_errmsg(ctx));
                ft_ctx_clear_error(ctx);
                ft_model_free(m);
                continue;
            }
            for (int k = 0; k < 3; k++) {
                if (!ft_model_output_find(ref, rnd_outputs[k])) continue;
                double d = out_diff(cpu, ref, ctx, m, rnd_outputs[k]);
                CHECK(d <= 2e-4, "%s: %s %s %s differs from CPU eager by %g", c->tag, ft_device_name(dev),
                      ft_mode_name(o.mode), rnd_outputs[k], d);
            }
            if (o.mode == FT_MODE_GRAPH && c->want_detail) {
                const char *op = c->deberta ? "attention_rel" : "linear_grouped";
                CHECK(count_op(m, op, c->want_detail) >= 1, "%s: no %s step with '%s' in the %s plan", c->tag, op,
                      c->want_detail, ft_device_name(dev));
                if (c->deberta) CHECK(count_square(m, c->seq) == 0, "%s: a [B, H, S, S] step left", c->tag);
            }
            ft_model_free(m);
        }
        ft_model_free(ref);
    }
    ft_test_tmpdir_remove();
    ft_ctx_free(ctx);
    ft_ctx_free(cpu);
}

static void test_random_configs_cpu(void) { random_configs(FT_DEVICE_CPU); }

static void test_random_configs_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    random_configs(FT_DEVICE_CUDA);
}

/* kernels per encoder layer: the golden configs with 1 and 2 layers, the difference */
static void kernels_per_layer(ft_device dev) {
    static const struct {
        const char *name, *cfg1, *cfg2;
        int max_graph;
    } k[] = {
        {"squeezebert", SQ_CFG(", \"num_hidden_layers\": 1"), SQ_CFG(""), 7},
        {"deberta", DB_CFG(", \"num_hidden_layers\": 1"), DB_CFG(""), 9},
    };
    ft_device devs[1] = {dev};
    ft_test_tmpdir_make("zoo_b_kpl");
    for (int d = 0; d < 1; d++) {
        ft_ctx *ctx = NULL;
        if (ft_ctx_create(devs[d], &ctx) != FT_OK) continue;
        for (int i = 0; i < 2; i++) {
            int eager[2] = {0}, graph[2] = {0};
            for (int L = 0; L < 2; L++) {
                char dir[400];
                snprintf(dir, sizeof dir, "%s/%s%d_%d", tmpdir, k[i].name, L, d);
                write_case(ctx, k[i].name, dir, NULL, L ? k[i].cfg2 : k[i].cfg1, NULL);
                golden_case g;
                if (golden_open(ctx, k[i].name, &g) != 0) continue;
                ft_model *m = load(ctx, dir, FT_MODE_GRAPH, FT_DTYPE_F16);
                ft_graph_stats st;
                memset(&st, 0, sizeof st);
                if (m && ft_model_forward(m, g.in, g.n_in) == FT_OK) ft_model_graph_stats(m, &st);
                eager[L] = st.traced_kernels;
                graph[L] = st.kernels_per_forward;
                ft_model_free(m);
                golden_close(&g);
            }
            int e = eager[1] - eager[0], gr = graph[1] - graph[0];
            printf("  %s on %s (f16, golden inputs with a padded row): kernels per layer eager %d, graph %d\n",
                   k[i].name, ft_device_name(devs[d]), e, gr);
            CHECK(e > 0 && gr > 0 && gr <= k[i].max_graph, "%s: %d kernels per layer in graph mode (eager %d)",
                  k[i].name, gr, e);
        }
        ft_ctx_free(ctx);
    }
    ft_test_tmpdir_remove();
}

static void test_kernels_per_layer_cpu(void) { kernels_per_layer(FT_DEVICE_CPU); }

static void test_kernels_per_layer_cuda(void) {
    if (ft_cuda_device_count() == 0) {
        SKIP("no CUDA device");
        return;
    }
    kernels_per_layer(FT_DEVICE_CUDA);
}
