/*
 * help.c - what the ftengine tool knows about its own command line: one table
 * of commands (synopsis, summary) and one table of options (which commands take
 * them, their value, their default). From these come `ftengine CMD --help`, the
 * one usage line printed with a usage error, the refusal of an option a command
 * does not take, `--flag=value`, and the "did you mean" suggestions.
 *
 * Adding an option: one row in cli_options[] below (the commands it applies to,
 * space-separated), plus the branch in parse() (tools/cli.c) that stores its value.
 * An option without a row is refused by every command as unknown.
 */
#include "cli.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct cli_command {
    const char *name;
    const char *synopsis; /* after "ftengine " */
    int max_positional;   /* MODEL and the like */
    const char *summary;
} cli_command;

static const cli_command cli_commands[] = {
    {"run", "run MODEL --inputs IN.safetensors --out OUT.safetensors [options]", 1,
     "One forward of MODEL on the inputs of a safetensors file; writes the outputs (F32) to another."},
    {"info", "info MODEL [--batch B] [--seq S]  |  info --presets", 1,
     "Architecture, parameter count and MACs of one forward, read from the config alone (no weights\n"
     "are loaded); --presets lists the built-in preset names."},
    {"bench", "bench MODEL [options]", 1,
     "Latency of MODEL's forward on the architecture's example inputs (random ids, images, audio):\n"
     "median, mean, min and p90 of --iters forwards timed one by one (forward + device sync)."},
    {"sweep", "sweep MODEL [options]  |  sweep --models LIST [options]", 1,
     "The framework-tax curve: latency (and kernels per forward) for every mode and batch size, in\n"
     "interleaved rounds (each round visits every point once, in a seeded shuffled order); the\n"
     "summary gives each point's median over rounds with its confidence interval."},
    {"plan", "plan MODEL [options]", 1,
     "One graph-mode (or static) forward on the example inputs, then its plan step by step."},
    {"version", "version", 0, "The version and the features compiled in (CUDA, cuBLASLt, CUPTI, NVTX)."},
};
#define N_COMMANDS (int)(sizeof cli_commands / sizeof cli_commands[0])

typedef struct cli_option {
    const char *name;     /* "--iters" */
    const char *value;    /* what it takes ("N"), or NULL for a flag */
    const char *commands; /* the commands taking it, space-separated */
    const char *help;     /* one line, with the default */
} cli_option;

static const cli_option cli_options[] = {
    {"--inputs", "IN.safetensors", "run", "model inputs by Hugging Face name (input_ids, pixel_values, ...)"},
    {"--out", "OUT.safetensors", "run", "where the outputs go (written to a temporary name, renamed on success)"},
    {"--presets", NULL, "info", "list the built-in presets"},
    {"--device", "cpu|cuda", "run bench sweep plan", "device (default cpu)"},
    {"--mode", "eager|graph|static", "run bench", "execution mode (default eager)"},
    {"--mode", "graph|static", "plan", "the plan to print (default graph; eager has no plan)"},
    {"--modes", "LIST", "sweep", "comma-separated modes (default eager,graph,static)"},
    {"--dtype", "fp32|fp16|bf16", "run bench sweep plan", "weights and activations (default fp32)"},
    {"--batch", "B", "info bench plan", "batch size (default 1)"},
    {"--batches", "LIST", "sweep", "comma-separated batch sizes (default 1,2,4,8,16,32,64,128)"},
    {"--seq", "S", "info bench sweep plan",
     "input length: tokens (text), image side (vision), samples (speech);\n"
     "default the architecture's: 128 tokens, 224 pixels, 32000 samples"},
    {"--warmup", "N", "bench", "untimed forwards after the first call (default 5)"},
    {"--warmup", "N", "sweep", "untimed forwards after each visit's first call (default 5)"},
    {"--iters", "N", "bench", "timed forwards (default 20)"},
    {"--iters", "N", "sweep", "timed forwards per point and round (default 20)"},
    {"--protocol", "paper|sync", "bench sweep",
     "sync: each forward timed alone with a device sync (default);\n"
     "paper: back to back, one sync, the mean (Fernandez et al.'s harness)"},
    {"--overhead", NULL, "sweep",
     "a profiled pass per visit: kernel time vs dispatch/host time, the overhead share of wall time"},
    {"--rounds", "N", "sweep", "rounds; each visits every point once, order shuffled per round (default 3)"},
    {"--seed", "N", "sweep", "the seed of the rounds' order, recorded in every row (default 1)"},
    {"--models", "LIST", "sweep",
     "several models in the same rounds: comma-separated MODEL or MODEL@LENGTH (instead of MODEL)"},
    {"--hidden-states", NULL, "run", "also write hidden_states.N"},
    {"--profile", NULL, "run", "print the forward's time, memory and graph/plan costs"},
    {"--phases", NULL, "run bench", "print the profiler's overhead metrics and per-phase/per-op tables"},
    {"--trace", "FILE.json", "run bench", "write a Chrome/Perfetto trace of the profiled forwards"},
    {"--ops-csv", "FILE.csv", "run bench", "write the profiler's per-op records as CSV (one row per op call)"},
    {"--csv", "FILE.csv", "run bench", "old name of --ops-csv (still accepted, with a note)"},
    {"--csv", "FILE.csv", "sweep", "write one row per (mode, batch) point, flushed as each finishes"},
    {"--resume", NULL, "sweep", "keep the points already in --csv measured by this commit and device"},
    {"--json", "FILE.json", "bench sweep", "write a machine-readable summary (statistics, config, provenance)"},
    {"--threads", "N", "run bench sweep plan", "OpenMP threads of the CPU device (default: OpenMP's, see the header)"},
    {"--op-cost-us", "N", "run bench", "emulate a slower framework: N us of host work per eager op (default 0)"},
    {"--op-cost-us", "LIST", "sweep",
     "emulated host cost per eager op, us; a list is one more axis of points (default none)"},
    {"--step-cost-us", "N", "run bench",
     "emulate a graph interpreter (TorchScript-like): N us of host work\nper graph-mode step (default 0)"},
    {"--step-cost-us", "LIST", "sweep",
     "emulated host cost per graph-mode step, us; a list goes side by side with --op-cost-us's"},
    {"--mem-limit", "BYTES", "run bench sweep plan", "cap the device allocator (suffix K, M or G; default none)"},
};
#define N_OPTIONS (int)(sizeof cli_options / sizeof cli_options[0])

static const char *cur_command; /* set by ft_cli_prepare; usage() prints its line */

static const cli_command *find_command(const char *name) {
    for (int i = 0; name && i < N_COMMANDS; i++)
        if (!strcmp(cli_commands[i].name, name)) return &cli_commands[i];
    return NULL;
}

static int applies(const cli_option *o, const char *cmd) {
    size_t n = strlen(cmd);
    for (const char *p = o->commands; (p = strstr(p, cmd)) != NULL; p += n)
        if ((p == o->commands || p[-1] == ' ') && (p[n] == ' ' || !p[n])) return 1;
    return 0;
}

/* The row of `name` for cmd; else (via *other) whether another command takes it. */
static const cli_option *find_option(const char *cmd, const char *name, int *other) {
    *other = 0;
    for (int i = 0; i < N_OPTIONS; i++)
        if (!strcmp(cli_options[i].name, name)) {
            if (applies(&cli_options[i], cmd)) return &cli_options[i];
            *other = 1;
        }
    return NULL;
}

/* Edit distance with transpositions (optimal string alignment), for the suggestions:
 * "bnech" is one step from "bench". Short strings only. */
int ft_cli_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 1 << 20;
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

/* Keeps the closest candidate: close means at most a third of the word's letters off. */
static void consider(const char *word, const char *cand, const char **best, int *best_d) {
    int d = ft_cli_edit_distance(word, cand);
    int limit = (int)strlen(word) / 3 > 1 ? (int)strlen(word) / 3 : 1;
    if (d > 0 && d <= limit && d < *best_d) {
        *best = cand;
        *best_d = d;
    }
}

int ft_cli_suggest_model(const char *path, char *buf, size_t size) {
    const char *best = NULL;
    int best_d = 1 << 20;
    for (int i = 0; ft_preset_name(i); i++) consider(path, ft_preset_name(i), &best, &best_d);
    if (best) {
        snprintf(buf, size, "%s", best);
        return 1;
    }
    /* a directory: its siblings, when the parent exists */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') dir[--n] = '\0';
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : dir;
    const char *parent = slash ? (slash == dir ? "/" : dir) : ".";
    if (slash && slash != dir) *slash = '\0';
    DIR *d = opendir(parent);
    if (!d) return 0;
    char found[256] = "";
    best_d = 1 << 20;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        const char *b = NULL;
        int bd = best_d;
        consider(base, e->d_name, &b, &bd);
        if (b && bd < best_d) {
            best_d = bd;
            snprintf(found, sizeof found, "%s", e->d_name);
        }
    }
    closedir(d);
    if (!found[0]) return 0;
    if (!slash) snprintf(buf, size, "%s", found);
    else if (slash == dir) snprintf(buf, size, "/%s", found);
    else snprintf(buf, size, "%s/%s", dir, found);
    return 1;
}

void ft_cli_print_usage_all(FILE *f) {
    fputs("usage:\n", f);
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  ftengine %s\n", cli_commands[i].synopsis);
    fputs("MODEL is a directory holding config.json and model.safetensors, or a preset name\n"
          "(ftengine info --presets lists them). ftengine COMMAND --help lists a command's options.\n",
          f);
}

void ft_cli_print_usage_line(FILE *f) {
    const cli_command *c = find_command(cur_command);
    if (!c) {
        ft_cli_print_usage_all(f);
        return;
    }
    fprintf(f, "usage: ftengine %s\n", c->synopsis);
    if (c->max_positional || strchr(c->synopsis, '['))
        fprintf(f, "(ftengine %s --help lists its options and their defaults)\n", c->name);
}

static void print_help(const cli_command *c) {
    printf("usage: ftengine %s\n\n%s\n", c->synopsis, c->summary);
    if (c->max_positional)
        printf("MODEL is a directory holding config.json and model.safetensors, or a preset name\n"
               "(ftengine info --presets lists them).\n");
    printf("\noptions (--opt VALUE or --opt=VALUE):\n");
    for (int i = 0; i < N_OPTIONS; i++) {
        const cli_option *o = &cli_options[i];
        if (!applies(o, c->name)) continue;
        char head[64];
        snprintf(head, sizeof head, "%s%s%s", o->name, o->value ? " " : "", o->value ? o->value : "");
        printf("  %-28s ", head);
        for (const char *p = o->help; *p; p++) {
            putchar(*p);
            if (*p == '\n') printf("  %-28s ", "");
        }
        putchar('\n');
    }
    printf("  %-28s %s\n", "-h, --help", "this help");
    if (!strcmp(c->name, "bench") || !strcmp(c->name, "sweep") || !strcmp(c->name, "run"))
        printf("\nOn the CPU device the OpenMP thread count matters: OMP_NUM_THREADS=1 gives stable\n"
               "times on a busy host (README.md, \"CPU timing\").\n");
    printf("Results go to stdout; errors (exit 1) and usage errors (exit 2) to stderr.\n");
}

int ft_cli_prepare(const char *cmd, int *argc, char ***argv) {
    const cli_command *c = find_command(cmd);
    cur_command = c ? c->name : NULL;
    if (!c) {
        const char *best = NULL;
        int bd = 1 << 20;
        for (int i = 0; i < N_COMMANDS; i++) consider(cmd, cli_commands[i].name, &best, &bd);
        if (best) return usage("unknown command '%s': did you mean %s?", cmd, best);
        return usage("unknown command '%s'", cmd);
    }
    int n = *argc;
    char **in = *argv;
    char **out = (char **)calloc((size_t)(2 * n + 1), sizeof *out);
    if (!out) return fail("out of host memory");
    int k = 0, positional = 0;
    for (int i = 0; i < n; i++) {
        char *a = in[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_help(c);
            free(out);
            return -1;
        }
        if (a[0] != '-' || !a[1]) {
            if (++positional > c->max_positional) {
                free(out);
                return usage("unexpected argument '%s'", a);
            }
            out[k++] = a;
            continue;
        }
        char *eq = strchr(a, '=');
        if (eq && a[1] == '-') *eq = '\0'; /* --flag=value: argv strings are ours to edit */
        else eq = NULL;
        int other = 0;
        const cli_option *o = find_option(c->name, a, &other);
        if (!o) {
            int unknown = !other;
            const char *best = NULL;
            int bd = 1 << 20;
            for (int j = 0; unknown && j < N_OPTIONS; j++)
                if (applies(&cli_options[j], c->name)) consider(a, cli_options[j].name, &best, &bd);
            free(out);
            if (!unknown) return usage("option %s does not apply to '%s'", a, c->name);
            if (best) return usage("unknown option '%s': did you mean %s?", a, best);
            return usage("unknown option '%s'", a);
        }
        out[k++] = a;
        if (eq && !o->value) {
            free(out);
            return usage("option %s takes no value", a);
        }
        if (eq) out[k++] = eq + 1;
        else if (o->value && i + 1 < n) out[k++] = in[++i]; /* the value, even one starting with '-' */
    }
    out[k] = NULL;
    *argc = k;
    *argv = out;
    return 0;
}

int ft_cli_help(int argc, char **argv) {
    const cli_command *c = argc > 0 ? find_command(argv[0]) : NULL;
    if (argc > 0 && !c) {
        cur_command = NULL;
        return usage("unknown command '%s'", argv[0]);
    }
    if (c) print_help(c);
    else ft_cli_print_usage_all(stdout);
    return 0;
}
