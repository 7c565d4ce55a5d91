/*
 * ft_test_env.h - for tests of switches read when a context is created
 * (FT_DISABLE_PDL, FT_GEMM_AUTOTUNE, ...): a context made while one
 * environment variable has a given value, the variable restored after.
 */
#ifndef FT_TEST_ENV_H
#define FT_TEST_ENV_H

#include "ft_test.h"
#include "ftengine.h"

/* A context on dev made while `name` is `value` (NULL: unset); NULL, with the
 * failure recorded, if it cannot be made. */
static __attribute__((unused)) ft_ctx *ft_test_ctx_with_env(ft_device dev, const char *name,
                                                            const char *value) {
    const char *old = getenv(name);
    char keep[256] = "";
    if (old) snprintf(keep, sizeof keep, "%s", old);
    if (value) setenv(name, value, 1);
    else unsetenv(name);
    ft_ctx *c = NULL;
    ft_status st = ft_ctx_create(dev, &c);
    if (old) setenv(name, keep, 1);
    else unsetenv(name);
    CHECK(st == FT_OK && c, "%s context with %s=%s: %s", ft_device_name(dev), name,
          value ? value : "(unset)", ft_status_str(st));
    return st == FT_OK ? c : NULL;
}

#endif /* FT_TEST_ENV_H */
