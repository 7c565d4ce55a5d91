#!/bin/sh
# test_cupti_timed_loops.sh - CUPTI sessions of whole programs on the
# emulator, whose fake CUPTI (playing CUPTI 13.0) reports at exit
# (FT_EMU_CUPTI_REPORT=1) its subscriptions, sessions and traced API calls:
# - every program opens at most one CUPTI session (a second one would mislabel
#   CUDA graph replays on 13.0), and none before its first profiled window
#   (no probe subscription when the profiler is made);
# - `ftengine bench --phases` times its forwards before that window: the calls
#   made before the session at least match the traced (profiled) ones;
# - `ftengine sweep --overhead` times every visit of every round before its
#   profiled passes (tools/sweep.c defers them on CUDA with CUPTI): the calls
#   made before the one session at least match the traced ones; its CSV has
#   every visit's row before the profiled-pass rows (protocol "profiled"), one
#   of each per point and round, and --resume of a sweep cut off among its
#   profiled passes runs only the missing ones;
# - the unprofiled commands the GPU session times its headline numbers with
#   (`bench` without --phases, `sweep` without --overhead) never load CUPTI.
# - examples/framework_tax times every mode and host cost before its first
#   profiled window, so none of its timed points runs under CUPTI.
# Built into build/emu/tests/ by tests/emu/emu.mk; prints a RESULT line.
B=${FT_BUILD:-build}/emu
pass=0
fail=0
unset FT_TEST_FILTER FT_CUPTI_SESSION FT_EMU_CUPTI_VERSION FT_EMU_CUPTI_GRAPH_BUG
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ft-cupti-loops.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# check NAME SESSIONS TIMED CMD...: CMD exits 0 and opens SESSIONS CUPTI
# sessions (one subscription each); TIMED=before: the calls made before the
# session are at least as many as the traced ones; TIMED=none: nothing traced
check() {
    name=$1
    want=$2
    timed=$3
    shift 3
    FT_EMU_CUPTI_REPORT=1 FT_EMU_LT_ALGOS=1 "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    line=$(grep '^fake CUPTI: ' "$tmp/err" | tail -n 1)
    re='^fake CUPTI: \([0-9]*\) subscriptions, \([0-9]*\) sessions, \([0-9]*\) API calls traced, \([0-9]*\) untraced, \([0-9]*\) untraced before the first session$'
    subs=$(echo "$line" | sed -n "s/$re/\\1/p")
    ses=$(echo "$line" | sed -n "s/$re/\\2/p")
    tr=$(echo "$line" | sed -n "s/$re/\\3/p")
    early=$(echo "$line" | sed -n "s/$re/\\5/p")
    ok=0
    if [ $rc -eq 0 ] && [ -n "$subs" ] && [ "$subs" -eq "$want" ] && [ "$ses" -eq "$want" ]; then
        case $timed in
        before) [ "$tr" -gt 0 ] && [ "$early" -ge "$tr" ] && ok=1 ;;
        none) [ "$tr" -eq 0 ] && ok=1 ;;
        *) [ "$tr" -gt 0 ] && ok=1 ;;
        esac
    fi
    if [ $ok -eq 1 ]; then
        echo "ok   $name: $line"
        pass=$((pass + 1))
    else
        echo "FAIL $name: exit $rc, '$line' (want $want subscriptions and sessions, timed: $timed)"
        tail -n 5 "$tmp/err"
        fail=$((fail + 1))
    fi
}

check "bench --phases (one session, after the timed loop)" 1 before \
    "$B/ftengine" bench tests/golden/bert --device cuda --mode eager --dtype fp16 --iters 2 --warmup 1 --phases
check "bench --phases, static (graph replays in the one session)" 1 before \
    "$B/ftengine" bench tests/golden/bert --device cuda --mode static --dtype fp16 --iters 2 --warmup 1 --phases
check "bench (headline: no CUPTI at all)" 0 none \
    "$B/ftengine" bench tests/golden/bert --device cuda --mode static --dtype fp16 --iters 2 --warmup 1
check "sweep without --overhead (headline curve: no CUPTI at all)" 0 none \
    "$B/ftengine" sweep tests/golden/bert --device cuda --dtype fp16 --protocol paper --iters 1 --warmup 0 \
    --batches 1,2 --rounds 1
sweep_overhead() {
    "$B/ftengine" sweep tests/golden/bert --device cuda --dtype fp16 --protocol paper --overhead --iters 1 \
        --warmup 1 --batches 1,2 --rounds 2 --csv "$tmp/s.csv" "$@"
}
check "sweep --overhead (every timed visit before the one session)" 1 before sweep_overhead

# rows_ok CSV: 12 visit rows (3 modes x 2 batches x 2 rounds), then 12 profiled-pass
# rows; the protocol is the 8th column (no quoted field before it)
rows_ok() {
    awk -F, 'NR > 1 { if ($8 == "profiled") { p++ } else { v++; if (p) late++ } }
             END { exit !(v == 12 && p == 12 && !late) }' "$1"
}
name="sweep --overhead CSV: the visits' rows, then one profiled-pass row per point and round"
if rows_ok "$tmp/s.csv"; then
    echo "ok   $name"
    pass=$((pass + 1))
else
    echo "FAIL $name"
    cut -d, -f5-8 "$tmp/s.csv"
    fail=$((fail + 1))
fi
# cut off after the visits and 3 profiled passes: --resume runs the 9 missing ones only
head -n 16 "$tmp/s.csv" >"$tmp/cut.csv" && mv "$tmp/cut.csv" "$tmp/s.csv"
name="sweep --overhead --resume after a cut among the profiled passes: only those run"
if FT_EMU_CUPTI_REPORT=1 FT_EMU_LT_ALGOS=1 sweep_overhead --resume >"$tmp/out" 2>"$tmp/err" &&
    grep -q "measuring 0$" "$tmp/out" && grep -q "^resumed: 9 kept rows still without a profiled pass" "$tmp/out" &&
    [ "$(grep -c ' profiled: wall ' "$tmp/out")" -eq 9 ] && rows_ok "$tmp/s.csv" &&
    grep -q "^fake CUPTI: 1 subscriptions, 1 sessions" "$tmp/err"; then
    echo "ok   $name"
    pass=$((pass + 1))
else
    echo "FAIL $name"
    tail -n 15 "$tmp/out" "$tmp/err"
    fail=$((fail + 1))
fi
check "framework_tax (every point timed before its one session)" 1 before "$B/examples/framework_tax" tests/golden/bert cuda 1
echo "RESULT: $pass passed, $fail failed, 0 skipped"
[ $fail -eq 0 ]
