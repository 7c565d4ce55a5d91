#!/usr/bin/env python3
"""torch_zoo_text_a.py - RoBERTa, ALBERT and GPT-2 in plain PyTorch, written out
from Hugging Face transformers' modeling code (v4.36 eager math, as
tests/golden/README-zoo.md describes it), in the conventions of
bench/torch_models.py: built from an HF config dict, weights in a dict under HF's
state_dict names, forward(**inputs) with HF's argument names returning HF's
output names (hidden_states.N included). torch_models.CLASSES registers them, so
bench/cpu_vs_torch.py times them and bench/hf_golden.py checks them against the
golden cases (tests/golden/{roberta,albert,gpt2}); tools/golden/zoo_text_a_variants.py
uses them to write reference cases of other sizes and layouts.

Eval mode only (dropout is the identity). No KV cache for GPT-2 (the bare
full-sequence forward).
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402  (Bert; this module is imported at its end)
from torch_base import F, HFModel, act_fn, text_inputs, torch  # noqa: E402


def ext_mask(mask, dtype):
    """HF's additive mask (1 - m) * finfo.min, [B, 1, 1, S]."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


class Roberta(torch_models.Bert):
    """RobertaModel: BERT with positions counted over the non-pad ids from pad + 1 (pads keep
    pad), whatever the attention mask says; a pooler only where the checkpoint has one."""
    prefix = "roberta."
    ignored = ("num_batches_tracked", "position_ids", "token_type_ids")

    def __init__(self, cfg, pooler=True):
        self.with_pooler = pooler
        super().__init__(cfg)
        self.pad = cfg["pad_token_id"]

    def declare_pooler(self):
        if self.with_pooler:
            super().declare_pooler()

    def positions(self, ids):
        n = (ids != self.pad).to(torch.int64)
        return torch.cumsum(n, dim=1) * n + self.pad

    def embed(self, ids, token_type_ids, position_ids=None):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        if position_ids is None:
            position_ids = self.positions(ids)
        x = (self.p["embeddings.word_embeddings.weight"][ids]
             + self.p["embeddings.token_type_embeddings.weight"][token_type_ids])
        x = x + self.p["embeddings.position_embeddings.weight"][position_ids]
        return self.ln(x, "embeddings.LayerNorm", self.eps)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape)
        x = self.embed(input_ids, token_type_ids, position_ids)
        mask = self.ext_mask(attention_mask, x)
        out = {"hidden_states.0": x}
        for i in range(self.L):
            x = self.layer(x, mask, i)
            out[f"hidden_states.{i + 1}"] = x
        out["last_hidden_state"] = x
        if self.with_pooler:
            out["pooler_output"] = torch.tanh(self.lin(x[:, 0], "pooler.dense"))
        return out


class Albert(HFModel):
    """AlbertModel: embedding_size-wide embeddings + LayerNorm, the E -> H mapping, then
    num_hidden_layers applications; application i runs every inner layer of group
    int(i / (L / G)) (float division, as HF); layers are BERT's post-LN layer under
    ALBERT's names; pooler = tanh(Linear named "pooler")."""
    prefix = "albert."
    ignored = ("num_batches_tracked", "position_ids", "token_type_ids")
    names = ("attention.query", "attention.key", "attention.value", "attention.dense", "attention.LayerNorm",
             "ffn", "ffn_output", "full_layer_layer_norm")

    def __init__(self, cfg, pooler=True):
        super().__init__(cfg)
        c = cfg
        self.e, self.h, self.L = c["embedding_size"], c["hidden_size"], c["num_hidden_layers"]
        self.G, self.inner, self.nh = c["num_hidden_groups"], c["inner_group_num"], c["num_attention_heads"]
        self.inter, self.eps, self.act = c["intermediate_size"], c["layer_norm_eps"], act_fn(c["hidden_act"])
        self.vocab, self.with_pooler = c["vocab_size"], pooler
        e, h = self.e, self.h
        self.param("embeddings.word_embeddings.weight", (c["vocab_size"], e))
        self.param("embeddings.position_embeddings.weight", (c["max_position_embeddings"], e))
        self.param("embeddings.token_type_embeddings.weight", (c["type_vocab_size"], e))
        self.norm("embeddings.LayerNorm", e)
        self.linear("encoder.embedding_hidden_mapping_in", h, e)
        for g in range(self.G):
            for j in range(self.inner):
                p = self.layer_prefix(g, j)
                for n in self.names[:4]:
                    self.linear(p + n, h, h)
                self.norm(p + self.names[4], h)
                self.linear(p + "ffn", self.inter, h)
                self.linear(p + "ffn_output", h, self.inter)
                self.norm(p + self.names[7], h)
        if pooler:
            self.linear("pooler", h, h)

    @staticmethod
    def layer_prefix(g, j):
        return f"encoder.albert_layer_groups.{g}.albert_layers.{j}."

    def inputs(self, batch, seq, seed=0):
        return text_inputs(self.vocab, batch, seq, seed)

    def group_of(self, i):
        return int(i / (self.L / self.G))

    def layer(self, x, mask, p):
        b, s, nh, d = x.shape[0], x.shape[1], self.nh, self.h // self.nh

        def heads(t):
            return t.view(b, s, nh, d).transpose(1, 2)
        q, k, v = (heads(self.lin(x, p + n)) for n in self.names[:3])
        sc = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d) + mask
        c = torch.matmul(torch.softmax(sc, dim=-1), v).transpose(1, 2).reshape(b, s, self.h)
        a = self.ln(x + self.lin(c, p + "attention.dense"), p + "attention.LayerNorm", self.eps)
        f = self.lin(self.act(self.lin(a, p + "ffn")), p + "ffn_output")
        return self.ln(f + a, p + "full_layer_layer_norm", self.eps)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        s = input_ids.shape[1]
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if position_ids is None:
            position_ids = torch.arange(s)[None]
        e = (self.p["embeddings.word_embeddings.weight"][input_ids]
             + self.p["embeddings.token_type_embeddings.weight"][token_type_ids])
        e = e + self.p["embeddings.position_embeddings.weight"][position_ids]
        e = self.ln(e, "embeddings.LayerNorm", self.eps)
        x = self.lin(e, "encoder.embedding_hidden_mapping_in")
        mask = ext_mask(attention_mask, x.dtype)
        out = {"hidden_states.0": x}
        for i in range(self.L):
            g = self.group_of(i)
            for j in range(self.inner):
                x = self.layer(x, mask, self.layer_prefix(g, j))
            out[f"hidden_states.{i + 1}"] = x
        out["last_hidden_state"] = x
        if self.with_pooler:
            out["pooler_output"] = torch.tanh(self.lin(x[:, 0], "pooler"))
        return out


class GPT2(HFModel):
    """GPT2Model: wte + wpe (+ wte[token_type_ids]); pre-LN blocks with Conv1D weights
    [in, out] (y = x W + b, addmm); scores / sqrt(Dh) (and / (layer + 1)), the positions
    past each query *replaced* by finfo.min, then (1 - m) * finfo.min *added*; gelu_new MLP;
    ln_f. hidden_states: the blocks' inputs, then the ln_f output."""
    prefix = "transformer."
    ignored = ("num_batches_tracked", "attn.bias", "attn.masked_bias")

    def __init__(self, cfg):
        super().__init__(cfg)
        c = cfg
        self.d, self.L, self.nh = c["n_embd"], c["n_layer"], c["n_head"]
        self.inner = c["n_inner"] if c.get("n_inner") is not None else 4 * self.d
        self.eps, self.act = c["layer_norm_epsilon"], act_fn(c["activation_function"])
        self.scale, self.by_layer = c["scale_attn_weights"], c["scale_attn_by_inverse_layer_idx"]
        self.vocab, self.npos = c["vocab_size"], c["n_positions"]
        self.causal = True  # (bench/test_torch_zoo_text_a.py turns it off to see the check fail)
        d = self.d
        self.param("wte.weight", (self.vocab, d))
        self.param("wpe.weight", (self.npos, d))
        for i in range(self.L):
            p = f"h.{i}."
            self.norm(p + "ln_1", d)
            self.conv1d(p + "attn.c_attn", d, 3 * d)
            self.conv1d(p + "attn.c_proj", d, d)
            self.norm(p + "ln_2", d)
            self.conv1d(p + "mlp.c_fc", d, self.inner)
            self.conv1d(p + "mlp.c_proj", self.inner, d)
        self.norm("ln_f", d)

    def conv1d(self, name, n_in, n_out):
        self.param(name + ".weight", (n_in, n_out))
        self.param(name + ".bias", (n_out,), "zeros")

    def c1d(self, x, name):
        """HF's Conv1D: addmm(bias, x, W) with W [in, out]."""
        w, b = self.p[name + ".weight"], self.p[name + ".bias"]
        return torch.addmm(b, x.reshape(-1, x.shape[-1]), w).view(*x.shape[:-1], w.shape[1])

    def inputs(self, batch, seq, seed=0):
        return text_inputs(self.vocab, batch, seq, seed)

    def attn(self, x, mask, i):
        b, s, nh, d = x.shape[0], x.shape[1], self.nh, self.d // self.nh
        q, k, v = self.c1d(x, f"h.{i}.attn.c_attn").split(self.d, dim=2)

        def heads(t):
            return t.view(b, s, nh, d).permute(0, 2, 1, 3)
        q, k, v = heads(q), heads(k), heads(v)
        w = torch.matmul(q, k.transpose(-1, -2))
        if self.scale:
            w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype)
        if self.by_layer:
            w = w / float(i + 1)
        if self.causal:
            causal = torch.ones(s, s, dtype=torch.bool).tril()[None, None]
            w = torch.where(causal, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
        if mask is not None:
            w = w + mask
        c = torch.matmul(torch.softmax(w, dim=-1), v).permute(0, 2, 1, 3).reshape(b, s, self.d)
        return self.c1d(c, f"h.{i}.attn.c_proj")

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        s = input_ids.shape[1]
        if position_ids is None:
            position_ids = torch.arange(s)[None]
        h = self.p["wte.weight"][input_ids] + self.p["wpe.weight"][position_ids]
        if token_type_ids is not None:
            h = h + self.p["wte.weight"][token_type_ids]
        mask = ext_mask(attention_mask, h.dtype) if attention_mask is not None else None
        out = {}
        for i in range(self.L):
            out[f"hidden_states.{i}"] = h
            h = h + self.attn(self.ln(h, f"h.{i}.ln_1", self.eps), mask, i)
            f = self.c1d(self.act(self.c1d(self.ln(h, f"h.{i}.ln_2", self.eps), f"h.{i}.mlp.c_fc")),
                         f"h.{i}.mlp.c_proj")
            h = h + f
        h = self.ln(h, "ln_f", self.eps)
        out[f"hidden_states.{self.L}"] = h
        out["last_hidden_state"] = h
        return out


CLASSES = {"roberta": Roberta, "albert": Albert, "gpt2": GPT2}
# registered here, whichever of the two modules is imported first (torch_models imports
# this one at its end)
torch_models.CLASSES.update(CLASSES)
_ = F
