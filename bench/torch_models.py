#!/usr/bin/env python3
"""torch_models.py - the six ftengine architectures in plain PyTorch, written
out from Hugging Face transformers' modeling code (v4.36 eager math), for
bench/cpu_vs_torch.py's side-by-side timing and for proving that math on the
golden cases (tests/golden/<arch>/: HF's own outputs).

Each model is built from an HF config dict (a config.json, or a preset: the
config class defaults plus the few keys ftengine's preset sets; torch_base.py)
and keeps its weights in a dict under HF's state_dict names, so the same
forward runs on random weights (timing) or on a checkpoint's model.safetensors
(golden check). forward(**inputs) takes HF's argument names and returns a dict
of HF's output names. Eval mode only: dropout, LayerDrop and SpecAugment are
identities. bench/hf_golden.py runs them on the golden cases with HF's weights
and checks the outputs against HF's (the C golden tests' criterion).
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_base import (F, PRESETS, TORCH_ERROR, HFModel, act_fn, full_config, gelu_new,  # noqa: E402,F401
                        preset_config, text_inputs, torch)
import torch_zoo_vision_a  # noqa: E402


# --------------------------------------------------------------------------- BERT, DistilBERT


class Bert(HFModel):
    """BertModel (and DistilBertModel below): word + position (+ token type) embeddings,
    LayerNorm; per layer q/k/v, scores / sqrt(d) + (1 - mask) * finfo.min, softmax, context,
    dense + residual + LayerNorm, act FFN + residual + LayerNorm; BERT's tanh pooler."""
    prefix = "bert."
    names = dict(q="attention.self.query", k="attention.self.key", v="attention.self.value",
                 o="attention.output.dense", ln1="attention.output.LayerNorm", i="intermediate.dense",
                 out="output.dense", ln2="output.LayerNorm", layer="encoder.layer")

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg
        self.h, self.nh, self.L = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
        self.inter, self.eps, self.act = c["intermediate_size"], c["layer_norm_eps"], act_fn(c["hidden_act"])
        self.vocab = c["vocab_size"]
        self.declare_embeddings(c)
        n, h = self.names, self.h
        for i in range(self.L):
            p = f"{n['layer']}.{i}."
            for k in ("q", "k", "v", "o"):
                self.linear(p + n[k], h, h)
            self.norm(p + n["ln1"], h)
            self.linear(p + n["i"], self.inter, h)
            self.linear(p + n["out"], h, self.inter)
            self.norm(p + n["ln2"], h)
        self.declare_pooler()

    def declare_embeddings(self, c):
        self.param("embeddings.word_embeddings.weight", (c["vocab_size"], self.h))
        self.param("embeddings.position_embeddings.weight", (c["max_position_embeddings"], self.h))
        self.param("embeddings.token_type_embeddings.weight", (c["type_vocab_size"], self.h))
        self.norm("embeddings.LayerNorm", self.h)

    def declare_pooler(self):
        self.linear("pooler.dense", self.h, self.h)

    def inputs(self, batch, seq, seed=0):
        return text_inputs(self.vocab, batch, seq, seed)

    def embed(self, ids, token_type_ids):
        s = ids.shape[1]
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        x = (self.p["embeddings.word_embeddings.weight"][ids]
             + self.p["embeddings.token_type_embeddings.weight"][token_type_ids]
             + self.p["embeddings.position_embeddings.weight"][:s])
        return self.ln(x, "embeddings.LayerNorm", self.eps)

    def scores(self, q, k, mask, d):
        # BERT: scores / sqrt(d) + the extended additive mask
        return torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d) + mask

    def ext_mask(self, mask, x):
        return (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min

    def layer(self, x, mask, i):
        n, b, s = self.names, x.shape[0], x.shape[1]
        p, nh, d = f"{n['layer']}.{i}.", self.nh, self.h // self.nh

        def heads(t):
            return t.view(b, s, nh, d).transpose(1, 2)
        q, k, v = (heads(self.lin(x, p + n[t])) for t in ("q", "k", "v"))
        probs = torch.softmax(self.scores(q, k, mask, d), dim=-1)
        c = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, self.h)
        x = self.ln(self.lin(c, p + n["o"]) + x, p + n["ln1"], self.eps)
        f = self.lin(self.act(self.lin(x, p + n["i"])), p + n["out"])
        return self.ln(f + x, p + n["ln2"], self.eps)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape)
        x = self.embed(input_ids, token_type_ids)
        mask = self.ext_mask(attention_mask, x)
        for i in range(self.L):
            x = self.layer(x, mask, i)
        return self.pool(x)

    def pool(self, x):
        return {"last_hidden_state": x, "pooler_output": torch.tanh(self.lin(x[:, 0], "pooler.dense"))}


class DistilBert(Bert):
    """DistilBertModel: BERT's layer under DistilBERT's names, no token types, q scaled before
    the product, masked_fill(mask == 0, finfo.min), no pooler."""
    prefix = "distilbert."
    names = dict(q="attention.q_lin", k="attention.k_lin", v="attention.v_lin", o="attention.out_lin",
                 ln1="sa_layer_norm", i="ffn.lin1", out="ffn.lin2", ln2="output_layer_norm", layer="transformer.layer")

    def __init__(self, cfg):
        c = dict(cfg, hidden_size=cfg["dim"], num_attention_heads=cfg["n_heads"], num_hidden_layers=cfg["n_layers"],
                 intermediate_size=cfg["hidden_dim"], hidden_act=cfg["activation"], layer_norm_eps=1e-12)
        super().__init__(c)

    def declare_embeddings(self, c):
        self.param("embeddings.word_embeddings.weight", (c["vocab_size"], self.h))
        self.param("embeddings.position_embeddings.weight", (c["max_position_embeddings"], self.h))
        self.norm("embeddings.LayerNorm", self.h)

    def declare_pooler(self):
        pass

    def embed(self, ids, token_type_ids):
        x = self.p["embeddings.word_embeddings.weight"][ids] + self.p["embeddings.position_embeddings.weight"][
            :ids.shape[1]]
        return self.ln(x, "embeddings.LayerNorm", self.eps)

    def ext_mask(self, mask, x):
        return (mask == 0)[:, None, None, :]

    def scores(self, q, k, mask, d):
        sc = torch.matmul(q / math.sqrt(d), k.transpose(-1, -2))
        return sc.masked_fill(mask.expand_as(sc), torch.finfo(sc.dtype).min)

    def pool(self, x):
        return {"last_hidden_state": x}


# --------------------------------------------------------------------------- MobileBERT


class MobileBert(HFModel):
    """MobileBertModel: trigram embedding input + embedding_transformation, NoNorm (x * w + b) or
    LayerNorm, per layer the input and shared query/key bottlenecks, attention at true_hidden
    width with the value from the full-width input, num_feedforward_networks - 1 extra FFNs,
    the intermediate/output FFN, and the output bottleneck back to hidden_size."""
    prefix = "mobilebert."

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg
        self.d, self.e, self.L, self.nh = c["hidden_size"], c["embedding_size"], c["num_hidden_layers"], \
            c["num_attention_heads"]
        self.inter, self.eps, self.act = c["intermediate_size"], c["layer_norm_eps"], act_fn(c["hidden_act"])
        self.vocab, self.trigram = c["vocab_size"], c["trigram_input"]
        self.bottleneck, self.bn_att = c["use_bottleneck"], c["use_bottleneck_attention"]
        self.kq_shared, self.n_ffn = c["key_query_shared_bottleneck"], c["num_feedforward_networks"]
        self.layer_norm = {"no_norm": False, "layer_norm": True}[c["normalization_type"]]
        self.cls_act = c["classifier_activation"]
        # true_hidden_size is derived, whatever the config says
        self.dt = c["intra_bottleneck_size"] if self.bottleneck else self.d
        d, dt, it = self.d, self.dt, self.inter
        self.param("embeddings.word_embeddings.weight", (self.vocab, self.e))
        self.param("embeddings.position_embeddings.weight", (c["max_position_embeddings"], d))
        self.param("embeddings.token_type_embeddings.weight", (c["type_vocab_size"], d))
        self.linear("embeddings.embedding_transformation", d, self.e * (3 if self.trigram else 1))
        self.norm("embeddings.LayerNorm", d)
        for i in range(self.L):
            p = f"encoder.layer.{i}."
            if self.bottleneck:
                self.linear(p + "bottleneck.input.dense", dt, d)
                self.norm(p + "bottleneck.input.LayerNorm", dt)
                if self.kq_shared:
                    self.linear(p + "bottleneck.attention.dense", dt, d)
                    self.norm(p + "bottleneck.attention.LayerNorm", dt)
            self.linear(p + "attention.self.query", dt, dt)
            self.linear(p + "attention.self.key", dt, dt)
            self.linear(p + "attention.self.value", dt, dt if self.bn_att else d)
            self.linear(p + "attention.output.dense", dt, dt)
            self.norm(p + "attention.output.LayerNorm", dt)
            for k in range(self.n_ffn - 1):
                self.linear(p + f"ffn.{k}.intermediate.dense", it, dt)
                self.linear(p + f"ffn.{k}.output.dense", dt, it)
                self.norm(p + f"ffn.{k}.output.LayerNorm", dt)
            self.linear(p + "intermediate.dense", it, dt)
            self.linear(p + "output.dense", dt, it)
            self.norm(p + "output.LayerNorm", dt)
            if self.bottleneck:
                self.linear(p + "output.bottleneck.dense", d, dt)
                self.norm(p + "output.bottleneck.LayerNorm", d)
        if self.cls_act:
            self.linear("pooler.dense", d, d)

    def inputs(self, batch, seq, seed=0):
        return text_inputs(self.vocab, batch, seq, seed)

    def nrm(self, x, name, eps=None):
        # HF builds the embedding and MobileBertOutput norms without eps (nn.LayerNorm's 1e-5)
        if self.layer_norm:
            return self.ln(x, name, self.eps if eps is None else eps)
        return x * self.p[name + ".weight"] + self.p[name + ".bias"]  # NoNorm

    def dense_norm(self, x, dense, res, norm, eps=None):
        return self.nrm(self.lin(x, dense) + res, norm, eps)

    def layer(self, h, mask, i):
        p = f"encoder.layer.{i}."
        q_in = k_in = v_in = li = h
        if self.bottleneck:
            li = self.nrm(self.lin(h, p + "bottleneck.input.dense"), p + "bottleneck.input.LayerNorm")
            if self.bn_att:
                q_in = k_in = v_in = li
            elif self.kq_shared:
                q_in = k_in = self.nrm(self.lin(h, p + "bottleneck.attention.dense"), p + "bottleneck.attention.LayerNorm")
        b, s, nh, dh = h.shape[0], h.shape[1], self.nh, self.dt // self.nh

        def heads(t):
            return t.view(b, s, nh, dh).permute(0, 2, 1, 3)
        q = heads(self.lin(q_in, p + "attention.self.query"))
        k = heads(self.lin(k_in, p + "attention.self.key"))
        v = heads(self.lin(v_in, p + "attention.self.value"))
        sc = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(dh) + mask
        c = torch.matmul(torch.softmax(sc, dim=-1), v).permute(0, 2, 1, 3).reshape(b, s, self.dt)
        a = self.dense_norm(c, p + "attention.output.dense", li, p + "attention.output.LayerNorm")
        for k2 in range(self.n_ffn - 1):
            f = self.act(self.lin(a, p + f"ffn.{k2}.intermediate.dense"))
            a = self.dense_norm(f, p + f"ffn.{k2}.output.dense", a, p + f"ffn.{k2}.output.LayerNorm")
        f = self.act(self.lin(a, p + "intermediate.dense"))
        o = self.dense_norm(f, p + "output.dense", a, p + "output.LayerNorm", eps=1e-5)
        if not self.bottleneck:
            return o
        return self.dense_norm(o, p + "output.bottleneck.dense", h, p + "output.bottleneck.LayerNorm")

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        s = input_ids.shape[1]
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        e = self.p["embeddings.word_embeddings.weight"][input_ids]
        if self.trigram:  # [e(t+1), e(t), e(t-1)], zero past either end
            e = torch.cat([F.pad(e[:, 1:], [0, 0, 0, 1]), e, F.pad(e[:, :-1], [0, 0, 1, 0])], dim=2)
        if self.trigram or self.e != self.d:
            e = self.lin(e, "embeddings.embedding_transformation")
        e = e + self.p["embeddings.position_embeddings.weight"][:s] + \
            self.p["embeddings.token_type_embeddings.weight"][token_type_ids]
        h = self.nrm(e, "embeddings.LayerNorm", eps=1e-5)
        mask = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        for i in range(self.L):
            h = self.layer(h, mask, i)
        first = h[:, 0]
        pooled = torch.tanh(self.lin(first, "pooler.dense")) if self.cls_act else first
        return {"last_hidden_state": h, "pooler_output": pooled}


# --------------------------------------------------------------------------- Funnel


class Funnel(HFModel):
    """FunnelModel (encoder + decoder) / FunnelBaseModel (encoder only), attention_type
    "relative_shift": word embeddings + LayerNorm; FunnelRelMultiheadAttention (content,
    positional through r_kernel-projected sinusoids and _relative_shift_gather, token-type
    through seg_embed; both masked by cls_mask) + post_proj + residual + LayerNorm, gelu_new
    FFN; blocks after the first mean-pool the query of their first layer (pool_q_only);
    the decoder upsamples, adds the first block's output and runs full-length layers."""
    prefix = "funnel."
    INF = 1e6

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg
        if c["attention_type"] != "relative_shift":
            raise ValueError(f"attention_type {c['attention_type']!r}: only relative_shift is written out here")
        self.d, self.nh, self.dh, self.inner = c["d_model"], c["n_head"], c["d_head"], c["d_inner"]
        self.blocks = list(c["block_sizes"])
        self.repeats = list(c["block_repeats"] or [1] * len(self.blocks))
        self.sep, self.trunc, self.q_only = c["separate_cls"], c["truncate_seq"], c["pool_q_only"]
        self.pool_mode, self.eps, self.act = c["pooling_type"], c["layer_norm_eps"], act_fn(c["hidden_act"])
        self.vocab = c["vocab_size"]
        self.base = "FunnelBaseModel" in (c.get("architectures") or [])
        self.n_dec = 0 if self.base else c["num_decoder_layers"]
        self.param("embeddings.word_embeddings.weight", (self.vocab, self.d))
        self.norm("embeddings.layer_norm", self.d)
        for b, n in enumerate(self.blocks):
            for li in range(n):
                self.declare_layer(f"encoder.blocks.{b}.{li}.")
        for li in range(self.n_dec):
            self.declare_layer(f"decoder.layers.{li}.")

    def declare_layer(self, p):
        d, h, nh, dh = self.d, self.nh * self.dh, self.nh, self.dh
        u = lambda shape: torch.rand(*shape) * 0.1  # noqa: E731  HF: uniform(0, initializer_range)
        self.linear(p + "attention.q_head", h, d, bias=False)
        self.linear(p + "attention.k_head", h, d)
        self.linear(p + "attention.v_head", h, d)
        for n in ("r_w_bias", "r_r_bias", "r_s_bias"):
            self.param(p + "attention." + n, (nh, dh), u)
        self.param(p + "attention.r_kernel", (d, nh, dh), u)
        self.param(p + "attention.seg_embed", (2, nh, dh), u)
        self.linear(p + "attention.post_proj", d, h)
        self.norm(p + "attention.layer_norm", d)
        self.linear(p + "ffn.linear_1", self.inner, d)
        self.linear(p + "ffn.linear_2", d, self.inner)
        self.norm(p + "ffn.layer_norm", d)

    def inputs(self, batch, seq, seed=0):
        return text_inputs(self.vocab, batch, seq, seed)

    # -- FunnelAttentionStructure
    def position_embeds(self, S, dtype):
        d = self.d
        inv_freq = 1 / (10000 ** (torch.arange(0, d // 2, dtype=torch.int64).to(dtype) / (d // 2)))
        rel = torch.arange(-S * 2, S * 2, dtype=torch.int64).to(dtype)
        sinus = rel[:, None] * inv_freq[None]
        table = torch.cat([torch.sin(sinus), torch.cos(sinus)], dim=-1)
        zero = S * 2
        pos = torch.arange(0, S, dtype=torch.int64).to(dtype)
        pooled, out = pos, []
        for b in range(len(self.blocks)):
            with_pool = None
            if b > 0:
                pooled = self.stride_pool_pos(pos, b)
                r = self.relative_pos(pos, 2 ** (b - 1), pooled, shift=2)
                with_pool = table[r + zero]
            pos = pooled
            out.append([table[self.relative_pos(pos, 2 ** b) + zero], with_pool])
        return out

    def stride_pool_pos(self, pos, b):
        if not self.sep:
            return pos[::2]
        cls = pos.new_tensor([-(2 ** b) + 1])
        rest = pos[1:-1] if self.trunc else pos[1:]
        return torch.cat([cls, rest[::2]], 0)

    @staticmethod
    def relative_pos(pos, stride, pooled=None, shift=1):
        pooled = pos if pooled is None else pooled
        ref = pooled[0] - pos[0]
        max_dist = ref + shift * pooled.shape[0] * stride
        min_dist = pooled[0] - pos[-1]
        return torch.arange(int(max_dist), int(min_dist) - 1, -stride, dtype=torch.long)

    def stride_pool(self, t, axis):
        if t is None:
            return None
        axis %= t.ndim
        sl = slice(None, -1, 2) if self.sep and self.trunc else slice(None, None, 2)
        if self.sep:
            t = torch.cat([t[(slice(None),) * axis + (slice(None, 1),)], t], dim=axis)
        return t[(slice(None),) * axis + (sl,)]

    def pool_tensor(self, t, mode):
        if self.sep:
            t = torch.cat([t[:, :1], t[:, :-1] if self.trunc else t], dim=1)
        nd = t.ndim
        t = t[:, None, :, None] if nd == 2 else t[:, None]
        if mode == "mean":
            t = F.avg_pool2d(t, (2, 1), stride=(2, 1), ceil_mode=True)
        elif mode == "max":
            t = F.max_pool2d(t, (2, 1), stride=(2, 1), ceil_mode=True)
        else:  # min
            t = -F.max_pool2d(-t, (2, 1), stride=(2, 1), ceil_mode=True)
        return t[:, 0, :, 0] if nd == 2 else t[:, 0]

    def attention_inputs(self, h, mask, tt):
        S = h.shape[1]
        same = tt[:, :, None] == tt[:, None]
        cls_ids = tt == 2  # <cls> is the same segment as everything
        ttm = (cls_ids[:, :, None] | cls_ids[:, None]) | same
        cls_mask = F.pad(h.new_ones([S - 1, S - 1]), (1, 0, 1, 0)) if self.sep else None
        return [self.position_embeds(S, h.dtype), ttm, mask, cls_mask]

    # -- one FunnelLayer
    def layer(self, p, block, q_in, kv_in, ai):
        pos_emb, ttm, mask, cls_mask = ai
        B, Lq, _ = q_in.shape
        Lk, nh, dh = kv_in.shape[1], self.nh, self.dh
        scale = 1.0 / dh ** 0.5
        a = p + "attention."
        q = self.lin(q_in, a + "q_head").view(B, Lq, nh, dh) * scale
        k = self.lin(kv_in, a + "k_head").view(B, Lk, nh, dh)
        v = self.lin(kv_in, a + "v_head").view(B, Lk, nh, dh)
        content = torch.einsum("bind,bjnd->bnij", q + self.p[a + "r_w_bias"] * scale, k)
        shift = 2 if Lq != Lk else 1
        r = pos_emb[block][shift - 1]
        r_head = torch.einsum("td,dnh->tnh", r, self.p[a + "r_kernel"])
        pos = torch.einsum("binh,tnh->bnit", q + self.p[a + "r_r_bias"] * scale, r_head)
        T = pos.shape[-1]  # _relative_shift_gather
        pos = pos.reshape(B, nh, T, Lq)[:, :, shift:, :].reshape(B, nh, Lq, T - shift)[..., :Lk]
        if cls_mask is not None:
            pos = pos * cls_mask
        tb = torch.einsum("bind,snd->bnis", q + self.p[a + "r_s_bias"] * scale, self.p[a + "seg_embed"])
        tm = ttm[:, None].expand([B, nh, Lq, Lk])
        diff, same = torch.split(tb, 1, dim=-1)
        tok = torch.where(tm, same.expand(tm.shape), diff.expand(tm.shape))
        if cls_mask is not None:
            tok = tok * cls_mask
        score = (content + pos + tok).float()
        if mask is not None:
            score = score - self.INF * (1 - mask[:, None, None].float())
        prob = torch.softmax(score, dim=-1, dtype=q.dtype)
        vec = torch.einsum("bnij,bjnd->bind", prob, v)
        out = self.lin(vec.reshape(B, Lq, nh * dh), a + "post_proj")
        x = self.ln(q_in + out, a + "layer_norm", self.eps)
        f = self.lin(self.act(self.lin(x, p + "ffn.linear_1")), p + "ffn.linear_2")
        return self.ln(x + f, p + "ffn.layer_norm", self.eps)

    def upsample(self, x, stride, target):
        if stride == 1:
            return x
        if self.sep:
            cls, x = x[:, :1], x[:, 1:]
        out = torch.repeat_interleave(x, repeats=stride, dim=1)
        if not self.sep:
            return out[:, :target]
        if self.trunc:
            out = F.pad(out, (0, 0, 0, stride - 1, 0, 0))
        return torch.cat([cls, out[:, :target - 1]], dim=1)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        h = self.ln(self.p["embeddings.word_embeddings.weight"][input_ids], "embeddings.layer_norm", self.eps)
        ai = self.attention_inputs(h, attention_mask.to(h.dtype), token_type_ids)
        hs = [h]
        for b, n in enumerate(self.blocks):
            pooling = b > 0 and h.shape[1] > (2 if self.sep else 1)
            if pooling:  # pre_attention_pooling
                pos_emb, ttm, mask, cls_mask = ai
                if self.q_only:
                    ai = [pos_emb, self.stride_pool(ttm, 1), mask, self.stride_pool(cls_mask, 0)]
                else:
                    ai = [pos_emb, self.stride_pool(self.stride_pool(ttm, 1), 2), self.pool_tensor(mask, "min"),
                          self.stride_pool(self.stride_pool(cls_mask, 0), 1)]
                pooled = self.pool_tensor(h, self.pool_mode)
            for li in range(n):
                for r in range(self.repeats[b]):
                    do = pooling and li == 0 and r == 0
                    q = pooled if do else h
                    kv = (h if self.q_only else pooled) if do else h
                    h = self.layer(f"encoder.blocks.{b}.{li}.", b, q, kv, ai)
                    if do and self.q_only:  # post_attention_pooling
                        pos_emb, ttm, mask, cls_mask = ai
                        ai = [pos_emb, self.stride_pool(ttm, 2), self.pool_tensor(mask, "min"),
                              self.stride_pool(cls_mask, 1)]
                    hs.append(h)
        if self.base:
            return {"last_hidden_state": h}
        first = hs[self.blocks[0]]
        x = self.upsample(h, 2 ** (len(self.blocks) - 1), first.shape[1]) + first
        ai = self.attention_inputs(x, attention_mask, token_type_ids)
        for li in range(self.n_dec):
            x = self.layer(f"decoder.layers.{li}.", 0, x, x, ai)
        return {"last_hidden_state": x, "encoder_last_hidden_state": h, "first_block_hidden_state": first}


# --------------------------------------------------------------------------- ResNet


class ResNet(HFModel):
    """ResNetModel (eval): 7x7/2 conv + BatchNorm + ReLU stem, 3x3/2 max pool; stages of
    bottleneck (1x1 reduce, 3x3 with the stride, 1x1 expand) or basic (3x3, 3x3) layers, each
    conv + BatchNorm on running statistics, a 1x1 conv + BN shortcut where the shape changes,
    ReLU after the add; global average pool."""
    prefix = "resnet."

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg
        self.act = act_fn(c["hidden_act"])
        self.down_bn = c["downsample_in_bottleneck"]
        self.convs = {}  # conv name -> (stride, padding)
        self.conv("embedder.embedder", c["num_channels"], c["embedding_size"], 7, 2)
        self.stages = []
        cin = c["embedding_size"]
        for si, (depth, cout) in enumerate(zip(c["depths"], c["hidden_sizes"])):
            stride = 2 if si > 0 or c["downsample_in_first_stage"] else 1
            layers = []
            for li in range(depth):
                p = f"encoder.stages.{si}.layers.{li}."
                s = stride if li == 0 else 1
                short = cin != cout or s != 1
                if short:
                    self.conv(p + "shortcut", cin, cout, 1, s)
                if c["layer_type"] == "bottleneck":
                    red = cout // 4
                    self.conv(p + "layer.0", cin, red, 1, s if self.down_bn else 1)
                    self.conv(p + "layer.1", red, red, 3, 1 if self.down_bn else s)
                    self.conv(p + "layer.2", red, cout, 1, 1)
                    n = 3
                else:
                    self.conv(p + "layer.0", cin, cout, 3, s)
                    self.conv(p + "layer.1", cout, cout, 3, 1)
                    n = 2
                layers.append((p, n, short))
                cin = cout
            self.stages.append(layers)

    def conv(self, name, cin, cout, k, stride):
        self.param(name + ".convolution.weight", (cout, cin, k, k), std=(2.0 / (cin * k * k)) ** 0.5)
        n = name + ".normalization."
        self.param(n + "weight", (cout,), lambda s: torch.rand(*s) + 0.5)
        self.param(n + "bias", (cout,), lambda s: torch.rand(*s) * 0.1)
        self.param(n + "running_mean", (cout,), lambda s: torch.rand(*s) * 0.1)
        self.param(n + "running_var", (cout,), lambda s: torch.rand(*s) + 0.5)
        self.convs[name] = (stride, k // 2)

    def inputs(self, batch, size, seed=0):
        g = torch.Generator().manual_seed(seed)
        return {"pixel_values": torch.rand(batch, 3, size, size, generator=g)}

    def cbn(self, x, name, act=True):
        stride, pad = self.convs[name]
        n = name + ".normalization."
        y = F.conv2d(x, self.p[name + ".convolution.weight"], None, stride, pad)
        y = F.batch_norm(y, self.p[n + "running_mean"], self.p[n + "running_var"], self.p[n + "weight"],
                         self.p[n + "bias"], False, 0.1, 1e-5)
        return self.act(y) if act else y

    def forward(self, pixel_values):
        x = F.max_pool2d(self.cbn(pixel_values, "embedder.embedder"), 3, 2, 1)
        for layers in self.stages:
            for p, n, short in layers:
                r = self.cbn(x, p + "shortcut", act=False) if short else x
                y = x
                for i in range(n):
                    y = self.cbn(y, p + f"layer.{i}", act=i < n - 1)
                x = self.act(y + r)
        return {"last_hidden_state": x, "pooler_output": F.adaptive_avg_pool2d(x, (1, 1))}


# --------------------------------------------------------------------------- WavLM


class WavLM(HFModel):
    """WavLMModel: 7 Conv1d feature encoder ("group": GroupNorm(channels) after conv 0 only;
    "layer": LayerNorm after each), GELU; feature projection (LayerNorm -> extract_features ->
    Linear); positional grouped conv with weight norm over dim 2 (weight_g / weight_v), even
    kernel drops the last frame, GELU, added; T5-style bucketed relative position bias from
    layer 0, gated per layer (gru_rel_pos_linear, gru_rel_pos_const); post-LN layers (base)
    or pre-LN layers with a final LayerNorm (do_stable_layer_norm)."""
    prefix = "wavlm."

    def __init__(self, cfg, fold_weight_norm=True):
        super().__init__(cfg)
        c = cfg
        self.fold = fold_weight_norm
        self.d, self.L, self.nh, self.inter = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], \
            c["intermediate_size"]
        self.eps, self.act, self.fact = c["layer_norm_eps"], act_fn(c["hidden_act"]), act_fn(
            c["feat_extract_activation"])
        self.group = {"group": True, "layer": False}[c["feat_extract_norm"]]
        self.stable = c["do_stable_layer_norm"]
        self.kern, self.strd, self.dims = list(c["conv_kernel"]), list(c["conv_stride"]), list(c["conv_dim"])
        self.pos_k, self.pos_g = c["num_conv_pos_embeddings"], c["num_conv_pos_embedding_groups"]
        self.nb, self.maxd = c["num_buckets"], c["max_bucket_distance"]
        cin = 1
        for i, (k, cout) in enumerate(zip(self.kern, self.dims)):
            p = f"feature_extractor.conv_layers.{i}."
            self.param(p + "conv.weight", (cout, cin, k), std=(1.0 / (cin * k)) ** 0.5)
            if c["conv_bias"]:
                self.param(p + "conv.bias", (cout,), "zeros")
            if not self.group or i == 0:
                self.norm(p + "layer_norm", cout)
            cin = cout
        C, d = self.dims[-1], self.d
        self.norm("feature_projection.layer_norm", C)
        self.linear("feature_projection.projection", d, C)
        self.param("masked_spec_embed", (d,), lambda s: torch.rand(*s))  # in the weights, unused at inference
        pc = "encoder.pos_conv_embed.conv."
        self.param(pc + "weight_v", (d, d // self.pos_g, self.pos_k), std=(1.0 / (d // self.pos_g * self.pos_k)) ** 0.5)
        self.param(pc + "weight_g", (1, 1, self.pos_k), "ones")
        self.p[pc + "weight_g"] = self.wn_norm(self.p[pc + "weight_v"])  # HF's start: g = ||v||
        self.param(pc + "bias", (d,), "zeros")
        self.norm("encoder.layer_norm", d)
        dh = d // self.nh
        for i in range(self.L):
            p = f"encoder.layers.{i}."
            for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
                self.linear(p + "attention." + n, d, d)
            self.param(p + "attention.gru_rel_pos_const", (1, self.nh, 1, 1), "ones")
            self.linear(p + "attention.gru_rel_pos_linear", 8, dh)
            if i == 0:
                self.param(p + "attention.rel_attn_embed.weight", (self.nb, self.nh))
            self.norm(p + "layer_norm", d)
            self.linear(p + "feed_forward.intermediate_dense", self.inter, d)
            self.linear(p + "feed_forward.output_dense", d, self.inter)
            self.norm(p + "final_layer_norm", d)
        self.prepare()

    @staticmethod
    def wn_norm(v):
        # weight_norm(dim=2): one norm per kernel tap, over dims 0 and 1
        return v.pow(2).sum(dim=(0, 1), keepdim=True).sqrt()

    def pos_weight(self):
        pc = "encoder.pos_conv_embed.conv."
        v, g = self.p[pc + "weight_v"], self.p[pc + "weight_g"]
        return v * (g / self.wn_norm(v))

    def prepare(self):
        # fold the weight norm once (as remove_weight_norm would); HF recomputes it every forward
        self.pos_w = self.pos_weight() if self.fold else None

    def inputs(self, batch, samples, seed=0):
        g = torch.Generator().manual_seed(seed)
        return {"input_values": torch.randn(batch, samples, generator=g)}

    def buckets(self, rel):
        nb = self.nb // 2
        out = (rel > 0).to(torch.long) * nb
        rel = torch.abs(rel)
        exact = nb // 2
        large = torch.log(rel.float() / exact) / math.log(self.maxd / exact) * (nb - exact)
        large = torch.min((exact + large).to(torch.long), torch.full_like(rel, nb - 1))
        return out + torch.where(rel < exact, rel, large)

    def attention(self, x, i, bias):
        B, T, d = x.shape
        nh, dh = self.nh, d // self.nh
        a = f"encoder.layers.{i}.attention."
        if bias is None:  # layer 0: [heads, T, T] from the bucketed offsets key - query
            pos = torch.arange(T)
            vals = self.p[a + "rel_attn_embed.weight"][self.buckets(pos[None, :] - pos[:, None])]
            bias = vals.permute(2, 0, 1).unsqueeze(0).repeat(B, 1, 1, 1).view(B * nh, T, T)
        gx = x.view(B, T, nh, dh).permute(0, 2, 1, 3)
        proj = self.lin(gx, a + "gru_rel_pos_linear").view(B, nh, T, 2, 4).sum(-1)
        ga, gb = torch.sigmoid(proj).chunk(2, dim=-1)
        gate = ga * (gb * self.p[a + "gru_rel_pos_const"] - 1.0) + 2.0
        gated = (gate.view(B * nh, -1, 1) * bias).view(-1, T, T)
        # F.multi_head_attention_forward with separate projections: q / sqrt(dh), + bias, softmax
        q = self.lin(x, a + "q_proj").view(B, T, nh, dh).transpose(1, 2).reshape(B * nh, T, dh)
        k = self.lin(x, a + "k_proj").view(B, T, nh, dh).transpose(1, 2).reshape(B * nh, T, dh)
        v = self.lin(x, a + "v_proj").view(B, T, nh, dh).transpose(1, 2).reshape(B * nh, T, dh)
        att = torch.softmax(torch.baddbmm(gated, q / math.sqrt(dh), k.transpose(-2, -1)), dim=-1)
        o = torch.bmm(att, v).view(B, nh, T, dh).transpose(1, 2).reshape(B, T, d)
        return self.lin(o, a + "out_proj"), bias

    def forward(self, input_values):
        x = input_values[:, None]
        for i, (k, s) in enumerate(zip(self.kern, self.strd)):
            p = f"feature_extractor.conv_layers.{i}."
            x = F.conv1d(x, self.p[p + "conv.weight"], self.p.get(p + "conv.bias"), s)
            if self.group and i == 0:
                x = F.group_norm(x, x.shape[1], self.p[p + "layer_norm.weight"], self.p[p + "layer_norm.bias"], 1e-5)
            elif not self.group:
                x = self.ln(x.transpose(-2, -1), p + "layer_norm", 1e-5).transpose(-2, -1)
            x = self.fact(x)
        feats = self.ln(x.transpose(1, 2), "feature_projection.layer_norm", self.eps)
        h = self.lin(feats, "feature_projection.projection")
        w = self.pos_w if self.pos_w is not None else self.pos_weight()
        pc = F.conv1d(h.transpose(1, 2), w, self.p["encoder.pos_conv_embed.conv.bias"], padding=self.pos_k // 2,
                      groups=self.pos_g)
        if self.pos_k % 2 == 0:
            pc = pc[:, :, :-1]
        h = h + self.act(pc).transpose(1, 2)
        if not self.stable:
            h = self.ln(h, "encoder.layer_norm", self.eps)
        bias = None
        for i in range(self.L):
            p = f"encoder.layers.{i}."
            if self.stable:
                a, bias = self.attention(self.ln(h, p + "layer_norm", self.eps), i, bias)
                h = h + a
                h = h + self.ffn(self.ln(h, p + "final_layer_norm", self.eps), p)
            else:
                a, bias = self.attention(h, i, bias)
                h = self.ln(h + a, p + "layer_norm", self.eps)
                h = self.ln(h + self.ffn(h, p), p + "final_layer_norm", self.eps)
        if self.stable:
            h = self.ln(h, "encoder.layer_norm", self.eps)
        return {"last_hidden_state": h, "extract_features": feats}

    def ffn(self, x, p):
        return self.lin(self.act(self.lin(x, p + "feed_forward.intermediate_dense")), p + "feed_forward.output_dense")


CLASSES = {"bert": Bert, "distilbert": DistilBert, "mobilebert": MobileBert, "funnel": Funnel, "resnet": ResNet,
           "wavlm": WavLM}
CLASSES.update(torch_zoo_vision_a.CLASSES)  # vit, wav2vec2, hubert

from torch_zoo_text_b import Deberta, SqueezeBert  # noqa: E402  (the zoo's SqueezeBERT and DeBERTa)

CLASSES.update(squeezebert=SqueezeBert, deberta=Deberta)

# MobileNetV2, EfficientNet, ConvNeXt (bench/torch_zoo_vision_b.py)
from torch_zoo_vision_b import CLASSES as _VISION_B  # noqa: E402

CLASSES.update(_VISION_B)

import torch_zoo_text_a  # noqa: E402,F401  (adds roberta, albert, gpt2 to CLASSES)


def build(cfg, **kw):
    """The torch model of an HF config dict (class defaults filled in)."""
    cfg = full_config(cfg)
    return CLASSES[cfg["model_type"]](cfg, **kw)


def build_preset(name, **kw):
    return CLASSES[PRESETS[name][0]](preset_config(name), **kw)
