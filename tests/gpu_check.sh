#!/bin/sh
# gpu_check.sh - `make gpu-check`: the whole GPU verification in one command.
# Detects the local GPU's compute capability, builds for it (in its own build
# folder, so objects of another CUDA_ARCH are never mixed in), runs `make test`,
# runs compute-sanitizer memcheck and racecheck over the CUDA op test (and the
# golden CUDA test binaries when present), runs the kernel bench, and prints a
# pass/fail line per step. Exits non-zero if any step failed; says "no GPU" and
# exits 0 on a machine without one. GPU_CHECK_STEPS (default "build test sanitize
# kbench") picks steps, so the check can be split over several timed calls.

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu-check: no GPU (nvidia-smi not found); nothing to check"
    exit 0
fi
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .\r')
case "$cap" in
'' | *[!0-9]*)
    echo "gpu-check: no GPU (nvidia-smi reports no device)"
    exit 0 ;;
esac
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)

B=${FT_GPU_BUILD:-build/gpu-sm$cap}
J=$(nproc 2>/dev/null || echo 4)
SAN=$(command -v compute-sanitizer 2>/dev/null)
[ -z "$SAN" ] && [ -n "$CUDA_HOME" ] && [ -x "$CUDA_HOME/bin/compute-sanitizer" ] && SAN=$CUDA_HOME/bin/compute-sanitizer
[ -z "$SAN" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && SAN=/usr/local/cuda/bin/compute-sanitizer

echo "gpu-check: $name, compute capability $cap -> CUDA_ARCH=$cap, build folder $B"
summary=""
failed=0
logdir="$B/gpu-check-logs"
mkdir -p "$logdir"

# step NAME CMD...: runs CMD, shows its output, records pass/fail
step() {
    sname=$1
    shift
    log="$logdir/$(echo "$sname" | tr ' /' '__').log"
    echo "== $sname: $*"
    "$@" >"$log" 2>&1
    rc=$?
    cat "$log"
    if [ $rc -eq 0 ]; then
        summary="$summary
  PASS  $sname"
    else
        summary="$summary
  FAIL  $sname (exit $rc, log $log)"
        failed=$((failed + 1))
    fi
    return $rc
}

STEPS=${GPU_CHECK_STEPS:-build test sanitize kbench}
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }

# the build always runs (a no-op when up to date): every later step needs it
step "build sm_$cap" make -j"$J" CUDA_ARCH="$cap" BUILD="$B" all
# EMU=0: the host emulator's rerun of the CUDA tests adds nothing where a GPU is
want test && step "make test" make -j"$J" CUDA_ARCH="$cap" BUILD="$B" EMU=0 test
# the first fused attention kernel, kept for A/B timing, must stay correct too
want test && step "attention v1" env FT_ATTN_KERNEL=v1 FT_TEST_FILTER=attention "$B/tests/test_cuda_ops"
want sanitize && make -j"$J" CUDA_ARCH="$cap" BUILD="$B" EMU=0 test-bins >/dev/null 2>&1

# the op test whole; of the model tests only their CUDA tests (FT_TEST_FILTER=cuda),
# whose CPU halves already ran in `make test` and gain nothing from the sanitizer
bins="$B/tests/test_cuda_ops"
golden_bins=""
for g in test_bert test_funnel_mobilebert test_resnet_wavlm test_graph_golden test_golden_variants; do
    golden_bins="$golden_bins $B/tests/$g"
done
if ! want sanitize; then
    :
elif [ -z "$SAN" ]; then
    summary="$summary
  FAIL  compute-sanitizer not found (PATH, CUDA_HOME, /usr/local/cuda)"
    failed=$((failed + 1))
else
    for bin in $bins $golden_bins; do
        if [ ! -x "$bin" ]; then
            summary="$summary
  FAIL  $bin missing"
            failed=$((failed + 1))
            continue
        fi
        bn=$(basename "$bin")
        # kernels run far slower under the sanitizer: the op test leaves out
        # its BERT-size cases there (they ran at full speed in `make test`)
        filter=""
        [ "$bn" != test_cuda_ops ] && filter=cuda
        step "memcheck $bn" env FT_TEST_SMALL=1 FT_TEST_FILTER=$filter "$SAN" --tool memcheck --error-exitcode 1 "$bin"
        step "racecheck $bn" env FT_TEST_SMALL=1 FT_TEST_FILTER=$filter "$SAN" --tool racecheck --error-exitcode 1 "$bin"
    done
fi

want kbench && step "kernel bench" make CUDA_ARCH="$cap" BUILD="$B" kernel-bench
want kbench && step "kernel bench, attention v1" env FT_ATTN_KERNEL=v1 "$B/bench/kernels/kernel_bench"

echo
echo "gpu-check summary ($name, sm_$cap):$summary"
if [ $failed -ne 0 ]; then
    echo "gpu-check: $failed step(s) FAILED"
    exit 1
fi
echo "gpu-check: all steps passed"
exit 0
