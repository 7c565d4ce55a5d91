#!/bin/sh
# test_install.sh - the library as a user outside the repository meets it:
# the examples run from another directory (default model found or a preset; a
# CUDA failure says why), then `make install PREFIX=<tmp>` and a small program
# compiled and linked through pkg-config, shared (must run with no
# LD_LIBRARY_PATH: the .pc carries an rpath) and static (libftengine.a plus
# Libs.private; must run with the .so removed). Prints "RESULT: P passed,
# F failed, S skipped" (tests/run_tests.sh).
B=${FT_BUILD:-build}
MAKE_CMD=${FT_MAKE:-make}
pass=0; fail=0; skip=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
finish() { echo "RESULT: $pass passed, $fail failed, $skip skipped"; [ -n "$tmp" ] && rm -rf "$tmp"; exit 0; }
root=$(pwd)
case "$B" in /*) ;; *) B="$root/$B" ;; esac
export OMP_NUM_THREADS=1 # a busy 2-core host otherwise slows tiny models 100x
tmp=$(mktemp -d /tmp/ft_test_install_XXXXXX) || { bad "mktemp"; finish; }

# a bare `make` builds the library and the tool (the Makefile's header says so); a
# helper library's rule above `all` once made it the default goal
if (cd "$root" && $MAKE_CMD -pnq 2>/dev/null | grep -qx '.DEFAULT_GOAL := all'); then
    ok "make with no target builds all"
else
    bad "make with no target does not build all (.DEFAULT_GOAL)"
fi

# the examples from a directory that is not the repository root
for ex in bert_forward framework_tax; do
    [ -x "$B/examples/$ex" ] || { echo "  SKIP $ex: not built"; skip=$((skip + 1)); continue; }
    if (cd "$tmp" && FT_GOLDEN_DIR="$root/tests/golden" "$B/examples/$ex" >"$tmp/$ex.log" 2>&1) &&
        grep -q "$root/tests/golden/bert\|BertModel" "$tmp/$ex.log"; then
        ok "$ex from another directory (FT_GOLDEN_DIR)"
    else
        cat "$tmp/$ex.log"; bad "$ex from another directory"
    fi
done
if [ -x "$B/examples/bert_forward" ]; then
    if (cd "$tmp" && env -u FT_GOLDEN_DIR "$B/examples/bert_forward" >"$tmp/bf.log" 2>&1) && grep -q "BertModel" "$tmp/bf.log"; then
        ok "bert_forward from another directory falls back to a preset"
    else
        cat "$tmp/bf.log"; bad "bert_forward without a golden directory"
    fi
    if [ "$("$B/ftengine" version | sed -n 's/^cuda devices: //p')" = 0 ]; then
        (cd "$tmp" && "$B/examples/framework_tax" bert-tiny cuda >"$tmp/fc.log" 2>&1)
        if [ $? -ne 0 ] && grep -q "cannot create a cuda context: [a-zA-Z]" "$tmp/fc.log"; then
            ok "framework_tax says why CUDA cannot be used"
        else
            cat "$tmp/fc.log"; bad "framework_tax's CUDA failure gives no reason"
        fi
    fi
fi
if ! command -v pkg-config >/dev/null 2>&1; then
    echo "  SKIP pkg-config: not installed"; skip=2; finish
fi
if ! $MAKE_CMD -s install PREFIX="$tmp/prefix" BUILD="$B" >"$tmp/install.log" 2>&1; then
    cat "$tmp/install.log"; bad "make install PREFIX=$tmp/prefix"; finish
fi
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cat >"$tmp/prog.c" <<'PROG'
#include <ftengine.h>
#include <stdio.h>
int main(void) {
    ft_ctx *ctx = NULL;
    if (ft_ctx_create(FT_DEVICE_CPU, &ctx) != FT_OK) return 1;
    ft_model_options o = ft_model_options_default();
    o.weights = FT_WEIGHTS_NONE;
    ft_model *m = NULL;
    if (ft_model_load(ctx, "bert-tiny", &o, &m) != FT_OK) { printf("%s\n", ft_ctx_errmsg(ctx)); return 1; }
    printf("linked: %s %lld\n", ft_model_arch(m), (long long)ft_model_param_count(m));
    ft_model_free(m);
    ft_ctx_free(ctx);
    return 0;
}
PROG
CC=${CC:-cc}
# shared: the rpath of Libs finds libftengine.so
if $CC "$tmp/prog.c" -o "$tmp/prog_shared" $(pkg-config --cflags --libs ftengine) 2>"$tmp/cc1.log" &&
    env -u LD_LIBRARY_PATH "$tmp/prog_shared" >"$tmp/run1.log" 2>&1 && grep -q "linked: BertModel" "$tmp/run1.log"; then
    ok "shared link via pkg-config --libs runs"
else
    cat "$tmp/cc1.log" "$tmp/run1.log" 2>/dev/null; bad "shared link via pkg-config --libs"
fi
# static: the archive, then everything it needs from Libs.private
if $CC "$tmp/prog.c" -o "$tmp/prog_static" $(pkg-config --cflags ftengine) "$(pkg-config --variable=staticlib ftengine)" \
        $(pkg-config --static --libs ftengine) 2>"$tmp/cc2.log" &&
    rm -f "$tmp/prefix/lib/libftengine.so" &&
    env -u LD_LIBRARY_PATH "$tmp/prog_static" >"$tmp/run2.log" 2>&1 && grep -q "linked: BertModel" "$tmp/run2.log"; then
    ok "static link via pkg-config --static --libs runs without libftengine.so"
else
    cat "$tmp/cc2.log" "$tmp/run2.log" 2>/dev/null; bad "static link via pkg-config --static --libs"
fi
finish
