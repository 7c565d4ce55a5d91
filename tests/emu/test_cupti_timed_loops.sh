#!/bin/sh
# test_cupti_timed_loops.sh - the headline latencies of `ftengine bench`,
# `ftengine sweep --overhead` and examples/framework_tax are timed with no CUPTI
# in the process: on the emulator, whose fake CUPTI reports at exit
# (FT_EMU_CUPTI_REPORT=1) how many times it was subscribed and how many API
# calls it traced, each program subscribes once per profiled window (plus one probe
# when its profiler is made: subscribed and dropped at once, nothing enabled, so
# another CUPTI client shows in the header; sweep opens one window per profiled
# forward), and its timed passes (at least as many calls as the profiled ones) go
# untraced.
# Built into build/emu/tests/ by tests/emu/emu.mk; prints a RESULT line.
B=${FT_BUILD:-build}/emu
pass=0
fail=0
unset FT_TEST_FILTER
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ft-cupti-loops.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# check NAME SUBSCRIPTIONS CMD...: CMD exits 0, subscribes SUBSCRIPTIONS times,
# and traces no more API calls than it makes untraced
check() {
    name=$1
    want=$2
    shift 2
    FT_EMU_CUPTI_REPORT=1 FT_EMU_LT_ALGOS=1 "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    line=$(grep '^fake CUPTI: ' "$tmp/err" | tail -n 1)
    subs=$(echo "$line" | sed -n 's/^fake CUPTI: \([0-9]*\) subscriptions, \([0-9]*\) API calls traced, \([0-9]*\) untraced$/\1/p')
    tr=$(echo "$line" | sed -n 's/^fake CUPTI: \([0-9]*\) subscriptions, \([0-9]*\) API calls traced, \([0-9]*\) untraced$/\2/p')
    un=$(echo "$line" | sed -n 's/^fake CUPTI: \([0-9]*\) subscriptions, \([0-9]*\) API calls traced, \([0-9]*\) untraced$/\3/p')
    if [ $rc -eq 0 ] && [ -n "$subs" ] && [ "$subs" -eq "$want" ] && [ "$tr" -gt 0 ] && [ "$un" -ge "$tr" ]; then
        echo "ok   $name: $line"
        pass=$((pass + 1))
    else
        echo "FAIL $name: exit $rc, '$line' (want $want subscriptions, traced > 0, untraced >= traced)"
        tail -n 5 "$tmp/err"
        fail=$((fail + 1))
    fi
}

check "bench --phases (a probe, one profiled pass)" 2 \
    "$B/ftengine" bench tests/golden/bert --device cuda --mode eager --dtype fp16 --iters 2 --warmup 1 --phases
check "sweep --overhead (a probe, one profiled forward per mode and batch)" 7 \
    "$B/ftengine" sweep tests/golden/bert --device cuda --dtype fp16 --protocol paper --overhead --iters 1 \
    --warmup 0 --batches 1,2 --rounds 1
check "framework_tax (a probe, one profiled pass per mode and cost)" 7 "$B/examples/framework_tax" tests/golden/bert cuda 1
echo "RESULT: $pass passed, $fail failed, 0 skipped"
[ $fail -eq 0 ]
