/*
 * vmath.h - float exp, erf/erfc, tanh, sigmoid and the GELUs as branch-free
 * polynomials that gcc vectorises inside a `#pragma omp simd` loop (libm's
 * expf/erff/tanhf are calls it cannot vectorise). Internal to kernels/cpu.
 *
 * Every function is a select between whole computed branches (no early
 * returns), so a loop over them becomes straight vector code. Accuracy,
 * measured against double libm over dense grids by tests/test_vmath_cpu.c:
 * exp within 2 ulp, erf/erfc/tanh/sigmoid/GELU within ~4e-7 relative
 * (where the value is not below 1e-30). NaN in gives NaN out; +-inf give the
 * limits (exp(-inf) = 0 exactly, erf(+-inf) = +-1, tanh(+-inf) = +-1).
 *
 * The coefficients were fitted for this file with mpmath.chebyfit (near-minimax
 * Chebyshev least squares in extended precision):
 *   exp:  e^r = 1 + r + r^2 P(r) on [-ln2/2, ln2/2], P of degree 5;
 *   erf:  erf(x) = x P(x^2) on |x| < 1, P of degree 7;
 *   erfc: erfc(a) = exp(-a^2) Q(t), t = 1/(1 + a/2), on a in [1, 10], Q of degree 9;
 *   tanh: tanh(u) = u + u^3 P(u^2) on |u| < 0.625, P of degree 5.
 */
#ifndef FT_CPU_VMATH_H
#define FT_CPU_VMATH_H

#include <stdint.h>

#if defined(__GNUC__)
#define FT_VM_INLINE static inline __attribute__((always_inline))
#else
#define FT_VM_INLINE static inline
#endif

typedef union ft_vm_bits {
    float f;
    uint32_t u;
} ft_vm_bits;

FT_VM_INLINE float ft_vm_from_bits(uint32_t u) {
    ft_vm_bits b;
    b.u = u;
    return b.f;
}

FT_VM_INLINE uint32_t ft_vm_to_bits(float f) {
    ft_vm_bits b;
    b.f = f;
    return b.u;
}

FT_VM_INLINE float ft_vm_abs(float x) { return ft_vm_from_bits(ft_vm_to_bits(x) & 0x7fffffffu); }

/* |m| with the sign of s */
FT_VM_INLINE float ft_vm_copysign(float m, float s) {
    return ft_vm_from_bits((ft_vm_to_bits(m) & 0x7fffffffu) | (ft_vm_to_bits(s) & 0x80000000u));
}

/* e^x. The argument is clamped to [-104, 89] (NaN passes the clamps: every
 * comparison with it is false), split as n ln2 + r with Cody-Waite, and 2^n
 * applied as two factors 2^(n/2) 2^(n - n/2) so the results from FLT_MAX
 * overflow (inf) down through the subnormals come out right without a branch. */
FT_VM_INLINE float ft_vexpf(float x) {
    const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float xc = x < -104.0f ? -104.0f : x;
    xc = xc > 89.0f ? 89.0f : xc;
    float t = xc * 1.44269504088896341f + shifter;
    float n = t - shifter;
    /* n as an integer: the low mantissa bits of t (unsigned arithmetic: no overflow
     * for the NaN bit patterns, whose result is discarded by the NaN in r) */
    int32_t ni = (int32_t)(ft_vm_to_bits(t) - ft_vm_to_bits(shifter));
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.989098087e-04f;
    p = p * r + 1.393364103e-03f;
    p = p * r + 8.333310934e-03f;
    p = p * r + 4.166646501e-02f;
    p = p * r + 1.666666668e-01f;
    p = p * r + 5.000000013e-01f;
    p = p * (r * r) + r + 1.0f;
    int32_t n1 = ni >> 1, n2 = ni - n1; /* (arithmetic shift: floor) */
    float s1 = ft_vm_from_bits((uint32_t)(n1 + 127) << 23);
    float s2 = ft_vm_from_bits((uint32_t)(n2 + 127) << 23);
    return p * s1 * s2;
}

/* erf(x) / x as a polynomial in u = x^2, for |x| < 1 */
FT_VM_INLINE float ft_verf_small(float u) {
    float p = -9.667044571e-06f;
    p = p * u + 1.126595903e-04f;
    p = p * u + -8.484080406e-04f;
    p = p * u + 5.221031808e-03f;
    p = p * u + -2.686543073e-02f;
    p = p * u + 1.128378250e-01f;
    p = p * u + -3.761263847e-01f;
    p = p * u + 1.128379167e+00f;
    return p;
}

/* erfc(a) for a >= 1; 0 past 10, where erfc is below 2e-45 (so that erfc(inf)
 * is 0 exactly and GELU(-inf) is -inf * 0 = NaN, as the double formula gives) */
FT_VM_INLINE float ft_verfc_big(float a) {
    float ac = a > 10.0f ? 10.0f : a;
    float t = 1.0f / (1.0f + 0.5f * ac);
    float q = -7.176861309e-02f;
    q = q * t + 3.425167233e-01f;
    q = q * t + -5.988079135e-01f;
    q = q * t + 3.971141816e-01f;
    q = q * t + -1.039698909e-01f;
    q = q * t + 2.343444065e-01f;
    q = q * t + 2.349637172e-01f;
    q = q * t + 2.836398999e-01f;
    q = q * t + 2.819789204e-01f;
    q = q * t + 3.805085046e-06f;
    float e = ft_vexpf(-ac * ac) * q;
    return a > 10.0f ? 0.0f : e;
}

FT_VM_INLINE float ft_verff(float x) {
    float a = ft_vm_abs(x);
    float small = x * ft_verf_small(x * x);
    float big = ft_vm_copysign(1.0f - ft_verfc_big(a), x);
    return a < 1.0f ? small : big; /* NaN: the big branch, NaN */
}

/* erfc(x), accurate relative to its value also where it is tiny (x large) */
FT_VM_INLINE float ft_verfcf(float x) {
    float a = ft_vm_abs(x);
    float small = 1.0f - x * ft_verf_small(x * x);
    float e = ft_verfc_big(a);
    float big = x > 0.0f ? e : 2.0f - e;
    big = x != x ? x : big;
    return a < 1.0f ? small : big;
}

FT_VM_INLINE float ft_vtanhf(float x) {
    float a = ft_vm_abs(x);
    float u = x * x;
    float p = 2.292744816e-03f;
    p = p * u + -8.343945516e-03f;
    p = p * u + 2.176891865e-02f;
    p = p * u + -5.395925958e-02f;
    p = p * u + 1.333330356e-01f;
    p = p * u + -3.333333317e-01f;
    float small = x + x * u * p;
    float big = ft_vm_copysign(1.0f - 2.0f / (ft_vexpf(2.0f * a) + 1.0f), x);
    return a < 0.625f ? small : big;
}

FT_VM_INLINE float ft_vsigmoidf(float x) { return 1.0f / (1.0f + ft_vexpf(-x)); }

/* x Phi(x) = x/2 erfc(-x/sqrt2): no cancellation in 1 + erf for negative x */
FT_VM_INLINE float ft_vgeluf(float x) { return 0.5f * x * ft_verfcf(-0.70710678118654752f * x); }

/* x/2 (1 + tanh(u)) = x sigmoid(2u): no cancellation for negative x */
FT_VM_INLINE float ft_vgelu_tanhf(float x) {
    float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return x * ft_vsigmoidf(2.0f * u);
}

/* NaN stays NaN, as the RELU op and torch.relu */
FT_VM_INLINE float ft_vreluf(float x) { return x > 0.0f || x != x ? x : 0.0f; }

/* min(max(x, 0), 6), NaN kept (torch.nn.ReLU6) */
FT_VM_INLINE float ft_vrelu6f(float x) {
    float c = x < 0.0f ? 0.0f : x;
    c = c > 6.0f ? 6.0f : c;
    return x != x ? x : c;
}

/* x sigmoid(x) = x / (1 + e^-x): 0 (signed) for large negative x, x for large positive */
FT_VM_INLINE float ft_vsiluf(float x) { return x / (1.0f + ft_vexpf(-x)); }

#endif /* FT_CPU_VMATH_H */
