#!/bin/sh
# test_baselines.sh - runs the Python baselines' own tests
# (bench/baselines/test_*.py, unittest, system python3) and prints their
# outcome as "RESULT: P passed, F failed, S skipped" for tests/run_tests.sh.
# Without python3 it is one skipped test, said so; tests needing torch,
# transformers or onnxruntime skip themselves with a line naming the module.
if ! command -v python3 >/dev/null 2>&1; then
    echo "skip: no python3 on PATH: the baselines' tests were not run"
    echo "RESULT: 0 passed, 0 failed, 1 skipped"
    exit 0
fi
log=$(mktemp "${TMPDIR:-/tmp}/ft-baselines.XXXXXX") || exit 1
python3 -m unittest discover -v -s bench/baselines -p 'test_*.py' >"$log" 2>&1
rc=$?
cat "$log"
ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p' "$log" | tail -n 1)
fl=$(grep -c -E '\.\.\. (FAIL|ERROR)$' "$log")
sk=$(grep -c -E '\.\.\. skipped' "$log")
rm -f "$log"
if [ -z "$ran" ]; then
    echo "FAIL: the baselines' tests did not run (exit $rc)"
    echo "RESULT: 0 passed, 1 failed, 0 skipped"
    exit 1
fi
[ $rc -ne 0 ] && [ "$fl" -eq 0 ] && fl=1
echo "RESULT: $((ran - fl - sk)) passed, $fl failed, $sk skipped"
[ $rc -eq 0 ]
