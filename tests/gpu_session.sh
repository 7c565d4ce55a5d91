#!/bin/sh
# gpu_session.sh - what a session with a borrowed GPU runs: stages that each fit
# one 10-minute device call from a fresh checkout (each builds what it needs),
# and whose results come back whole. What comes back from a call is limited (at
# most 8 files, 16 MiB each, 64 MiB in all, no deeper than OUT/a/b/file, names
# of [A-Za-z0-9._-]), so a stage leaves exactly two things in OUT:
#   OUT/STAGE.log     what ran, each step's exit status and seconds, the lines
#                     that matter (latencies, PASS/FAIL, errors), the machine
#   OUT/STAGE.tar.gz  everything else: every step's full log, CSVs, traces,
#                     JSON results, golden variants (split into
#                     STAGE.tar.gz.part-aa, -ab, ... if over 15 MiB)
# and checks the limits itself before it exits: it prints the file count and
# fails (exit 3) if OUT breaks a limit. Docs and time estimates per stage:
# docs/gpu_session.md.
#
#   tests/gpu_session.sh STAGE [OUT]    (OUT default build/gpu-session/STAGE)
#   tests/gpu_session.sh list           the stage names, in the order to run them
#
# Stages: check-test check-memcheck-ops check-memcheck-models check-racecheck check-kbench bench-models
# bench-ab bench-curves report-main report-variants baselines golden. Each step gets the time left of the
# stage's budget (GPU_SESSION_BUDGET_S, default 450 s) as its timeout, so a
# stage that runs long still bundles and returns what it has.
# FT_GPU_SESSION_DRY_RUN=1 logs the commands instead of running them (and writes
# placeholder output files), for tests/test_gpu_session.sh; FT_NVIDIA_SMI names
# the nvidia-smi to ask (default: the one on PATH).
STAGES="check-test check-memcheck-ops check-memcheck-models check-racecheck check-kbench bench-models bench-ab bench-curves report-main report-variants baselines golden"
stage=${1:-}
usage() {
    echo "usage: tests/gpu_session.sh STAGE [OUT]   (STAGE: $STAGES; or: list)" >&2
    exit 2
}
case "$stage" in
list) echo "$STAGES"; exit 0 ;;
'') usage ;;
esac
case " $STAGES " in *" $stage "*) ;; *) usage ;; esac

OUT=${2:-build/gpu-session/$stage}
DRY=${FT_GPU_SESSION_DRY_RUN:-0}
SMI=${FT_NVIDIA_SMI:-nvidia-smi}
BUDGET=${GPU_SESSION_BUDGET_S:-450}
MAX_FILES=8
MAX_FILE=16777216   # 16 MiB
MAX_TOTAL=67108864  # 64 MiB
PART=15m            # split size of a bundle over the per-file limit

mkdir -p "$OUT" || exit 1
t_start=$(date +%s)
deadline=$((t_start + BUDGET))
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-session-$stage.XXXXXX") || exit 1
LOG=$work/$stage.log
mkdir -p "$work/steps"
failed=0
skipped=0
nstep=0

# ---- OUT: what comes back ----------------------------------------------------

# Prints what OUT holds and every limit it breaks; 0 when within all limits.
check_out() {
    listing=$(find "$OUT" -mindepth 1 -printf '%y %s %P\n' 2>/dev/null)
    n=0
    total=0
    bad=0
    old_ifs=$IFS
    IFS='
'
    for line in $listing; do
        IFS=$old_ifs
        type=${line%% *}
        rest=${line#* }
        size=${rest%% *}
        path=${rest#* }
        depth=$(printf '%s' "$path" | tr -cd / | wc -c)
        case "$type" in
        d)
            if [ "$depth" -gt 1 ]; then
                echo "gpu_session: LIMIT: folder $path is deeper than OUT/a/b" >&2
                bad=$((bad + 1))
            fi ;;
        f)
            n=$((n + 1))
            total=$((total + size))
            if [ "$depth" -gt 2 ]; then
                echo "gpu_session: LIMIT: $path is deeper than OUT/a/b/file" >&2
                bad=$((bad + 1))
            fi
            if [ "$size" -gt $MAX_FILE ]; then
                echo "gpu_session: LIMIT: $path is $size bytes (over 16 MiB)" >&2
                bad=$((bad + 1))
            fi ;;
        *)
            echo "gpu_session: LIMIT: $path is not a plain file or folder ($type)" >&2
            bad=$((bad + 1)) ;;
        esac
        case "$path" in
        *[!A-Za-z0-9._/-]* | */ | '')
            echo "gpu_session: LIMIT: the name '$path' has characters other than [A-Za-z0-9._-]" >&2
            bad=$((bad + 1)) ;;
        esac
        IFS='
'
    done
    IFS=$old_ifs
    if [ $n -gt $MAX_FILES ]; then
        echo "gpu_session: LIMIT: $n files (at most $MAX_FILES come back)" >&2
        bad=$((bad + 1))
    fi
    if [ $total -gt $MAX_TOTAL ]; then
        echo "gpu_session: LIMIT: $total bytes in all (over 64 MiB)" >&2
        bad=$((bad + 1))
    fi
    echo "gpu_session: OUT ($OUT) holds $n files (limit $MAX_FILES), $total bytes (limit $MAX_TOTAL)"
    if [ $bad -ne 0 ]; then
        echo "gpu_session: FAILED: OUT breaks $bad limit(s) of what a device call brings back" >&2
        return 1
    fi
    return 0
}

# Moves the stage's log and bundle into OUT (replacing an earlier run of the
# same stage), checks the limits, exits with the stage's status.
finish() {
    rc=$1
    end=$(date +%s)
    {
        echo
        echo "stage $stage: $nstep steps, $failed failed, $skipped skipped for the time budget, $((end - t_start)) s wall"
    } >>"$LOG"
    rm -f "$OUT/$stage.log" "$OUT/$stage.tar.gz" "$OUT/$stage.tar.gz.part-"*
    bundle=$work.tar.gz
    (cd "$work" && tar -czf "$bundle" --exclude="./$stage.log" .) || {
        echo "gpu_session: cannot bundle $work" >>"$LOG"
        rc=1
    }
    cp "$LOG" "$OUT/$stage.log"
    if [ -f "$bundle" ]; then
        if [ "$(wc -c <"$bundle")" -gt $MAX_FILE ]; then
            split -b $PART -a 2 "$bundle" "$OUT/$stage.tar.gz.part-"
            echo "gpu_session: bundle split (join: cat $stage.tar.gz.part-* > $stage.tar.gz)" >>"$OUT/$stage.log"
        else
            cp "$bundle" "$OUT/$stage.tar.gz"
        fi
        rm -f "$bundle"
    fi
    rm -rf "$work"
    tail -n 60 "$OUT/$stage.log"
    check_out || exit 3
    exit "$rc"
}

# ---- steps ---------------------------------------------------------------------

# Placeholder run: logs the command and writes a small file where it would
# write one (--csv/--trace/--json FILE), and a tree of files under the golden
# variants folder, so the bundling is exercised as in a real run.
dry() {
    echo "DRY RUN: $*"
    prev=
    for a in "$@"; do
        case "$prev" in --csv | --trace | --json) mkdir -p "$(dirname "$a")" && echo "dry run" >"$a" ;; esac
        case "$a" in */variants) for c in 1 2 3; do
            mkdir -p "$a/case$c" && for f in config.json model.safetensors inputs.safetensors expected.safetensors; do
                echo "dry run" >"$a/case$c/$f"
            done
        done ;; esac
        prev=$a
    done
    return 0
}

# Lines of a step's log worth reading without opening the bundle.
KEYS='^(model|device|latency|gemm|graph: (trace|kernels)|profile|gpu-check|  (PASS|FAIL))|FAILED|[Ee]rror|RESULT|passed|^[0-9]+ +(eager|graph|static)|^(eager|graph|static) |ORT|torch|no GPU'

# step NAME CMD...: runs CMD with the stage's time left as its timeout, its
# output in steps/NN-NAME.log (in the bundle); the log gets the command, exit
# status, seconds and key lines. With real_run=1 CMD runs even in a dry run
# (scripts that honour FT_GPU_SESSION_DRY_RUN themselves).
real_run=0
step() {
    name=$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_')
    shift
    nstep=$((nstep + 1))
    slog=$work/steps/$(printf '%02d' $nstep)-$name.log
    now=$(date +%s)
    left=$((deadline - now))
    echo "\$ $*" >>"$LOG"
    if [ $left -le 15 ]; then
        echo "[$name: SKIPPED, the stage's $BUDGET s budget is spent]" >>"$LOG"
        skipped=$((skipped + 1))
        failed=$((failed + 1))
        return 1
    fi
    if [ "$DRY" = 1 ] && [ "$real_run" != 1 ]; then
        dry "$@" >"$slog" 2>&1
    else
        timeout -k 10 $left "$@" >"$slog" 2>&1
    fi
    src=$?
    echo "[$name: exit $src, $(($(date +%s) - now)) s]" >>"$LOG"
    grep -E "$KEYS" "$slog" | head -n 60 >>"$LOG"
    if [ $src -ne 0 ]; then
        failed=$((failed + 1))
        [ $src -eq 124 ] && echo "[$name: TIMED OUT at the stage budget]" >>"$LOG"
        tail -n 20 "$slog" | sed 's/^/    /' >>"$LOG"
    fi
    echo >>"$LOG"
    return $src
}

{
    echo "gpu_session stage $stage"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    [ "$DRY" = 1 ] && echo "DRY RUN (FT_GPU_SESSION_DRY_RUN=1): commands are logged, not run"
} >"$LOG"

cap=$("$SMI" --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .\r')
case "$cap" in
'' | *[!0-9]*)
    echo "gpu_session: no GPU ($SMI reports no compute capability): nothing run" | tee -a "$LOG"
    finish 0 ;;
esac
echo "gpu: $("$SMI" --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null | head -n 1), sm_$cap" >>"$LOG"
echo "cpus: $(nproc 2>/dev/null)" >>"$LOG"
echo >>"$LOG"

B=${FT_GPU_BUILD:-build/gpu-sm$cap}
J=$(nproc 2>/dev/null || echo 4)
TOOL=$B/ftengine
W=$work
build() { step "build" make -j"$J" CUDA_ARCH="$cap" BUILD="$B" EMU=0 "$@"; }
bench() { # bench MODEL MODE [ARGS...]: fp16 batch 1, 200 iterations unless ARGS say otherwise
    m=$1
    mode=$2
    shift 2
    step "bench-$m-$mode" "$TOOL" bench "$m" --device cuda --mode "$mode" --dtype fp16 --batch 1 --iters 200 \
        --warmup 20 "$@"
}
check() { # check STEPS: tests/gpu_check.sh with its step logs in the bundle
    real_run=1
    step "gpu-check-$(echo "$1" | tr ' ' '-')" env GPU_CHECK_STEPS="$1" FT_GPU_BUILD="$B" \
        FT_GPU_CHECK_LOGDIR="$W/gpu-check" FT_NVIDIA_SMI="$SMI" sh tests/gpu_check.sh
    real_run=0
}

case "$stage" in
check-test) check "test" ;;
check-memcheck-ops) check "memcheck-ops" ;;
check-memcheck-models) check "memcheck-models" ;;
check-racecheck) check "racecheck" ;;
check-kbench) check "kbench" ;;
bench-models)
    # the model presets in eager / graph / static, and static without CUDA graphs
    build all
    for model in bert-base distilbert-base bert-large funnel-small mobilebert-uncased resnet-50 wavlm-base; do
        for mode in eager graph static; do bench "$model" "$mode"; done
        step "nographs-$model-static" env FT_DISABLE_CUDA_GRAPHS=1 "$TOOL" bench "$model" --device cuda \
            --mode static --dtype fp16 --batch 1 --iters 200 --warmup 20
    done ;;
bench-ab)
    build all
    # Funnel without the affine pass (2026-11-25): q's GEMM, scale and bias adds as
    # before, against three stacked GEMM blocks; at batch 1 and 64
    for b in 1 64; do
        bench funnel-small static --batch $b --iters 100 --warmup 10
        step "funnel-noaffine-b$b" env FT_DISABLE_PASSES=affine "$TOOL" bench funnel-small --device cuda \
            --mode static --dtype fp16 --batch $b --iters 100 --warmup 10
    done
    # programmatic dependent launch off (the device label in each header says
    # "PDL on" or why not); the "on" runs are bench-models'
    for model in bert-base resnet-50 wavlm-base; do
        for mode in eager static; do
            step "nopdl-$model-$mode" env FT_DISABLE_PDL=1 "$TOOL" bench "$model" --device cuda --mode "$mode" \
                --dtype fp16 --batch 1 --iters 200 --warmup 20
        done
    done
    # GEMM autotuning off: the heuristic's first guess instead of the fastest candidate
    for mode in eager static; do
        step "notune-bert-$mode" env FT_GEMM_AUTOTUNE=0 "$TOOL" bench bert-base --device cuda --mode "$mode" \
            --dtype fp16 --batch 1 --iters 200 --warmup 20
    done
    step "notune-bert-static-b64" env FT_GEMM_AUTOTUNE=0 "$TOOL" bench bert-base --device cuda --mode static \
        --dtype fp16 --batch 64 --iters 50 --warmup 5
    step "notune-resnet-static" env FT_GEMM_AUTOTUNE=0 "$TOOL" bench resnet-50 --device cuda --mode static \
        --dtype fp16 --batch 1 --iters 200 --warmup 20
    # what exact GELU costs (one launch per FFN) and the previous attention kernel
    step "fastgelu-bert-static" env FT_FAST_GELU=1 "$TOOL" bench bert-base --device cuda --mode static \
        --dtype fp16 --batch 1 --iters 200 --warmup 20
    step "attnv1-bert-static" env FT_ATTN_KERNEL=v1 "$TOOL" bench bert-base --device cuda --mode static \
        --dtype fp16 --batch 1 --iters 200 --warmup 20
    for mode in eager graph static; do
        bench bert-base "$mode" --dtype fp32
        bench bert-base "$mode" --batch 64 --iters 50 --warmup 5
    done
    # static mode profiled: a replay's kernels given back to their ops ('in graph' column)
    bench bert-base static --iters 20 --warmup 5 --phases --trace "$W/bert-base-static-trace.json"
    step "nopdl-bert-static-phases" env FT_DISABLE_PDL=1 "$TOOL" bench bert-base --device cuda --mode static \
        --dtype fp16 --batch 1 --iters 20 --warmup 5 --phases --trace "$W/bert-base-static-nopdl-trace.json" ;;
bench-curves)
    build all "$B/examples/framework_tax"
    # the framework tax: modes x emulated per-op cost, timed unprofiled, then profiled
    step "framework-tax" "$B/examples/framework_tax" bert-base cuda 1
    # the framework-tax curves (paper protocol, overhead share per point)
    for model in bert-base resnet-50; do
        step "sweep-$model" "$TOOL" sweep "$model" --device cuda --dtype fp16 --protocol paper --overhead \
            --rounds 3 --iters 7 --warmup 2 --batches 1,2,4,8,16,32,64,128 --csv "$W/sweep-$model.csv"
    done ;;
report-main | report-variants)
    # the reproduction study (make report, docs/report.md) on the GPU, in two calls:
    # the main and emulation sweeps, then width, depth and the models; each call's
    # report folder (CSVs, JSON, logs, a report.md of what it has) goes in the bundle.
    # Unpack both bundles into one folder and render the whole report anywhere:
    #   python3 bench/report.py --device cuda --dir DIR --no-sweeps
    build all
    groups=main,emulation
    [ "$stage" = report-variants ] && groups=width,depth,models
    step "report-$groups" make report CUDA_ARCH="$cap" BUILD="$B" EMU=0 DEVICE=cuda DTYPE=fp16 \
        REPORT_DIR="$W/report" STAGE="$groups"
    [ -f "$W/report/report.md" ] && grep -E '^### F|^Verdict' "$W/report/report.md" >>"$LOG" ;;
baselines)
    # PyTorch eager / CUDA graphs and ONNX Runtime on the same presets (no build needed)
    for model in bert-base distilbert-base resnet-50; do
        step "baseline-$model" python3 bench/baselines/hf_latency.py --model "$model" --batch 1 --dtype fp16 --ort \
            --json "$W/baseline-$model.json"
    done ;;
golden)
    build all "$B/tests/test_golden_variants"
    # the HF variant cases, written here, checked on CPU and CUDA; the shipped
    # cases are in the checkout and are not copied
    G=$W/golden
    mkdir -p "$G"
    cp -r tests/golden/. "$G/"
    step "make-golden" python3 tools/golden/make_golden.py "$G/variants"
    step "golden-variants" env FT_GOLDEN_DIR="$G" "$B/tests/test_golden_variants"
    # only the variants go in the bundle
    find "$G" -mindepth 1 -maxdepth 1 ! -name variants -exec rm -rf {} + ;;
esac
rc=0
[ $failed -ne 0 ] && rc=1
finish $rc
