#!/usr/bin/env python3
"""torch_zoo_text_b.py - SqueezeBERT and DeBERTa (v1) in plain PyTorch, written
out op for op from Hugging Face transformers 4.36.2's modeling code (the math of
SqueezeBertModel and DebertaModel in eval mode), for bench/cpu_vs_torch.py's
side-by-side timing, for proving that math on the golden cases (bench/hf_golden.py)
and for writing variant cases (bench/make_zoo_text_b_variants.py).

Conventions of bench/torch_models.py (torch_base.HFModel): weights in a dict
under HF's state_dict names, built from an HF config dict with the class
defaults filled in, forward(**inputs) with HF's argument names returning HF's
output names. SqueezeBERT runs channels first as HF does ([B, C, S], grouped
Conv1d), so it checks ftengine's channels-last grouped linear rather than
repeating it. DeBERTa keeps HF's own steps: the head-interleaved in_proj chunk,
the f32 sqrt of the scale, torch.gather on the relative products, XSoftmax's
masked_fill / softmax / masked_fill, the f32 LayerNorm and the embedding times
mask. return_hidden=True adds hidden_states.N.
"""
import math

from torch_base import F, HFModel, act_fn, text_inputs, torch


def _drop(sd, keep, prefixes):
    """sd without the keys HF never loads into the bare model (task heads, ignored tables)."""
    return {k: v for k, v in sd.items() if k in keep or not k.startswith(prefixes)}


class SqueezeBert(HFModel):
    """SqueezeBertModel: BERT embeddings; per layer grouped 1x1 Conv1d q/k/v over [B, C, S],
    q k / sqrt(d) + mask, softmax, context; post_attention conv + residual + LayerNorm over C
    (eps 1e-12 fixed); intermediate conv + act; output conv + residual + LayerNorm; tanh pooler."""
    prefix = "transformer."

    def __init__(self, cfg, return_hidden=False):
        super().__init__(cfg)
        c = cfg
        self.ret_hidden = return_hidden
        self.h, self.nh, self.L = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
        self.inter, self.eps, self.act = c["intermediate_size"], c["layer_norm_eps"], act_fn(c["hidden_act"])
        self.vocab = c["vocab_size"]
        if c["embedding_size"] != self.h:
            raise ValueError("SqueezeBERT needs embedding_size == hidden_size")
        self.g = dict(q=c["q_groups"], k=c["k_groups"], v=c["v_groups"], post=c["post_attention_groups"],
                      inter=c["intermediate_groups"], out=c["output_groups"])
        h, i = self.h, self.inter
        self.param("embeddings.word_embeddings.weight", (self.vocab, h))
        self.param("embeddings.position_embeddings.weight", (c["max_position_embeddings"], h))
        self.param("embeddings.token_type_embeddings.weight", (c["type_vocab_size"], h))
        self.norm("embeddings.LayerNorm", h)
        convs = (("attention.query", h, h, "q"), ("attention.key", h, h, "k"), ("attention.value", h, h, "v"),
                 ("post_attention.conv1d", h, h, "post"), ("intermediate.conv1d", h, i, "inter"),
                 ("output.conv1d", i, h, "out"))
        for li in range(self.L):
            p = f"encoder.layers.{li}."
            for name, cin, cout, g in convs:
                self.param(p + name + ".weight", (cout, cin // self.g[g], 1))
                self.param(p + name + ".bias", (cout,), "zeros")
            self.norm(p + "post_attention.layernorm", h)
            self.norm(p + "output.layernorm", h)
        self.linear("pooler.dense", h, h)

    def load_state(self, sd):
        sd = {(k[len(self.prefix):] if k.startswith(self.prefix) else k): v for k, v in sd.items()}
        return super().load_state(_drop(sd, self.p, ("cls.",)))

    def inputs(self, batch, seq, seed=0):
        return text_inputs(self.vocab, batch, seq, seed)

    def conv(self, x, name, groups):
        return F.conv1d(x, self.p[name + ".weight"], self.p[name + ".bias"], groups=groups)

    def ln_channels(self, x, name):
        # SqueezeBertLayerNorm: permute to channels last, LayerNorm(eps 1e-12), permute back
        x = x.permute(0, 2, 1)
        x = F.layer_norm(x, (x.shape[-1],), self.p[name + ".weight"], self.p[name + ".bias"], 1e-12)
        return x.permute(0, 2, 1)

    def layer(self, x, mask, li):
        p, b, nh, d = f"encoder.layers.{li}.", x.shape[0], self.nh, self.h // self.nh
        q = self.conv(x, p + "attention.query", self.g["q"])
        k = self.conv(x, p + "attention.key", self.g["k"])
        v = self.conv(x, p + "attention.value", self.g["v"])
        s = x.shape[-1]
        q = q.view(b, nh, d, s).permute(0, 1, 3, 2)  # transpose_for_scores
        k = k.view(b, nh, d, s)                      # transpose_key_for_scores
        v = v.view(b, nh, d, s).permute(0, 1, 3, 2)
        scores = torch.matmul(q, k) / math.sqrt(d) + mask
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        ctx = ctx.permute(0, 1, 3, 2).contiguous().view(b, self.h, s)  # transpose_output
        a = self.ln_channels(self.conv(ctx, p + "post_attention.conv1d", self.g["post"]) + x,
                             p + "post_attention.layernorm")
        f = self.act(self.conv(a, p + "intermediate.conv1d", self.g["inter"]))
        return self.ln_channels(self.conv(f, p + "output.conv1d", self.g["out"]) + a, p + "output.layernorm")

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        s = input_ids.shape[1]
        e = (self.p["embeddings.word_embeddings.weight"][input_ids]
             + self.p["embeddings.position_embeddings.weight"][:s]
             + self.p["embeddings.token_type_embeddings.weight"][token_type_ids])
        h = self.ln(e, "embeddings.LayerNorm", self.eps)
        mask = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        hidden = [h]
        x = h.permute(0, 2, 1)
        for li in range(self.L):
            x = self.layer(x, mask, li)
            hidden.append(x.permute(0, 2, 1))
        last = x.permute(0, 2, 1)
        out = {"last_hidden_state": last, "pooler_output": torch.tanh(self.lin(last[:, 0], "pooler.dense"))}
        if self.ret_hidden:
            out.update({f"hidden_states.{i}": t for i, t in enumerate(hidden)})
        return out


def pos_att_types(value):
    """DebertaConfig: a string is lower-cased, split on '|' and stripped; None is empty."""
    if value is None:
        return []
    if isinstance(value, str):
        return [x.strip() for x in value.lower().split("|")]
    return list(value)


class Deberta(HFModel):
    """DebertaModel (v1): word (+ position if position_biased_input, + token type if any)
    embeddings, embed_proj when embedding_size differs, f32 LayerNorm, times the mask;
    disentangled attention (interleaved in_proj, q_bias / v_bias, q / sqrt(f32(d) * (1 +
    len(pos_att_type))), c2p and p2c relative terms gathered from the shared relative table,
    XSoftmax with the pairwise mask, optional talking heads); dense + residual + LayerNorm,
    act FFN + residual + LayerNorm; no pooler."""
    prefix = "deberta."

    def __init__(self, cfg, return_hidden=False):
        super().__init__(cfg)
        c = cfg
        self.ret_hidden = return_hidden
        self.h, self.nh, self.L = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
        self.inter, self.eps, self.act = c["intermediate_size"], c["layer_norm_eps"], act_fn(c["hidden_act"])
        self.vocab = c["vocab_size"]
        self.emb = c.get("embedding_size", self.h)
        self.pos_input = c["position_biased_input"]
        self.types = c["type_vocab_size"]
        self.rel = c["relative_attention"]
        self.att = pos_att_types(c["pos_att_type"])
        self.talking = c.get("talking_head", False)
        self.max_rel = c["max_relative_positions"]
        if self.max_rel < 1:
            self.max_rel = c["max_position_embeddings"]
        h, e = self.h, self.emb
        self.param("embeddings.word_embeddings.weight", (self.vocab, e))
        if self.pos_input:
            self.param("embeddings.position_embeddings.weight", (c["max_position_embeddings"], e))
        if self.types > 0:
            self.param("embeddings.token_type_embeddings.weight", (self.types, e))
        if e != h:
            self.param("embeddings.embed_proj.weight", (h, e))
        self.norm("embeddings.LayerNorm", h)
        if self.rel:
            self.param("encoder.rel_embeddings.weight", (2 * self.max_rel, h))
        for li in range(self.L):
            p = f"encoder.layer.{li}.attention.self."
            self.param(p + "in_proj.weight", (3 * h, h))
            self.param(p + "q_bias", (h,), "zeros")
            self.param(p + "v_bias", (h,), "zeros")
            if self.rel and "c2p" in self.att:
                self.param(p + "pos_proj.weight", (h, h))
            if self.rel and "p2c" in self.att:
                self.linear(p + "pos_q_proj", h, h)
            if self.talking:
                self.param(p + "head_logits_proj.weight", (self.nh, self.nh))
                self.param(p + "head_weights_proj.weight", (self.nh, self.nh))
            p = f"encoder.layer.{li}."
            self.linear(p + "attention.output.dense", h, h)
            self.norm(p + "attention.output.LayerNorm", h)
            self.linear(p + "intermediate.dense", self.inter, h)
            self.linear(p + "output.dense", h, self.inter)
            self.norm(p + "output.LayerNorm", h)

    def load_state(self, sd):
        sd = {(k[len(self.prefix):] if k.startswith(self.prefix) else k): v for k, v in sd.items()}
        # the original export's LM head, and the position table when position_biased_input is off
        return super().load_state(_drop(sd, self.p, ("lm_predictions.", "embeddings.position_embeddings.")))

    def inputs(self, batch, seq, seed=0):
        return text_inputs(self.vocab, batch, seq, seed)

    def ln(self, x, name, eps):
        # DebertaLayerNorm: normalised in f32, cast back, then weight * x + bias
        t = x.dtype
        y = x.float()
        mean = y.mean(-1, keepdim=True)
        var = (y - mean).pow(2).mean(-1, keepdim=True)
        y = ((y - mean) / torch.sqrt(var + eps)).to(t)
        return self.p[name + ".weight"] * y + self.p[name + ".bias"]

    def heads(self, x):
        return x.view(x.shape[:-1] + (self.nh, -1)).permute(0, 2, 1, 3)

    def attention(self, x, mask, rel_pos, li):
        p = f"encoder.layer.{li}.attention.self."
        qp = F.linear(x, self.p[p + "in_proj.weight"])
        q, k, v = self.heads(qp).chunk(3, dim=-1)
        q = q + self.heads(self.p[p + "q_bias"][None, None, :])
        v = v + self.heads(self.p[p + "v_bias"][None, None, :])
        sf = self.scale_factor()
        scale = torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * sf)
        q = q / scale.to(dtype=q.dtype)
        scores = torch.matmul(q, k.transpose(-1, -2))
        if self.rel:
            span = min(max(q.size(-2), k.size(-2)), self.max_rel)
            r = self.p["encoder.rel_embeddings.weight"][self.max_rel - span:self.max_rel + span, :].unsqueeze(0)
            score = 0
            if "c2p" in self.att:
                pk = self.heads(F.linear(r, self.p[p + "pos_proj.weight"]))
                c2p = torch.matmul(q, pk.transpose(-1, -2))
                idx = torch.clamp(rel_pos + span, 0, span * 2 - 1)
                score = score + torch.gather(c2p, -1, idx.expand(q.size(0), q.size(1), q.size(2), rel_pos.size(-1)))
            if "p2c" in self.att:
                pq = self.heads(F.linear(r, self.p[p + "pos_q_proj.weight"], self.p[p + "pos_q_proj.bias"]))
                pq = pq / torch.sqrt(torch.tensor(pq.size(-1), dtype=torch.float) * sf)
                idx = torch.clamp(-rel_pos + span, 0, span * 2 - 1)
                p2c = torch.matmul(k, pq.transpose(-1, -2).to(dtype=k.dtype))
                p2c = torch.gather(p2c, -1, idx.expand(q.size(0), q.size(1), k.size(-2), k.size(-2)))
                score = score + p2c.transpose(-1, -2)
            scores = scores + score
        if self.talking:
            scores = F.linear(scores.permute(0, 2, 3, 1), self.p[p + "head_logits_proj.weight"]).permute(0, 3, 1, 2)
        probs = self.xsoftmax(scores, mask)
        if self.talking:
            probs = F.linear(probs.permute(0, 2, 3, 1), self.p[p + "head_weights_proj.weight"]).permute(0, 3, 1, 2)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.shape[:-2] + (-1,))

    def scale_factor(self):
        return 1 + len(self.att)

    @staticmethod
    def xsoftmax(scores, mask):
        # XSoftmax: masked scores replaced by finfo.min, softmax, masked probabilities set to 0
        rmask = ~(mask.to(torch.bool))
        probs = torch.softmax(scores.masked_fill(rmask, torch.finfo(scores.dtype).min), -1)
        return probs.masked_fill(rmask, 0)

    @staticmethod
    def relative_position(s):
        # build_relative_position: query i - key j
        ids = torch.arange(s)
        return (ids[:, None] - ids[None, :]).unsqueeze(0).unsqueeze(0)

    def layer(self, x, mask, rel_pos, li):
        p = f"encoder.layer.{li}."
        a = self.ln(self.lin(self.attention(x, mask, rel_pos, li), p + "attention.output.dense") + x,
                    p + "attention.output.LayerNorm", self.eps)
        f = self.lin(self.act(self.lin(a, p + "intermediate.dense")), p + "output.dense")
        return self.ln(f + a, p + "output.LayerNorm", self.eps)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape, dtype=torch.long)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        s = input_ids.shape[1]
        e = self.p["embeddings.word_embeddings.weight"][input_ids]
        if self.pos_input:
            e = e + self.p["embeddings.position_embeddings.weight"][:s]
        if self.types > 0:
            e = e + self.p["embeddings.token_type_embeddings.weight"][token_type_ids]
        if self.emb != self.h:
            e = F.linear(e, self.p["embeddings.embed_proj.weight"])
        h = self.ln(e, "embeddings.LayerNorm", self.eps)
        h = h * attention_mask.unsqueeze(2).to(h.dtype)
        ext = attention_mask.unsqueeze(1).unsqueeze(2)
        mask = (ext * ext.squeeze(-2).unsqueeze(-1)).byte()  # get_attention_mask: pairwise, uint8
        rel_pos = self.relative_position(s)
        hidden = [h]
        for li in range(self.L):
            h = self.layer(h, mask, rel_pos, li)
            hidden.append(h)
        out = {"last_hidden_state": h}
        if self.ret_hidden:
            out.update({f"hidden_states.{i}": t for i, t in enumerate(hidden)})
        return out
