#!/bin/sh
# dry_run.sh - `make emu-dry-run`: the GPU session's bench-stage commands
# (tests/gpu_session.sh) on the CUDA emulator, with the small golden models in
# place of the presets and one timed forward each, so a broken command, option
# or CUDA-only code path in the tool shows up before GPU time is spent on it.
# The latencies it prints are the emulator's and mean nothing.
B=${FT_BUILD:-build}/emu
T=$B/ftengine
fails=0
run() {
    echo "\$ $*"
    out=$("$@" 2>&1)
    rc=$?
    echo "$out" | grep -E '^(model|device|graph: kernels)|error|failed' | head -n 4
    if [ $rc -ne 0 ]; then
        echo "$out" | tail -n 5
        echo "DRY-RUN FAIL (exit $rc)"
        fails=$((fails + 1))
    fi
}
one="--iters 1 --warmup 0"
for m in bert funnel mobilebert resnet wavlm; do
    for mode in eager graph static; do
        run "$T" bench "tests/golden/$m" --device cuda --mode "$mode" --dtype fp16 --batch 1 $one
    done
    run env FT_DISABLE_CUDA_GRAPHS=1 "$T" bench "tests/golden/$m" --device cuda --mode static --dtype fp16 $one
done
for mode in eager graph static; do
    run "$T" bench tests/golden/bert --device cuda --mode "$mode" --dtype fp32 --batch 1 $one
    run "$T" bench tests/golden/bert --device cuda --mode "$mode" --dtype bf16 --batch 3 $one
    run "$T" run tests/golden/bert --inputs tests/golden/bert/inputs.safetensors --out "$B/dry.safetensors" \
        --device cuda --mode "$mode" --profile --phases --trace "$B/dry.json" --csv "$B/dry.csv"
done
for mode in eager static; do
    run env FT_DISABLE_PDL=1 "$T" bench tests/golden/resnet --device cuda --mode "$mode" --dtype fp16 --batch 1 $one
done
run env FT_DISABLE_PDL=1 "$T" bench tests/golden/bert --device cuda --mode static --dtype fp16 --batch 1 $one \
    --phases --trace "$B/dry-nopdl.json"
run env FT_GEMM_AUTOTUNE=0 "$T" bench tests/golden/bert --device cuda --mode static --dtype fp16 --batch 1 $one
run env FT_DISABLE_PASSES=affine "$T" bench tests/golden/funnel --device cuda --mode static --dtype fp16 --batch 2 $one
run "$B/examples/framework_tax" tests/golden/bert cuda 1
run "$T" sweep tests/golden/resnet --device cuda --dtype fp16 --protocol paper --overhead --iters 1 \
    --warmup 0 --batches 1,2 --csv "$B/dry-sweep.csv"
echo "dry run: $fails failed"
[ $fails -eq 0 ]
