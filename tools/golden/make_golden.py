#!/usr/bin/env python3
"""make_golden.py - writes extra Hugging Face reference cases ("variants") for
configurations the five shipped golden cases do not cover: other Funnel block
layouts and pooling, MobileBERT with more FFNs / LayerNorm / no bottleneck,
ResNet basic blocks on non-square images, WavLM with an audio attention mask,
long audio and the large (stable layer norm) layout, BERT and DistilBERT at odd
sizes, RoBERTa with padding, ALBERT with 2 groups x 2 inner layers, left-padded
GPT-2. Each case has the layout of tests/golden/<arch>/ (config.json,
model.safetensors, inputs.safetensors, expected.safetensors) and is checked by
tests/test_golden_variants.c.

Optional tooling: it needs torch, transformers and safetensors (the lent GPU
machine has them; the build and the tests never run it). The forward is untouched
HF code run in float64 on the CPU; weights that HF initialises to constants are
perturbed so a skipped bias or norm cannot pass (as in tests/golden/README.md).

    python3 tools/golden/make_golden.py OUTDIR [CASE ...]
"""
import json
import zlib
import os
import sys

try:
    import torch
    import transformers as tf
    from safetensors.torch import save_file
except Exception as e:  # optional tooling
    print(f"make_golden: needs torch, transformers and safetensors ({e}); nothing written")
    sys.exit(0)


def perturb(model, gen):
    """Constant-initialised tensors get noise; WavLM's weight_g is rescaled."""
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if not p.is_floating_point() or p.numel() == 0:
                continue
            if "position_ids" in name or "token_type_ids" in name:
                continue
            flat = p.reshape(-1)
            const = bool((flat == flat[0]).all())
            if name.endswith("running_var"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen, dtype=p.dtype))
            elif name.endswith("running_mean"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
            elif "weight_g" in name or "original0" in name:
                p.mul_(0.5 + torch.rand(p.shape, generator=gen, dtype=p.dtype))
            elif const:
                base = 1.0 if float(flat[0]) == 1.0 else 0.0
                p.copy_(base + 0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))


def text_inputs(gen, batch, seq, vocab, types=2, cls_type=None, mask=True):
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    inp = {"input_ids": ids}
    if mask:
        m = torch.ones(batch, seq, dtype=torch.long)
        for b in range(1, batch):  # rows after the first are padded, each differently
            m[b, seq - (2 * b + 1):] = 0
        inp["attention_mask"] = m
    if types:
        tt = torch.randint(0, types, (batch, seq), generator=gen)
        if cls_type is not None:
            tt[:, 0] = cls_type
        inp["token_type_ids"] = tt
    return inp


def audio_inputs(gen, lengths):
    n = max(lengths)
    x = torch.zeros(len(lengths), n)
    m = torch.zeros(len(lengths), n, dtype=torch.long)
    for b, L in enumerate(lengths):
        x[b, :L] = torch.randn(L, generator=gen)
        m[b, :L] = 1
    return {"input_values": x, "attention_mask": m}


def make_config(cls, **kw):
    cfg = cls(**kw)
    try:  # the reference is the plain math path, not SDPA/flash
        cfg._attn_implementation = "eager"
    except Exception:
        pass
    return cfg


# name -> (model class, config class, config kwargs, inputs(gen, cfg))
CASES = {
    "bert-b3-s13": (
        "BertModel", "BertConfig",
        dict(vocab_size=300, hidden_size=48, num_hidden_layers=3, num_attention_heads=3,
             intermediate_size=96, max_position_embeddings=64, initializer_range=0.1),
        lambda g, c: text_inputs(g, 3, 13, c.vocab_size)),
    "distilbert-b3-s11": (
        "DistilBertModel", "DistilBertConfig",
        dict(vocab_size=300, dim=48, n_layers=2, n_heads=4, hidden_dim=96,
             max_position_embeddings=64, initializer_range=0.1),
        lambda g, c: text_inputs(g, 3, 11, c.vocab_size, types=0)),
    "funnel-212-nocls-notrunc": (
        "FunnelModel", "FunnelConfig",
        dict(vocab_size=300, block_sizes=[2, 1, 2], block_repeats=[1, 1, 1], d_model=48, n_head=3,
             d_head=16, d_inner=96, num_decoder_layers=1, separate_cls=False, truncate_seq=False,
             pooling_type="mean", initializer_range=0.1),
        lambda g, c: text_inputs(g, 3, 17, c.vocab_size, types=2, cls_type=2)),
    "funnel-max-poolkv": (
        "FunnelModel", "FunnelConfig",
        dict(vocab_size=300, block_sizes=[1, 2], block_repeats=[1, 2], d_model=48, n_head=3,
             d_head=16, d_inner=96, num_decoder_layers=2, separate_cls=True, truncate_seq=True,
             pooling_type="max", pool_q_only=False, initializer_range=0.1),
        lambda g, c: text_inputs(g, 3, 15, c.vocab_size, types=2, cls_type=2)),
    "funnel-factorized": (
        "FunnelModel", "FunnelConfig",
        dict(vocab_size=300, block_sizes=[1, 1, 2], d_model=48, n_head=3, d_head=16, d_inner=96,
             num_decoder_layers=1, attention_type="factorized", initializer_range=0.1),
        lambda g, c: text_inputs(g, 3, 14, c.vocab_size, types=2, cls_type=2)),
    "funnel-base-222": (
        "FunnelBaseModel", "FunnelConfig",
        dict(vocab_size=300, block_sizes=[2, 2, 2], d_model=48, n_head=3, d_head=16, d_inner=96,
             initializer_range=0.1),
        lambda g, c: text_inputs(g, 2, 12, c.vocab_size, types=2, cls_type=2)),
    "mobilebert-4ffn": (
        "MobileBertModel", "MobileBertConfig",
        dict(vocab_size=300, hidden_size=96, embedding_size=24, intra_bottleneck_size=48,
             true_hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=96, num_feedforward_networks=4, max_position_embeddings=64,
             initializer_range=0.1),
        lambda g, c: text_inputs(g, 3, 13, c.vocab_size)),
    "mobilebert-layernorm-attnbottleneck": (
        "MobileBertModel", "MobileBertConfig",
        dict(vocab_size=300, hidden_size=64, embedding_size=64, intra_bottleneck_size=32,
             true_hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=64, num_feedforward_networks=2, normalization_type="layer_norm",
             use_bottleneck_attention=True, key_query_shared_bottleneck=False,
             trigram_input=False, classifier_activation=False, hidden_act="gelu",
             max_position_embeddings=64, initializer_range=0.1),
        lambda g, c: text_inputs(g, 2, 9, c.vocab_size)),
    "mobilebert-nobottleneck": (
        "MobileBertModel", "MobileBertConfig",
        dict(vocab_size=300, hidden_size=48, embedding_size=16, intra_bottleneck_size=24,
             use_bottleneck=False, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=64, num_feedforward_networks=1, max_position_embeddings=64,
             initializer_range=0.1),
        lambda g, c: text_inputs(g, 3, 7, c.vocab_size)),
    "resnet-basic-nonsquare": (
        "ResNetModel", "ResNetConfig",
        dict(embedding_size=16, hidden_sizes=[16, 32, 48, 64], depths=[2, 1, 2, 1],
             layer_type="basic"),
        lambda g, c: {"pixel_values": torch.randn(3, 3, 40, 56, generator=g)}),
    "resnet-bottleneck-downsample": (
        "ResNetModel", "ResNetConfig",
        dict(embedding_size=16, hidden_sizes=[32, 64, 96, 128], depths=[1, 2, 1, 1],
             layer_type="bottleneck", downsample_in_first_stage=True,
             downsample_in_bottleneck=True),
        lambda g, c: {"pixel_values": torch.randn(2, 3, 37, 45, generator=g)}),
}

WAVLM_SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                   conv_dim=[32] * 7, num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                   num_buckets=320, max_bucket_distance=800, initializer_range=0.1)
CASES.update({
    "wavlm-masked-long": (
        "WavLMModel", "WavLMConfig", dict(WAVLM_SMALL),
        lambda g, c: audio_inputs(g, [32000, 27000, 12000])),
    "wavlm-large-layout": (
        "WavLMModel", "WavLMConfig",
        dict(WAVLM_SMALL, feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True,
             num_conv_pos_embeddings=15),
        lambda g, c: {"input_values": torch.randn(2, 30000, generator=g)}),
    "wavlm-large-masked": (
        "WavLMModel", "WavLMConfig",
        dict(WAVLM_SMALL, feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True),
        lambda g, c: audio_inputs(g, [26000, 17000])),
})

# SqueezeBERT and DeBERTa (v1): the configurations of bench/make_zoo_text_b_variants.py
# (other group counts, spans shorter than the sequence, one relative term with absolute
# positions, token types and embed_proj, talking heads), here by HF itself
ZOO_SQ = dict(vocab_size=64, hidden_size=48, embedding_size=48, num_attention_heads=4, intermediate_size=96,
              max_position_embeddings=32, initializer_range=0.1)
ZOO_DB = dict(vocab_size=64, hidden_size=32, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=24, type_vocab_size=0, initializer_range=0.1)
CASES.update({
    "hf-squeezebert-groups-2-4-3-2-4-6": (
        "SqueezeBertModel", "SqueezeBertConfig",
        dict(ZOO_SQ, num_hidden_layers=2, q_groups=2, k_groups=4, v_groups=3, post_attention_groups=2,
             intermediate_groups=4, output_groups=6, layer_norm_eps=1e-5),
        lambda g, c: text_inputs(g, 3, 13, c.vocab_size)),
    "hf-deberta-span4-b3": (
        "DebertaModel", "DebertaConfig",
        dict(ZOO_DB, num_hidden_layers=2, relative_attention=True, max_relative_positions=4,
             pos_att_type="c2p|p2c", position_biased_input=False),
        lambda g, c: text_inputs(g, 3, 11, c.vocab_size, types=0)),
    "hf-deberta-p2c-positions-types-proj": (
        "DebertaModel", "DebertaConfig",
        dict(ZOO_DB, num_hidden_layers=1, embedding_size=24, type_vocab_size=2, relative_attention=True,
             pos_att_type="p2c", max_relative_positions=3, position_biased_input=True),
        lambda g, c: text_inputs(g, 2, 9, c.vocab_size, types=2)),
    "hf-deberta-c2p-talking-heads": (
        "DebertaModel", "DebertaConfig",
        dict(ZOO_DB, num_hidden_layers=1, relative_attention=True, pos_att_type="c2p", talking_head=True,
             position_biased_input=False),
        lambda g, c: text_inputs(g, 2, 7, c.vocab_size, types=0)),
})


def padded_text(gen, batch, seq, vocab, pad, left=False):
    """text_inputs' right-padded rows (or left-padded, as batched generation pads), with the
    padded positions holding the pad id (RoBERTa's positions skip them)."""
    inp = text_inputs(gen, batch, seq, vocab, types=0)
    m = inp["attention_mask"].flip(1) if left else inp["attention_mask"]
    inp["attention_mask"] = m
    inp["input_ids"][m == 0] = pad
    return inp


# RoBERTa, ALBERT, GPT-2 (tests/golden/README-zoo.md): also covered without transformers
# by tools/golden/zoo_text_a_variants.py; these are HF's own classes
CASES.update({
    "roberta-pads-b3-s13": (
        "RobertaModel", "RobertaConfig",
        dict(vocab_size=300, hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
             max_position_embeddings=20, type_vocab_size=1, layer_norm_eps=1e-5, initializer_range=0.1),
        lambda g, c: padded_text(g, 3, 13, c.vocab_size, c.pad_token_id)),
    "albert-2groups-2inner": (
        "AlbertModel", "AlbertConfig",
        dict(vocab_size=300, embedding_size=24, hidden_size=48, num_hidden_layers=4, num_hidden_groups=2,
             inner_group_num=2, num_attention_heads=4, intermediate_size=96, max_position_embeddings=64,
             initializer_range=0.1),
        lambda g, c: text_inputs(g, 3, 13, c.vocab_size)),
    "gpt2-leftpad-b3-s13": (
        "GPT2Model", "GPT2Config",
        dict(vocab_size=300, n_positions=32, n_embd=48, n_layer=2, n_head=4, initializer_range=0.1),
        lambda g, c: padded_text(g, 3, 13, c.vocab_size, c.eos_token_id % c.vocab_size, left=True)),
})


def write_case(outdir, name, spec):
    model_cls, cfg_cls, kw, make_inputs = spec
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()) % (2**31))
    torch.manual_seed(zlib.crc32(name.encode()) % (2**31))
    cfg = make_config(getattr(tf, cfg_cls), **kw)
    cfg.architectures = [model_cls]
    model = getattr(tf, model_cls)(cfg).eval()
    perturb(model, gen)
    inputs = make_inputs(gen, cfg)
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    cfg.save_pretrained(d)
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    state = {k: (v.float() if v.is_floating_point() else v) for k, v in state.items()}
    save_file(state, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    save_file({k: v.contiguous() for k, v in inputs.items()}, os.path.join(d, "inputs.safetensors"),
              metadata={"format": "pt"})
    m64 = model.double()
    args = {k: (v.double() if v.is_floating_point() else v) for k, v in inputs.items()}
    with torch.no_grad():
        out = m64(**args, output_hidden_states=True, return_dict=True)
    exp = {"last_hidden_state": out.last_hidden_state}
    if getattr(out, "pooler_output", None) is not None:
        exp["pooler_output"] = out.pooler_output
    if getattr(out, "extract_features", None) is not None:
        exp["extract_features"] = out.extract_features
    for i, h in enumerate(out.hidden_states or ()):
        exp[f"hidden_states.{i}"] = h
    exp = {k: v.float().contiguous() for k, v in exp.items()}
    save_file(exp, os.path.join(d, "expected.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump({"hf_class": model_cls, "transformers": tf.__version__, "torch": torch.__version__,
                   "inputs": {k: list(v.shape) for k, v in inputs.items()},
                   "outputs": {k: list(v.shape) for k, v in exp.items()}}, f, indent=1)
    return sorted(exp)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    outdir, want = sys.argv[1], sys.argv[2:]
    failed = 0
    for name, spec in CASES.items():
        if want and name not in want:
            continue
        try:
            outs = write_case(outdir, name, spec)
            print(f"make_golden: {name}: {', '.join(outs)}")
        except Exception as e:  # one bad case must not lose the others
            failed += 1
            print(f"make_golden: {name}: FAILED: {e.__class__.__name__}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
