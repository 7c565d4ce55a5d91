#!/bin/sh
# test_gpu_session.sh - tests/gpu_session.sh leaves in OUT only what a device
# call brings back (at most 8 files, none over 16 MiB, 64 MiB in all, no deeper
# than OUT/a/b/file, names of [A-Za-z0-9._-]), for every stage: with a fake
# nvidia-smi reporting compute capability 9.0 (FT_GPU_SESSION_DRY_RUN=1: the
# commands are logged and placeholder outputs written, the bundling and the
# limit check are the real ones) and with no nvidia-smi at all. The limits are
# checked here independently of the script's own check, and that check is
# shown to fail on an OUT that breaks them. Run from the checkout's root (make
# test does); prints "RESULT: P passed, F failed, S skipped".
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

S=tests/gpu_session.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ft-gpu-session.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
cat >"$tmp/bin/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
*compute_cap*) echo "9.0" ;;
*name,driver*) echo "NVIDIA H100 80GB HBM3, 570.00, 81559 MiB, 1980 MHz" ;;
*name*) echo "NVIDIA H100 80GB HBM3" ;;
*) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)" ;;
esac
EOF
chmod +x "$tmp/bin/nvidia-smi"

# limits DIR WHAT: what a device call brings back, checked here
limits() {
    d=$1
    what=$2
    n=$(find "$d" -type f | wc -l)
    [ "$n" -le 8 ] || { bad "$what: $n files in OUT"; return 1; }
    deep=$(cd "$d" && find . -mindepth 4 | head -n 1)
    [ -z "$deep" ] || { bad "$what: $deep is deeper than OUT/a/b/file"; return 1; }
    odd=$(cd "$d" && find . -mindepth 1 | sed 's|^\./||' | tr / '\n' | grep '[^A-Za-z0-9._-]' | head -n 1)
    [ -z "$odd" ] || { bad "$what: name '$odd'"; return 1; }
    other=$(find "$d" -mindepth 1 ! -type f ! -type d | head -n 1)
    [ -z "$other" ] || { bad "$what: $other is not a plain file"; return 1; }
    big=$(find "$d" -type f -size +16384k | head -n 1)
    [ -z "$big" ] || { bad "$what: $big over 16 MiB"; return 1; }
    total=$(find "$d" -type f -exec cat {} + | wc -c)
    [ "$total" -le 67108864 ] || { bad "$what: $total bytes"; return 1; }
    [ "$n" -ge 1 ] || { bad "$what: OUT is empty (no log came back)"; return 1; }
    ok "$what: $n files, $total bytes"
}

stages=$(sh $S list)
case "$stages" in
*check-test*golden*) ok "stages: $stages" ;;
*) bad "stage list: '$stages'" ;;
esac
sh $S nosuchstage "$tmp/x" >/dev/null 2>&1
[ $? -eq 2 ] && ok "an unknown stage is a usage error" || bad "an unknown stage was accepted"

for st in $stages; do
    # a GPU of compute capability 9.0 (fake), commands not run
    o=$tmp/gpu-$st
    PATH="$tmp/bin:$PATH" FT_GPU_SESSION_DRY_RUN=1 sh $S "$st" "$o" >"$tmp/log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q "holds [0-9]* files (limit 8)" "$tmp/log" && [ -f "$o/$st.log" ]; then
        ok "$st (fake sm_90): exit 0, file count printed"
    else
        bad "$st (fake sm_90): exit $rc"
        tail -n 15 "$tmp/log"
    fi
    limits "$o" "$st (fake sm_90)"
    grep -q 'sm_90' "$o/$st.log" || bad "$st: the log does not name the GPU"
    # everything else is in the bundle: the step logs at least
    if tar -tzf "$o/$st.tar.gz" 2>/dev/null | grep -q 'steps/01-'; then
        ok "$st: step logs bundled"
    else
        bad "$st: no step log in $o/$st.tar.gz"
    fi
    # no GPU: nvidia-smi absent
    o=$tmp/none-$st
    FT_NVIDIA_SMI="$tmp/no/nvidia-smi" sh $S "$st" "$o" >"$tmp/log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q "no GPU" "$tmp/log" && grep -q "no GPU" "$o/$st.log"; then
        ok "$st (no nvidia-smi): exit 0, says no GPU"
    else
        bad "$st (no nvidia-smi): exit $rc"
        tail -n 5 "$tmp/log"
    fi
    limits "$o" "$st (no nvidia-smi)"
done

# the golden stage's many variant files (three levels deep) travel in the bundle
if tar -tzf "$tmp/gpu-golden/golden.tar.gz" | grep -q 'golden/variants/case1/model.safetensors'; then
    ok "golden: variant cases bundled"
else
    bad "golden: variant cases missing from the bundle"
fi
# racecheck: autotuner off and the engine's kernels only, said in the log
if tar -xzOf "$tmp/gpu-check-racecheck/check-racecheck.tar.gz" 2>/dev/null | grep -q 'FT_GEMM_AUTOTUNE=0' &&
    grep -q 'racecheck checks the engine.s own kernels only.*kns=ft_k_' "$tmp/gpu-check-racecheck/check-racecheck.log" &&
    grep -q 'GEMM autotuner is off' "$tmp/gpu-check-racecheck/check-racecheck.log"; then
    ok "racecheck: autotuner off, filtered to the engine's kernels, both in the log"
else
    bad "racecheck: autotuner or kernel filter not stated"
fi

# the script's own check fails loudly on an OUT that breaks a limit
o=$tmp/full
mkdir -p "$o/a/b/c"
for i in 1 2 3 4 5 6 7 8 9; do echo x >"$o/junk$i"; done
PATH="$tmp/bin:$PATH" FT_GPU_SESSION_DRY_RUN=1 sh $S check-kbench "$o" >"$tmp/log" 2>&1
rc=$?
if [ $rc -eq 3 ] && grep -q 'LIMIT: 11 files' "$tmp/log" && grep -q 'deeper than OUT/a/b' "$tmp/log" &&
    grep -q 'FAILED: OUT breaks' "$tmp/log"; then
    ok "an OUT over the limits fails (exit 3) and says why"
else
    bad "an OUT over the limits: exit $rc"
    tail -n 8 "$tmp/log"
fi
o=$tmp/oddname
mkdir -p "$o"
echo x >"$o/a b"
FT_NVIDIA_SMI="$tmp/no/nvidia-smi" sh $S golden "$o" >"$tmp/log" 2>&1
rc=$?
[ $rc -eq 3 ] && grep -q "LIMIT: the name 'a b'" "$tmp/log" && ok "a name with a space fails" ||
    bad "a name with a space: exit $rc"
# a second run of a stage into the same OUT replaces its files
o=$tmp/gpu-bench-ab
PATH="$tmp/bin:$PATH" FT_GPU_SESSION_DRY_RUN=1 sh $S bench-ab "$o" >/dev/null 2>&1
n=$(find "$o" -type f | wc -l)
[ "$n" -eq 2 ] && ok "a rerun replaces the stage's files ($n)" || bad "a rerun left $n files"

echo "RESULT: $pass passed, $fail failed, 0 skipped"
[ $fail -eq 0 ]
