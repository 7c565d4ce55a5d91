#!/bin/sh
# gpu_session.sh - what a session with a borrowed GPU runs, in stages that each
# fit one 10-minute device call, every log written under OUT (default
# build/gpu-session) so it can be brought back and recorded in docs/results/.
#
#   tests/gpu_session.sh check  [OUT]   make gpu-check: build for the local GPU, make test,
#                                       compute-sanitizer, kernel bench (GPU_CHECK_STEPS="build
#                                       test" then "sanitize kbench" splits it over two calls)
#   tests/gpu_session.sh bench  [OUT]   ftengine bench of the model presets in eager / graph /
#                                       static (+ static without CUDA graphs) with the plan
#                                       costs, A/B runs of the switches (PDL, GEMM autotuning,
#                                       passes), `ftengine sweep` curves (batch 1..128), and
#                                       PyTorch / ONNX Runtime baselines (GPU_BENCH_STEPS="models
#                                       ab" then "curves baselines" splits it over two calls)
#   tests/gpu_session.sh golden [OUT]   writes the HF variant cases (tools/golden/make_golden.py)
#                                       and runs tests/test_golden_variants on them, CPU and CUDA
#
# Needs a build from `check` (same build folder) for `bench` and `golden`.
stage=${1:-}
OUT=${2:-build/gpu-session}
mkdir -p "$OUT"
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .\r')
case "$cap" in
'' | *[!0-9]*) echo "gpu_session: no GPU"; exit 0 ;;
esac
B=${FT_GPU_BUILD:-build/gpu-sm$cap}
J=$(nproc 2>/dev/null || echo 4)
TOOL=$B/ftengine

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null
} >"$OUT/machine-$stage.txt"

case "$stage" in
check)
    FT_GPU_BUILD=$B sh tests/gpu_check.sh >"$OUT/gpu-check.log" 2>&1
    rc=$?
    tail -n 40 "$OUT/gpu-check.log"
    cp -r "$B/gpu-check-logs" "$OUT/" 2>/dev/null
    exit $rc
    ;;
bench)
    make -j"$J" CUDA_ARCH="$cap" BUILD="$B" all "$B/examples/framework_tax" >/dev/null || exit 1
    # GPU_BENCH_STEPS="models ab" then "curves baselines" splits the stage over two
    # device calls if one runs past 10 minutes; each call writes its own log
    steps=${GPU_BENCH_STEPS:-models ab curves baselines}
    log=$OUT/bench-$(echo "$steps" | tr ' ' '-').log
    : >"$log"
    run() { echo "\$ $*" >>"$log"; "$@" >>"$log" 2>&1; echo >>"$log"; }
    want() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }
    want models && for model in bert-base distilbert-base bert-large funnel-small mobilebert-uncased resnet-50 wavlm-base; do
        for mode in eager graph static; do
            run "$TOOL" bench "$model" --device cuda --mode "$mode" --dtype fp16 --batch 1 --iters 200 --warmup 20
        done
        run env FT_DISABLE_CUDA_GRAPHS=1 "$TOOL" bench "$model" --device cuda --mode static --dtype fp16 --batch 1 --iters 200 --warmup 20
    done
    if want ab; then
        # Funnel without the affine pass (2026-11-25): q's GEMM, scale and bias adds as
        # before, against three stacked GEMM blocks; at batch 1 and 64
        for b in 1 64; do
            run "$TOOL" bench funnel-small --device cuda --mode static --dtype fp16 --batch $b --iters 100 --warmup 10
            run env FT_DISABLE_PASSES=affine "$TOOL" bench funnel-small --device cuda --mode static --dtype fp16 \
                --batch $b --iters 100 --warmup 10
        done
        # programmatic dependent launch (2026-11-25): each kernel's launch hidden behind
        # the tail of the one before it; the same runs with it off (the device label
        # in each header says "PDL on" or why not)
        for model in bert-base resnet-50 wavlm-base; do
            for mode in eager static; do
                run env FT_DISABLE_PDL=1 "$TOOL" bench "$model" --device cuda --mode "$mode" --dtype fp16 --batch 1 \
                    --iters 200 --warmup 20
            done
        done
        # GEMM autotuning (2026-11-25): the heuristic's first guess instead of the
        # fastest of its candidates
        for mode in eager static; do
            run env FT_GEMM_AUTOTUNE=0 "$TOOL" bench bert-base --device cuda --mode "$mode" --dtype fp16 --batch 1 \
                --iters 200 --warmup 20
        done
        run env FT_GEMM_AUTOTUNE=0 "$TOOL" bench bert-base --device cuda --mode static --dtype fp16 --batch 64 \
            --iters 50 --warmup 5
        run env FT_GEMM_AUTOTUNE=0 "$TOOL" bench resnet-50 --device cuda --mode static --dtype fp16 --batch 1 \
            --iters 200 --warmup 20
        # what exact GELU costs (one launch per FFN) and the previous attention kernel
        run env FT_FAST_GELU=1 "$TOOL" bench bert-base --device cuda --mode static --dtype fp16 --batch 1 --iters 200 --warmup 20
        run env FT_ATTN_KERNEL=v1 "$TOOL" bench bert-base --device cuda --mode static --dtype fp16 --batch 1 --iters 200 --warmup 20
        for mode in eager graph static; do
            run "$TOOL" bench bert-base --device cuda --mode "$mode" --dtype fp32 --batch 1 --iters 200 --warmup 20
            run "$TOOL" bench bert-base --device cuda --mode "$mode" --dtype fp16 --batch 64 --iters 50 --warmup 5
        done
        # static mode profiled: a replay's kernels given back to their ops ('in graph' column)
        run "$TOOL" bench bert-base --device cuda --mode static --dtype fp16 --batch 1 --iters 20 --warmup 5 \
            --phases --trace "$OUT/bert-base-static-trace.json"
        run env FT_DISABLE_PDL=1 "$TOOL" bench bert-base --device cuda --mode static --dtype fp16 --batch 1 \
            --iters 20 --warmup 5 --phases --trace "$OUT/bert-base-static-nopdl-trace.json"
    fi
    if want curves; then
        # the framework tax, profiled: modes x emulated per-op cost (CUPTI busy time)
        run "$B/examples/framework_tax" bert-base cuda 1
        # the framework-tax curves (paper protocol, overhead share per point)
        for model in bert-base resnet-50; do
            run "$TOOL" sweep "$model" --device cuda --dtype fp16 --protocol paper --overhead --iters 20 \
                --warmup 2 --batches 1,2,4,8,16,32,64,128 --csv "$OUT/sweep-$model.csv"
        done
    fi
    want baselines && for model in bert-base distilbert-base resnet-50; do
        run python3 bench/baselines/hf_latency.py --model "$model" --batch 1 --dtype fp16 --ort \
            --json "$OUT/baseline-$model.json"
    done
    grep -E '^\$|latency|device:|gemm:|graph: (trace|kernels)|CUDA graph replays|FAILED|error|^[0-9]+ +(eager|graph|static)|^(eager|graph|static) ' "$log"
    ;;
golden)
    [ -x "$TOOL" ] || make -j"$J" CUDA_ARCH="$cap" BUILD="$B" all >/dev/null || exit 1
    G=$OUT/golden
    rm -rf "$G"
    cp -r tests/golden "$G"
    python3 tools/golden/make_golden.py "$G/variants" >"$OUT/make_golden.log" 2>&1
    cat "$OUT/make_golden.log"
    make -j"$J" CUDA_ARCH="$cap" BUILD="$B" "$B/tests/test_golden_variants" >/dev/null || exit 1
    FT_GOLDEN_DIR=$G "$B/tests/test_golden_variants" >"$OUT/variants.log" 2>&1
    rc=$?
    cat "$OUT/variants.log"
    exit $rc
    ;;
*)
    echo "usage: tests/gpu_session.sh check|bench|golden [OUT]"
    exit 2
    ;;
esac
