//! Alignment of a vectorised loop's contiguous accesses (the seed's aligned attribute).
//!
//! Lane 0 of a contiguous access is at element offset `f + i` from its array's start, where
//! `i` is the vectorised iterator and `f` depends on the other iterators and the sizes. When
//! `f` is a multiple of `a` for every value of the other iterators, a loop whose first
//! iteration is a multiple of `a`, over an array whose start is aligned to `a` elements, reads
//! (or writes) an aligned first vector, and every vector after it is aligned too: vectors are
//! whole vectors apart. [`alignment`] gives the largest such `a`, a power of two up to
//! [`MAX_ALIGNMENT`]; an emitter that knows the array's start and the loop's first iteration
//! (or tests them once per loop) may then use aligned vector loads and stores.

use std::collections::BTreeMap;

use super::{access_pattern, AccessPattern};
use crate::program::{Access, Program, Var};

/// The largest alignment, in elements, [`alignment`] reports.
pub const MAX_ALIGNMENT: i64 = 64;

/// The alignment in elements of the offsets of `access`'s first lane relative to its array's
/// start, given a first iteration of the vectorised iterator `depth` aligned as much; `None`
/// when the access is not contiguous along `depth`.
pub fn alignment(program: &Program, access: &Access, depth: usize) -> Option<i64> {
    if access_pattern(access, depth) != AccessPattern::Contiguous {
        return None;
    }
    let extents = program.array_extents(access.array);
    let params = program.param_values();
    let mut stride = 1i64;
    let mut strides = vec![0i64; extents.len()];
    for d in (0..extents.len()).rev() {
        strides[d] = stride;
        stride = stride.saturating_mul(extents[d].max(1));
    }
    let mut iterators: BTreeMap<usize, i64> = BTreeMap::new();
    let mut constant = 0i64;
    for (sub, s) in access.subscripts.iter().zip(&strides) {
        constant = constant.wrapping_add(sub.constant.wrapping_mul(*s));
        for (v, c) in sub.terms() {
            match v {
                Var::Iter(d) if *d == depth => {}
                Var::Iter(d) => *iterators.entry(*d).or_insert(0) += c.wrapping_mul(*s),
                Var::Param(p) => {
                    constant =
                        constant.wrapping_add(c.wrapping_mul(*s).wrapping_mul(params[p.index()]))
                }
                // A contiguous access has no division variables (see `access_pattern`).
                Var::Div(_) => return None,
            }
        }
    }
    let g = iterators.values().fold(constant, |g, c| gcd(g, *c));
    Some(if g == 0 {
        MAX_ALIGNMENT
    } else {
        (1i64 << g.trailing_zeros().min(6)).min(MAX_ALIGNMENT)
    })
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{AffineExpr, ArrayId};

    #[test]
    fn gcd_of_offsets() {
        assert_eq!(gcd(0, 12), 12);
        assert_eq!(gcd(-8, 12), 4);
        assert_eq!(gcd(0, 0), 0);
    }

    #[test]
    fn row_offsets_and_constants_decide_the_alignment() {
        let program = frontend_free_program();
        let at = |row: i64, col_shift: i64| Access {
            array: ArrayId(0),
            subscripts: vec![
                AffineExpr::term(Var::Iter(0), row),
                AffineExpr::from_terms([(Var::Iter(1), 1)], col_shift),
            ],
            span: Default::default(),
        };
        // Rows of 24 elements: the row start is a multiple of 8.
        assert_eq!(alignment(&program, &at(1, 0), 1), Some(8));
        assert_eq!(alignment(&program, &at(1, 2), 1), Some(2));
        assert_eq!(alignment(&program, &at(0, 0), 1), Some(MAX_ALIGNMENT));
        assert_eq!(alignment(&program, &at(1, 0), 0), None);
    }

    fn frontend_free_program() -> Program {
        let mut p = Program::default();
        p.arrays.push(crate::program::Array {
            name: "A".into(),
            elem: crate::program::ScalarType::F32,
            shape: vec![AffineExpr::constant(5), AffineExpr::constant(24)],
            role: crate::program::ArrayRole::Input,
            span: Default::default(),
        });
        p
    }
}
