#!/bin/sh
# gpu_session.sh - what a session with a borrowed GPU runs. First, and usually
# alone, the GPU day: one device call of at most 8 minutes that brings back
# what matters most (docs/gpu_session.md):
#   sh tests/gpu_session.sh day OUT       (then, if time is left: report OUT)
# It runs the prebuilt binaries of `make gpu-prebuild` (build/gpu-sm90, carried
# with the call) when they match the checkout, else builds them with 16 jobs,
# and says which. Every step has a time box (the boxes add up to at most
# 480 s, checked before anything runs: exit 4 if not), steps in order of value:
# correctness on the GPU, compute-sanitizer, headline numbers in processes
# that never load CUPTI, the framework-tax sweep, PyTorch peers, one profiled
# run. `sh tests/gpu_session.sh plan day` lists the steps and boxes.
#
# The older stages each fit one 10-minute call from a fresh checkout (each
# builds what it needs) for longer leases. What comes back from a call is
# limited (at most 8 files, 16 MiB each, 64 MiB in all, no deeper than
# OUT/a/b/file, names of [A-Za-z0-9._-]); day and report leave at most 4
# files, the other stages 8. A stage leaves two things in OUT:
#   OUT/STAGE.log     what ran, each step's exit status and seconds, the lines
#                     that matter (latencies, PASS/FAIL, errors), the machine
#   OUT/STAGE.tar.gz  everything else: every step's full log, CSVs, traces,
#                     JSON results, golden variants (split into
#                     STAGE.tar.gz.part-aa, -ab, ... if over 15 MiB)
# and checks the limits itself before it exits: it prints the file count and
# fails (exit 3) if OUT breaks a limit.
#
#   tests/gpu_session.sh STAGE [OUT]    (OUT default build/gpu-session/STAGE)
#   tests/gpu_session.sh list           the stage names, in the order to run them
#   tests/gpu_session.sh plan day|report  the steps and time boxes of a timed stage
#   tests/gpu_session.sh stamp          the sources' hash gpu-prebuild stamps
#
# Stages: day report, then check-test check-memcheck-ops check-memcheck-models
# check-racecheck check-kbench bench-models bench-ab bench-curves report-main
# report-variants baselines golden. In those, each step gets the time left of
# the stage's budget (GPU_SESSION_BUDGET_S, default 450 s) as its timeout.
# FT_GPU_SESSION_DRY_RUN=1 logs the commands instead of running them (and writes
# placeholder output files), for tests/test_gpu_session.sh; FT_NVIDIA_SMI names
# the nvidia-smi to ask (default: the one on PATH); FT_GPU_PREBUILT the
# prebuilt folder (default build/gpu-sm<cc>). For the tests only:
# FT_GPU_DAY_EXTRA_STEP=NAME:SECONDS adds a step to the day's plan,
# FT_GPU_DAY_EXTRA_FILES=N leaves N more files in OUT.
STAGES="day report check-test check-memcheck-ops check-memcheck-models check-racecheck check-kbench bench-models bench-ab bench-curves report-main report-variants baselines golden"
stage=${1:-}
usage() {
    echo "usage: tests/gpu_session.sh STAGE [OUT]   (STAGE: $STAGES; or: list)" >&2
    exit 2
}

# ---- the GPU day's plan and helpers (also commands of their own) -------------

DAY_BUDGET=480    # seconds of wall time for the day's steps, all boxes together
REPORT_BUDGET=200 # the report stage's (what a 15-minute lease leaves after the day)

# The day's steps in order of value, each with its time box in seconds.
day_plan() {
    cat <<'EOF'
prepare 20
ops 40
golden 60
golden-programs 30
pdl-capture 30
memcheck 45
bert-eager 15
bert-graph 15
bert-static 15
bert-static-nopdl 15
resnet-static 15
sweep 70
peers 90
profiled 20
EOF
    [ -n "${FT_GPU_DAY_EXTRA_STEP:-}" ] && echo "$FT_GPU_DAY_EXTRA_STEP" | tr ':' ' '
    return 0
}
report_plan() {
    cat <<'EOF'
prepare 20
report-timing 60
report-overhead 90
report-render 25
EOF
}

# plan_of STAGE: its plan; plan_total STAGE: the sum of its boxes
plan_of() { if [ "$1" = report ]; then report_plan; else day_plan; fi; }
plan_total() { plan_of "$1" | awk '{ s += $2 } END { print s + 0 }'; }
box_of() { plan_of "$1" | awk -v n="$2" '$1 == n { print $2; exit }'; }

# The sources a build reads, hashed: `make gpu-prebuild` writes it into STAMP
# and the day compares. No git needed (the device's copy may have no .git).
sources_hash() {
    find Makefile include engine graph models kernels tools bench examples tests -type f \
        \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.mk' -o -name Makefile \) \
        ! -path 'tests/golden/*' 2>/dev/null | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
}

# run_tests DIR SPEC...: runs test programs, SPEC NAME (every test) or
# NAME/FILTER (FT_TEST_FILTER); their whole output; non-zero if one failed or
# is missing.
run_tests() {
    dir=$1
    shift
    bad=0
    for spec in "$@"; do
        name=${spec%%/*}
        filter=
        case "$spec" in */*) filter=${spec#*/} ;; esac
        echo "== $name${filter:+ (FT_TEST_FILTER=$filter)}"
        if [ ! -x "$dir/$name" ]; then
            echo "MISSING $dir/$name"
            bad=$((bad + 1))
            continue
        fi
        FT_TEST_FILTER=$filter "$dir/$name" 2>&1
        rc=$?
        [ $rc -ne 0 ] && { echo "FAILED $name (exit $rc)"; bad=$((bad + 1)); }
    done
    echo "run_tests: $# programs, $bad failed"
    [ $bad -eq 0 ]
}

# Where compute-sanitizer is: PATH, the toolkits, /opt/nvidia, then a bounded
# search of the whole machine (its place differs between images).
find_sanitizer() {
    if [ -n "${FT_COMPUTE_SANITIZER:-}" ]; then echo "$FT_COMPUTE_SANITIZER"; return; fi
    command -v compute-sanitizer 2>/dev/null && return
    for c in ${CUDA_HOME:+$CUDA_HOME/bin/compute-sanitizer} /usr/local/cuda*/bin/compute-sanitizer \
        /usr/local/cuda*/compute-sanitizer/compute-sanitizer /opt/nvidia/*/compute-sanitizer \
        /opt/nvidia/*/*/compute-sanitizer; do
        [ -x "$c" ] && { echo "$c"; return; }
    done
    timeout 20 find / -xdev -maxdepth 10 -name compute-sanitizer -type f -perm -u+x 2>/dev/null | head -n 1
}

# memcheck BIN: compute-sanitizer memcheck on the op test's small cases. A
# sanitizer the runtime refuses ("Device not supported") is a REFUSED line and
# exit 0: that machine cannot run it, the day goes on.
memcheck() {
    san=$(find_sanitizer)
    if [ -z "$san" ]; then
        echo "REFUSED: compute-sanitizer not found (PATH, CUDA_HOME, /usr/local/cuda*, /opt/nvidia, find /)"
        return 0
    fi
    echo "compute-sanitizer: $san; GEMM autotuner off, small cases (FT_TEST_SMALL=1)"
    log=$(mktemp "${TMPDIR:-/tmp}/ft-memcheck.XXXXXX") || return 1
    FT_GEMM_AUTOTUNE=0 FT_TEST_SMALL=1 "$san" --tool memcheck --error-exitcode 1 "$1" >"$log" 2>&1
    rc=$?
    cat "$log"
    why=$(grep -m 1 -iE 'device not supported|not supported on this|error 999|unable to (attach|launch)' "$log")
    rm -f "$log"
    if [ $rc -ne 0 ] && [ -n "$why" ]; then
        echo "REFUSED: compute-sanitizer refused this machine: $why"
        return 0
    fi
    return $rc
}

# info PRE: the machine, the toolchain, the binaries and Python packages the day uses
info() {
    smi=${FT_NVIDIA_SMI:-nvidia-smi}
    echo "gpu: $("$smi" --query-gpu=name,driver_version,memory.total,clocks.max.sm,compute_cap --format=csv,noheader 2>&1 | head -n 1)"
    echo "host: $(uname -srm), $(nproc) CPUs, $(sed -n 's/^MemTotal: *//p' /proc/meminfo 2>/dev/null)"
    echo "nvcc: $(nvcc --version 2>/dev/null | tail -n 1 || echo none)"
    echo "compute-sanitizer on PATH: $(command -v compute-sanitizer || echo no, the memcheck step searches)"
    echo "prebuilt: $1"
    "$1/bin/ftengine" --version 2>&1
    python3 -c 'import sys; print("python", sys.version.split()[0])
for m in ("torch", "transformers", "onnxruntime", "matplotlib"):
    try:
        print(m, __import__(m).__version__)
    except Exception as e:
        print(m, "not importable:", e.__class__.__name__)' 2>&1
    return 0
}

# report_sweeps TOOL DIR timing|overhead HAVE_FP16: the report's main sweeps,
# BERT-base fp16 in three modes and fp32 eager, unprofiled or --overhead
report_sweeps() {
    sw="bert-base --device cuda --batches 1,2,4,8,16,32,64,128 --iters 20 --warmup 2 --protocol paper"
    ov=""
    [ "$3" = overhead ] && ov=--overhead
    rc=0
    if [ "$4" != 1 ]; then
        # shellcheck disable=SC2086
        "$1" sweep $sw --dtype fp16 --modes eager,graph,static $ov --csv "$2/main-fp16.csv" || rc=1
    fi
    # shellcheck disable=SC2086
    "$1" sweep $sw --dtype fp32 --modes eager $ov --csv "$2/main-fp32.csv" || rc=1
    return $rc
}

case "$stage" in
list) echo "$STAGES"; exit 0 ;;
info) info "$2"; exit 0 ;;
report-sweeps) report_sweeps "$2" "$3" "$4" "$5"; exit $? ;;
plan)
    st=${2:-day}
    plan_of "$st" | awk '{ printf "%-20s %4d s\n", $1, $2 }'
    echo "total $(plan_total "$st") s (budget $([ "$st" = report ] && echo $REPORT_BUDGET || echo $DAY_BUDGET) s)"
    exit 0 ;;
stamp) echo "sources: $(sources_hash)"; exit 0 ;;
run-tests) shift; run_tests "$@"; exit $? ;;
memcheck) memcheck "$2"; exit $? ;;
'') usage ;;
esac
case " $STAGES " in *" $stage "*) ;; *) usage ;; esac

OUT=${2:-build/gpu-session/$stage}
DRY=${FT_GPU_SESSION_DRY_RUN:-0}
SMI=${FT_NVIDIA_SMI:-nvidia-smi}
BUDGET=${GPU_SESSION_BUDGET_S:-450}
case "$stage" in day) BUDGET=$DAY_BUDGET ;; report) BUDGET=$REPORT_BUDGET ;; esac
MAX_FILES=8
case "$stage" in day | report) MAX_FILES=4 ;; esac
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
summary=""

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
        [ -n "$summary" ] && echo "steps (used / box):$summary"
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
    i=0
    while [ "$i" -lt "${FT_GPU_DAY_EXTRA_FILES:-0}" ]; do
        i=$((i + 1))
        echo "extra file $i (FT_GPU_DAY_EXTRA_FILES)" >"$OUT/$stage-extra$i.txt"
    done
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
KEYS='^(model|device|latency|gemm|graph: (trace|kernels)|profile|gpu-check|  (PASS|FAIL))|FAILED|[Ee]rror|RESULT|passed|^[0-9]+ +(eager|graph|static)|^(eager|graph|static) |ORT|torch|no GPU|^== |REFUSED|ERROR SUMMARY|^compute-sanitizer|^golden summary|^    kernels: |skipping|timed out|MISSING|^[a-z0-9-]+ b[0-9]+ (fp16|fp32|bf16) '

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
    if [ $left -le ${MIN_LEFT:-15} ]; then
        echo "[$name: SKIPPED, the stage's $BUDGET s budget is spent]" >>"$LOG"
        skipped=$((skipped + 1))
        failed=$((failed + 1))
        summary="$summary
  $(printf '%-18s' "$name") SKIPPED (the $BUDGET s budget is spent)"
        return 1
    fi
    # a timed stage's step: its box, or what is left if less
    box=${STEP_BOX:-$left}
    [ "$box" -gt "$left" ] && box=$left
    left=$box
    if [ "$DRY" = 1 ] && [ "$real_run" != 1 ]; then
        dry "$@" >"$slog" 2>&1
    else
        timeout -k 10 $left "$@" >"$slog" 2>&1
    fi
    src=$?
    used=$(($(date +%s) - now))
    echo "[$name: exit $src, $used s${STEP_BOX:+ of a $box s box}]" >>"$LOG"
    if [ "$name" = prepare ]; then cat "$slog" >>"$LOG"; else grep -E "$KEYS" "$slog" | head -n 80 >>"$LOG"; fi
    st=ok
    grep -q '^REFUSED' "$slog" && st=refused
    if [ $src -ne 0 ]; then
        failed=$((failed + 1))
        st="FAILED (exit $src)"
        if [ $src -eq 124 ]; then
            st="TIMED OUT (box $box s)"
            echo "[$name: TIMED OUT at its $box s box]" >>"$LOG"
        fi
        tail -n 20 "$slog" | sed 's/^/    /' >>"$LOG"
    fi
    summary="$summary
  $(printf '%-18s %4s s of %4s s  ' "$name" "$used" "$box")$st"
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

# the older stages' own build (objects and all); the day's prebuilt folder is another
B=${FT_GPU_BUILD:-build/gpu-check-sm$cap}
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

# ---- the day and its report: prebuilt binaries, every step in a box ----------

# The plan must fit its budget before anything runs (a step added or a box
# grown past it is refused here, not discovered at the device's time limit).
case "$stage" in
day | report)
    total=$(plan_total "$stage")
    {
        echo "plan ($stage, in order of value; boxes in seconds):"
        plan_of "$stage" | awk '{ printf "  %-18s %4d s\n", $1, $2 }'
        echo "  total $total s of the $BUDGET s budget"
        echo
    } >>"$LOG"
    if [ "$total" -gt "$BUDGET" ]; then
        echo "gpu_session: PLAN OVER BUDGET: the $stage steps' boxes add up to $total s, more than $BUDGET s" |
            tee -a "$LOG" >&2
        finish 4
    fi ;;
esac

# Sets PRE (the binaries to run): the prebuilt folder when it matches this
# checkout, is for this GPU and runs here; else builds it (16 jobs) in a step
# of its own, whose time comes off the later steps. Says which, either way.
use_prebuilt() {
    PRE=${FT_GPU_PREBUILT:-build/gpu-sm$cap}
    want=$(sources_hash)
    why=""
    if [ ! -f "$PRE/STAMP" ]; then
        why="is not there (no STAMP: make gpu-prebuild not run here, or the folder not carried)"
    else
        have=$(sed -n 's/^sources: //p' "$PRE/STAMP")
        arch=$(sed -n 's/^arch: //p' "$PRE/STAMP")
        if [ "$have" != "$want" ]; then
            why="was built from other sources ($have; this checkout: $want)"
        elif [ "$arch" != "$cap" ]; then
            why="was built for sm_$arch, this GPU is sm_$cap"
        else
            # the CUDA libraries may live elsewhere than on the machine that built it
            if ldd "$PRE/lib/libftengine.so" 2>/dev/null | grep -q 'not found'; then
                nv=$(command -v nvcc 2>/dev/null)
                extra=""
                for d in ${CUDA_HOME:+$CUDA_HOME/lib64} ${nv:+$(dirname "$nv")/../lib64} /usr/local/cuda/lib64 \
                    /usr/local/cuda-13*/lib64; do
                    [ -d "$d" ] && extra="$extra${extra:+:}$d"
                done
                LD_LIBRARY_PATH=$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
                export LD_LIBRARY_PATH
                echo "prebuilt: CUDA libraries not where they were at build time: LD_LIBRARY_PATH=$LD_LIBRARY_PATH" |
                    tee -a "$LOG"
            fi
            if ! v=$("$PRE/bin/ftengine" --version 2>&1); then
                why="does not run here: $(echo "$v" | tail -n 1)"
            fi
        fi
    fi
    if [ -z "$why" ]; then
        echo "prebuilt: using $PRE, no build (sources $want; $(grep -E '^(commit|nvcc|built):' "$PRE/STAMP" |
            tr '\n' ' '))" | tee -a "$LOG"
        echo >>"$LOG"
        return 0
    fi
    echo "prebuilt: $PRE $why: building it now (make -j16 gpu-prebuild); the last steps may not fit" |
        tee -a "$LOG"
    STEP_BOX=300
    step build make -j16 gpu-prebuild GPU_PRE_ARCH="$cap" GPU_PRE="$PRE"
    STEP_BOX=
}

# tstep STEP CMD...: CMD in STEP's box of this stage's plan
tstep() {
    n=$1
    shift
    STEP_BOX=$(box_of "$stage" "$n")
    MIN_LEFT=5
    step "$n" "$@"
    rc_=$?
    STEP_BOX=
    MIN_LEFT=
    return $rc_
}

# the bench lines worth a glance, gathered at the end of the day's log
headline() {
    echo "headline (fp16, batch 1; medians; PyTorch peers beside):"
    for f in "$work"/steps/*; do
        n=$(basename "$f" .log)
        n=${n#[0-9][0-9]-}
        grep -h '^latency ms' "$f" 2>/dev/null | sed "s/^/  $n: /"
        grep -h -E '^[a-z0-9-]+ b[0-9]+ (fp16|fp32|bf16) ' "$f" 2>/dev/null | sed 's/^/  peer: /'
    done
    echo
}

case "$stage" in
day)
    use_prebuilt
    T=$PRE/tests
    TOOL=$PRE/bin/ftengine
    bert="bert-base --device cuda --dtype fp16 --batch 1 --seq 128"
    # 1. correctness on the GPU: each test program run directly
    tstep prepare sh tests/gpu_session.sh info "$PRE"
    tstep ops "$T/test_cuda_ops"
    tstep golden env FT_GOLDEN_MODES=eager,graph,static FT_GOLDEN_DTYPES=fp32,fp16,bf16 "$T/test_golden_all"
    # the per-architecture programs' CUDA tests, the new ones (test_*zoo*) found by name
    more=""
    for f in "$T"/test_*zoo*; do [ -x "$f" ] && more="$more $(basename "$f")/cuda"; done
    # shellcheck disable=SC2086 # a list of program names
    tstep golden-programs sh tests/gpu_session.sh run-tests "$T" test_graph_golden/cuda test_bert/cuda \
        test_funnel_mobilebert/cuda test_resnet_wavlm/cuda test_funnel_factorized/cuda test_golden_variants/cuda $more
    tstep pdl-capture sh tests/gpu_session.sh run-tests "$T" test_cuda_pdl test_graph/cuda test_cuda_gemm_tune/cuda \
        test_plan_info/cuda test_hardening/cuda test_profiler/cuda
    # 2. compute-sanitizer, or the line that says why not
    tstep memcheck sh tests/gpu_session.sh memcheck "$T/test_cuda_ops"
    # 3. headline numbers, each in a process that never loads CUPTI (no --phases)
    # shellcheck disable=SC2086
    for mode in eager graph static; do
        tstep "bert-$mode" "$TOOL" bench $bert --mode "$mode" --iters 200 --warmup 20 --json "$W/bench-bert-base-$mode.json"
    done
    # shellcheck disable=SC2086
    tstep bert-static-nopdl env FT_DISABLE_PDL=1 "$TOOL" bench $bert --mode static --iters 200 --warmup 20 \
        --json "$W/bench-bert-base-static-nopdl.json"
    tstep resnet-static "$TOOL" bench resnet-50 --device cuda --dtype fp16 --batch 1 --mode static --iters 200 \
        --warmup 20 --json "$W/bench-resnet-50-static.json"
    # 4. the framework-tax curve, paper protocol, unprofiled (the report stage adds the overhead)
    tstep sweep "$TOOL" sweep bert-base --device cuda --dtype fp16 --modes eager,graph,static \
        --batches 1,2,4,8,16,32,64,128 --iters 20 --warmup 2 --protocol paper --csv "$W/main-fp16.csv" \
        --json "$W/main-fp16.json"
    # 5. the peers on this GPU, same shapes; torch.compile inside its own box
    tstep peers env PYTHONUNBUFFERED=1 python3 bench/baselines/hf_latency.py --model bert-base --batch 1 --seq 128 \
        --dtype fp16 --peers --compile-box 40 --json "$W/peers-bert-base.json"
    # 6. one profiled static run, in its own process: replay kernels given to plan steps
    # shellcheck disable=SC2086
    tstep profiled "$TOOL" bench $bert --mode static --iters 20 --warmup 5 --phases \
        --trace "$W/trace-bert-base-static.json"
    [ -n "${FT_GPU_DAY_EXTRA_STEP:-}" ] && tstep "${FT_GPU_DAY_EXTRA_STEP%%:*}" true
    headline >>"$LOG" ;;
report)
    # the CUDA report's main group (docs/report.md): its timed sweeps unprofiled,
    # its overhead from separate profiled sweeps (a process that profiled once
    # keeps CUPTI: engine/cupti.c), merged, then rendered with figures
    use_prebuilt
    TOOL=$PRE/bin/ftengine
    R=$W/report
    mkdir -p "$R/profiled"
    tstep prepare sh tests/gpu_session.sh info "$PRE"
    # the day's own unprofiled sweep, when its bundle was carried in the prebuilt folder
    have16=0
    if [ -f "$PRE/day.tar.gz" ] && tar -xzf "$PRE/day.tar.gz" -C "$R" ./main-fp16.csv 2>/dev/null; then
        echo "report: main-fp16 timings from the day's bundle ($PRE/day.tar.gz)" | tee -a "$LOG"
        have16=1
    fi
    tstep report-timing sh tests/gpu_session.sh report-sweeps "$TOOL" "$R" timing $have16
    tstep report-overhead sh tests/gpu_session.sh report-sweeps "$TOOL" "$R/profiled" overhead 0
    tstep report-render sh -c "python3 tests/gpu_merge_overhead.py '$R' '$R/profiled' main-fp16 main-fp32 &&
        python3 bench/report.py --device cuda --dtype fp16 --dir '$R' --only main --no-sweeps \
        --note 'timings from unprofiled sweeps; overhead columns from profiled sweeps in other processes'"
    [ -f "$R/report.md" ] && grep -E '^### F|^Verdict' "$R/report.md" >>"$LOG" ;;
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
