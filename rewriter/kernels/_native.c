/*
 * rewriter.kernels._native -- exact ReduceProd kernel.
 *
 * Entry point (called by rewriter/kernels/__init__.py, which does all argument
 * checking and layout canonicalisation):
 *
 *   reduce(inp, out, code, dims, mask, mode, nthreads) -> number of overflowed outputs
 *
 *   inp   C-contiguous buffer of raw element bits (floats are passed as the unsigned
 *         integer view of the same width, bfloat16/float16 as uint16)
 *   out   writable C-contiguous buffer, one element per output (same raw type)
 *   code  0 f32, 1 f64, 2 f16, 3 bf16, 4 i32, 5 i64, 6 u32, 7 u64
 *   dims  tuple of the input dims (all > 0), mask tuple of 0/1 (1 = reduced)
 *   mode  0 wrap, 1 saturate (integers only)
 *
 * Floats: tier 1 multiplies in double with the exponent stripped every G elements
 * (the partial products of G inputs cannot leave the normal double range), giving a
 * value m*2^E with a proven relative error bound; if the result is not provably on
 * one side of a rounding boundary, tier 2 recomputes that output in double-double
 * (error ~2^-100 per element), and tier 3 computes the exact product of the integer
 * mantissas as a multi-precision integer and rounds it once.
 * Integers: product of magnitudes mod 2^64 plus a sticky "magnitude exceeded 2^64"
 * flag and the sign parity; overflow is decided exactly at the end.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>
#include <pthread.h>
#include <unistd.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(REWRITER_NO_CLONES)
#define HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HOT
#endif

enum { T_F32 = 0, T_F64, T_F16, T_BF16, T_I32, T_I64, T_U32, T_U64 };
#define MAXB 64
#define G 6 /* elements multiplied between renormalisations */

typedef struct { int p, emin, emax; uint64_t inf, qnan; } ffmt_t;
static const ffmt_t FMT[4] = {
    {24, -126, 127, 0x7f800000ULL, 0x7fc00000ULL},
    {53, -1022, 1023, 0x7ff0000000000000ULL, 0x7ff8000000000000ULL},
    {11, -14, 15, 0x7c00ULL, 0x7e00ULL},
    {8, -126, 127, 0x7f80ULL, 0x7fc0ULL},
};
static const int ESIZE[8] = {4, 8, 2, 2, 4, 8, 4, 8};

typedef double vd __attribute__((vector_size(64)));
typedef int64_t vl __attribute__((vector_size(64)));
typedef uint64_t vu __attribute__((vector_size(64)));
typedef float vf8 __attribute__((vector_size(32)));
typedef uint32_t vi8 __attribute__((vector_size(32)));
typedef uint16_t vh8 __attribute__((vector_size(16)));

/* ------------------------------------------------------------------ plan */
typedef struct {
    int nb;
    int64_t size[MAXB], istr[MAXB], ostr[MAXB];
    int red[MAXB];
    int64_t nout, nred, total;
} plan_t;

typedef struct {
    double *m, *l; int64_t *e; uint64_t *f;    /* float state: (m + l) * 2^e */
} state_t;

/* ------------------------------------------------------------ helpers */
static inline uint64_t dbits(double d) { uint64_t b; memcpy(&b, &d, 8); return b; }
static inline double bitsd(uint64_t b) { double d; memcpy(&d, &b, 8); return d; }

static inline double renorm(double a, int64_t *e, uint64_t *f) {
    uint64_t b = dbits(a), fld = (b >> 52) & 0x7ff;
    *f |= ((fld - 1) | (fld + 1)) >> 11; /* zero / inf / nan seen */
    *e += (int64_t)fld - 1023;
    return bitsd((b & 0x800fffffffffffffULL) | 0x3ff0000000000000ULL);
}
static inline vd vrenorm(vd a, vl *e, vu *f) {
    vu b = (vu)a, fld = (b >> 52) & 0x7ff;
    *f |= ((fld - 1) | (fld + 1)) >> 11;
    *e += (vl)fld - 1023;
    return (vd)((b & 0x800fffffffffffffULL) | 0x3ff0000000000000ULL);
}

/* Loads: f32 and bf16 are converted exactly; f16 is converted to value*2^-112
 * (exact for normals and subnormals), inf/nan flagged, and 112 per element added
 * to the exponent at the end. */
static inline vd ld8_f32(const void *p, vi8 *fl) { (void)fl; vf8 v; memcpy(&v, p, 32); return __builtin_convertvector(v, vd); }
static inline vd ld8_bf16(const void *p, vi8 *fl) {
    (void)fl; vh8 h; memcpy(&h, p, 16);
    vi8 w = __builtin_convertvector(h, vi8) << 16;
    return __builtin_convertvector((vf8)w, vd);
}
static inline vd ld8_f16(const void *p, vi8 *fl) {
    vh8 h; memcpy(&h, p, 16);
    vi8 w = __builtin_convertvector(h, vi8);
    *fl |= ((w & 0x7c00) + 0x400) >> 15;
    vi8 b = ((w & 0x7fff) << 13) | ((w & 0x8000) << 16);
    return __builtin_convertvector((vf8)b, vd);
}
static inline double ld1_f32(const void *p, uint64_t *fl) { (void)fl; float v; memcpy(&v, p, 4); return v; }
static inline double ld1_bf16(const void *p, uint64_t *fl) {
    (void)fl; uint16_t h; memcpy(&h, p, 2); uint32_t w = (uint32_t)h << 16; float v; memcpy(&v, &w, 4); return v;
}
static inline double ld1_f16(const void *p, uint64_t *fl) {
    uint16_t h; memcpy(&h, p, 2); uint32_t w = h;
    *fl |= ((w & 0x7c00) + 0x400) >> 15;
    uint32_t b = ((w & 0x7fff) << 13) | ((w & 0x8000) << 16);
    float v; memcpy(&v, &b, 4); return v;
}

static inline uint64_t vi8_or(vi8 v) { uint32_t r = 0; for (int i = 0; i < 8; i++) r |= v[i]; return r; }
static inline uint64_t vu_or(vu v) { uint64_t r = 0; for (int i = 0; i < 8; i++) r |= v[i]; return r; }

/* (With FMA, K consecutive inputs are first multiplied in plain double: 2 float32,
 * 3 float16 or 6 bfloat16 significands fit in 53 bits, so that product is exact.)
 * Tier 1 keeps each lane as an unevaluated sum h + l times 2^e. Multiplying by an
 * input x (at most 24 significant bits) is done exactly up to one rounding of the
 * small part: h is split into two 26-bit halves (Dekker), hh*x and hl*x are exact,
 * h' = hh*x and l' = fl(l*x + hl*x). |l| stays below ~2^-23|h| between
 * renormalisations, so each element adds a relative error below 2^-75. */
#define SPLITC 134217729.0 /* 2^27 + 1 */
static inline void vdd_mul(vd *h, vd *l, vd x) {
    vd t = SPLITC * *h, hh = t - (t - *h), hl = *h - hh;
    *l = *l * x + hl * x;
    *h = hh * x;
}
static inline void vdd_renorm(vd *h, vd *l, vl *e, vu *f) {
    vd s = *h + *l; *l = *l - (s - *h); *h = s;
    vu b = (vu)*h, fld = (b >> 52) & 0x7ff;
    *f |= ((fld - 1) | (fld + 1)) >> 11;
    *e += (vl)fld - 1023;
    vd sc = (vd)(((2046 - fld) & 0x7ff) << 52);
    *h = *h * sc; *l = *l * sc;
}
static inline void dd_mul(double *h, double *l, double x) {
    double t = SPLITC * *h, hh = t - (t - *h), hl = *h - hh;
    *l = *l * x + hl * x;
    *h = hh * x;
}
static inline void dd_renorm(double *h, double *l, int64_t *e, uint64_t *f) {
    double s = *h + *l; *l = *l - (s - *h); *h = s;
    uint64_t fld = (dbits(*h) >> 52) & 0x7ff;
    *f |= ((fld - 1) | (fld + 1)) >> 11;
    *e += (int64_t)fld - 1023;
    double sc = bitsd(((2046 - fld) & 0x7ff) << 52);
    *h *= sc; *l *= sc;
}
/* general double-double product (h,l) *= (h2,l2), exact high part via Dekker */
static inline void dd_mul_dd(double *h, double *l, double h2, double l2) {
    double a = *h, t = SPLITC * a, ah = t - (t - a), al = a - ah;
    t = SPLITC * h2; double bh = t - (t - h2), bl = h2 - bh;
    double p = a * h2;
    double err = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    err += a * l2 + *l * h2;
    *h = p + err; *l = err - (*h - p);
}

#ifdef HAVE_X86
/* With FMA the high product is exact in one instruction: e = h*x - fl(h*x). */
__attribute__((target("avx512f,fma"))) static inline void vdd_mul_512(vd *h, vd *l, vd x) {
    __m512d H = (__m512d)*h, X = (__m512d)x;
    __m512d P = _mm512_mul_pd(H, X);
    __m512d E = _mm512_fmsub_pd(H, X, P);
    *l = (vd)_mm512_fmadd_pd((__m512d)*l, X, E);
    *h = (vd)P;
}
#endif

#define DEF_FLOAT_KERNELS(NAME, ES, SUF, ATTR, VMUL, K)                                                  \
ATTR static void run_##NAME##SUF(const char *x, int64_t n, double *oh, double *ol, int64_t *oe, uint64_t *of) { \
    vd h0 = {1, 1, 1, 1, 1, 1, 1, 1}, h1 = h0, l0 = {0}, l1 = {0};                           \
    vl e0 = {0}, e1 = {0}; vu f0 = {0}, f1 = {0}; vi8 fl = {0};                              \
    int64_t i = 0;                                                                          \
    for (; i + 16 * G <= n; i += 16 * G) {                                                  \
        const char *b = x + i * ES;                                                         \
        for (int g = 0; g < G; g += K) { /* K inputs multiply exactly in double */         \
            vd p0 = ld8_##NAME(b + (16 * g) * ES, &fl), p1 = ld8_##NAME(b + (16 * g + 8) * ES, &fl); \
            for (int q = 1; q < K; q++) {                                                   \
                p0 *= ld8_##NAME(b + (16 * (g + q)) * ES, &fl);                              \
                p1 *= ld8_##NAME(b + (16 * (g + q) + 8) * ES, &fl);                          \
            }                                                                               \
            VMUL(&h0, &l0, p0); VMUL(&h1, &l1, p1);                                         \
        }                                                                                   \
        vdd_renorm(&h0, &l0, &e0, &f0);                                                     \
        vdd_renorm(&h1, &l1, &e1, &f1);                                                     \
    }                                                                                       \
    if (i + 16 <= n) { /* fewer than G chunks of 16 left: one renormalisation suffices */   \
        for (; i + 16 <= n; i += 16) {                                                      \
            VMUL(&h0, &l0, ld8_##NAME(x + i * ES, &fl));                                    \
            VMUL(&h1, &l1, ld8_##NAME(x + (i + 8) * ES, &fl));                              \
        }                                                                                   \
        vdd_renorm(&h0, &l0, &e0, &f0);                                                     \
        vdd_renorm(&h1, &l1, &e1, &f1);                                                     \
    }                                                                                       \
    uint64_t f = vu_or(f0 | f1) | vi8_or(fl), sf = 0;                                       \
    int64_t e = 0; double h = 1.0, l = 0.0;                                                 \
    for (int k = 0; k < 8; k++) {                                                           \
        e += e0[k] + e1[k];                                                                 \
        dd_mul_dd(&h, &l, h0[k], l0[k]); dd_renorm(&h, &l, &e, &f);                         \
        dd_mul_dd(&h, &l, h1[k], l1[k]); dd_renorm(&h, &l, &e, &f);                         \
    }                                                                                       \
    for (; i < n; i++) { dd_mul(&h, &l, ld1_##NAME(x + i * ES, &sf)); dd_renorm(&h, &l, &e, &f); } \
    *oh = h; *ol = l; *oe = e; *of = f | sf;                                                \
}                                                                                           \
ATTR static void rows_##NAME##SUF(const char *x, int64_t rows, int64_t rstride, int64_t c0,       \
                            int64_t c1, double *H, double *L, int64_t *e, uint64_t *f) {    \
  for (int64_t t0 = c0; t0 < c1; t0 += 512) { /* column tiles: state stays in L1 */     \
    int64_t t1 = t0 + 512 < c1 ? t0 + 512 : c1;                                            \
    for (int64_t r = 0; r < rows; r += G) {                                                 \
        int g = rows - r < G ? (int)(rows - r) : G;                                         \
        const char *b = x + r * rstride * ES;                                               \
        int64_t j = t0;                                                                     \
        for (; j + 8 <= t1; j += 8) {                                                       \
            vi8 fl = {0};                                                                   \
            vd h, l; vl ee; vu ff;                                                          \
            memcpy(&h, H + j, 64); memcpy(&l, L + j, 64);                                   \
            memcpy(&ee, e + j, 64); memcpy(&ff, f + j, 64);                                 \
            int k = 0;                                                                      \
            for (; k + K <= g; k += K) {                                                    \
                vd p = ld8_##NAME(b + (k * rstride + j) * ES, &fl);                         \
                for (int q = 1; q < K; q++) p *= ld8_##NAME(b + ((k + q) * rstride + j) * ES, &fl); \
                VMUL(&h, &l, p);                                                            \
            }                                                                               \
            for (; k < g; k++) VMUL(&h, &l, ld8_##NAME(b + (k * rstride + j) * ES, &fl));  \
            ff |= __builtin_convertvector(fl, vu);                                          \
            vdd_renorm(&h, &l, &ee, &ff);                                                   \
            memcpy(H + j, &h, 64); memcpy(L + j, &l, 64);                                   \
            memcpy(e + j, &ee, 64); memcpy(f + j, &ff, 64);                                 \
        }                                                                                   \
        for (; j < t1; j++) {                                                               \
            uint64_t sf = 0;                                                                \
            for (int k = 0; k < g; k++) dd_mul(&H[j], &L[j], ld1_##NAME(b + (k * rstride + j) * ES, &sf)); \
            f[j] |= sf;                                                                     \
            dd_renorm(&H[j], &L[j], &e[j], &f[j]);                                          \
        }                                                                                   \
    }                                                                                       \
  }                                                                                         \
}

#define NOATTR
/* ------------------------------------------- narrow-register variants
 * The kernels above use 8-lane (512-bit) vectors. Compiled for AVX2 (256-bit) or the
 * x86-64 baseline (128-bit SSE2) those vectors span 2 or 4 registers and the state
 * spills to the stack, so the AVX2 and generic variants below are written for their
 * register width W (4 or 2 doubles): each lane does exactly the same operations as in
 * the 8-lane kernels (run_: same chunks of 16 elements, same renormalisation points,
 * lane results combined in the same order, exponents summed and flags or'ed as
 * integers; rows_: the same columns go through vector steps, the same rows are
 * multiplied between renormalisations), so tier 1 computes the same values; only the
 * layout in registers changes. */
#define W_ALWAYS static inline __attribute__((always_inline))
#define DEF_WTYPES(W, S, IL) /* IL: lanes of the uint32 flag vector (>= W) */              \
typedef double wd##S __attribute__((vector_size(8 * (W))));                                 \
typedef int64_t wl##S __attribute__((vector_size(8 * (W))));                                \
typedef uint64_t wu##S __attribute__((vector_size(8 * (W))));                               \
typedef float wf##S __attribute__((vector_size(4 * (W))));                                  \
typedef uint32_t wi##S __attribute__((vector_size(4 * (IL))));                              \
typedef uint16_t wh##S __attribute__((vector_size(2 * (W))));                               \
/* same operations as vdd_mul (Dekker split, no FMA) */                                     \
W_ALWAYS void wmul_dek##S(wd##S *h, wd##S *l, wd##S x) {                                    \
    wd##S t = SPLITC * *h, hh = t - (t - *h), hl = *h - hh;                                 \
    *l = *l * x + hl * x;                                                                   \
    *h = hh * x;                                                                            \
}                                                                                           \
/* same operations as vdd_renorm */                                                         \
W_ALWAYS void wrenorm##S(wd##S *h, wd##S *l, wl##S *e, wu##S *f) {                          \
    wd##S s = *h + *l; *l = *l - (s - *h); *h = s;                                          \
    wu##S b = (wu##S)*h, fld = (b >> 52) & 0x7ff;                                           \
    *f |= ((fld - 1) | (fld + 1)) >> 11;                                                    \
    *e += (wl##S)fld - 1023;                                                                \
    wd##S sc = (wd##S)(((2046 - fld) & 0x7ff) << 52);                                       \
    *h = *h * sc; *l = *l * sc;                                                             \
}

#define DEF_WLOADS(S)                                                                       \
W_ALWAYS wd##S wld_f32##S(const void *p, wi##S *fl) { (void)fl; wf##S v; memcpy(&v, p, sizeof v); return __builtin_convertvector(v, wd##S); } \
W_ALWAYS wd##S wld_bf16##S(const void *p, wi##S *fl) {                                      \
    (void)fl; wh##S h; memcpy(&h, p, sizeof h);                                             \
    wi##S w = __builtin_convertvector(h, wi##S) << 16;                                      \
    return __builtin_convertvector((wf##S)w, wd##S);                                        \
}                                                                                           \
W_ALWAYS wd##S wld_f16##S(const void *p, wi##S *fl) {                                       \
    wh##S h; memcpy(&h, p, sizeof h);                                                       \
    wi##S w = __builtin_convertvector(h, wi##S);                                            \
    *fl |= ((w & 0x7c00) + 0x400) >> 15;                                                    \
    wi##S b = ((w & 0x7fff) << 13) | ((w & 0x8000) << 16);                                  \
    return __builtin_convertvector((wf##S)b, wd##S);                                        \
}                                                                                           \
W_ALWAYS wu##S wflu##S(wi##S fl) { return __builtin_convertvector(fl, wu##S); }

/* one column step of rows_ (W-lane kernels): NVEC registers, columns j .. j+NVEC*W-1 */
#define W_ROWSTEP(NAME, ES, S, W, VMUL, K, NVEC)                                            \
        {                                                                                   \
            wi##S fl[NVEC]; wd##S h[NVEC], l[NVEC]; wl##S ee[NVEC]; wu##S ff[NVEC];         \
            _Pragma("GCC unroll 8") for (int v = 0; v < (NVEC); v++) {                      \
                fl[v] = (wi##S){0};                                                         \
                memcpy(&h[v], H + j + (W) * v, 8 * (W)); memcpy(&l[v], L + j + (W) * v, 8 * (W)); \
                memcpy(&ee[v], e + j + (W) * v, 8 * (W)); memcpy(&ff[v], f + j + (W) * v, 8 * (W)); \
            }                                                                               \
            int k = 0;                                                                      \
            for (; k + K <= g; k += K) {                                                    \
                _Pragma("GCC unroll 8") for (int v = 0; v < (NVEC); v++) {                  \
                    wd##S p = wld_##NAME##S(b + (k * rstride + j + (W) * v) * ES, &fl[v]);  \
                    _Pragma("GCC unroll 8") for (int q = 1; q < K; q++)                     \
                        p *= wld_##NAME##S(b + ((k + q) * rstride + j + (W) * v) * ES, &fl[v]); \
                    VMUL(&h[v], &l[v], p);                                                  \
                }                                                                           \
            }                                                                               \
            for (; k < g; k++)                                                              \
                _Pragma("GCC unroll 8") for (int v = 0; v < (NVEC); v++)                    \
                    VMUL(&h[v], &l[v], wld_##NAME##S(b + (k * rstride + j + (W) * v) * ES, &fl[v])); \
            _Pragma("GCC unroll 8") for (int v = 0; v < (NVEC); v++) {                      \
                ff[v] |= wflu##S(fl[v]);                                                    \
                wrenorm##S(&h[v], &l[v], &ee[v], &ff[v]);                                   \
                memcpy(H + j + (W) * v, &h[v], 8 * (W)); memcpy(L + j + (W) * v, &l[v], 8 * (W)); \
                memcpy(e + j + (W) * v, &ee[v], 8 * (W)); memcpy(f + j + (W) * v, &ff[v], 8 * (W)); \
            }                                                                               \
        }

/* W lanes per register, NV = 16/W registers per chunk of 16 elements (register v holds
 * elements W*v .. W*v+W-1 of the chunk), updated in NP passes over each block of 16*G
 * elements (NV/NP registers at a time, so that they fit in the register file); RV
 * registers per column step in rows_. */
#define DEF_WFLOAT_KERNELS(NAME, ES, SUF, ATTR, S, W, VMUL, K, RV, NP)                      \
ATTR static void run_##NAME##SUF(const char *x, int64_t n, double *oh, double *ol, int64_t *oe, uint64_t *of) { \
    enum { NV = 16 / (W) };                                                                 \
    wd##S h[NV], l[NV]; wl##S ev = {0}; wu##S fv = {0}; wi##S fl = {0};                     \
    _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++) { h[v] = (wd##S){0} + 1.0; l[v] = (wd##S){0}; } \
    int64_t i = 0;                                                                          \
    for (; i + 16 * G <= n; i += 16 * G) {                                                  \
        const char *b = x + i * ES;                                                         \
        _Pragma("GCC unroll 1") for (int hf = 0; hf < (NP); hf++) {                          \
            wd##S hr[NV / (NP)], lr[NV / (NP)]; /* the registers of this pass */           \
            _Pragma("GCC unroll 16") for (int u = 0; u < NV / (NP); u++) {                  \
                hr[u] = h[hf * (NV / (NP)) + u]; lr[u] = l[hf * (NV / (NP)) + u];           \
            }                                                                               \
            _Pragma("GCC unroll 8") for (int g = 0; g < G; g += K) {                        \
                _Pragma("GCC unroll 16") for (int u = 0; u < NV / (NP); u++) {              \
                    int v = hf * (NV / (NP)) + u;                                           \
                    wd##S p = wld_##NAME##S(b + (16 * g + (W) * v) * ES, &fl);              \
                    _Pragma("GCC unroll 8") for (int q = 1; q < K; q++)                     \
                        p *= wld_##NAME##S(b + (16 * (g + q) + (W) * v) * ES, &fl);         \
                    VMUL(&hr[u], &lr[u], p);                                                \
                }                                                                           \
            }                                                                               \
            _Pragma("GCC unroll 16") for (int u = 0; u < NV / (NP); u++) {                  \
                wrenorm##S(&hr[u], &lr[u], &ev, &fv);                                       \
                h[hf * (NV / (NP)) + u] = hr[u]; l[hf * (NV / (NP)) + u] = lr[u];           \
            }                                                                               \
        }                                                                                   \
    }                                                                                       \
    if (i + 16 <= n) {                                                                      \
        for (; i + 16 <= n; i += 16) {                                                      \
            _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++)                           \
                VMUL(&h[v], &l[v], wld_##NAME##S(x + (i + (W) * v) * ES, &fl));             \
        }                                                                                   \
        _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++) wrenorm##S(&h[v], &l[v], &ev, &fv); \
    }                                                                                       \
    uint64_t f = 0, sf = 0; int64_t e = 0;                                                  \
    for (int k = 0; k < (W); k++) { f |= fv[k]; e += ev[k]; }                              \
    for (int k = 0; k < (int)(sizeof fl / 4); k++) f |= fl[k];                              \
    double hh = 1.0, ll = 0.0;                                                              \
    for (int k = 0; k < 8; k++) { /* lane order of the 8-lane kernels: element k, then 8+k */ \
        dd_mul_dd(&hh, &ll, h[k / (W)][k % (W)], l[k / (W)][k % (W)]); dd_renorm(&hh, &ll, &e, &f); \
        dd_mul_dd(&hh, &ll, h[(8 + k) / (W)][k % (W)], l[(8 + k) / (W)][k % (W)]); dd_renorm(&hh, &ll, &e, &f); \
    }                                                                                       \
    for (; i < n; i++) { dd_mul(&hh, &ll, ld1_##NAME(x + i * ES, &sf)); dd_renorm(&hh, &ll, &e, &f); } \
    *oh = hh; *ol = ll; *oe = e; *of = f | sf;                                              \
}                                                                                           \
ATTR static void rows_##NAME##SUF(const char *x, int64_t rows, int64_t rstride, int64_t c0,       \
                            int64_t c1, double *H, double *L, int64_t *e, uint64_t *f) {    \
  for (int64_t t0 = c0; t0 < c1; t0 += 512) { /* column tiles: state stays in L1 */     \
    int64_t t1 = t0 + 512 < c1 ? t0 + 512 : c1;                                            \
    for (int64_t r = 0; r < rows; r += G) {                                                 \
        int g = rows - r < G ? (int)(rows - r) : G;                                         \
        const char *b = x + r * rstride * ES;                                               \
        int64_t j = t0;                                                                     \
        for (; j + (RV) * (W) <= t1; j += (RV) * (W)) W_ROWSTEP(NAME, ES, S, W, VMUL, K, RV)   \
        /* then steps of 8 columns, so that the columns left to the scalar loop are those   \
           of the 8-lane kernels */                                                         \
        for (; j + 8 <= t1; j += 8) W_ROWSTEP(NAME, ES, S, W, VMUL, K, 8 / (W))             \
        for (; j < t1; j++) {                                                               \
            uint64_t sf = 0;                                                                \
            for (int k = 0; k < g; k++) dd_mul(&H[j], &L[j], ld1_##NAME(b + (k * rstride + j) * ES, &sf)); \
            f[j] |= sf;                                                                     \
            dd_renorm(&H[j], &L[j], &e[j], &f[j]);                                          \
        }                                                                                   \
    }                                                                                       \
  }                                                                                         \
}

#ifdef HAVE_X86
/* SSE2 loads (generic vector conversions of 2 lanes are scalarised by GCC 12) */
DEF_WTYPES(2, 2, 4)
W_ALWAYS wd2 wld_f322(const void *p, wi2 *fl) {
    (void)fl; return (wd2)_mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)p)));
}
W_ALWAYS wd2 wld_bf162(const void *p, wi2 *fl) {
    (void)fl; int32_t v; memcpy(&v, p, 4);
    __m128i w = _mm_unpacklo_epi16(_mm_setzero_si128(), _mm_cvtsi32_si128(v)); /* h << 16 */
    return (wd2)_mm_cvtps_pd(_mm_castsi128_ps(w));
}
W_ALWAYS wd2 wld_f162(const void *p, wi2 *fl) {
    int32_t v; memcpy(&v, p, 4);
    wi2 w = (wi2)_mm_unpacklo_epi16(_mm_cvtsi32_si128(v), _mm_setzero_si128()); /* lanes 2, 3 are 0 */
    *fl |= ((w & 0x7c00) + 0x400) >> 15;
    wi2 b = ((w & 0x7fff) << 13) | ((w & 0x8000) << 16);
    return (wd2)_mm_cvtps_pd((__m128)b);
}
W_ALWAYS wu2 wflu2(wi2 fl) { return (wu2)_mm_unpacklo_epi32((__m128i)fl, _mm_setzero_si128()); }
#else
DEF_WTYPES(2, 2, 2)
DEF_WLOADS(2)
#endif
DEF_WFLOAT_KERNELS(f32, 4, _gen, NOATTR, 2, 2, wmul_dek2, 1, 4, 2)
DEF_WFLOAT_KERNELS(bf16, 2, _gen, NOATTR, 2, 2, wmul_dek2, 1, 4, 2)
DEF_WFLOAT_KERNELS(f16, 2, _gen, NOATTR, 2, 2, wmul_dek2, 1, 4, 2)
#ifdef HAVE_X86
#define A512 __attribute__((target("avx512f,fma")))
#define A256 __attribute__((target("avx2,fma")))
DEF_FLOAT_KERNELS(f32, 4, _512, A512, vdd_mul_512, 2)
DEF_FLOAT_KERNELS(bf16, 2, _512, A512, vdd_mul_512, 6)
DEF_FLOAT_KERNELS(f16, 2, _512, A512, vdd_mul_512, 3)
DEF_WTYPES(4, 4, 4)
A256 W_ALWAYS wu4 wflu4(wi4 fl) { return __builtin_convertvector(fl, wu4); }
/* (__builtin_convertvector of 4 floats to 4 doubles goes through the stack in GCC 12) */
A256 W_ALWAYS wd4 wld_f324(const void *p, wi4 *fl) { (void)fl; return (wd4)_mm256_cvtps_pd(_mm_loadu_ps((const float *)p)); }
A256 W_ALWAYS wd4 wld_bf164(const void *p, wi4 *fl) {
    (void)fl;
    __m128i w = _mm_slli_epi32(_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)p)), 16);
    return (wd4)_mm256_cvtps_pd(_mm_castsi128_ps(w));
}
A256 W_ALWAYS wd4 wld_f164(const void *p, wi4 *fl) {
    wi4 w = (wi4)_mm_cvtepu16_epi32(_mm_loadl_epi64((const __m128i *)p));
    *fl |= ((w & 0x7c00) + 0x400) >> 15;
    wi4 b = ((w & 0x7fff) << 13) | ((w & 0x8000) << 16);
    return (wd4)_mm256_cvtps_pd((__m128)b);
}
/* With FMA the high product is exact in one instruction (as vdd_mul_512). */
A256 W_ALWAYS void wmul_fma4(wd4 *h, wd4 *l, wd4 x) {
    __m256d H = (__m256d)*h, X = (__m256d)x;
    __m256d P = _mm256_mul_pd(H, X);
    __m256d E = _mm256_fmsub_pd(H, X, P);
    *l = (wd4)_mm256_fmadd_pd((__m256d)*l, X, E);
    *h = (wd4)P;
}
DEF_WFLOAT_KERNELS(f32, 4, _256, A256, 4, 4, wmul_fma4, 2, 4, 1)
DEF_WFLOAT_KERNELS(bf16, 2, _256, A256, 4, 4, wmul_fma4, 6, 4, 1)
DEF_WFLOAT_KERNELS(f16, 2, _256, A256, 4, 4, wmul_fma4, 3, 4, 1)
#endif

/* ------------------------------------------------------------ float64 tier 1
 * Each lane keeps (h + l) * 2^e. Every input x is split exactly into its significand
 * m (sign kept, |m| in [1,2)) and its exponent, summed separately (so no partial
 * product can overflow or underflow), and the lane is multiplied by m with an
 * error-free transformation: P = fl(h*m), E = h*m - P exactly (fma, or Dekker's
 * two-product without FMA), l' = fl(l*m + E), h' = P. Every F64G inputs the lane is
 * renormalised: (h, l) <- fast-two-sum(h, l) (exact), then scaled by a power of two
 * so that |h| is in [1,2) (exact).
 * Error bound (u = 2^-53): after a renormalisation |l| <= u|h|; k steps later
 * |l| <= (k+1)u(1+2u)^k |h| <= 17.1u|h| for k <= 16. One step adds a relative error
 * <= u(2|l m| + |E|)/|(h+l)m| <= 35u^2 (two roundings without FMA; one with it).
 * Combining lanes / threads (dd_mul_dd, a scalar tail step with Dekker's
 * two-product) adds <= 7u^2 each and happens at most once per input, or per lane
 * (<= 32) / thread (<= 64). So the relative error of the result is below
 * (n + 64) * 1024u^2 = (n + 64) * 2^-96: F64_ERR. Zero, subnormal (AVX2/generic),
 * infinite and NaN inputs set the lane's flag and send that output to the exact path.
 * With AVX-512 the split uses getmant/getexp, which are exact for subnormals too
 * (their exponent sum becomes non-finite for 0, inf and NaN, which is flagged). */
#define F64G 16
#define F64_ERR(n) (((double)(n) + 64.0) * 0x1p-96)
#define F64_MANT(b) (((b) & 0x800fffffffffffffULL) | 0x3ff0000000000000ULL)

static inline void f64_two_prod(double a, double b, double *p, double *e) {
    *p = a * b;
    double t = SPLITC * a, ah = t - (t - a), al = a - ah;
    t = SPLITC * b; double bh = t - (t - b), bl = b - bh;
    *e = ((ah * bh - *p) + ah * bl + al * bh) + al * bl;
}
/* scalar step (tails and the last columns), Dekker: same bound */
static inline void f64_step1(double *h, double *l, int64_t *e, uint64_t *f, const char *p) {
    uint64_t b; memcpy(&b, p, 8);
    uint64_t fld = (b >> 52) & 0x7ff;
    *f |= ((fld - 1) | (fld + 1)) >> 11;
    *e += (int64_t)fld - 1023;
    double m = bitsd(F64_MANT(b)), P, E;
    f64_two_prod(*h, m, &P, &E);
    *l = *l * m + E;
    *h = P;
}

/* generic: 2 lanes, Dekker's two-product */
W_ALWAYS void f64_step_gen(wd2 *h, wl2 *ea, wd2 *l, wu2 *f, const char *p) {
    wu2 b; memcpy(&b, p, 16);
    wu2 fld = (b >> 52) & 0x7ff;
    *f |= ((fld - 1) | (fld + 1)) >> 11;
    *ea += (wl2)fld - 1023;
    wd2 m = (wd2)F64_MANT(b);
    wd2 P = *h * m;
    wd2 t = SPLITC * *h, hh = t - (t - *h), hl = *h - hh;
    t = SPLITC * m; wd2 mh = t - (t - m), ml = m - mh;
    wd2 E = ((hh * mh - P) + hh * ml + hl * mh) + hl * ml;
    *l = *l * m + E;
    *h = P;
}
W_ALWAYS void f64_renorm_gen(wd2 *h, wl2 *ea, wd2 *l, wl2 *e, wu2 *f) {
    wrenorm2(h, l, e, f);
    *e += *ea; *ea = (wl2){0};
}
#ifdef HAVE_X86
A256 W_ALWAYS void f64_step_256(wd4 *h, wl4 *ea, wd4 *l, wu4 *f, const char *p) {
    wu4 b; memcpy(&b, p, 32);
    wu4 fld = (b >> 52) & 0x7ff;
    *f |= ((fld - 1) | (fld + 1)) >> 11;
    *ea += (wl4)fld - 1023;
    __m256d M = (__m256d)F64_MANT(b), H = (__m256d)*h, P = _mm256_mul_pd(H, M);
    *l = (wd4)_mm256_fmadd_pd((__m256d)*l, M, _mm256_fmsub_pd(H, M, P));
    *h = (wd4)P;
}
A256 W_ALWAYS void f64_renorm_256(wd4 *h, wl4 *ea, wd4 *l, wl4 *e, wu4 *f) {
    wrenorm4(h, l, e, f);
    *e += *ea; *ea = (wl4){0};
}
/* AVX-512: the exponent sum is kept as a double (exact: |sum| < 2^51) */
A512 W_ALWAYS void f64_step_512(vd *h, vd *ea, vd *l, vu *f, const char *p) {
    (void)f;
    __m512d X = _mm512_loadu_pd((const void *)p);
    __m512d M = _mm512_getmant_pd(X, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src);
    *ea = (vd)_mm512_add_pd((__m512d)*ea, _mm512_getexp_pd(X));
    __m512d H = (__m512d)*h, P = _mm512_mul_pd(H, M);
    *l = (vd)_mm512_fmadd_pd((__m512d)*l, M, _mm512_fmsub_pd(H, M, P));
    *h = (vd)P;
}
A512 W_ALWAYS void f64_renorm_512(vd *h, vd *ea, vd *l, vl *e, vu *f) {
    vdd_renorm(h, l, e, f);
    vu eb = (vu)*ea;
    *f |= (((eb >> 52) & 0x7ff) + 1) >> 11; /* non-finite sum: a 0, inf or NaN input */
    vd mg = *ea + 0x1.8p52;                   /* integer in the low bits */
    *e += (vl)((vu)mg - 0x4338000000000000ULL);
    *ea = (vd){0};
}
#endif

/* one column step of rows_f64: NV2 vectors of W lanes, columns j .. j+NV2*W-1 */
#define F64_ROWSTEP(VD, VL, VU, EA, W, STEP, RENORM, NV2)                                  \
    {                                                                                       \
        VD h[NV2], l[NV2]; EA ea[NV2]; VL ee[NV2]; VU ff[NV2];                              \
        _Pragma("GCC unroll 8") for (int v = 0; v < (NV2); v++) {                           \
            memcpy(&h[v], H + j + (W) * v, 8 * (W)); memcpy(&l[v], L + j + (W) * v, 8 * (W)); \
            memcpy(&ee[v], e + j + (W) * v, 8 * (W)); memcpy(&ff[v], f + j + (W) * v, 8 * (W)); \
            ea[v] = (EA){0};                                                                \
        }                                                                                   \
        for (int k = 0; k < g; k++)                                                         \
            _Pragma("GCC unroll 8") for (int v = 0; v < (NV2); v++)                         \
                STEP(&h[v], &ea[v], &l[v], &ff[v], b + (k * rstride + j + (W) * v) * 8);   \
        _Pragma("GCC unroll 8") for (int v = 0; v < (NV2); v++) {                           \
            RENORM(&h[v], &ea[v], &l[v], &ee[v], &ff[v]);                                   \
            memcpy(H + j + (W) * v, &h[v], 8 * (W)); memcpy(L + j + (W) * v, &l[v], 8 * (W)); \
            memcpy(e + j + (W) * v, &ee[v], 8 * (W)); memcpy(f + j + (W) * v, &ff[v], 8 * (W)); \
        }                                                                                   \
    }

#define DEF_F64_KERNELS(SUF, ATTR, VD, VL, VU, EA, W, NV, STEP, RENORM)                    \
ATTR static void run_f64##SUF(const char *x, int64_t n, double *oh, double *ol, int64_t *oe, uint64_t *of) { \
    VD h[NV], l[NV]; EA ea[NV]; VL ev[NV]; VU fv[NV];                                       \
    _Pragma("GCC unroll 8") for (int v = 0; v < (NV); v++) {                                \
        h[v] = (VD){0} + 1.0; l[v] = (VD){0}; ea[v] = (EA){0}; ev[v] = (VL){0}; fv[v] = (VU){0}; \
    }                                                                                       \
    int64_t i = 0;                                                                          \
    while (i + (NV) * (W) <= n) {                                                           \
        int64_t cnt = (n - i) / ((NV) * (W));                                               \
        if (cnt > F64G) cnt = F64G;                                                         \
        for (int64_t g = 0; g < cnt; g++, i += (NV) * (W))                                  \
            _Pragma("GCC unroll 8") for (int v = 0; v < (NV); v++)                          \
                STEP(&h[v], &ea[v], &l[v], &fv[v], x + (i + (W) * v) * 8);                  \
        _Pragma("GCC unroll 8") for (int v = 0; v < (NV); v++)                              \
            RENORM(&h[v], &ea[v], &l[v], &ev[v], &fv[v]);                                   \
    }                                                                                       \
    uint64_t f = 0; int64_t e = 0; double hh = 1.0, ll = 0.0;                               \
    for (int v = 0; v < (NV); v++)                                                          \
        for (int k = 0; k < (W); k++) {                                                     \
            f |= fv[v][k]; e += ev[v][k];                                                   \
            dd_mul_dd(&hh, &ll, h[v][k], l[v][k]); dd_renorm(&hh, &ll, &e, &f);             \
        }                                                                                   \
    for (; i < n; i++) { f64_step1(&hh, &ll, &e, &f, x + i * 8); dd_renorm(&hh, &ll, &e, &f); } \
    *oh = hh; *ol = ll; *oe = e; *of = f;                                                   \
}                                                                                           \
ATTR static void rows_f64##SUF(const char *x, int64_t rows, int64_t rstride, int64_t c0,     \
                               int64_t c1, double *H, double *L, int64_t *e, uint64_t *f) { \
  for (int64_t t0 = c0; t0 < c1; t0 += 512) {                                              \
    int64_t t1 = t0 + 512 < c1 ? t0 + 512 : c1;                                            \
    for (int64_t r = 0; r < rows; r += F64G) {                                              \
        int g = rows - r < F64G ? (int)(rows - r) : F64G;                                   \
        const char *b = x + r * rstride * 8;                                                \
        int64_t j = t0;                                                                     \
        for (; j + (NV) * (W) <= t1; j += (NV) * (W)) F64_ROWSTEP(VD, VL, VU, EA, W, STEP, RENORM, NV) \
        for (; j + (W) <= t1; j += (W)) F64_ROWSTEP(VD, VL, VU, EA, W, STEP, RENORM, 1)     \
        for (; j < t1; j++) {                                                               \
            for (int k = 0; k < g; k++) f64_step1(&H[j], &L[j], &e[j], &f[j], b + (k * rstride + j) * 8); \
            dd_renorm(&H[j], &L[j], &e[j], &f[j]);                                          \
        }                                                                                   \
    }                                                                                       \
  }                                                                                         \
}

DEF_F64_KERNELS(_gen, NOATTR, wd2, wl2, wu2, wl2, 2, 2, f64_step_gen, f64_renorm_gen)
#ifdef HAVE_X86
DEF_F64_KERNELS(_256, A256, wd4, wl4, wu4, wl4, 4, 2, f64_step_256, f64_renorm_256)
DEF_F64_KERNELS(_512, A512, vd, vl, vu, vd, 8, 4, f64_step_512, f64_renorm_512)
#endif

typedef void (*run_fn)(const char *, int64_t, double *, double *, int64_t *, uint64_t *);
typedef void (*rows_fn)(const char *, int64_t, int64_t, int64_t, int64_t, double *, double *, int64_t *, uint64_t *);
/* indexed by type code T_F32, T_F64, T_F16, T_BF16 */
static run_fn RUN[4] = {run_f32_gen, run_f64_gen, run_f16_gen, run_bf16_gen};
static rows_fn ROWS[4] = {rows_f32_gen, rows_f64_gen, rows_f16_gen, rows_bf16_gen};
static const char *ISA = "generic";
static void select_isa(void) {
#ifdef HAVE_X86
    __builtin_cpu_init();
    const char *force = getenv("REWRITER_KERNEL_ISA");
    int want512 = !force || strcmp(force, "avx512") == 0, want256 = !force || strcmp(force, "avx2") == 0 || strcmp(force, "avx512") == 0;
    if (want512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) {
        RUN[0] = run_f32_512; RUN[1] = run_f64_512; RUN[2] = run_f16_512; RUN[3] = run_bf16_512;
        ROWS[0] = rows_f32_512; ROWS[1] = rows_f64_512; ROWS[2] = rows_f16_512; ROWS[3] = rows_bf16_512;
        ISA = "avx512f+fma";
    } else if (want256 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        RUN[0] = run_f32_256; RUN[1] = run_f64_256; RUN[2] = run_f16_256; RUN[3] = run_bf16_256;
        ROWS[0] = rows_f32_256; ROWS[1] = rows_f64_256; ROWS[2] = rows_f16_256; ROWS[3] = rows_bf16_256;
        ISA = "avx2+fma";
    }
#endif
}

/* ------------------------------------------------------------- integers */
/* State per output: mag = product of |x| mod 2^64 (wrapped result up to sign),
 * neg = sign parity, d = product of |x| in double clamped to 2^70 (a lower bound of the
 * true magnitude once clamped, else within a relative (2n+64)*2^-53 of it). Overflow is
 * decided from d when it is clearly on one side of the limit, else by an exact recheck. */
#define DCLAMP 0x1p70
static inline vd vmin_d(vd a, vd b) { vl m = (vl)(a < b); return (vd)(((vl)a & m) | ((vl)b & ~m)); }
#define DEF_INT_KERNELS(NAME, ST, VT, ES, SIGNED)                                         \
static inline void ld8_##NAME(const char *p, vu *a, vu *ng) {                               \
    VT v; memcpy(&v, p, sizeof v);                                                          \
    vl w = __builtin_convertvector(v, vl);                                                  \
    if (SIGNED) { vl sg = w >> 63; *ng ^= (vu)sg; *a = (vu)((w ^ sg) - sg); }               \
    else *a = (vu)w;                                                                        \
}                                                                                           \
static inline uint64_t ld1_##NAME(const char *p, uint64_t *ng) {                            \
    ST v; memcpy(&v, p, sizeof v);                                                          \
    if (SIGNED) { int64_t w = (int64_t)v, sg = w >> 63; *ng ^= (uint64_t)sg; return (uint64_t)((w ^ sg) - sg); } \
    return (uint64_t)v;                                                                     \
}                                                                                           \
HOT static void irun_##NAME(const char *x, int64_t n, double *od, uint64_t *oneg, uint64_t *omag) { \
    vu m0 = {1, 1, 1, 1, 1, 1, 1, 1}, m1 = m0, g0 = {0}, g1 = {0};                          \
    vd d0 = {1, 1, 1, 1, 1, 1, 1, 1}, d1 = d0, cl = d0 * DCLAMP;                             \
    int64_t i = 0;                                                                          \
    for (; i + 16 <= n; i += 16) {                                                          \
        vu a0, a1;                                                                          \
        ld8_##NAME(x + i * ES, &a0, &g0); ld8_##NAME(x + (i + 8) * ES, &a1, &g1);           \
        m0 *= a0; m1 *= a1;                                                                 \
        d0 *= __builtin_convertvector(a0, vd); d1 *= __builtin_convertvector(a1, vd);       \
        d0 = vmin_d(d0, cl); d1 = vmin_d(d1, cl);                                     \
    }                                                                                       \
    uint64_t mag = 1, ng = 0; double d = 1.0;                                               \
    for (int k = 0; k < 8; k++) {                                                           \
        mag *= m0[k] * m1[k]; ng ^= g0[k] ^ g1[k];                                          \
        d *= d0[k]; d = d < DCLAMP ? d : DCLAMP; d *= d1[k]; d = d < DCLAMP ? d : DCLAMP;   \
    }                                                                                       \
    for (; i < n; i++) { uint64_t a = ld1_##NAME(x + i * ES, &ng); mag *= a; d *= (double)a; d = d < DCLAMP ? d : DCLAMP; } \
    *od = d; *oneg = ng & 1; *omag = mag;                                                   \
}                                                                                           \
HOT static void irows_##NAME(const char *x, int64_t rows, int64_t rstride, int64_t c0, int64_t c1, \
                             double *D, uint64_t *NG, uint64_t *MG) {                        \
    vd cl = {DCLAMP, DCLAMP, DCLAMP, DCLAMP, DCLAMP, DCLAMP, DCLAMP, DCLAMP};                 \
    for (int64_t r = 0; r < rows; r += 4) {                                                 \
        int g = rows - r < 4 ? (int)(rows - r) : 4;                                         \
        const char *b = x + r * rstride * ES;                                               \
        int64_t j = c0;                                                                     \
        for (; j + 8 <= c1; j += 8) {                                                       \
            vd d; vu ng, mg;                                                                \
            memcpy(&d, D + j, 64); memcpy(&ng, NG + j, 64); memcpy(&mg, MG + j, 64);        \
            for (int k = 0; k < g; k++) {                                                   \
                vu a; ld8_##NAME(b + (k * rstride + j) * ES, &a, &ng);                      \
                mg *= a; d *= __builtin_convertvector(a, vd); d = vmin_d(d, cl);          \
            }                                                                               \
            memcpy(D + j, &d, 64); memcpy(NG + j, &ng, 64); memcpy(MG + j, &mg, 64);        \
        }                                                                                   \
        for (; j < c1; j++)                                                                 \
            for (int k = 0; k < g; k++) {                                                   \
                uint64_t a = ld1_##NAME(b + (k * rstride + j) * ES, &NG[j]);                \
                MG[j] *= a; D[j] *= (double)a; D[j] = D[j] < DCLAMP ? D[j] : DCLAMP;       \
            }                                                                               \
    }                                                                                       \
}
typedef int32_t vs32 __attribute__((vector_size(32)));
typedef int64_t vs64 __attribute__((vector_size(64)));
typedef uint32_t vu32 __attribute__((vector_size(32)));
typedef uint64_t vu64 __attribute__((vector_size(64)));
DEF_INT_KERNELS(i32, int32_t, vs32, 4, 1)
DEF_INT_KERNELS(i64, int64_t, vs64, 8, 1)
DEF_INT_KERNELS(u32, uint32_t, vu32, 4, 0)
DEF_INT_KERNELS(u64, uint64_t, vu64, 8, 0)

/* exact overflow decision for one integer output (slow path) */
static int int_exact_over(const uint64_t *buf, int64_t n, int t) {
    uint64_t mag = 1, neg = 0; int sat = 0, zero = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = buf[i], a;
        switch (t) {
        case T_I32: { int32_t w = (int32_t)(uint32_t)v; neg ^= w < 0; a = w < 0 ? (uint64_t)(-(int64_t)w) : (uint64_t)w; break; }
        case T_I64: { int64_t w = (int64_t)v; neg ^= w < 0; a = w < 0 ? (uint64_t)0 - v : v; break; }
        case T_U32: a = (uint32_t)v; break;
        default: a = v; break;
        }
        zero |= a == 0;
        sat |= __builtin_mul_overflow(mag, a, &mag);
    }
    if (zero) return 0;
    if (sat) return 1;
    int bits = ESIZE[t] * 8;
    if (t == T_I32 || t == T_I64) return mag > ((1ULL << (bits - 1)) - 1 + neg);
    return bits == 32 ? mag > 0xffffffffULL : 0;
}

static void run_any(int t, const char *x, int64_t n, double *m, double *l, int64_t *e, uint64_t *f) {
    /* for ints the three outputs are reinterpreted as mag/neg/sat */
    switch (t) {
    case T_F32: case T_F64: case T_BF16: case T_F16: RUN[t](x, n, m, l, e, f); break;
    case T_I32: irun_i32(x, n, m, (uint64_t *)e, f); break;
    case T_I64: irun_i64(x, n, m, (uint64_t *)e, f); break;
    case T_U32: irun_u32(x, n, m, (uint64_t *)e, f); break;
    case T_U64: irun_u64(x, n, m, (uint64_t *)e, f); break;
    default: break;
    }
}
static void rows_any(int t, const char *x, int64_t rows, int64_t rs, int64_t c0, int64_t c1,
                     double *m, double *l, int64_t *e, uint64_t *f) {
    switch (t) {
    case T_F32: case T_F64: case T_BF16: case T_F16: ROWS[t](x, rows, rs, c0, c1, m, l, e, f); break;
    case T_I32: irows_i32(x, rows, rs, c0, c1, m, (uint64_t *)e, f); break;
    case T_I64: irows_i64(x, rows, rs, c0, c1, m, (uint64_t *)e, f); break;
    case T_U32: irows_u32(x, rows, rs, c0, c1, m, (uint64_t *)e, f); break;
    case T_U64: irows_u64(x, rows, rs, c0, c1, m, (uint64_t *)e, f); break;
    default: break;
    }
}
static inline int is_int(int t) { return t >= T_I32; }

/* combine a partial result (m2,e2,f2) into (m,e,f) */
static inline void combine(int t, double *m, double *l, int64_t *e, uint64_t *f, double m2, double l2, int64_t e2, uint64_t f2) {
    if (is_int(t)) { /* m = clamped double magnitude, e = sign parity, f = wrapped magnitude */
        uint64_t *neg = (uint64_t *)e, neg2; memcpy(&neg2, &e2, 8);
        *f *= f2; *neg ^= neg2;
        *m *= m2; if (*m > DCLAMP) *m = DCLAMP;
    } else {
        *e += e2; *f |= f2;
        dd_mul_dd(m, l, m2, l2);
        dd_renorm(m, l, e, f);
    }
}

/* --------------------------------------------------------- accumulation */
enum { SPLIT_NONE = 0, SPLIT_RUN, SPLIT_OUTER, SPLIT_COLS };

typedef struct {
    const plan_t *P; const char *in; int t; state_t S;
    int split; int64_t lo, hi;
    double pm, pl; int64_t pe; uint64_t pf; /* partial state for SPLIT_RUN */
    /* finalisation */
    char *out; int mode; int64_t nover; int fin_err;
} job_t;

/* Iterate positions of blocks [0, stop) (block 0 restricted to [b0lo,b0hi)) and call
 * fn with input/output element offsets. */
static void accumulate(job_t *J) {
    const plan_t *P = J->P; int t = J->t; int nb = P->nb; int ib = nb - 1;
    int64_t es = ESIZE[t];
    double *M = J->S.m, *Lo = J->S.l; int64_t *E = J->S.e; uint64_t *F = J->S.f;
    if (P->red[ib] && nb == 1) {
        int64_t lo = J->split == SPLIT_RUN ? J->lo : 0, hi = J->split == SPLIT_RUN ? J->hi : P->size[0];
        double m, l = 0; int64_t e; uint64_t f;
        run_any(t, J->in + lo * es, hi - lo, &m, &l, &e, &f);
        J->pm = m; J->pl = l; J->pe = e; J->pf = f;
        return;
    }
    int stop = P->red[ib] ? ib : (nb >= 2 ? ib - 1 : 0);
    int64_t idx[MAXB] = {0}, lim[MAXB], start0 = 0;
    for (int k = 0; k < stop; k++) lim[k] = P->size[k];
    if (J->split == SPLIT_OUTER && stop > 0) { start0 = J->lo; lim[0] = J->hi; idx[0] = start0; }
    int64_t c0 = 0, c1 = P->size[ib];
    if (J->split == SPLIT_COLS) { c0 = J->lo; c1 = J->hi; }
    int64_t rows = (!P->red[ib] && nb >= 2) ? P->size[ib - 1] : 1;
    int64_t rstride = P->size[ib];
    if (stop > 0 && start0 >= lim[0]) return;
    for (;;) {
        int64_t ioff = 0, ooff = 0;
        for (int k = 0; k < stop; k++) { ioff += idx[k] * P->istr[k]; ooff += idx[k] * P->ostr[k]; }
        if (P->red[ib]) {
            double m, l = 0; int64_t e; uint64_t f;
            run_any(t, J->in + ioff * es, P->size[ib], &m, &l, &e, &f);
            combine(t, &M[ooff], &Lo[ooff], &E[ooff], &F[ooff], m, l, e, f);
        } else {
            rows_any(t, J->in + ioff * es, rows, rstride, c0, c1, M + ooff, Lo + ooff, E + ooff, F + ooff);
        }
        int k = stop - 1;
        while (k >= 0) {
            if (++idx[k] < lim[k]) break;
            idx[k] = (k == 0) ? start0 : 0;
            k--;
        }
        if (k < 0) break;
    }
}

/* --------------------------------------------------------- slow paths */
/* gather the raw bits of the elements of output o */
static void gather(const plan_t *P, const char *in, int t, int64_t o, uint64_t *buf) {
    int64_t es = ESIZE[t], base = 0, rem = o;
    int nb = P->nb;
    /* output index -> kept block indices (output is C order over kept blocks) */
    for (int k = 0; k < nb; k++) {
        if (P->red[k]) continue;
        int64_t i = rem / P->ostr[k];
        rem -= i * P->ostr[k];
        base += i * P->istr[k];
    }
    int64_t idx[MAXB] = {0};
    int rb[MAXB], nr = 0;
    for (int k = 0; k < nb; k++) if (P->red[k]) rb[nr++] = k;
    int64_t n = 0;
    for (;;) {
        int64_t off = base;
        for (int j = 0; j < nr; j++) off += idx[j] * P->istr[rb[j]];
        uint64_t v = 0;
        memcpy(&v, in + off * es, es); /* little endian */
        buf[n++] = v;
        int j = nr - 1;
        while (j >= 0) { if (++idx[j] < P->size[rb[j]]) break; idx[j] = 0; j--; }
        if (j < 0) break;
    }
}

/* classification and decoding of one float element into odd mantissa * 2^exp */
typedef struct { int nan, inf, zero; uint64_t neg; } cls_t;
static void classify(int t, uint64_t v, cls_t *c, uint64_t *mant, int64_t *ex) {
    int sb, eb, mb; int bias;
    switch (t) {
    case T_F32: sb = 31; eb = 8; mb = 23; bias = 127; break;
    case T_F64: sb = 63; eb = 11; mb = 52; bias = 1023; break;
    case T_F16: sb = 15; eb = 5; mb = 10; bias = 15; break;
    default: sb = 15; eb = 8; mb = 7; bias = 127; break;
    }
    c->neg ^= (v >> sb) & 1;
    uint64_t fld = (v >> mb) & ((1ULL << eb) - 1), fr = v & ((1ULL << mb) - 1);
    *mant = 0; *ex = 0;
    if (fld == (1ULL << eb) - 1) { if (fr) c->nan = 1; else c->inf = 1; return; }
    if (fld == 0 && fr == 0) { c->zero = 1; return; }
    uint64_t m = fld ? (fr | (1ULL << mb)) : fr;
    int64_t e = (fld ? (int64_t)fld : 1) - bias - mb;
    int tz = __builtin_ctzll(m);
    *mant = m >> tz; *ex = e + tz;
}

static inline int bitlen64(uint64_t x) { return x ? 64 - __builtin_clzll(x) : 0; }

/* value = (hi+lo) * 2^E, hi > 0; err_rel bounds |true/approx - 1|.
 * Returns 1 with the correctly rounded magnitude bits in *out, or 0 if undecidable. */
static int round_dd(double hi, double lo, int64_t E, double err_rel, const ffmt_t *F, uint64_t *out) {
    int p = F->p;
    if (err_rel >= ldexp(1.0, -(p + 3))) return 0;
    if (hi >= 2.0 && lo >= 0) { hi *= 0.5; lo *= 0.5; E += 1; }
    if (hi == 1.0 && lo < 0) { hi = 2.0; lo *= 2; E -= 1; }
    if (E > F->emax) { *out = F->inf; return 1; }
    int64_t qmin = (int64_t)F->emin - (p - 1);
    int64_t q = (E >= F->emin ? E : F->emin) - (p - 1);
    int64_t s = E - q;
    if (s < -4) { *out = 0; return 1; }
    double H = ldexp(hi, (int)s), L = ldexp(lo, (int)s);
    double r0 = floor(H);
    double fr = (H - r0) + L;
    if (fr < 0) { r0 -= 1; fr += 1; } else if (fr >= 1) { r0 += 1; fr -= 1; }
    double eu = err_rel * ldexp(1.0, (int)s + 1) + 0x1p-50;
    if (eu >= 0.25 || fabs(fr - 0.5) <= eu) return 0;
    uint64_t r = (uint64_t)r0 + (fr > 0.5);
    uint64_t bits = ((uint64_t)(q - qmin) << (p - 1)) + r;
    *out = bits >= F->inf ? F->inf : bits;
    return 1;
}

/* double-double product of normalised mantissas */
static inline void two_prod(double a, double b, double *p, double *e) {
    const double C = 134217729.0; /* 2^27 + 1 */
    *p = a * b;
    double t = C * a, ah = t - (t - a), al = a - ah;
    t = C * b; double bh = t - (t - b), bl = b - bh;
    *e = ((ah * bh - *p) + ah * bl + al * bh) + al * bl;
}

static int round_dd_path(const uint64_t *mant, int64_t n, int64_t e0, const ffmt_t *F, uint64_t *out) {
    double hi = 1.0, lo = 0.0; int64_t E = e0;
    for (int64_t i = 0; i < n; i++) {
        int bl = bitlen64(mant[i]);
        double b = ldexp((double)mant[i], -(bl - 1)); /* exact, in [1,2) */
        E += bl - 1;
        double p, e;
        two_prod(hi, b, &p, &e);
        e += lo * b;
        hi = p + e; lo = e - (hi - p);
        if (hi >= 2.0) { hi *= 0.5; lo *= 0.5; E += 1; }
    }
    return round_dd(hi, lo, E, ((double)n + 4) * 0x1p-100, F, out);
}

/* exact: multi-precision product of the odd mantissas */
static int round_exact(const uint64_t *mant, int64_t n, int64_t e0, const ffmt_t *F, uint64_t *out) {
    int64_t bits = 64;
    for (int64_t i = 0; i < n; i++) bits += bitlen64(mant[i]);
    int64_t cap = bits / 64 + 2, len = 1;
    uint64_t *L = (uint64_t *)calloc((size_t)cap, 8);
    if (!L) return 0;
    L[0] = 1;
    uint64_t w = 1;
    for (int64_t i = 0; i <= n; i++) {
        if (i < n) {
            unsigned __int128 pr = (unsigned __int128)w * mant[i];
            if ((pr >> 64) == 0) { w = (uint64_t)pr; continue; }
        }
        unsigned __int128 c = 0;
        for (int64_t k = 0; k < len; k++) { c += (unsigned __int128)L[k] * w; L[k] = (uint64_t)c; c >>= 64; }
        if (c) L[len++] = (uint64_t)c;
        if (i < n) w = mant[i];
    }
    int p = F->p;
    int64_t nbits = 64 * (len - 1) + bitlen64(L[len - 1]);
    int64_t E = e0 + nbits - 1;
    if (E > F->emax) { free(L); *out = F->inf; return 1; }
    int64_t qmin = (int64_t)F->emin - (p - 1);
    int64_t q = (E >= F->emin ? E : F->emin) - (p - 1);
    int64_t sh = q - e0;
    uint64_t r;
    if (sh <= 0) {
        r = L[0] << (-sh); /* nbits <= p here */
    } else if (sh > nbits) {
        r = 0;
    } else {
        /* r = M >> sh (at most p bits) */
        int64_t li = sh / 64; int bo = (int)(sh % 64);
        r = li < len ? L[li] >> bo : 0;
        if (bo && li + 1 < len) r |= L[li + 1] << (64 - bo);
        int64_t hb = sh - 1; /* half bit index */
        uint64_t half = (L[hb / 64] >> (hb % 64)) & 1, sticky = 0;
        for (int64_t k = 0; k < hb / 64 && !sticky; k++) sticky = L[k] != 0;
        if (hb % 64) sticky |= (L[hb / 64] & ((1ULL << (hb % 64)) - 1)) != 0;
        if (half && (sticky || (r & 1))) r++;
    }
    free(L);
    uint64_t b = ((uint64_t)(q - qmin) << (p - 1)) + r;
    *out = b >= F->inf ? F->inf : b;
    return 1;
}

static void store(char *out, int64_t o, int es, uint64_t v) { memcpy(out + o * es, &v, es); }

/* slow path for one float output; returns 0 on allocation failure */
static int float_slow(const plan_t *P, const char *in, int t, int64_t o, char *out) {
    const ffmt_t *F = &FMT[t];
    int64_t n = P->nred;
    uint64_t *buf = (uint64_t *)malloc((size_t)n * 8);
    if (!buf) return 0;
    gather(P, in, t, o, buf);
    cls_t c = {0, 0, 0, 0};
    int64_t e0 = 0, k = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t m; int64_t e;
        classify(t, buf[i], &c, &m, &e);
        if (m) { buf[k++] = m; e0 += e; }
    }
    uint64_t sign = c.neg << (t == T_F32 ? 31 : t == T_F64 ? 63 : 15), r;
    int ok = 1;
    if (c.nan || (c.inf && c.zero)) r = F->qnan, sign = 0;
    else if (c.inf) r = F->inf;
    else if (c.zero) r = 0;
    else if (!round_dd_path(buf, k, e0, F, &r)) ok = round_exact(buf, k, e0, F, &r);
    free(buf);
    if (!ok) return 0;
    store(out, o, ESIZE[t], r | sign);
    return 1;
}

/* Tier-1 relative error bound of float32/float16/bfloat16 (vdd_mul: < 2^-75 per
 * element, plus the lane and thread combinations); float64: F64_ERR above. */
#define NARROW_ERR(n) (((double)(n) + 64.0) * 0x1p-70)
/* float outputs that tier 1 could not decide (recomputed by the exact path), since
 * the module was loaded: exposed as _native.exact_outputs() for tests and benches */
static int64_t exact_outputs = 0;

static void finalize(job_t *J) {
    const plan_t *P = J->P; int t = J->t; int es = ESIZE[t];
    int64_t nover = 0;
    for (int64_t o = J->lo; o < J->hi; o++) {
        if (!is_int(t)) {
            double m = J->S.m[o], l = J->S.l[o];
            int64_t E = J->S.e[o] + (t == T_F16 ? 112 * P->nred : 0);
            uint64_t r;
            if (!J->S.f[o]) {
                double err = t == T_F64 ? F64_ERR(P->nred) : NARROW_ERR(P->nred);
                if (round_dd(fabs(m), m < 0 ? -l : l, E, err, &FMT[t], &r)) {
                    uint64_t sign = (m < 0) ? (1ULL << (es * 8 - 1)) : 0;
                    store(J->out, o, es, r | sign);
                    continue;
                }
            }
            __atomic_fetch_add(&exact_outputs, 1, __ATOMIC_RELAXED);
            if (!float_slow(P, J->in, t, o, J->out)) J->fin_err = 1;
            continue;
        }
        double d = J->S.m[o];
        uint64_t neg = (uint64_t)J->S.e[o] & 1, mag = J->S.f[o];
        int bitsz = es * 8, sgn = (t == T_I32 || t == T_I64);
        double gam = (2.0 * (double)P->nred + 64.0) * 0x1p-53;
        double lim = ldexp(1.0, sgn ? bitsz - 1 : bitsz);
        int over;
        if (d * (1 + gam) < lim) over = 0;
        else if (sgn ? d * (1 - gam) > lim : d * (1 - gam) >= lim) over = 1;
        else {
            uint64_t *buf = (uint64_t *)malloc((size_t)P->nred * 8);
            if (!buf) { J->fin_err = 1; over = 0; }
            else { gather(P, J->in, t, o, buf); over = int_exact_over(buf, P->nred, t); free(buf); }
        }
        uint64_t w = neg ? (uint64_t)0 - mag : mag;
        if (over) {
            nover++;
            if (J->mode == 1) {
                if (!sgn) w = ~0ULL;
                else w = neg ? (1ULL << (bitsz - 1)) : (1ULL << (bitsz - 1)) - 1;
            }
        }
        store(J->out, o, es, w);
    }
    J->nover = nover;
}

/* ------------------------------------------------------------ threading */
static void *acc_thread(void *arg) { accumulate((job_t *)arg); return NULL; }
static void *fin_thread(void *arg) { finalize((job_t *)arg); return NULL; }

static void run_jobs(job_t *jobs, int nt, void *(*fn)(void *)) {
    pthread_t th[64]; int started[64] = {0};
    for (int i = 1; i < nt; i++) started[i] = pthread_create(&th[i], NULL, fn, &jobs[i]) == 0;
    fn(&jobs[0]);
    for (int i = 1; i < nt; i++) { if (started[i]) pthread_join(th[i], NULL); else fn(&jobs[i]); }
}

/* ------------------------------------------------------------ entry */
static PyObject *py_reduce(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer inb, outb;
    int t, mode, nthreads;
    PyObject *dims, *mask;
    if (!PyArg_ParseTuple(args, "y*w*iO!O!ii", &inb, &outb, &t, &PyTuple_Type, &dims, &PyTuple_Type, &mask, &mode, &nthreads))
        return NULL;
    PyObject *res = NULL;
    plan_t P; memset(&P, 0, sizeof P);
    state_t S; memset(&S, 0, sizeof S);
    job_t *jobs = NULL;
    Py_ssize_t nd = PyTuple_GET_SIZE(dims);
    if (t < 0 || t > 7 || nd != PyTuple_GET_SIZE(mask) || nd > MAXB) { PyErr_SetString(PyExc_ValueError, "bad arguments"); goto done; }
    int64_t total = 1, nout = 1;
    int nb = 0;
    for (Py_ssize_t k = 0; k < nd; k++) {
        int64_t d = PyLong_AsLongLong(PyTuple_GET_ITEM(dims, k));
        int r = PyObject_IsTrue(PyTuple_GET_ITEM(mask, k));
        if (PyErr_Occurred()) goto done;
        if (d <= 0) { PyErr_SetString(PyExc_ValueError, "dims must be positive"); goto done; }
        total *= d;
        if (!r) nout *= d;
        if (d == 1) continue;
        if (nb > 0 && P.red[nb - 1] == r) P.size[nb - 1] *= d;
        else { P.size[nb] = d; P.red[nb] = r; nb++; }
    }
    if (nb == 0) { P.size[0] = 1; P.red[0] = 1; nb = 1; }
    P.nb = nb; P.total = total; P.nout = nout; P.nred = total / nout;
    {
        int64_t is = 1, os = 1;
        for (int k = nb - 1; k >= 0; k--) {
            P.istr[k] = is; is *= P.size[k];
            P.ostr[k] = P.red[k] ? 0 : os; if (!P.red[k]) os *= P.size[k];
        }
    }
    if (inb.len != total * ESIZE[t] || outb.len != nout * ESIZE[t]) { PyErr_SetString(PyExc_ValueError, "buffer size mismatch"); goto done; }
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 64) nthreads = 64;
    S.m = (double *)malloc((size_t)nout * 8); S.e = (int64_t *)malloc((size_t)nout * 8); S.f = (uint64_t *)malloc((size_t)nout * 8); S.l = (double *)malloc((size_t)nout * 8);
    jobs = (job_t *)calloc((size_t)nthreads, sizeof(job_t));
    if (!S.m || !S.e || !S.f || !S.l || !jobs) { PyErr_NoMemory(); goto done; }
    int64_t nover = 0; int err = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t o = 0; o < nout; o++) {
        S.m[o] = 1.0; S.e[o] = 0; S.l[o] = 0.0;
        S.f[o] = is_int(t) ? 1 : 0;
    }
    int ib = nb - 1;
    int split = SPLIT_NONE; int64_t range = 0;
    int nt = (total >= (1 << 18)) ? nthreads : 1;
    if (nt > 1) {
        if (nb == 1 && P.red[0]) { split = SPLIT_RUN; range = P.size[0]; }
        else if (!P.red[0] && nb >= 2 && P.size[0] >= 2 * nt) { split = SPLIT_OUTER; range = P.size[0]; }
        else if (!P.red[ib] && P.size[ib] >= 64 * nt) { split = SPLIT_COLS; range = P.size[ib]; }
    }
    if (split == SPLIT_NONE) nt = 1;
    for (int i = 0; i < nt; i++) {
        job_t *J = &jobs[i];
        J->P = &P; J->in = (const char *)inb.buf; J->t = t; J->S = S; J->split = split;
        J->out = (char *)outb.buf; J->mode = mode;
        int64_t a = range * i / nt, b = range * (i + 1) / nt;
        if (split == SPLIT_COLS || split == SPLIT_RUN) { a &= ~(int64_t)63; b = (i == nt - 1) ? range : (b & ~(int64_t)63); }
        J->lo = a; J->hi = b;
    }
    run_jobs(jobs, nt, acc_thread);
    if (split == SPLIT_RUN) {
        for (int i = 1; i < nt; i++) combine(t, &jobs[0].pm, &jobs[0].pl, &jobs[0].pe, &jobs[0].pf, jobs[i].pm, jobs[i].pl, jobs[i].pe, jobs[i].pf);
    }
    if (P.red[ib] && nb == 1) { S.m[0] = jobs[0].pm; S.l[0] = jobs[0].pl; S.e[0] = jobs[0].pe; S.f[0] = jobs[0].pf; }
    /* finalisation, in parallel over outputs when there is enough work */
    int nf = (nthreads > 1 && (nout >= 4096 || (t == T_F64 && total >= (1 << 16)))) ? nthreads : 1;
    if (nf > nout) nf = (int)nout;
    if (nf < 1) nf = 1;
    for (int i = 0; i < nf; i++) {
        job_t *J = &jobs[i];
        J->P = &P; J->in = (const char *)inb.buf; J->t = t; J->S = S;
        J->out = (char *)outb.buf; J->mode = mode;
        J->lo = nout * i / nf; J->hi = nout * (i + 1) / nf; J->nover = 0; J->fin_err = 0;
    }
    run_jobs(jobs, nf, fin_thread);
    for (int i = 0; i < nf; i++) { nover += jobs[i].nover; err |= jobs[i].fin_err; }
    Py_END_ALLOW_THREADS
    if (err) { PyErr_NoMemory(); goto done; }
    res = PyLong_FromLongLong(nover);
done:
    free(S.m); free(S.l); free(S.e); free(S.f); free(jobs);
    PyBuffer_Release(&inb); PyBuffer_Release(&outb);
    return res;
}

static PyObject *py_exact_outputs(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    return PyLong_FromLongLong(__atomic_load_n(&exact_outputs, __ATOMIC_RELAXED));
}

/* ------------------------------------------------------------------------------------
 * balance(w, h, k, cols, fmt, nthreads): rounding to half keeping each group's sum (rewriter.io.half).
 *   w    float32 buffer, groups of k consecutive values (cols 0), or the columns of each
 *        block of k rows of a [rows, cols] array
 *   h    writable uint16 buffer, the same values rounded to nearest even in the half type
 *        (fmt 0 float16, 1 bfloat16); rewritten in place
 * The exact algorithm of rewriter.io.half._balance_numpy, group by group, with the same
 * arithmetic in the same order (float32 errors and steps, float64 sums in order), so both
 * give the same bits.
 */
static inline float f16_bits_to_float(uint16_t b) {
    uint32_t bits, sign = (uint32_t)(b & 0x8000u) << 16, ex = (b >> 10) & 0x1fu, man = b & 0x3ffu;
    if (ex == 0) {
        float f = (float)man * 5.9604644775390625e-08f; /* man * 2^-24, exact */
        memcpy(&bits, &f, 4);
        bits |= sign;
    } else if (ex == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((ex + 112u) << 23) | (man << 13);
    }
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

static inline float half_bits_to_float(uint16_t b, int fmt) {
    if (fmt == 0) return f16_bits_to_float(b);
    uint32_t bits = (uint32_t)b << 16; /* bfloat16: float32's upper half */
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

#define BALANCE_MAXK 4096

/* one group of k values (stride apart), rounded to nearest in h: the values are tried cheapest
 * first -- by the float32 exponent of |step| - 2|e|, what rounding one the other way adds to
 * its error, then by position -- and each is rounded the other way when that brings the
 * group's sum nearer its float32 sum */
static void balance_group(const float *w, uint16_t *h, Py_ssize_t k, Py_ssize_t stride, int fmt) {
    float delta[BALANCE_MAXK];
    uint16_t alt[BALANCE_MAXK];
    short level[BALANCE_MAXK];
    int lo = 256, hi = -1;
    double total = 0.0;
    for (Py_ssize_t i = 0; i < k; i++) {
        uint16_t hb = h[i * stride];
        float wi = w[i * stride];
        float hf = half_bits_to_float(hb, fmt);
        float e = hf - wi;
        int away = (e < 0.0f) != (signbit(wi) != 0);
        alt[i] = (uint16_t)(hb + (away ? 1u : 0xFFFFu));
        delta[i] = half_bits_to_float(alt[i], fmt) - hf;
        level[i] = -1;
        if (e != 0.0f && isfinite(e) && isfinite(delta[i])) {
            float cost = fabsf(delta[i]) - 2.0f * fabsf(e);
            uint32_t bits;
            memcpy(&bits, &cost, 4);
            int l = (int)((bits >> 23) & 0xFFu);
            level[i] = (short)l;
            if (l < lo) lo = l;
            if (l > hi) hi = l;
        }
        total += isfinite(e) ? (double)e : 0.0;
    }
    if (hi < 0) return;
    /* counting sort by level (stable: positions stay in order within a level) */
    int start[257];
    Py_ssize_t order[BALANCE_MAXK];
    for (int l = lo; l <= hi + 1; l++) start[l - lo] = 0;
    for (Py_ssize_t i = 0; i < k; i++)
        if (level[i] >= 0) start[level[i] - lo + 1]++;
    for (int l = lo + 1; l <= hi + 1; l++) start[l - lo] += start[l - lo - 1];
    for (Py_ssize_t i = 0; i < k; i++)
        if (level[i] >= 0) order[start[level[i] - lo]++] = i;
    Py_ssize_t n = start[hi - lo];
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_ssize_t i = order[j];
        double moved = total + (double)delta[i];
        if (fabs(moved) < fabs(total)) {
            total = moved;
            h[i * stride] = alt[i];
        }
    }
}

typedef struct { const float *w; uint16_t *h; Py_ssize_t k, cols, first, last; int fmt; } balance_job_t;

/* groups first..last-1: contiguous runs of k (cols 0), or, with cols > 0, the columns of
 * blocks of k rows of a [rows, cols] array (group g: block g / cols, column g % cols) */
static void *balance_thread(void *arg) {
    balance_job_t *J = (balance_job_t *)arg;
    for (Py_ssize_t g = J->first; g < J->last; g++) {
        if (J->cols == 0) {
            balance_group(J->w + g * J->k, J->h + g * J->k, J->k, 1, J->fmt);
        } else {
            Py_ssize_t at = (g / J->cols) * J->k * J->cols + g % J->cols;
            balance_group(J->w + at, J->h + at, J->k, J->cols, J->fmt);
        }
    }
    return NULL;
}

static PyObject *py_balance(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer wb, hb;
    Py_ssize_t k, cols;
    int fmt, nthreads;
    if (!PyArg_ParseTuple(args, "y*w*nnii", &wb, &hb, &k, &cols, &fmt, &nthreads)) return NULL;
    PyObject *res = NULL;
    if (k < 1 || k > BALANCE_MAXK || cols < 0 || (fmt != 0 && fmt != 1) || wb.len % (4 * k * (cols ? cols : 1)) ||
        hb.len * 2 != wb.len) {
        PyErr_SetString(PyExc_ValueError, "bad arguments");
        goto done;
    }
    {
        Py_ssize_t groups = wb.len / (4 * k);
        int nt = nthreads < 1 ? 1 : (nthreads > 64 ? 64 : nthreads);
        if ((Py_ssize_t)nt * 4096 > groups * k) nt = 1; /* small tensors: one thread */
        balance_job_t jobs[64];
        pthread_t th[64];
        int started[64] = {0};
        for (int i = 0; i < nt; i++) {
            jobs[i].w = (const float *)wb.buf; jobs[i].h = (uint16_t *)hb.buf; jobs[i].k = k; jobs[i].fmt = fmt;
            jobs[i].cols = cols;
            jobs[i].first = groups * i / nt; jobs[i].last = groups * (i + 1) / nt;
        }
        Py_BEGIN_ALLOW_THREADS
        for (int i = 1; i < nt; i++) started[i] = pthread_create(&th[i], NULL, balance_thread, &jobs[i]) == 0;
        balance_thread(&jobs[0]);
        for (int i = 1; i < nt; i++) { if (started[i]) pthread_join(th[i], NULL); else balance_thread(&jobs[i]); }
        Py_END_ALLOW_THREADS
    }
    Py_INCREF(Py_None);
    res = Py_None;
done:
    PyBuffer_Release(&wb);
    PyBuffer_Release(&hb);
    return res;
}

static PyMethodDef methods[] = {
    {"exact_outputs", py_exact_outputs, METH_NOARGS, "number of float outputs recomputed by the exact path so far"},
    {"reduce", py_reduce, METH_VARARGS, "reduce(inp, out, code, dims, mask, mode, nthreads) -> n_overflow"},
    {"balance", py_balance, METH_VARARGS, "balance(w, h, k, cols, fmt, nthreads): half bits h of float32 w rounded keeping each group's sum"},
    {NULL, NULL, 0, NULL},
};
static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_native", "Exact ReduceProd kernel.", -1, methods};
PyMODINIT_FUNC PyInit__native(void) {
    select_isa();
    PyObject *m = PyModule_Create(&moddef);
    if (m && PyModule_AddStringConstant(m, "ISA", ISA) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
