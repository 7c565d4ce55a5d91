#!/usr/bin/env python3
"""torch_kernels.py - PyTorch's numbers for the shapes of kernel_bench.c, so the
two tables can be read side by side: F.layer_norm, softmax (+ mask),
scaled_dot_product_attention and the BERT-base linears, fp16, sequence 128,
batch 1 and 64. CUDA events, warm-up, median of many runs. Exits 0 with a note
when torch (or a CUDA device) is not available; it is optional.
"""
import statistics
import sys

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # torch is optional
    print(f"torch_kernels: torch not importable ({e.__class__.__name__}); skipping PyTorch numbers")
    sys.exit(0)

REPS, RUNS = 20, 30


def median_ms(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(RUNS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(REPS):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / REPS)
    return statistics.median(times)


def row(name, shape, ms, nbytes, flops):
    gbs = nbytes / (ms * 1e-3) / 1e9
    tf = flops / (ms * 1e-3) / 1e12
    print(f"{name:<11} {shape:<30} {ms * 1e3:9.2f}  {gbs:9.1f} {tf:9.2f}")


def main():
    if not torch.cuda.is_available():
        print("torch_kernels: no CUDA device visible to torch; skipping")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    dev, h = "cuda", torch.float16
    print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()} (eager, stream-timed: "
          "host gaps included where the op is shorter than its launch)")
    print(f"{'op':<11} {'shape (fp16)':<30} {'us':>9}  {'GB/s':>9} {'TFLOP/s':>9}")
    S, D, H, Dh, FF = 128, 768, 12, 64, 3072
    for B in (1, 64):
        R = B * S
        x = torch.randn(R, D, device=dev, dtype=h)
        g, bt = torch.randn(D, device=dev, dtype=h), torch.randn(D, device=dev, dtype=h)
        ms = median_ms(lambda: F.layer_norm(x, (D,), g, bt, 1e-12))
        row("layernorm", f"[{R},{D}]", ms, 2 * R * D * 2 + 2 * D * 2, 0)

        s = torch.randn(B, H, S, S, device=dev, dtype=h)
        m = torch.where(torch.rand(B, 1, 1, S, device=dev) < 0.9, 0.0, -10000.0).to(h)
        ms = median_ms(lambda: torch.softmax(s * 0.125 + m, dim=-1))
        row("softmax", f"[{B},{H},{S},{S}]", ms, 2 * B * H * S * S * 2, 0)

        q, k, v = (torch.randn(B, H, S, Dh, device=dev, dtype=h) for _ in range(3))
        ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.125))
        row("attention", f"[{B},{H},{S},{Dh}]", ms, 4 * B * H * S * Dh * 2, 4 * B * H * S * S * Dh)

        for K, N in ((D, 3 * D), (D, D), (D, FF), (FF, D)):
            xa = torch.randn(R, K, device=dev, dtype=h)
            w, bias = torch.randn(N, K, device=dev, dtype=h), torch.randn(N, device=dev, dtype=h)
            ms = median_ms(lambda: F.linear(xa, w, bias))
            row("linear", f"{R}x{N}x{K} +bias", ms, 2 * (R * K + N * K + R * N), 2 * R * N * K)

        torch.backends.cudnn.allow_tf32 = False
        for ci, co, k, st, side in ((3, 64, 7, 2, 224), (64, 64, 1, 1, 56), (64, 64, 3, 1, 56),
                                    (64, 256, 1, 1, 56), (128, 128, 3, 2, 56), (256, 256, 3, 1, 14),
                                    (1024, 2048, 1, 2, 14), (512, 512, 3, 1, 7)):
            xc = torch.randn(B, ci, side, side, device=dev, dtype=h)
            wc = torch.randn(co, ci, k, k, device=dev, dtype=h)
            os_ = (side + 2 * (k // 2) - k) // st + 1
            ms = median_ms(lambda: F.conv2d(xc, wc, None, st, k // 2))
            row("conv2d", f"{ci}x{co} {k}x{k}/{st} @{side}", ms,
                2 * (B * ci * side * side + co * ci * k * k + B * co * os_ * os_),
                2 * B * co * os_ * os_ * ci * k * k)


if __name__ == "__main__":
    main()
