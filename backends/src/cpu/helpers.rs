//! The static inline C helpers a kernel may need, each emitted only when used.
//!
//! Integer loop-bound helpers work on `int64_t` with a positive divisor. The `i32` helpers give
//! the interpreter's semantics without undefined behaviour: arithmetic wraps (computed on
//! `uint32_t`), division truncates, division and remainder by zero give 0 (the interpreter
//! stops with an error there, so a program that divides by zero is never compared), and
//! `INT32_MIN / -1` wraps. Float-to-integer conversion truncates and saturates, NaN giving 0,
//! as Rust's `as` does.
//!
//! `pf_f64x8` and the other vector types hold a register tile's vectors; their `_u` forms
//! load and store them at any element-aligned address (see [`super::micro_vector`]).
//!
//! `pf_f32` rounds a `double` to `float` as the cast does, behind an empty `asm` that keeps the
//! rounding: GCC 12's SLP vectorizer drops a `(double)(float)x` round trip on lanes it permutes
//! (a loop over `A[K - 1 - j]` unrolled into a vector), which would keep the unrounded value.
//!
//! `f16` values live in `float` variables and in `uint16_t` storage. `pf_h2f` widens exactly;
//! `pf_f2h` rounds a `double` to the nearest `f16`, ties to even, with overflow to infinity;
//! `pf_f16r` rounds a `float` result of one operation on `f16` values back to `f16`. Rounding a
//! `float` result is the same as rounding the exact result because `float` has at least
//! 2·11 + 2 significand bits, so `+ - * /` and `sqrt` double-round innocuously.

/// A helper, in an order where every helper comes after the ones it calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Helper {
    FloorD,
    CeilD,
    Mod,
    Min,
    Max,
    NegI32,
    AddI32,
    SubI32,
    MulI32,
    DivI32,
    RemI32,
    AbsI32,
    MinI32,
    MaxI32,
    F2I,
    F32,
    H2F,
    F2H,
    F16R,
    VecF32x8,
    VecF32x16,
    VecF64x4,
    VecF64x8,
}

impl Helper {
    /// The helpers this one calls.
    pub(crate) fn requires(self) -> &'static [Helper] {
        match self {
            Helper::DivI32 | Helper::AbsI32 => &[Helper::NegI32],
            Helper::F16R => &[Helper::H2F, Helper::F2H],
            _ => &[],
        }
    }

    pub(crate) fn source(self) -> &'static str {
        match self {
            Helper::FloorD => {
                "static inline int64_t pf_floord(int64_t a, int64_t b)\n{\n    int64_t q = a / b;\n    return (a % b != 0 && a < 0) ? q - 1 : q;\n}\n"
            }
            Helper::CeilD => {
                "static inline int64_t pf_ceild(int64_t a, int64_t b)\n{\n    int64_t q = a / b;\n    return (a % b != 0 && a > 0) ? q + 1 : q;\n}\n"
            }
            Helper::Mod => {
                "static inline int64_t pf_mod(int64_t a, int64_t b)\n{\n    int64_t r = a % b;\n    return r < 0 ? r + b : r;\n}\n"
            }
            Helper::Min => {
                "static inline int64_t pf_min(int64_t a, int64_t b) { return a < b ? a : b; }\n"
            }
            Helper::Max => {
                "static inline int64_t pf_max(int64_t a, int64_t b) { return a > b ? a : b; }\n"
            }
            Helper::NegI32 => {
                "static inline int32_t pf_neg_i32(int32_t a) { return (int32_t)(0u - (uint32_t)a); }\n"
            }
            Helper::AddI32 => {
                "static inline int32_t pf_add_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }\n"
            }
            Helper::SubI32 => {
                "static inline int32_t pf_sub_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }\n"
            }
            Helper::MulI32 => {
                "static inline int32_t pf_mul_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }\n"
            }
            Helper::DivI32 => {
                "static inline int32_t pf_div_i32(int32_t a, int32_t b)\n{\n    return b == 0 ? 0 : b == -1 ? pf_neg_i32(a) : a / b;\n}\n"
            }
            Helper::RemI32 => {
                "static inline int32_t pf_rem_i32(int32_t a, int32_t b)\n{\n    return (b == 0 || b == -1) ? 0 : a % b;\n}\n"
            }
            Helper::AbsI32 => {
                "static inline int32_t pf_abs_i32(int32_t a) { return a < 0 ? pf_neg_i32(a) : a; }\n"
            }
            Helper::MinI32 => {
                "static inline int32_t pf_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }\n"
            }
            Helper::MaxI32 => {
                "static inline int32_t pf_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }\n"
            }
            Helper::F2I => {
                "static inline int32_t pf_f2i(double x)\n{\n    if (x != x)\n        return 0;\n    if (x <= -2147483648.0)\n        return INT32_MIN;\n    if (x >= 2147483647.0)\n        return INT32_MAX;\n    return (int32_t)x;\n}\n"
            }
            Helper::F32 => {
                "static inline float pf_f32(double x)\n{\n    float f = (float)x;\n    __asm__(\"\" : \"+m\"(f));\n    return f;\n}\n"
            }
            Helper::H2F => {
                "static inline float pf_h2f(uint16_t h)\n{\n    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;\n    uint32_t exp = (h >> 10) & 0x1fu;\n    uint32_t man = h & 0x3ffu;\n    uint32_t bits;\n    if (exp == 0) {\n        float m = (float)man * 0x1p-24f;\n        return sign ? -m : m;\n    }\n    if (exp == 31)\n        bits = sign | 0x7f800000u | (man << 13);\n    else\n        bits = sign | ((exp + 112u) << 23) | (man << 13);\n    float f;\n    memcpy(&f, &bits, sizeof f);\n    return f;\n}\n"
            }
            Helper::F2H => {
                "static inline uint16_t pf_f2h(double x)\n{\n    uint64_t b;\n    memcpy(&b, &x, sizeof b);\n    uint16_t sign = (uint16_t)((b >> 48) & 0x8000u);\n    uint64_t mag = b & 0x7fffffffffffffffull;\n    if (mag > 0x7ff0000000000000ull)\n        return sign | 0x7e00u;\n    int64_t e = (int64_t)(mag >> 52) - 1023;\n    if (e >= 16)\n        return sign | 0x7c00u;\n    if (e >= -14) {\n        uint64_t rest = mag & ((1ull << 42) - 1);\n        uint64_t half = 1ull << 41;\n        uint32_t h = (uint32_t)(((e + 15) << 10) | (int64_t)((mag >> 42) & 0x3ffu));\n        if (rest > half || (rest == half && (h & 1u)))\n            h += 1;\n        return sign | (uint16_t)h;\n    }\n    if (e < -25)\n        return sign;\n    uint64_t m = (mag & ((1ull << 52) - 1)) | (1ull << 52);\n    int s = (int)(28 - e);\n    uint64_t rest = m & ((1ull << s) - 1);\n    uint64_t half = 1ull << (s - 1);\n    uint32_t h = (uint32_t)(m >> s);\n    if (rest > half || (rest == half && (h & 1u)))\n        h += 1;\n    return sign | (uint16_t)h;\n}\n"
            }
            Helper::F16R => {
                "static inline float pf_f16r(double x) { return pf_h2f(pf_f2h(x)); }\n"
            }
            Helper::VecF32x8 => {
                "typedef float pf_f32x8 __attribute__((vector_size(32)));\ntypedef float pf_f32x8_u __attribute__((vector_size(32), aligned(4), may_alias));\n"
            }
            Helper::VecF32x16 => {
                "typedef float pf_f32x16 __attribute__((vector_size(64)));\ntypedef float pf_f32x16_u __attribute__((vector_size(64), aligned(4), may_alias));\n"
            }
            Helper::VecF64x4 => {
                "typedef double pf_f64x4 __attribute__((vector_size(32)));\ntypedef double pf_f64x4_u __attribute__((vector_size(32), aligned(8), may_alias));\n"
            }
            Helper::VecF64x8 => {
                "typedef double pf_f64x8 __attribute__((vector_size(64)));\ntypedef double pf_f64x8_u __attribute__((vector_size(64), aligned(8), may_alias));\n"
            }
        }
    }
}
