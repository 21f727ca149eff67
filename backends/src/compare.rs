//! Comparison of a target's outputs with the reference interpreter's.
//!
//! Every back end reproduces the interpreter's arithmetic operation by operation (same types,
//! same rounding after every operation, same order of every reduction), so a correct target
//! agrees with it exactly except where a math library differs: transcendental functions may
//! differ by an ulp between implementations. The tolerances allow a few ulps of the element
//! type and nothing more, so a wrong loop bound (a missing or extra term of a sum of values in
//! [-1, 1), an element left unwritten) is always caught:
//!
//! | type | relative | absolute |
//! | --- | --- | --- |
//! | `f64` | 1e-12 | 1e-12 |
//! | `f32` | 1e-6 (≈ 8 ulp) | 1e-6 |
//! | `f16` | 2⁻¹⁰ (1 ulp) | 2⁻¹⁴ (smallest normal) |
//! | `i32` | exact | exact |
//!
//! A finite element passes when `|actual - expected| <= abs + rel * |expected|`. Special values
//! match exactly: NaN only NaN, `+inf` only `+inf`, `-inf` only `-inf`; the tolerances apply to
//! finite values only.
//! WGSL lets a shader compiler assume that no value is an infinity or NaN, so on the GPU
//! ([`Specials::UnspecifiedByWgsl`]) an element whose interpreter value is not finite and whose
//! GPU value differs is neither a match nor a mismatch: it is counted as *unspecified* and the
//! verdict says so. The GPU writer computes IEEE results where a kernel makes special values
//! from finite ones by dividing by zero; what a shader compiler then folds (`x - x` to 0 for an
//! infinite `x`) is what WGSL leaves open.
//!
//! The reported relative error of an element is `|actual - expected| / |expected|`, or the
//! absolute error where the expected value is zero.

use std::fmt;

use polyhedral::interp::Memory;
use polyhedral::program::{ArrayId, Program, ScalarType};

/// How far an element may be from the interpreter's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub abs: f64,
    pub rel: f64,
}

impl Tolerance {
    /// The tolerance for elements of `ty` (see the module docs).
    pub fn for_type(ty: ScalarType) -> Tolerance {
        match ty {
            ScalarType::F64 => Tolerance {
                abs: 1e-12,
                rel: 1e-12,
            },
            ScalarType::F32 => Tolerance {
                abs: 1e-6,
                rel: 1e-6,
            },
            ScalarType::F16 => Tolerance {
                abs: f64::powi(2.0, -14),
                rel: f64::powi(2.0, -10),
            },
            ScalarType::I32 | ScalarType::Bool => Tolerance { abs: 0.0, rel: 0.0 },
        }
    }

    /// Special values match exactly: NaN only NaN, an infinity only the same infinity (a
    /// relative tolerance of an infinity would be infinite and accept any number).
    fn accepts(&self, expected: f64, actual: f64) -> bool {
        if !expected.is_finite() || !actual.is_finite() {
            return (expected.is_nan() && actual.is_nan()) || expected == actual;
        }
        (actual - expected).abs() <= self.abs + self.rel * expected.abs()
    }
}

/// What a target's language promises about infinities and NaNs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Specials {
    /// IEEE arithmetic: special values are compared exactly, as every other value (C, the
    /// simulator).
    Ieee,
    /// WGSL: an element whose interpreter value is not finite and that differs is unspecified.
    UnspecifiedByWgsl,
}

/// The errors of one output array.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayComparison {
    pub array: ArrayId,
    pub tolerance: Tolerance,
    pub max_abs: f64,
    pub max_rel: f64,
    /// Elements outside the tolerance.
    pub mismatches: usize,
    /// The first element outside the tolerance: flat index, expected and actual value.
    pub first_mismatch: Option<(usize, f64, f64)>,
    /// Elements whose interpreter value is not finite and whose value here differs, where the
    /// target's language leaves special values unspecified ([`Specials::UnspecifiedByWgsl`]).
    pub unspecified: usize,
    /// The first of those: flat index, expected and actual value.
    pub first_unspecified: Option<(usize, f64, f64)>,
}

/// The errors of every output array of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub arrays: Vec<ArrayComparison>,
}

impl Comparison {
    /// No element differs beyond its tolerance (unspecified elements aside: see
    /// [`Comparison::unspecified`]).
    pub fn passed(&self) -> bool {
        self.arrays.iter().all(|a| a.mismatches == 0)
    }

    /// Elements that differ where the target's language leaves special values unspecified.
    pub fn unspecified(&self) -> usize {
        self.arrays.iter().map(|a| a.unspecified).sum()
    }

    /// The last line `polyfuse run` prints for a compiled target.
    pub fn verdict(&self) -> String {
        match (self.passed(), self.unspecified()) {
            (false, _) => "result: MISMATCH with the interpreter\n".into(),
            (true, 0) => "result: matches the interpreter\n".into(),
            (true, n) => format!(
                "result: matches the interpreter wherever WGSL specifies the result; {n} \
                 element{} non-finite on gpu: unspecified by WGSL\n",
                if n == 1 { "" } else { "s" }
            ),
        }
    }

    /// One line per output array: errors, tolerance, and the first mismatch if any.
    pub fn to_text(&self, program: &Program) -> String {
        let mut out = String::new();
        for a in &self.arrays {
            let array = program.array(a.array);
            let extents = program.array_extents(a.array);
            out += &format!(
                "  {}: {}[{}]  max abs error {:.3e}  max rel error {:.3e}  (tolerance abs {:.1e}, rel {:.1e})  {}\n",
                array.name,
                array.elem,
                join(&extents),
                a.max_abs,
                a.max_rel,
                a.tolerance.abs,
                a.tolerance.rel,
                match (a.mismatches, a.unspecified) {
                    (0, 0) => "ok",
                    (0, _) => "unspecified",
                    _ => "MISMATCH",
                }
            );
            if let Some((flat, expected, actual)) = a.first_mismatch {
                out += &format!(
                    "    {} of {} elements differ; first {}[{}]: expected {expected:e}, got {actual:e}\n",
                    a.mismatches,
                    program.array_len(a.array),
                    array.name,
                    join(&unflatten(flat, &extents))
                );
            }
            if let Some((flat, expected, actual)) = a.first_unspecified {
                out += &format!(
                    "    {} of {} elements non-finite on gpu: unspecified by WGSL; first {}[{}]: \
                     expected {expected:e}, got {actual:e}\n",
                    a.unspecified,
                    program.array_len(a.array),
                    array.name,
                    join(&unflatten(flat, &extents))
                );
            }
        }
        out
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "abs {:e}, rel {:e}", self.abs, self.rel)
    }
}

fn join(items: &[i64]) -> String {
    items
        .iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn unflatten(mut flat: usize, extents: &[i64]) -> Vec<i64> {
    let mut index = vec![0; extents.len()];
    for (d, &e) in extents.iter().enumerate().rev() {
        let e = e.max(1) as usize;
        index[d] = (flat % e) as i64;
        flat /= e;
    }
    index
}

/// Compares `actual` (the live-out arrays a target produced, by array) with the interpreter's
/// final memory `expected`, special values exactly. A live-out array missing from `actual`, or
/// of the wrong length, counts as mismatching everywhere.
pub fn compare(program: &Program, expected: &Memory, actual: &[(ArrayId, Vec<f64>)]) -> Comparison {
    compare_with(program, expected, actual, Specials::Ieee)
}

/// [`compare`] for a target whose language makes the promises `specials`.
pub fn compare_with(
    program: &Program,
    expected: &Memory,
    actual: &[(ArrayId, Vec<f64>)],
    specials: Specials,
) -> Comparison {
    let arrays = program
        .arrays
        .iter()
        .enumerate()
        .filter(|(_, a)| a.role.is_live_out())
        .map(|(k, a)| {
            let id = ArrayId(k as u32);
            let want = expected.array(id);
            let tolerance = Tolerance::for_type(a.elem);
            let mut c = ArrayComparison {
                array: id,
                tolerance,
                max_abs: 0.0,
                max_rel: 0.0,
                mismatches: 0,
                first_mismatch: None,
                unspecified: 0,
                first_unspecified: None,
            };
            let got = actual.iter().find(|(a, _)| *a == id).map(|(_, v)| v);
            match got {
                Some(got) if got.len() == want.len() => {
                    for (flat, (&e, &g)) in want.iter().zip(got).enumerate() {
                        let accepted = tolerance.accepts(e, g);
                        if !accepted && specials == Specials::UnspecifiedByWgsl && !e.is_finite() {
                            c.unspecified += 1;
                            c.first_unspecified.get_or_insert((flat, e, g));
                            continue;
                        }
                        let (abs, rel) = errors(e, g);
                        c.max_abs = c.max_abs.max(abs);
                        c.max_rel = c.max_rel.max(rel);
                        if !accepted {
                            c.mismatches += 1;
                            c.first_mismatch.get_or_insert((flat, e, g));
                        }
                    }
                }
                _ => {
                    c.max_abs = f64::INFINITY;
                    c.max_rel = f64::INFINITY;
                    c.mismatches = want.len().max(1);
                }
            }
            c
        })
        .collect();
    Comparison { arrays }
}

/// Absolute and relative error of one element; both NaN counts as no error.
fn errors(expected: f64, actual: f64) -> (f64, f64) {
    if (expected.is_nan() && actual.is_nan()) || expected == actual {
        return (0.0, 0.0);
    }
    let abs = (actual - expected).abs();
    let abs = if abs.is_nan() { f64::INFINITY } else { abs };
    let rel = if expected == 0.0 || abs.is_infinite() {
        abs
    } else {
        abs / expected.abs()
    };
    (abs, rel)
}

/// Whether `program`, a rewrite of `reference`, keeps the reference's arrays in order (names,
/// element types and roles), perhaps with temporaries added after them, so that the two can be
/// run on the same random inputs and their outputs compared.
pub fn keeps_arrays(reference: &Program, program: &Program) -> bool {
    reference.arrays.len() <= program.arrays.len()
        && reference
            .arrays
            .iter()
            .zip(&program.arrays)
            .all(|(a, b)| a.name == b.name && a.elem == b.elem && a.role == b.role)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerances_accept_ulps_and_reject_wrong_values() {
        let f32_tol = Tolerance::for_type(ScalarType::F32);
        let x = 3.25f32;
        let next = f32::from_bits(x.to_bits() + 2) as f64;
        assert!(f32_tol.accepts(x as f64, next));
        assert!(!f32_tol.accepts(x as f64, x as f64 + 1e-4));
        let i = Tolerance::for_type(ScalarType::I32);
        assert!(!i.accepts(7.0, 8.0));
        assert!(i.accepts(f64::NAN, f64::NAN));
        let h = Tolerance::for_type(ScalarType::F16);
        assert!(h.accepts(1.0, 1.0 + f64::powi(2.0, -10)));
        assert!(!h.accepts(1.0, 1.0 + f64::powi(2.0, -8)));
    }

    #[test]
    fn special_values_match_only_themselves() {
        let inf = f64::INFINITY;
        for ty in [ScalarType::F64, ScalarType::F32, ScalarType::F16] {
            let t = Tolerance::for_type(ty);
            assert!(t.accepts(inf, inf));
            assert!(t.accepts(-inf, -inf));
            assert!(!t.accepts(inf, 3.4e38));
            assert!(!t.accepts(inf, -inf));
            assert!(!t.accepts(-inf, 0.0));
            assert!(!t.accepts(inf, f64::NAN));
            assert!(!t.accepts(f64::NAN, inf));
            assert!(!t.accepts(f64::NAN, 1.0));
            assert!(!t.accepts(1.0, f64::NAN));
            assert!(!t.accepts(1.0, inf));
        }
    }

    #[test]
    fn relative_error_of_zero_is_the_absolute_error() {
        assert_eq!(errors(0.0, 0.5), (0.5, 0.5));
        assert_eq!(errors(2.0, 1.0), (1.0, 0.5));
        assert_eq!(errors(1.0, f64::NAN).0, f64::INFINITY);
        assert_eq!(errors(f64::INFINITY, 1.0), (f64::INFINITY, f64::INFINITY));
    }
}
