//! Textbook cases and property tests of the ILP solver against brute-force enumeration.

use super::*;
use proptest::prelude::*;

fn q(v: i64) -> BigRational {
    BigRational::from(BigInt::from(v))
}

fn problem(n: usize, ineqs: &[&[i64]], eqs: &[&[i64]]) -> Problem {
    let mut p = Problem::new(n);
    for r in ineqs {
        p.add_ineq(r).unwrap();
    }
    for r in eqs {
        p.add_eq(r).unwrap();
    }
    p
}

#[test]
fn empty_without_integer_points() {
    // 1 ≤ 3x ≤ 2 has rational points only.
    let p = problem(1, &[&[-1, 3], &[2, -3]], &[]);
    assert!(p.is_empty().unwrap());
    assert_eq!(p.lexmin().unwrap(), LexMin::Empty);
    assert!(matches!(p.lp_lexmin().unwrap(), LexMin::Point(_)));
}

#[test]
fn rationally_empty() {
    let p = problem(2, &[&[-1, 1, 1], &[0, -1, 0], &[0, 0, -1]], &[]);
    assert_eq!(p.lexmin().unwrap(), LexMin::Empty);
}

#[test]
fn lexmin_prefers_earlier_variables() {
    // x + y ≥ 3, 0 ≤ x, y ≤ 5: lexmin is (0, 3).
    let p = problem(
        2,
        &[
            &[-3, 1, 1],
            &[0, 1, 0],
            &[0, 0, 1],
            &[5, -1, 0],
            &[5, 0, -1],
        ],
        &[],
    );
    assert_eq!(p.lexmin().unwrap().integer_point(), Some(vec![0, 3]));
}

#[test]
fn integrality_needs_branching() {
    // 2x = 2y + 1 + 2z has no integer point; 2x + 3y = 7, x,y ≥ 0 gives (2, 1).
    let p = problem(3, &[], &[&[-1, 2, -2, -2]]);
    assert!(p.is_empty().unwrap());
    let p = problem(2, &[&[0, 1, 0], &[0, 0, 1]], &[&[-7, 2, 3]]);
    assert_eq!(p.lexmin().unwrap().integer_point(), Some(vec![2, 1]));
}

#[test]
fn free_variables_and_unbounded() {
    // x free, y ≥ x − 10, y ≤ −x: lexmin of x is unbounded.
    let p = problem(2, &[&[10, -1, 1], &[0, -1, -1]], &[]);
    assert_eq!(p.lexmin().unwrap(), LexMin::Unbounded);
    // x ≥ −7 free otherwise; y ≥ 2x.
    let p = problem(2, &[&[7, 1, 0], &[0, -2, 1]], &[]);
    assert_eq!(p.lexmin().unwrap().integer_point(), Some(vec![-7, -14]));
}

#[test]
fn rational_variables_are_not_branched() {
    // 2λ = x with λ rational, x ≥ 1: x = 1, λ = 1/2.
    let mut p = problem(2, &[&[-1, 1, 0]], &[&[0, 1, -2]]);
    p.set_rational(1);
    match p.lexmin().unwrap() {
        LexMin::Point(v) => {
            assert_eq!(v[0], q(1));
            assert_eq!(v[1], BigRational::new(BigInt::from(1), BigInt::from(2)));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn large_coefficients_fall_back_to_wider_integers() {
    // 7x ≥ B, 11y ≥ B, 13y ≤ B + 5x with B = 3·10^17: pivoting products overflow i64.
    let big = 300_000_000_000_000_000i64;
    let p = problem(2, &[&[-big, 7, 0], &[-big, 0, 11], &[big, 5, -13]], &[]);
    let got = p.lexmin().unwrap().integer_point().unwrap();
    let x0 = (big + 6) / 7;
    assert_eq!(got[0], x0);
    let y0 = (big + 10) / 11;
    assert!(big as i128 + 5 * x0 as i128 - 13 * y0 as i128 >= 0);
    assert_eq!(got[1], y0);
}

#[test]
fn bad_rows_are_errors() {
    let mut p = Problem::new(2);
    assert!(p.add_ineq(&[1, 2]).is_err());
    assert!(p.add_eq(&[1, 2, 3, 4]).is_err());
}

#[test]
fn redundant_equalities() {
    let p = problem(2, &[&[0, 1, 0], &[4, -1, 0]], &[&[-2, 1, 1], &[-4, 2, 2]]);
    assert_eq!(p.lexmin().unwrap().integer_point(), Some(vec![0, 2]));
}

/// Brute-force lexmin over the box `[-B, B]^n` (the generated constraints include that box).
fn brute(n: usize, ineqs: &[Vec<i64>], eqs: &[Vec<i64>], b: i64) -> Option<Vec<i64>> {
    let side = (2 * b + 1) as usize;
    let total = side.pow(n as u32);
    let eval =
        |r: &Vec<i64>, x: &[i64]| r[0] + r[1..].iter().zip(x).map(|(a, v)| a * v).sum::<i64>();
    (0..total)
        .map(|mut k| {
            let mut x = vec![0; n];
            for v in (0..n).rev() {
                x[v] = (k % side) as i64 - b;
                k /= side;
            }
            x
        })
        .find(|x| ineqs.iter().all(|r| eval(r, x) >= 0) && eqs.iter().all(|r| eval(r, x) == 0))
}

fn boxed(n: usize, b: i64, ineqs: &[Vec<i64>], eqs: &[Vec<i64>]) -> (Problem, Vec<Vec<i64>>) {
    let mut all = ineqs.to_vec();
    for v in 0..n {
        let mut lo = vec![0; n + 1];
        lo[0] = b;
        lo[1 + v] = 1;
        let mut hi = vec![0; n + 1];
        hi[0] = b;
        hi[1 + v] = -1;
        all.push(lo);
        all.push(hi);
    }
    let mut p = Problem::new(n);
    for r in &all {
        p.add_ineq(r).unwrap();
    }
    for r in eqs {
        p.add_eq(r).unwrap();
    }
    (p, all)
}

fn row(n: usize, c: i64) -> impl Strategy<Value = Vec<i64>> {
    (prop::collection::vec(-4i64..=4, n), -c..=c).prop_map(|(mut v, k)| {
        v.insert(0, k);
        v
    })
}

fn check(n: usize, b: i64, ineqs: Vec<Vec<i64>>, eqs: Vec<Vec<i64>>) -> Result<(), TestCaseError> {
    let (p, all) = boxed(n, b, &ineqs, &eqs);
    let expect = brute(n, &all, &eqs, b);
    let got = p.lexmin().unwrap();
    match &expect {
        None => prop_assert_eq!(got, LexMin::Empty),
        Some(x) => prop_assert_eq!(got.integer_point(), Some(x.clone())),
    }
    prop_assert_eq!(p.is_empty().unwrap(), expect.is_none());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn lexmin_matches_enumeration_2d(ineqs in prop::collection::vec(row(2, 8), 0..5)) {
        check(2, 4, ineqs, Vec::new())?;
    }

    #[test]
    fn lexmin_matches_enumeration_3d(
        ineqs in prop::collection::vec(row(3, 8), 0..5),
        eqs in prop::collection::vec(row(3, 4), 0..2),
    ) {
        check(3, 3, ineqs, eqs)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2500))]

    #[test]
    fn lexmin_matches_enumeration_4d(
        ineqs in prop::collection::vec(row(4, 6), 1..6),
        eqs in prop::collection::vec(row(4, 3), 0..2),
    ) {
        check(4, 2, ineqs, eqs)?;
    }

    /// The relaxed lexmin is a lower bound of the integer one and satisfies every row.
    #[test]
    fn relaxation_is_feasible_and_below(ineqs in prop::collection::vec(row(3, 8), 0..6)) {
        let (p, all) = boxed(3, 3, &ineqs, &[]);
        let relaxed = p.lp_lexmin().unwrap();
        let exact = p.lexmin().unwrap();
        if let LexMin::Point(x) = &relaxed {
            for r in &all {
                let s = x.iter().zip(&r[1..]).fold(q(r[0]), |s, (v, &a)| s + v * q(a));
                prop_assert!(s >= q(0));
            }
            if let LexMin::Point(y) = &exact {
                prop_assert!(lex_cmp(x, y) != Ordering::Greater);
            }
        } else {
            prop_assert_eq!(exact, LexMin::Empty);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Past [`GENERATED_ROWS_FROM`] inequalities the rows enter the tableau as they are
    /// violated; the answers are those of the whole system and of enumeration.
    /// Most rows hold at the origin, so most systems have points and their lexmin is cut
    /// by a few of the rows.
    #[test]
    fn generated_rows_agree_with_the_whole_system(
        loose in prop::collection::vec(row(3, 24), GENERATED_ROWS_FROM..GENERATED_ROWS_FROM + 40),
        tight in prop::collection::vec(row(3, 8), 0..3),
        eqs in prop::collection::vec(row(3, 4), 0..2),
    ) {
        let ineqs: Vec<Vec<i64>> = loose
            .into_iter()
            .map(|mut r| {
                r[0] = r[0].abs();
                r
            })
            .chain(tight)
            .collect();
        let (p, all) = boxed(3, 3, &ineqs, &eqs);
        let whole = p.branch_and_bound(true).unwrap();
        prop_assert_eq!(p.lexmin().unwrap(), whole);
        check(3, 3, ineqs, eqs.clone())?;
        if let Some(x) = p.find_point().unwrap() {
            for r in &all {
                let s = x.iter().zip(&r[1..]).fold(q(r[0]), |s, (v, &a)| s + v * q(a));
                prop_assert!(s >= q(0));
            }
            for r in &eqs {
                let s = x.iter().zip(&r[1..]).fold(q(r[0]), |s, (v, &a)| s + v * q(a));
                prop_assert_eq!(s, q(0));
            }
        }
    }
}
