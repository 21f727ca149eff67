//! The C vector types of the vector variants ([`super::vector`]) and the helpers on them.
//!
//! A vector variant runs `n` lanes of one width: 32-bit lanes (`f16`, `f32`, `i32` and `bool`
//! values; `n` is the target's vector bytes / 4) or, where any value of the variant or of a
//! function it calls is `f64`, 64-bit lanes (`n` is the vector bytes / 8). Every value has `n`
//! lanes whatever its type, so `i32` and `f32` values of a variant with 64-bit lanes fill half
//! a register. Masks have the lane width of the variant (`pf_vNi`, or `pf_vNl` with 64-bit
//! lanes): a comparison of operands of the other width is converted to it, and a select of
//! values of the other width converts the mask to theirs (`__builtin_convertvector` keeps 0 and
//! −1).
//!
//! `f16` values are `float` lanes rounded to `f16` after every operation (`pf_f16r_vN`), as the
//! scalar code rounds them (see [`super::helpers`]): a `float` result of `+ - * /` on `f16`
//! values rounded to `f16` is the correctly rounded `f16` result. The rounding is written with
//! integer operations on the lanes' bits (round the significand to 11 bits, ties to even;
//! overflow to infinity; below 2⁻¹⁴ an addition of ½ rounds to a multiple of 2⁻²⁴): portable
//! C, one path on every machine, tested against the scalar rounding on a sample of all `float`
//! bit patterns. Measured with GCC 12 on a chain of dependent `x = round(round(x·a) + b)` over
//! 8 lanes (AVX-512 machine with F16C and AVX512-FP16): the integer rounding took 0.9–1.4 s per
//! 40 million roundings, the F16C round trip (`vcvtps2ph` / `vcvtph2ps`, x86 only) 1.1–1.2 s,
//! so a second, x86-only path does not pay. `_Float16` vectors were 4× faster there, compiled
//! to AVX512-FP16 instructions, but with `-march=x86-64-v3` GCC 12 converts every operation
//! to `float` and back (no faster than the integer rounding), other targets lack the type, and
//! their rounding under C's excess-precision rules would need its own checks; `f32` lanes
//! keep one well-tested path.

use polyhedral::program::ScalarType;

/// The lanes of a vector variant: how many, and whether they are 64-bit (some value is `f64`)
/// rather than 32-bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Lanes {
    pub n: usize,
    pub wide: bool,
}

impl Lanes {
    /// The C type of a varying value of type `ty`.
    pub fn vector(self, ty: ScalarType) -> String {
        let n = self.n;
        match ty {
            ScalarType::F16 | ScalarType::F32 => format!("pf_v{n}f"),
            ScalarType::F64 => format!("pf_v{n}d"),
            ScalarType::I32 => format!("pf_v{n}i"),
            ScalarType::Bool => self.mask(),
        }
    }

    /// The C type of a mask.
    pub fn mask(self) -> String {
        if self.wide {
            format!("pf_v{}l", self.n)
        } else {
            format!("pf_v{}i", self.n)
        }
    }

    /// The suffix of the helpers on masks (`pf_any_vN…`, `pf_splat_vN…`).
    pub fn mask_code(self) -> char {
        if self.wide {
            'l'
        } else {
            'i'
        }
    }

    /// Whether the lanes of values of type `ty` are 64-bit (so masks of them are `pf_vNl`).
    fn wide_type(self, ty: ScalarType) -> bool {
        match ty {
            ScalarType::F64 => true,
            ScalarType::Bool => self.wide,
            _ => false,
        }
    }

    /// Mask `m`, a C expression of the variant's mask type, as a mask for values of `ty`.
    pub fn mask_for(self, ty: ScalarType, m: &str) -> String {
        if self.wide_type(ty) == self.wide {
            m.to_string()
        } else if self.wide {
            format!("__builtin_convertvector({m}, pf_v{}i)", self.n)
        } else {
            format!("__builtin_convertvector({m}, pf_v{}l)", self.n)
        }
    }

    /// `cmp`, a comparison of operands of type `ty`, as a mask of the variant.
    pub fn mask_of_comparison(self, ty: ScalarType, cmp: String) -> String {
        if self.wide_type(ty) == self.wide {
            cmp
        } else {
            format!("__builtin_convertvector({cmp}, {})", self.mask())
        }
    }

    /// A select of values of type `ty` by mask `m` of the variant.
    pub fn select(self, ty: ScalarType, m: &str, a: &str, b: &str) -> String {
        let kind = match ty {
            ScalarType::F16 | ScalarType::F32 => 'f',
            ScalarType::F64 => 'd',
            ScalarType::I32 => 'i',
            ScalarType::Bool => self.mask_code(),
        };
        format!(
            "pf_sel_v{}{kind}({}, {a}, {b})",
            self.n,
            self.mask_for(ty, m)
        )
    }

    /// The bytes of a vector of elements of type `ty`.
    pub fn bytes(self, ty: ScalarType) -> usize {
        self.n * ty.size_in_bytes()
    }
}

/// The opening of an `#if` whose true branch defines `name(ty m)`, whether any lane of the mask
/// `m` (a vector of `bytes` bytes) is set: one `vptest` where the vectors are a whole AVX or
/// SSE register. The caller writes the `#else` branch, a portable fallback.
fn any_lanes_test(name: &str, ty: &str, bytes: usize) -> String {
    let (guard, intrinsic, reg) = match bytes {
        32 => ("__AVX__", "_mm256_testz_si256", "__m256i"),
        16 => ("__SSE4_1__", "_mm_testz_si128", "__m128i"),
        _ => return "#if 0\n".to_string(),
    };
    format!(
        "#if defined({guard})\n#include <immintrin.h>\nstatic inline int {name}({ty} m) {{ return !{intrinsic}(({reg})m, ({reg})m); }}\n"
    )
}

/// The vector typedefs and helpers for `w` lanes of 32 bits.
pub(crate) fn prelude(w: usize) -> String {
    let bytes = 4 * w;
    let words = (bytes / 8).max(1);
    let ors: Vec<String> = (0..words).map(|k| format!("w[{k}]")).collect();
    let splat_f: Vec<&str> = vec!["x"; w];
    let iota: Vec<String> = (0..w).map(|k| format!("{k}u")).collect();
    let test = any_lanes_test(&format!("pf_any_v{w}"), &format!("pf_v{w}i"), bytes);
    format!(
        "\ntypedef float pf_v{w}f __attribute__((vector_size({bytes})));\n\
typedef int32_t pf_v{w}i __attribute__((vector_size({bytes})));\n\
typedef uint32_t pf_v{w}u __attribute__((vector_size({bytes})));\n\
{test}#else\nstatic inline int pf_any_v{w}(pf_v{w}i m)\n{{\n    uint64_t w[{words}];\n    memcpy(w, &m, sizeof m);\n    return ({}) != 0;\n}}\n#endif\n\
static inline pf_v{w}f pf_splat_v{w}f(float x) {{ return (pf_v{w}f){{{}}}; }}\n\
static inline pf_v{w}i pf_splat_v{w}i(int32_t x) {{ return (pf_v{w}i){{{}}}; }}\n\
static inline pf_v{w}i pf_lin_v{w}i(int32_t x, int32_t s)\n{{\n    pf_v{w}u k = {{{}}};\n    return (pf_v{w}i)((pf_v{w}u)pf_splat_v{w}i(x) + k * (uint32_t)s);\n}}\n\
{}",
        ors.join(" | "),
        splat_f.join(", "),
        splat_f.join(", "),
        iota.join(", "),
        selects_and_groups(w, 'f', 'i'),
    )
}

/// Selects by mask, `fmin`/`fmax` and the structs of 2 and 4 vectors for `w` lanes of the
/// float vector type `pf_vW{float}` and its mask type `pf_vW{mask}`.
fn selects_and_groups(w: usize, float: char, mask: char) -> String {
    let (fs, ms) = (format!("v{w}{float}"), format!("v{w}{mask}"));
    let (f, m) = (format!("pf_{fs}"), format!("pf_{ms}"));
    format!(
        "static inline {m} pf_sel_{ms}({m} m, {m} a, {m} b) {{ return (m & a) | (~m & b); }}\n\
static inline {f} pf_sel_{fs}({m} m, {f} a, {f} b)\n{{\n    return ({f})((m & ({m})a) | (~m & ({m})b));\n}}\n\
static inline {f} pf_fmin_{fs}({f} a, {f} b) {{ return pf_sel_{fs}((a < b) | (b != b), a, b); }}\n\
static inline {f} pf_fmax_{fs}({f} a, {f} b) {{ return pf_sel_{fs}((a > b) | (b != b), a, b); }}\n\
typedef struct {{ {f} v[2]; }} {f}x2;\n\
typedef struct {{ {m} v[2]; }} {m}x2;\n\
typedef struct {{ {f} v[4]; }} {f}x4;\n\
typedef struct {{ {m} v[4]; }} {m}x4;\n"
    )
}

/// `pf_f16r_vW`: every lane of a `float` vector of `w` lanes rounded to the nearest `f16`,
/// ties to even, as `pf_f16r` rounds one value (NaN stays NaN).
pub(crate) fn f16_rounding(w: usize) -> String {
    let body = [
        format!("const pf_v{w}u b = (pf_v{w}u)x;"),
        format!("const pf_v{w}u sign = b & 0x80000000u;"),
        format!("const pf_v{w}u mag = b & 0x7fffffffu;"),
        "/* f16 normals: the significand rounded to 11 bits, ties to even. */".to_string(),
        format!("pf_v{w}u r = (mag + 0xfffu + ((mag >> 13) & 1u)) & ~(pf_v{w}u){{0}} << 13;"),
        "/* Past the largest f16 (65504): infinity. */".to_string(),
        format!("const pf_v{w}u big = (pf_v{w}u)(r > 0x477fe000u);"),
        "r = (r & ~big) | (0x7f800000u & big);".to_string(),
        "/* Below 2^-14: a multiple of 2^-24, rounded by adding 1/2 (whose ulp is 2^-24). */"
            .to_string(),
        format!("const pf_v{w}f small = ((pf_v{w}f)mag + 0.5f) - 0.5f;"),
        format!("const pf_v{w}u tiny = (pf_v{w}u)(mag < 0x38800000u);"),
        format!("r = (r & ~tiny) | ((pf_v{w}u)small & tiny);"),
        format!("const pf_v{w}u nan = (pf_v{w}u)(mag > 0x7f800000u);"),
        "r = (r & ~nan) | (mag & nan);".to_string(),
        format!("return (pf_v{w}f)(r | sign);"),
    ];
    format!(
        "\nstatic inline pf_v{w}f pf_f16r_v{w}(pf_v{w}f x)\n{{\n    {}\n}}\n",
        body.join("\n    ")
    )
}

/// The typedefs and helpers for `w` lanes of 64 bits (after [`prelude`] for `w` lanes of 32).
pub(crate) fn wide_prelude(w: usize) -> String {
    let bytes = 8 * w;
    let splat: Vec<&str> = vec!["x"; w];
    let splat = splat.join(", ");
    let test = any_lanes_test(&format!("pf_any_v{w}l"), &format!("pf_v{w}l"), bytes);
    let ors: Vec<String> = (0..w).map(|k| format!("m[{k}]")).collect();
    format!(
        "\ntypedef double pf_v{w}d __attribute__((vector_size({bytes})));\n\
typedef int64_t pf_v{w}l __attribute__((vector_size({bytes})));\n\
{test}#else\nstatic inline int pf_any_v{w}l(pf_v{w}l m) {{ return ({}) != 0; }}\n#endif\n\
static inline pf_v{w}d pf_splat_v{w}d(double x) {{ return (pf_v{w}d){{{splat}}}; }}\n\
static inline pf_v{w}l pf_splat_v{w}l(int64_t x) {{ return (pf_v{w}l){{{splat}}}; }}\n\
{}",
        ors.join(" | "),
        selects_and_groups(w, 'd', 'l'),
    )
}

#[cfg(test)]
mod tests {
    use super::super::helpers::Helper;
    use super::*;

    /// `pf_f16r_v8` against the scalar `pf_f16r` on every 61st bit pattern of `float` (all
    /// exponents, both signs, NaN and infinity among them) and on the boundaries it tests.
    #[test]
    fn vector_f16_rounding_is_the_scalar_rounding() {
        let helpers: String = [Helper::H2F, Helper::F2H, Helper::F16R]
            .iter()
            .map(|h| h.source())
            .collect();
        let main = r#"
#include <stdio.h>
static int check(const float *xs)
{
    pf_v8f x;
    memcpy(&x, xs, sizeof x);
    const pf_v8f r = pf_f16r_v8(x);
    int bad = 0;
    for (int k = 0; k < 8; k++) {
        const float want = pf_f16r(xs[k]);
        uint32_t a, b;
        const float got = r[k];
        memcpy(&a, &want, 4);
        memcpy(&b, &got, 4);
        if (want != want ? got == got : a != b) {
            if (bad < 5)
                printf("%a: %a, not %a\n", xs[k], got, want);
            bad++;
        }
    }
    return bad;
}
int main(void)
{
    long bad = 0;
    float xs[8];
    for (uint64_t i = 0; i < (1ull << 32); i += 8 * 61) {
        for (int k = 0; k < 8; k++) {
            const uint32_t b = (uint32_t)(i + 61 * k);
            memcpy(&xs[k], &b, 4);
        }
        bad += check(xs);
    }
    const float edges[] = {65504.0f, 65519.99f, 65520.0f, 0x1p-14f, 0x1.ffcp-15f, 0x1p-24f,
        0x1p-25f, 0x1.8p-25f, 1.0f + 0x1p-11f, 1.0f + 0x3p-11f, INFINITY, NAN, 0.0f, -0.0f,
        -65520.0f, -0x1p-25f};
    for (int j = 0; j + 8 <= 16; j += 8)
        bad += check(edges + j);
    printf("%ld\n", bad);
    return bad != 0;
}
"#;
        let source = format!(
            "#include <math.h>\n#include <stdint.h>\n#include <string.h>\n{helpers}{}{}{main}",
            prelude(8),
            f16_rounding(8)
        );
        let dir = std::env::temp_dir().join(format!("polyfuse-f16-lanes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (c, exe) = (dir.join("t.c"), dir.join("t"));
        std::fs::write(&c, source).unwrap();
        let built = std::process::Command::new("cc")
            .args(["-O2", "-ffp-contract=off", "-o"])
            .arg(&exe)
            .arg(&c)
            .arg("-lm")
            .status()
            .expect("a C compiler");
        assert!(built.success(), "the test program does not build");
        let run = std::process::Command::new(&exe).output().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stdout)
        );
    }
}
