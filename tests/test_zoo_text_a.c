/*
 * test_zoo_text_a.c - RobertaModel, AlbertModel and GPT2Model end to end.
 */
#include "ft_golden.h"
#include "ft_test.h"

#include "ftengine.h"

static const char *const req_pooled[] = {"last_hidden_state", "pooler_output", NULL};
static const char *const req_plain[] = {"last_hidden_state", NULL};

typedef struct zoo_case {
    const char *name;
    const char *const *required;
} zoo_case;

static const zoo_case cases[] = {
    {"roberta", req_pooled},
    {"albert", req_pooled},
    {"gpt2", req_plain},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static const ft_mode modes[] = {FT_MODE_EAGER, FT_MODE_GRAPH, FT_MODE_STATIC};

static void test_golden_cpu_fp32(void) {
    for (int c = 0; c < N_CASES; c++)
        for (int k = 0; k < 3; k++)
            golden_run_check(cases[c].name, FT_DEVICE_CPU, modes[k], FT_DTYPE_F32, cases[c].required, GOLDEN_FP32);
}

int main(void) {
    RUN(test_golden_cpu_fp32);
    return ft_test_finish();
}
