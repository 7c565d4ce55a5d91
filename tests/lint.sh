#!/bin/sh
# lint.sh - the project's cheap style checks: every source file starts with a
# comment saying what it is, and stays under the size budget (800 lines); every
# CUDA kernel opens with FT_KERNEL_PROLOGUE() (kernels/cuda/cuda_common.cuh:
# kernels may be launched with programmatic dependent launch, and must not touch
# global memory before the grid they depend on has finished); every extern
# __shared__ declaration carries __align__. `make lint` then runs the kernel
# resource check (tests/ptxas_check.sh).
status=0
for f in $(git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null); do
    first=$(grep -v '^[[:space:]]*$' "$f" | head -n 1)
    case "$first" in
    "/*"*|"//"*) ;;
    *) echo "lint: $f does not start with a comment"; status=1 ;;
    esac
    lines=$(wc -l < "$f")
    if [ "$lines" -gt 800 ]; then
        echo "lint: $f has $lines lines (budget 800)"
        status=1
    fi
done
for f in $(git ls-files 'kernels/cuda/*.cu' 'kernels/cuda/*.cuh' 2>/dev/null); do
    [ "$f" = kernels/cuda/emu.cuh ] && continue
    # after a __global__ line, the body's first non-blank line must be the prologue
    bad=$(awk '
        /__global__/ && !/#define/ { sig = 1; at = FNR }
        sig && /\{[[:space:]]*$/ { sig = 0; body = 1; next }
        body && !/^[[:space:]]*$/ {
            if ($0 !~ /^[[:space:]]*FT_KERNEL_PROLOGUE\(\);/) print at
            body = 0
        }' "$f")
    for l in $bad; do
        echo "lint: $f:$l: kernel does not start with FT_KERNEL_PROLOGUE();"
        status=1
    done
done
# dynamic shared memory is read as float4 / uint4: its declaration must carry
# __align__(16) (the default alignment is the element type's)
for f in $(git ls-files 'kernels/cuda/*.cu' 'kernels/cuda/*.cuh' 2>/dev/null); do
    grep -n 'extern[[:space:]]*__shared__' "$f" | grep -v '__align__' | while IFS=: read -r l _; do
        echo "lint: $f:$l: extern __shared__ without __align__(16)"
    done | grep . && status=1
done
[ $status -eq 0 ] && echo "lint: ok"
exit $status
