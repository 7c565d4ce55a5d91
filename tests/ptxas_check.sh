#!/bin/sh
# ptxas_check.sh - kernel resources checked at build time: compiles every
# kernels/cuda/*.cu for sm_90 with `ptxas -v` (device code only, into a temp
# dir), parses the report and fails on
#   - any register spill (spill stores or loads > 0),
#   - a stack frame (local memory: on these kernels, by-value structs indexed at
#     run time) in a kernel not in the allowlist below, which gives the reason,
#   - registers x block size above 65536 (the sm_90 register file of a block,
#     registers allocated in units of 8 per thread), with the block size the
#     kernel is launched with (LIMITS below; 1024, the hardware maximum, for a
#     kernel not listed there),
#   - static + dynamic shared memory above 48 KiB (no kernel here opts in to
#     more with cudaFuncAttributeMaxDynamicSharedMemorySize; sm_90 would allow
#     227 KiB per block with it).
# The report is cached under $FT_BUILD/ptxas/ (default build/) by a hash of
# the kernel sources, the engine headers, this script and the nvcc version, so
# `make lint` recompiles only after a change. Without nvcc it says so and
# passes (and so with NVCC set empty, a CPU-only build). Before the real report,
# the parser is run on a made-up one where each rule must fire (FT_PTXAS_REPORT
# names a report to check instead of compiling). `--table FILE` also writes the per-kernel table (docs/kernels.md).
set -u
table=
[ "${1:-}" = --table ] && table=${2:?--table needs a file}
build=${FT_BUILD:-build}

if [ "${NVCC+set}" = set ] && [ -z "$NVCC" ]; then
    echo "ptxas check: skipped (CPU-only build: NVCC empty)"
    exit 0
fi
nvcc=${NVCC:-$(command -v nvcc 2>/dev/null)}
[ -z "$nvcc" ] && [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] && nvcc=$CUDA_HOME/bin/nvcc
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
    echo "ptxas check: skipped (no nvcc on PATH, in CUDA_HOME or /usr/local/cuda)"
    exit 0
fi

# kernel name (demangled, up to '<' or '(')  threads per block at most  dynamic smem bytes at most
LIMITS='
attention_kernel     128 43520  AT_THREADS; at_smem_floats<128>() * 4 (static_assert <= 48 KiB)
attention_v1_kernel  128 41088  AT_THREADS; at1_smem_floats<4>() * 4 (static_assert <= 48 KiB)
softmax_warp_kernel  128 0      32 * SM_WARPS
softmax_loop_kernel  128 0      32 * SM_WARPS
ln_warp_kernel       128 0      32 * LN_WARPS
attention_rel_kernel 128 47232  AR_THREADS; ar_smem_floats<4>() * 4 (static_assert <= 48 KiB)
'
# awk regex on the demangled kernel name (no spaces; '.' matches one)  reason a stack frame is accepted
ALLOW_STACK='
^ft_k_fused<.*,.long>$  64-bit index instances only (an offset past INT32_MAX, never at the models sizes): the 64-bit division subroutine saves registers on the stack
'

srcs=$(ls kernels/cuda/*.cu)
ver=$("$nvcc" --version | tail -n 1)
key=$( { echo "$ver"; cat "$0" kernels/cuda/*.cu kernels/cuda/*.cuh kernels/cuda/*.h engine/*.h include/*.h; } |
      cksum | tr ' ' '_')
cache=$build/ptxas/report-$key.txt
if [ -n "${FT_PTXAS_REPORT:-}" ]; then
    cache=$FT_PTXAS_REPORT # a given report (the self-test below)
else
    # first, the parser against a made-up report: a spill, an unlisted stack frame, too
    # many registers for the block and too much shared memory must each fail, and a clean
    # kernel must pass (a report format the parser misreads would otherwise pass silently)
    st=$(mktemp -d) || exit 1
    t=$(printf '\t')
    {
        echo "x.cu${t}ptxas info    : Compiling entry function '_Z4k_okPf' for 'sm_90'"
        echo "x.cu${t}ptxas info    : Function properties for _Z4k_okPf"
        echo "x.cu${t}    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
        echo "x.cu${t}ptxas info    : Used 64 registers, used 1 barriers, 1024 bytes smem, 360 bytes cmem[0]"
        for b in spill stack regs smem; do
            m=_Z$((${#b} + 2))k_${b}Pf
            echo "x.cu${t}ptxas info    : Compiling entry function '$m' for 'sm_90'"
            echo "x.cu${t}ptxas info    : Function properties for $m"
            case $b in
            spill) echo "x.cu${t}    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads" ;;
            stack) echo "x.cu${t}    104 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" ;;
            *) echo "x.cu${t}    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" ;;
            esac
            case $b in
            regs) echo "x.cu${t}ptxas info    : Used 65 registers, used 1 barriers, 360 bytes cmem[0]" ;;
            smem) echo "x.cu${t}ptxas info    : Used 16 registers, used 1 barriers, 50000 bytes smem, 360 bytes cmem[0]" ;;
            *) echo "x.cu${t}ptxas info    : Used 16 registers, 360 bytes cmem[0]" ;;
            esac
        done
    } >"$st/report"
    FT_PTXAS_REPORT=$st/report sh "$0" >"$st/out" 2>&1
    rc=$?
    nf=$(grep -c '^ptxas check: x.cu: k_' "$st/out")
    if [ $rc -eq 0 ] || [ "$nf" -ne 4 ] || grep -q 'k_ok' "$st/out" || ! grep -q 'k_spill.*spills' "$st/out" ||
        ! grep -q 'k_stack.*104 B stack' "$st/out" || ! grep -q 'k_regs.*65 registers x 1024' "$st/out" ||
        ! grep -q 'k_smem.*50000 B static' "$st/out"; then
        echo "ptxas check: the parser's self-test failed (exit $rc, $nf of 4 expected failures):"
        cat "$st/out"
        rm -rf "$st"
        exit 1
    fi
    rm -rf "$st"
fi
if [ ! -f "$cache" ]; then
    mkdir -p "$build/ptxas" || exit 1
    tmp=$(mktemp -d) || exit 1
    start=$(date +%s)
    # two at a time: the machines this runs on may have 2 cores
    set -- $srcs
    while [ $# -gt 0 ]; do
        for f in "$1" ${2:+"$2"}; do
            b=$(basename "$f" .cu)
            ( "$nvcc" -cubin -O3 -std=c++17 -Iinclude -Iengine -DFT_WITH_CUDA -arch=sm_90 -Xptxas -v \
                  "$f" -o "$tmp/$b.cubin" >"$tmp/$b.log" 2>&1 || echo "FAILED" >>"$tmp/$b.log" ) &
        done
        wait
        shift; [ $# -gt 0 ] && shift
    done
    : >"$tmp/all"
    bad=0
    for f in $srcs; do
        b=$(basename "$f" .cu)
        if grep -q '^FAILED$' "$tmp/$b.log"; then
            echo "ptxas check: $f did not compile for sm_90:"; cat "$tmp/$b.log"; bad=1
        fi
        sed "s|^|$b.cu\t|" "$tmp/$b.log" >>"$tmp/all"
    done
    if [ $bad -ne 0 ]; then rm -rf "$tmp"; exit 1; fi
    rm -f "$build"/ptxas/report-*.txt # reports of older sources
    mv "$tmp/all" "$cache"
    rm -rf "$tmp"
    echo "ptxas check: compiled $(echo $srcs | wc -w) files for sm_90 in $(( $(date +%s) - start )) s (cached in $cache)"
fi

# one line per kernel: file mangled regs stack spill_st spill_ld smem
rows=$(awk -F'\t' -v q="'" '
    function flush() { if (fn != "") print file, fn, regs + 0, stack + 0, sst + 0, sld + 0, smem + 0 }
    function fname(s) { sub(/.*(entry function|Function properties for) /, "", s); gsub(q, "", s)
                        sub(/ for .*/, "", s); return s }
    $2 ~ /Compiling entry function/ {
        flush(); file = $1; fn = fname($2); props = ""; regs = stack = sst = sld = smem = 0; next }
    $2 ~ /Function properties for/ { props = fname($2); next }
    $2 ~ /bytes stack frame/ && props == fn {
        split($2, w, " "); stack = w[1]; sst = w[5]; sld = w[9]; next }
    $2 ~ /Used [0-9]+ registers/ {
        s = $2; r = s; sub(/.*Used /, "", r); sub(/ registers.*/, "", r); regs = r
        if (s ~ / bytes smem/) { m = s; sub(/ bytes smem.*/, "", m); sub(/.*, /, "", m); smem = m } }
    END { flush() }' "$cache")
if [ -z "$rows" ]; then
    echo "ptxas check: no kernels found in the ptxas report ($cache)"; exit 1
fi
# demangled short names (c++filt from binutils; the mangled name without it)
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
echo "$rows" >"$work/rows"
if command -v c++filt >/dev/null 2>&1; then
    awk '{print $2}' "$work/rows" | c++filt | sed 's/^void //; s/(.*//' >"$work/names"
else
    awk '{print $2}' "$work/rows" >"$work/names"
fi

report=$(paste -d '\t' "$work/rows" "$work/names" |
    awk -F'\t' -v limits="$LIMITS" -v allow="$ALLOW_STACK" '
    BEGIN {
        n = split(limits, L, "\n")
        for (i = 1; i <= n; i++) { if (split(L[i], f, " ") >= 3) { thr[f[1]] = f[2]; dyn[f[1]] = f[3] } }
        n = split(allow, A, "\n")
        na = 0
        for (i = 1; i <= n; i++) { if (split(A[i], f, " ") >= 2) ok_re[++na] = f[1] }
    }
    {
        split($1, v, " "); file = v[1]; regs = v[3]; stack = v[4]; sst = v[5]; sld = v[6]; smem = v[7]
        name = $2; base = name; sub(/<.*/, "", base)
        t = (base in thr) ? thr[base] : 1024; d = (base in dyn) ? dyn[base] : 0
        r8 = int((regs + 7) / 8) * 8
        why = ""
        if (sst > 0 || sld > 0) why = why sprintf(" spills (%d B stores, %d B loads);", sst, sld)
        allowed = 0
        for (i = 1; i <= na; i++) if (name ~ ok_re[i]) allowed = 1
        if (stack > 0 && !allowed) why = why sprintf(" %d B stack frame (not allowlisted);", stack)
        if (r8 * t > 65536) why = why sprintf(" %d registers x %d threads > 65536;", regs, t)
        if (smem + d > 49152) why = why sprintf(" %d B static + %d B dynamic shared memory > 48 KiB;", smem, d)
        printf "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", file, name, regs, smem, d, stack, sst, sld, t, why
    }')

n=$(echo "$report" | wc -l)
nstack=$(echo "$report" | awk -F'\t' '$6 > 0' | wc -l)
nspill=$(echo "$report" | awk -F'\t' '$7 > 0 || $8 > 0' | wc -l)
maxreg=$(echo "$report" | awk -F'\t' '$3 > m { m = $3 } END { print m + 0 }')
fails=$(echo "$report" | awk -F'\t' '$10 != "" { printf "ptxas check: %s: %s:%s\n", $1, $2, $10 }')

if [ -n "$table" ]; then
    {
        echo "# Kernel resources on sm_90"
        echo
        echo "Generated by \`sh tests/ptxas_check.sh --table docs/kernels.md\` from \`ptxas -v\`"
        echo "($ver, \`-O3 -arch=sm_90\`): every kernel instance the CUDA backend compiles."
        echo "\`make lint\` and \`make test\` run the same check (cached by a hash of the sources in"
        echo "build/ptxas/) and fail on any spill, on a stack frame outside the allowlist, on"
        echo "registers x block size over 65536 and on shared memory over 48 KiB; the block size is"
        echo "the largest the launcher uses (the script's LIMITS, else 1024), the dynamic shared"
        echo "memory the largest it asks for. The kernels that took shape/stride structs by value and"
        echo "indexed them at run time (a local-memory copy each) now take them \`__grid_constant__\`,"
        echo "read in place from parameter memory. Stack frames accepted, with the reason:"
        echo
        echo "$ALLOW_STACK" | awk 'NF { re = $1; $1 = ""; printf "- `%s`:%s\n", re, $0 }'
        echo
        echo "$n kernels, $nstack with a stack frame, $nspill spilling, at most $maxreg registers per thread."
        echo
        echo "| file | kernel | registers | static smem (B) | dynamic smem (B, max) | stack (B) | spill st/ld (B) | threads/block (max) |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|"
        echo "$report" | sort -t "$(printf '\t')" -k1,1 -k2,2 |
            awk -F'\t' '{ printf "| %s | `%s` | %d | %d | %d | %d | %d/%d | %d |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }'
    } >"$table"
    echo "ptxas check: wrote $table"
fi

if [ -n "$fails" ]; then
    echo "$fails"
    echo "ptxas check: FAILED ($n kernels; $(echo "$fails" | wc -l) over their limits)"
    exit 1
fi
echo "ptxas check: ok ($n kernels on sm_90: 0 spills, $nstack stack frames, all allowlisted, max $maxreg registers)"
