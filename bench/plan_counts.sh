#!/bin/sh
# plan_counts.sh - kernels per forward of every preset's plan, on the CPU and
# (through the host emulator, which builds the same plan as a GPU) on CUDA:
# what a fusion change does to the launch count, measurable without a GPU.
# Counts, not timings. Usage: sh bench/plan_counts.sh [BUILD_DIR]   (default build)
#   prints: model, CPU fp32 steps, CUDA fp16 steps and graph nodes, CUDA fp32 graph nodes
B=${1:-build}
[ -x "$B/ftengine" ] || { echo "plan_counts: no $B/ftengine (run make)" >&2; exit 1; }
[ -x "$B/emu/ftengine" ] || make -s BUILD="$B" "$B/emu/ftengine" >/dev/null || exit 1
count() { sed -n 's/.*kernels per forward \([0-9]*\).*/\1/p'; }
nodes() { sed -n 's/.*kernels per forward \([0-9]*\).*(\([0-9]*\) CUDA graph nodes).*/\1 \2/p'; }
echo "model cpu_f32_steps cuda_f16_steps cuda_f16_nodes cuda_f32_nodes"
for m in bert-base distilbert-base funnel-small funnel-intermediate-base mobilebert-uncased wavlm-base resnet-50; do
    # the length does not change the counts: short inputs keep the emulated forwards quick
    case $m in wavlm-base) len="--seq 16000" ;; resnet-50) len="" ;; *) len="--seq 16" ;; esac
    cpu=$("$B/ftengine" plan $m --mode graph $len 2>&1 | count)
    f16=$("$B/emu/ftengine" plan $m --device cuda --mode static --dtype fp16 $len 2>&1 | nodes)
    f32=$("$B/emu/ftengine" plan $m --device cuda --mode static --dtype fp32 $len 2>&1 | nodes)
    echo "$m ${cpu:-?} ${f16:-? ?} ${f32#* }"
done
