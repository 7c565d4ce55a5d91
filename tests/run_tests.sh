#!/bin/sh
# run_tests.sh - runs every test binary given on the command line, adds up the
# "RESULT: P passed, F failed, S skipped" line each prints, and ends with one
# line "N passed, N failed, N skipped". A binary that crashes or prints no
# RESULT line counts as one failed test. Exits non-zero if anything failed.
pass=0; fail=0; skip=0
log=$(mktemp)
for bin in "$@"; do
    name=$(basename "$bin")
    case "$bin" in
    */emu/tests/*)
        # the CUDA tests again, on the host emulator of the device (tests/emu/):
        # whole programs where every test touches CUDA, else the tests named *cuda*
        order=forward
        nolt=
        lazy=0
        busy=0
        # several cuBLASLt candidates, so GEMMs go through the autotuner (slow
        # on the emulator: only where it is the point, or once per model)
        case "$name" in
        test_graph_golden | test_cuda_pdl | test_cuda_gemm_tune) algos=3 ;;
        *) algos=1 ;;
        esac
        case "$name" in
        test_cuda_ops | test_funnel_factorized) f=${FT_TEST_FILTER:-} ;;
        *_random) f=${FT_TEST_FILTER:-}; order=random ;;
        *_noepi) f=${FT_TEST_FILTER:-}; nolt=epilogue ;;
        *_nolt) f=${FT_TEST_FILTER:-}; nolt=all ;;
        test_cuda_ops_lazy) f=${FT_TEST_FILTER:-}; lazy=1 ;;
        *_lazy) f=${FT_TEST_FILTER:-cuda}; lazy=1 ;;
        *_cuptibusy) f=${FT_TEST_FILTER:-cuda}; busy=1 ;;
        *) f=${FT_TEST_FILTER:-cuda} ;;
        esac
        name="$name [CUDA emulated on the host]"
        echo "== $name"
        if [ -n "$nolt" ]; then
            FT_EMU_LT_ALGOS=$algos FT_EMU_LT_NO_ALGO=$nolt FT_EMU_LAZY=$lazy FT_EMU_ORDER=$order \
                FT_TEST_FILTER=$f "$bin" >"$log" 2>&1
        else
            FT_EMU_LT_ALGOS=$algos FT_EMU_CUPTI_BUSY=$busy FT_EMU_LAZY=$lazy FT_EMU_ORDER=$order \
                FT_TEST_FILTER=$f "$bin" >"$log" 2>&1
        fi ;;
    *.py)
        # the Python tests run with the interpreter make passes (make test PYTHON=...)
        echo "== $name (${FT_PYTHON:-python3})"
        "${FT_PYTHON:-python3}" "$bin" >"$log" 2>&1 ;;
    *)
        echo "== $name"
        "$bin" >"$log" 2>&1 ;;
    esac
    rc=$?
    cat "$log"
    line=$(grep '^RESULT: ' "$log" | tail -n 1)
    case "$bin" in
    */examples/*)
        # examples are programs, not test suites: they pass by exiting 0
        if [ $rc -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL example $name exited $rc"; fi
        continue ;;
    esac
    if [ -z "$line" ]; then
        echo "FAIL $name exited $rc without a RESULT line"
        fail=$((fail + 1))
        continue
    fi
    p=$(echo "$line" | sed -n 's/^RESULT: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped.*/\1/p')
    f=$(echo "$line" | sed -n 's/^RESULT: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped.*/\2/p')
    s=$(echo "$line" | sed -n 's/^RESULT: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped.*/\3/p')
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name exited $rc"
        fail=$((fail + 1))
    fi
done
rm -f "$log"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
