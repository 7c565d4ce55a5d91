#!/bin/sh
# test_docs.sh - the docs run as written: every command of the ```sh blocks of
# README.md and docs/*.md (not docs/results/) is run, in order, from a scratch
# directory that looks like the repository root (its entries linked), so files
# the commands write land there. One test per command. The conventions
# (docs/writing_docs.md):
#   - only ```sh / ```bash / ```shell blocks are commands; ```text, ```console,
#     ```c ... are not run. A line ending in "\" continues on the next.
#   - a command whose comment says "needs a GPU" is skipped (run with
#     FT_DOCS_GPU=1 on a GPU machine); "needs the CUDA toolkit" is skipped in a
#     CPU-only build; one whose comment starts "# long" is skipped with its
#     reason (minutes of work that other tests cover). A comment line of its
#     own carrying one of these markers marks every command after it in the fence.
#   - small settings: `ftengine bench|sweep` get --iters 2 --warmup 0 (sweep
#     also --batches 1,2) inserted before the doc's own options, which win;
#     `make bench|sweep` get the same through ARGS=. OMP_NUM_THREADS=1 unless set.
#   - never run here: make test/check (this is make test), make gpu-check,
#     make install (tests/test_install.sh installs into a temporary prefix),
#     git clone and cd (the scratch directory is the clone).
# Prints "RESULT: P passed, F failed, S skipped" (tests/run_tests.sh).
root=$(pwd)
B=${FT_BUILD:-build}
case "$B" in /*) ;; *) B="$root/$B" ;; esac
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
pass=0; fail=0; skip=0
work=$(mktemp -d /tmp/ft_test_docs_XXXXXX) || { echo "RESULT: 0 passed, 1 failed, 0 skipped"; exit 1; }
for e in "$root"/* "$root"/.ci; do
    [ -e "$e" ] || continue
    case "$(basename "$e")" in build) ;; *) ln -s "$e" "$work/" ;; esac
done
ln -s "$B" "$work/build"

files="$root/README.md $(ls "$root"/docs/*.md)"
# one line per command: FILE:LINE<TAB>COMMAND (continuations joined)
cmds="$work/.commands"
for f in $files; do
    awk -v F="${f#$root/}" '
        /^```/ { if (inb) { inb = 0; next }
                 lang = substr($0, 4); inb = 1; mark = ""
                 run = (lang == "sh" || lang == "bash" || lang == "shell"); next }
        !inb || !run { next }
        { line = $0
          if (cont != "") { cur = cur " " line } else { cur = line; at = NR }
          if (cur ~ /\\$/) { sub(/\\$/, "", cur); cont = 1; next }
          cont = ""
          sub(/^[ \t]*\$ /, "", cur)
          # a comment line carrying a marker marks every command after it in the fence
          if (cur ~ /^[ \t]*#/ && cur ~ /needs a GPU|needs the CUDA toolkit|^[ \t]*# long/) {
              mark = cur; sub(/^[ \t]*#[ ]*/, "", mark); next }
          if (cur ~ /^[ \t]*(#.*)?$/) next
          if (mark != "" && cur !~ /#/) cur = cur "  # " mark
          printf "%s:%d\t%s\n", F, at, cur }' "$f"
done >"$cmds"

i=0
while IFS="	" read -r where cmd; do
    i=$((i + 1))
    comment=$(printf '%s' "$cmd" | sed -n 's/^[^#]*#[ ]*//p')
    case "$comment" in
    *"needs a GPU"*)
        if [ "${FT_DOCS_GPU:-0}" != 1 ]; then
            echo "  SKIP $where: needs a GPU: $cmd"; skip=$((skip + 1)); continue
        fi ;;
    *"needs the CUDA toolkit"*)
        if ! "$B/ftengine" version | grep -q '^cuda: yes'; then
            echo "  SKIP $where: a CPU-only build: $cmd"; skip=$((skip + 1)); continue
        fi ;;
    long*)
        echo "  SKIP $where: $comment"; skip=$((skip + 1)); continue ;;
    esac
    case "$cmd" in
    "make test"* | "make check"* | "make gpu-check"* | "make install"* | "git clone"* | "cd "*)
        echo "  SKIP $where: not run by the docs test: $cmd"; skip=$((skip + 1)); continue ;;
    esac
    small=$(printf '%s' "$cmd" | sed \
        -e 's#\(ftengine bench\) #\1 --iters 2 --warmup 0 #g' \
        -e 's#\(ftengine sweep\) #\1 --iters 2 --warmup 0 --batches 1,2 #g' \
        -e 's#^\(make bench\)\( \|$\)#\1 ARGS="--iters 2 --warmup 0" #' \
        -e 's#^\(make sweep\)\( \|$\)#\1 ARGS="--iters 2 --warmup 0 --batches 1,2" #')
    log="$work/.log$i"
    if (cd "$work" && sh -c "$small") >"$log" 2>&1; then
        echo "ok   $where: $cmd"; pass=$((pass + 1))
    else
        echo "FAIL $where: $cmd"
        echo "     ran: $small"
        tail -n 15 "$log" | sed 's/^/     | /'
        fail=$((fail + 1))
    fi
done <"$cmds"

# make bench says so in one line when it falls back to the CPU (README, "Two commands")
if ! nvidia-smi -L >/dev/null 2>&1; then
    if (cd "$work" && make -s bench MODEL=tests/golden/bert ARGS="--iters 1 --warmup 0 --seq 8") >"$work/.fallback" 2>&1 &&
        grep -q "^ftengine: running on the CPU in fp32: " "$work/.fallback"; then
        echo "ok   make bench names its CPU fallback"; pass=$((pass + 1))
    else
        echo "FAIL make bench does not say it fell back to the CPU"; sed 's/^/     | /' "$work/.fallback"
        fail=$((fail + 1))
    fi
fi
rm -rf "$work"
echo "RESULT: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
