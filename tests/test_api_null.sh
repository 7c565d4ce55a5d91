#!/bin/sh
# test_api_null.sh - every function of include/ftengine.h called with NULL in each
# of its pointer arguments, one at a time, the others valid (issue 27). The list
# of functions comes from the header itself (preprocessed, then parsed here), so
# a function added to the header is called too; an argument type this script has
# no valid value for stops the test with its name (add a rule to value_of below).
# Each call runs in a child process of its own (a crash is a failure naming the
# call). Required: no crash; a function returning ft_status answers
# FT_ERR_INVALID_ARG, one returning a tensor NULL, and either records a message in
# the context when the call had one. Pointers that may be NULL by the header's
# own words (an optional bias or mask, default options) are listed in OPTIONAL:
# there only "no crash" is required. Prints "RESULT: P passed, F failed, S skipped".
B=${FT_BUILD:-build}
CC=${CC:-cc}
pass=0; fail=0; skip=0
tmp=$(mktemp -d /tmp/ft_test_api_null_XXXXXX) || { echo "FAIL mktemp"; echo "RESULT: 0 passed, 1 failed, 0 skipped"; exit 1; }
finish() { rm -rf "$tmp"; echo "RESULT: $pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
root=$(pwd)
case "$B" in /*) ;; *) B="$root/$B" ;; esac
if [ ! -f "$B/libftengine.so" ] || [ ! -f include/ftengine.h ]; then
    echo "  SKIP: run from the repository root after make ($B/libftengine.so)"; skip=1; finish
fi

OPTIONAL="ft_ctx_create_ex:opt ft_model_load:opt ft_profiler_create:opt ft_softmax:mask ft_layernorm:gamma
ft_layernorm:beta ft_groupnorm:gamma ft_groupnorm:beta ft_batchnorm:gamma ft_batchnorm:beta ft_linear:bias
ft_attention:mask ft_conv1d:bias ft_conv2d:bias ft_model_example_inputs:owned ft_tensor_describe:t
ft_linear_grouped:bias ft_attention_rel:mask ft_attention_rel:c2p ft_attention_rel:p2c ft_attention_rel:row_scale
ft_conv2d_ex:bias ft_channel_norm:gamma ft_channel_norm:beta ft_softmax_causal:mask ft_attention_causal:mask"

# one line per function: "ret|name|type name|type name..." (brace bodies and typedefs dropped)
$CC -E -P -Iinclude include/ftengine.h >"$tmp/h.i" 2>"$tmp/cc.log" || { cat "$tmp/cc.log"; echo "FAIL preprocess"; fail=1; finish; }
tr '\n' ' ' <"$tmp/h.i" | awk '{
    s = $0; out = ""; depth = 0
    for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "{") depth++; else if (c == "}") depth--; else if (depth == 0) out = out c
    }
    n = split(out, parts, ";")
    for (k = 1; k <= n; k++) {
        p = parts[k]; gsub(/[ \t]+/, " ", p); sub(/^ /, "", p); sub(/ $/, "", p)
        if (p ~ /typedef/ || p !~ /[ *]ft_[a-z0-9_]+ ?\(/) continue
        if (p ~ /^(extern|static)/) continue
        head = p; sub(/\(.*$/, "", head); args = p; sub(/^[^(]*\(/, "", args); sub(/\)$/, "", args)
        name = head; sub(/^.*[ *]/, "", name); ret = substr(head, 1, length(head) - length(name)); sub(/ $/, "", ret)
        line = ret "|" name
        if (args != "void") { m = split(args, a, ","); for (j = 1; j <= m; j++) { t = a[j]; sub(/^ /, "", t); line = line "|" t } }
        print line
    }
}' >"$tmp/protos.txt"
nfun=$(wc -l <"$tmp/protos.txt")
if [ "$nfun" -lt 90 ]; then
    echo "FAIL only $nfun functions parsed from include/ftengine.h"; fail=1; finish
fi

# The C program: setup() makes one of each object; case k is one call.
awk -v optional="$OPTIONAL" -v outdir="$tmp" '
function strip(t) { gsub(/const /, "", t); gsub(/ /, "", t); return t }
function value_of(fn, ty, nm,    t) {
    t = strip(ty)
    if (t == "ft_ctx*") return "ctx"
    if (t == "ft_ctx**") return "&o_ctx"
    if (t == "ft_ctx_options*") return "&copt"
    if (t == "ft_tensor*") return (nm == "ids" || nm == "idx") ? "ids" : "x"
    if (t == "int64_t*" && ty ~ /const/) return "shp"
    if (t == "int*" && ty ~ /const/) return "perm"
    if (t == "void*") return "hbuf"
    if (t == "char*" && ty !~ /const/) return "cbuf"
    if (t == "char*") {
        if (nm == "path" && fn ~ /write/) return "outpath"
        if (nm == "path") return "\"bert-tiny\""
        if (nm == "name") return "\"last_hidden_state\""
        if (fn ~ /mode/) return "\"eager\""  # a valid value, so the parser reaches its output
        return "\"f32\""
    }
    if (t == "ft_dtype*") return "&o_dt"
    if (t == "ft_mode*") return "&o_md"
    if (t == "ft_model*") return "model"
    if (t == "ft_model**") return "&o_model"
    if (t == "ft_model_options*") return "&mopt"
    if (t == "ft_host_tensor*") return ty ~ /const/ ? "hin" : "o_hin"
    if (t == "int*") return "&o_int"
    if (t == "int64_t*") return "&o_i64"
    if (t == "void**") return "&o_owned"
    if (t == "ft_graph_stats*") return "&o_gs"
    if (t == "ft_plan_step_info*") return "&o_psi"
    if (t == "ft_profile_summary*") return "&o_sum"
    if (t == "ft_profile_op*") return "&o_op"
    if (t == "ft_profile_op_stats*") return "&o_ops"
    if (t == "ft_profiler*") return "prof"
    if (t == "ft_profiler**") return "&o_prof"
    if (t == "ft_profiler_options*") return "&popt"
    if (t == "ft_conv2d_opts*") return "&c2o"
    if (t == "int") return nm == "ndim" ? "2" : nm == "n_inputs" ? "n_hin" : "0"
    if (t == "int64_t") return nm == "length" ? "8" : "1"
    if (t == "size_t") return "256"
    if (t == "float") return "1.0f"
    if (t == "double") return "0.0"
    if (t == "ft_dtype") return "FT_DTYPE_F32"
    if (t == "ft_device") return "FT_DEVICE_CPU"
    if (t == "ft_mode") return "FT_MODE_EAGER"
    if (t == "ft_status") return "FT_OK"
    return ""
}
BEGIN {
    n = split(optional, o, /[ \n]+/); for (i = 1; i <= n; i++) opt[o[i]] = 1
    print "#include \"ftengine.h\"\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>"
    print "#include <sys/wait.h>\n#include <unistd.h>"
    print "static ft_ctx *ctx, *o_ctx; static ft_model *model, *o_model; static ft_profiler *prof, *o_prof;"
    print "static ft_tensor *x, *ids; static int64_t shp[FT_MAX_DIMS] = {2, 3, 1, 1, 1, 1};"
    print "static int perm[FT_MAX_DIMS] = {0, 1, 2, 3, 4, 5}; static float hbuf[1024]; static char cbuf[256];"
    print "static ft_dtype o_dt; static ft_mode o_md; static int o_int; static int64_t o_i64; static void *o_owned;"
    print "static ft_ctx_options copt; static ft_model_options mopt; static ft_profiler_options popt;"
    print "static ft_host_tensor hin[8], o_hin[8]; static int n_hin; static void *hin_data;"
    print "static ft_graph_stats o_gs; static ft_plan_step_info o_psi; static ft_profile_summary o_sum;"
    print "static ft_profile_op o_op; static ft_profile_op_stats o_ops; static ft_conv2d_opts c2o;"
    printf "static const char *outpath = \"%s/out.file\";\n", outdir
    print "static int setup(void) {"
    print "    copt = ft_ctx_options_default(); copt.cpu_threads = 1;"
    print "    if (ft_ctx_create_ex(&copt, &ctx) != FT_OK) return 1;"
    print "    mopt = ft_model_options_default(); popt = ft_profiler_options_default();"
    print "    if (ft_profiler_create(ctx, &popt, &prof) != FT_OK) return 2;"
    print "    if (ft_model_load(ctx, \"bert-tiny\", &mopt, &model) != FT_OK) return 3;"
    print "    if (ft_model_example_inputs(model, 1, 8, hin, &n_hin, &hin_data) != FT_OK) return 4;"
    print "    if (ft_profiler_start(prof) != FT_OK || ft_model_forward(model, hin, n_hin) != FT_OK ||"
    print "        ft_profiler_stop(prof) != FT_OK) return 5;"
    print "    float v[6] = {1, 2, 3, 4, 5, 6}; int64_t iv[2] = {0, 1}, s2[1] = {2};"
    print "    x = ft_tensor_from_host(ctx, FT_DTYPE_F32, 2, shp, v);"
    print "    ids = ft_tensor_from_host(ctx, FT_DTYPE_I64, 1, s2, iv);"
    print "    return x && ids ? 0 : 6;"
    print "}"
    print "/* 0 ok, 1 a check failed (printed) */"
    print "static int expect(const char *what, int is_status, int st_ok, int has_ctx, int optional) {"
    print "    if (optional) return 0;"
    print "    if (st_ok) { printf(\"  %s: %s instead of an error\\n\", what, is_status ? \"FT_OK\" : \"a tensor\"); return 1; }"
    print "    if (has_ctx && ft_ctx_status(ctx) != FT_ERR_INVALID_ARG) {"
    print "        printf(\"  %s: the context holds %s, want FT_ERR_INVALID_ARG\\n\", what, ft_status_str(ft_ctx_status(ctx)));"
    print "        return 1; }"
    print "    if (has_ctx && !ft_ctx_errmsg(ctx)[0]) { printf(\"  %s: no message in the context\\n\", what); return 1; }"
    print "    return 0;"
    print "}"
    ncase = 0
}
{
    nf = split($0, f, "|"); ret = f[1]; fn = f[2]; np = nf - 2
    for (i = 1; i <= np; i++) {
        ty[i] = f[i + 2]; nm[i] = ty[i]; sub(/^.*[ *]/, "", nm[i]); tt[i] = substr(ty[i], 1, length(ty[i]) - length(nm[i]))
        if (nm[i] == ty[i]) { tt[i] = ty[i]; nm[i] = "arg" i }
        v[i] = value_of(fn, tt[i], nm[i])
        if (v[i] == "") { printf "#error no valid value for argument %s (%s) of %s: add a rule to tests/test_api_null.sh\n", nm[i], tt[i], fn; next }
    }
    for (k = 1; k <= np; k++) {
        if (tt[k] !~ /\*/) continue
        ncase++
        call = fn "("
        has_ctx = 0
        for (i = 1; i <= np; i++) {
            call = call (i > 1 ? ", " : "") (i == k ? "NULL" : v[i])
            if (i != k && (v[i] == "ctx" || v[i] == "model" || v[i] == "prof")) has_ctx = 1
        }
        call = call ")"
        what = fn "(" nm[k] " = NULL)"
        isopt = (fn ":" nm[k]) in opt
        printf "static int case_%d(void) {\n", ncase
        if (ret == "ft_status") printf "    ft_status st = %s;\n    return expect(\"%s\", 1, st == FT_OK, %d, %d);\n", call, what, has_ctx, isopt
        else if (ret ~ /ft_tensor ?\*/) printf "    ft_tensor *t = %s;\n    return expect(\"%s\", 0, t != NULL, %d, %d);\n", call, what, has_ctx, isopt
        else if (ret == "void") printf "    %s;\n    return 0;\n", call
        else printf "    (void)(%s);\n    return 0;\n", call
        print "}"
        names[ncase] = what
    }
}
END {
    print "typedef int (*case_fn)(void);"
    printf "static const case_fn cases[] = {"
    for (i = 1; i <= ncase; i++) printf "%scase_%d", (i > 1 ? ", " : ""), i
    print "};"
    printf "static const char *const names[] = {"
    for (i = 1; i <= ncase; i++) printf "%s\"%s\"", (i > 1 ? ", " : ""), names[i]
    print "};"
    print "int main(void) {"
    print "    int rc = setup();"
    print "    if (rc) { printf(\"FAIL setup step %d: %s\\n\", rc, ctx ? ft_ctx_errmsg(ctx) : \"no context\"); return 2; }"
    print "    int bad = 0, n = (int)(sizeof cases / sizeof cases[0]);"
    print "    for (int i = 0; i < n; i++) {"
    print "        fflush(stdout);"
    print "        pid_t pid = fork();"
    print "        if (pid == 0) { int r = cases[i](); fflush(stdout); _exit(r); }"
    print "        int status = 0;"
    print "        waitpid(pid, &status, 0);"
    print "        if (WIFSIGNALED(status)) { printf(\"  %s: crashed (signal %d)\\n\", names[i], WTERMSIG(status)); bad++; }"
    print "        else if (WEXITSTATUS(status)) bad++;"
    print "    }"
    print "    printf(\"calls: %d, bad: %d\\n\", n, bad);"
    print "    return bad ? 1 : 0;"
    print "}"
}' "$tmp/protos.txt" >"$tmp/calls.c"

if ! $CC -std=c11 -D_GNU_SOURCE -Iinclude -o "$tmp/calls" "$tmp/calls.c" -L"$B" -lftengine -Wl,-rpath,"$B" -lm \
    >"$tmp/build.log" 2>&1; then
    cat "$tmp/build.log" | head -20
    echo "FAIL the generated calls do not compile (a new argument type? see the #error above)"
    fail=1; finish
fi
echo "  $nfun functions in include/ftengine.h"
if OMP_NUM_THREADS=1 "$tmp/calls" >"$tmp/run.log" 2>&1; then
    sed -n 's/^calls: /  calls: /p' "$tmp/run.log"
    echo "ok   every pointer argument of every public function refuses NULL"
    pass=1
else
    cat "$tmp/run.log" | head -60
    echo "FAIL NULL arguments of the public API"
    fail=1
fi
finish
