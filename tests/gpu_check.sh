#!/bin/sh
# gpu_check.sh - `make gpu-check`: the whole GPU verification in one command.
# Detects the local GPU's compute capability, builds for it (in its own build
# folder, so objects of another CUDA_ARCH are never mixed in), runs `make test`,
# runs compute-sanitizer memcheck and racecheck over the CUDA op test and the
# CUDA tests of the model test programs, runs the kernel bench, and prints a
# pass/fail line per step. Exits non-zero if any step failed; says "no GPU" and
# exits 0 on a machine without one.
#
# GPU_CHECK_STEPS (default "build test memcheck racecheck kbench"; "memcheck" is
# memcheck-ops (the op test) + memcheck-models (the model tests' CUDA tests),
# "sanitize" is memcheck + racecheck) picks steps: tests/gpu_session.sh runs them as separate
# stages, each in one timed device call. The build always runs (a no-op when up
# to date). Each step's log goes to FT_GPU_CHECK_LOGDIR (default
# BUILD/gpu-check-logs). FT_GPU_SESSION_DRY_RUN=1 prints the commands instead of
# running them; FT_NVIDIA_SMI names the nvidia-smi to ask.
#
# Under compute-sanitizer the GEMM autotuner is off (FT_GEMM_AUTOTUNE=0: timing
# cuBLASLt candidates there measures the sanitizer, and runs cuBLAS kernels
# that are not ours many more times), and racecheck checks only the engine's own
# kernels (--kernel-name kns=NAME for each __global__ function of
# kernels/cuda/*.cu): cuBLAS kernels are not ours and are very slow to
# race-check. Both are stated in the log.

SMI=${FT_NVIDIA_SMI:-nvidia-smi}
DRY=${FT_GPU_SESSION_DRY_RUN:-0}
if ! command -v "$SMI" >/dev/null 2>&1; then
    echo "gpu-check: no GPU ($SMI not found); nothing to check"
    exit 0
fi
cap=$("$SMI" --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .\r')
case "$cap" in
'' | *[!0-9]*)
    echo "gpu-check: no GPU ($SMI reports no device)"
    exit 0 ;;
esac
name=$("$SMI" --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)

B=${FT_GPU_BUILD:-build/gpu-check-sm$cap}
J=$(nproc 2>/dev/null || echo 4)
SAN=$(command -v compute-sanitizer 2>/dev/null)
[ -z "$SAN" ] && [ -n "$CUDA_HOME" ] && [ -x "$CUDA_HOME/bin/compute-sanitizer" ] && SAN=$CUDA_HOME/bin/compute-sanitizer
[ -z "$SAN" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && SAN=/usr/local/cuda/bin/compute-sanitizer
[ -z "$SAN" ] && [ "$DRY" = 1 ] && SAN=compute-sanitizer

echo "gpu-check: $name, compute capability $cap -> CUDA_ARCH=$cap, build folder $B"
[ "$DRY" = 1 ] && echo "gpu-check: DRY RUN (FT_GPU_SESSION_DRY_RUN=1): commands are printed, not run"
summary=""
failed=0
logdir=${FT_GPU_CHECK_LOGDIR:-$B/gpu-check-logs}
mkdir -p "$logdir"

# step NAME CMD...: runs CMD, shows its output, records pass/fail
step() {
    sname=$1
    shift
    log="$logdir/$(printf '%s' "$sname" | tr -c 'A-Za-z0-9.-' '_').log"
    echo "== $sname: $*"
    t0=$(date +%s)
    if [ "$DRY" = 1 ]; then
        echo "DRY RUN: $*" >"$log"
    else
        "$@" >"$log" 2>&1
    fi
    rc=$?
    cat "$log"
    if [ $rc -eq 0 ]; then
        summary="$summary
  PASS  $sname ($(($(date +%s) - t0)) s)"
    else
        summary="$summary
  FAIL  $sname (exit $rc, log $log)"
        failed=$((failed + 1))
    fi
    return $rc
}

STEPS=${GPU_CHECK_STEPS:-build test memcheck racecheck kbench}
STEPS=$(echo " $STEPS " | sed -e 's/ sanitize / memcheck racecheck /' -e 's/ memcheck / memcheck-ops memcheck-models /')
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }

step "build sm_$cap" make -j"$J" CUDA_ARCH="$cap" BUILD="$B" EMU=0 all
# EMU=0: the host emulator's rerun of the CUDA tests adds nothing where a GPU is
want test && step "make test" make -j"$J" CUDA_ARCH="$cap" BUILD="$B" EMU=0 test
# the first fused attention kernel, kept for A/B timing, must stay correct too
want test && step "attention v1" env FT_ATTN_KERNEL=v1 FT_TEST_FILTER=attention "$B/tests/test_cuda_ops"
if want memcheck-ops || want memcheck-models || want racecheck; then
    step "test programs" make -j"$J" CUDA_ARCH="$cap" BUILD="$B" EMU=0 test-bins
fi

# the op test whole; of the model tests only their CUDA tests (FT_TEST_FILTER=cuda),
# whose CPU halves already ran in `make test` and gain nothing from the sanitizer
bins="$B/tests/test_cuda_ops"
for g in test_bert test_funnel_mobilebert test_resnet_wavlm test_graph_golden test_golden_variants \
    test_zoo_text_a; do
    bins="$bins $B/tests/$g"
done
# the engine's kernels: every __global__ function's name
own=$(cat kernels/cuda/*.cu | tr '\n' ' ' | sed 's/__launch_bounds__ *([^)]*)//g' |
    grep -o '__global__[^(;{]*(' | sed 's/ *($//' | awk '{print $NF}' | sort -u)
race_filter=""
for k in $own; do race_filter="$race_filter --kernel-name kns=$k"; done
if want memcheck-ops || want memcheck-models || want racecheck; then
    echo "gpu-check: under compute-sanitizer the GEMM autotuner is off (FT_GEMM_AUTOTUNE=0)"
    echo "gpu-check: racecheck checks the engine's own kernels only (cuBLAS kernels are left out):$race_filter"
fi
for tool in memcheck racecheck; do
    case $tool in
    memcheck) want memcheck-ops || want memcheck-models || continue ;;
    *) want $tool || continue ;;
    esac
    if [ -z "$SAN" ]; then
        summary="$summary
  FAIL  compute-sanitizer not found (PATH, CUDA_HOME, /usr/local/cuda)"
        failed=$((failed + 1))
        break
    fi
    filter=""
    [ $tool = racecheck ] && filter=$race_filter
    for bin in $bins; do
        if [ "$DRY" != 1 ] && [ ! -x "$bin" ]; then
            summary="$summary
  FAIL  $bin missing"
            failed=$((failed + 1))
            continue
        fi
        bn=$(basename "$bin")
        if [ $tool = memcheck ]; then
            if [ "$bn" = test_cuda_ops ]; then want memcheck-ops || continue; else want memcheck-models || continue; fi
        fi
        # kernels run far slower under the sanitizer: the op test leaves out
        # its BERT-size cases there (they ran at full speed in `make test`)
        tf=""
        [ "$bn" != test_cuda_ops ] && tf=cuda
        # shellcheck disable=SC2086 # the filter is a list of options
        step "$tool $bn" env FT_GEMM_AUTOTUNE=0 FT_TEST_SMALL=1 FT_TEST_FILTER=$tf \
            "$SAN" --tool $tool $filter --error-exitcode 1 "$bin"
    done
done

want kbench && step "kernel bench" make CUDA_ARCH="$cap" BUILD="$B" EMU=0 kernel-bench
want kbench && step "kernel bench, attention v1" env FT_ATTN_KERNEL=v1 "$B/bench/kernels/kernel_bench"

echo
echo "gpu-check summary ($name, sm_$cap):$summary"
if [ $failed -ne 0 ]; then
    echo "gpu-check: $failed step(s) FAILED"
    exit 1
fi
echo "gpu-check: all steps passed"
exit 0
