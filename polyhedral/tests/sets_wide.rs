//! Sets and maps whose constraints have coefficients near `2^40`, against brute-force
//! enumeration (constraints evaluated in `i128`).
//!
//! Eliminating a variable between two such constraints multiplies their coefficients, about
//! `2^80`: far beyond `i64`, so these cases exercise the restart on wider integers, and the
//! inexact eliminations would need about `2^40` splinters, so they also exercise the ILP
//! route for feasibility and the splinters-with-points route for projection. The inputs
//! themselves fit in `i64`, and so do the answers checked here; a last test checks the error
//! for an answer that does not. Each `proptest!` block states its case count; the seed is fixed.

use polyhedral::sets::{Error, Map, Set};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use std::collections::{BTreeMap, BTreeSet};

const SEED: u64 = 0x0b16_c0ef;
const BIG: i64 = 1 << 40;

#[derive(Clone, Debug)]
enum Atom {
    Ge(Vec<i64>, i64),
    Eq(Vec<i64>, i64),
    Mod(Vec<i64>, i64, i64, i64),
    FloorLe(Vec<i64>, i64, i64, i64),
}

fn dot(a: &[i64], x: &[i64]) -> i128 {
    a.iter().zip(x).map(|(&a, &x)| a as i128 * x as i128).sum()
}

impl Atom {
    fn eval(&self, x: &[i64]) -> bool {
        match self {
            Atom::Ge(a, c) => dot(a, x) + *c as i128 >= 0,
            Atom::Eq(a, c) => dot(a, x) + *c as i128 == 0,
            Atom::Mod(a, c, m, r) => (dot(a, x) + *c as i128).rem_euclid(*m as i128) == *r as i128,
            Atom::FloorLe(a, c, m, k) => {
                (dot(a, x) + *c as i128).div_euclid(*m as i128) <= *k as i128
            }
        }
    }

    fn text(&self, names: &[String]) -> String {
        let lin = |a: &[i64], c: i64| {
            let mut s = String::new();
            for (i, &k) in a.iter().enumerate() {
                if k != 0 {
                    s.push_str(&format!(" + {k}*{}", names[i]));
                }
            }
            format!("({c}{s})")
        };
        match self {
            Atom::Ge(a, c) => format!("{} >= 0", lin(a, *c)),
            Atom::Eq(a, c) => format!("{} = 0", lin(a, *c)),
            Atom::Mod(a, c, m, r) => format!("{} mod {m} = {r}", lin(a, *c)),
            Atom::FloorLe(a, c, m, k) => format!("floor({} / {m}) <= {k}", lin(a, *c)),
        }
    }
}

/// A union of conjunctions inside the box `0 <= x_i <= ext_i`.
#[derive(Clone, Debug)]
struct RSet {
    ext: Vec<i64>,
    disj: Vec<Vec<Atom>>,
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("x{i}")).collect()
}

impl RSet {
    fn eval(&self, x: &[i64]) -> bool {
        x.iter().zip(&self.ext).all(|(&v, &e)| 0 <= v && v <= e)
            && self.disj.iter().any(|c| c.iter().all(|a| a.eval(x)))
    }

    fn body(&self) -> Vec<String> {
        let n = names(self.ext.len());
        self.disj
            .iter()
            .map(|c| {
                let mut parts: Vec<String> = n
                    .iter()
                    .zip(&self.ext)
                    .map(|(n, e)| format!("0 <= {n} <= {e}"))
                    .collect();
                parts.extend(c.iter().map(|a| a.text(&n)));
                parts.join(" and ")
            })
            .collect()
    }

    fn set(&self) -> Set {
        let n = names(self.ext.len());
        let parts: Vec<String> = self
            .body()
            .into_iter()
            .map(|b| format!("[{}] : {b}", n.join(", ")))
            .collect();
        let t = format!("{{ {} }}", parts.join("; "));
        t.parse().unwrap_or_else(|e| panic!("{t}: {e}"))
    }

    /// As a map from the first dimension to the others.
    fn map(&self) -> Map {
        let n = names(self.ext.len());
        let parts: Vec<String> = self
            .body()
            .into_iter()
            .map(|b| format!("[{}] -> [{}] : {b}", n[0], n[1..].join(", ")))
            .collect();
        let t = format!("{{ {} }}", parts.join("; "));
        t.parse().unwrap_or_else(|e| panic!("{t}: {e}"))
    }

    fn points(&self) -> BTreeSet<Vec<i64>> {
        let mut out = BTreeSet::new();
        let mut x = vec![0; self.ext.len()];
        loop {
            if self.eval(&x) {
                out.insert(x.clone());
            }
            let mut i = x.len();
            loop {
                if i == 0 {
                    return out;
                }
                i -= 1;
                if x[i] < self.ext[i] {
                    x[i] += 1;
                    break;
                }
                x[i] = 0;
            }
        }
    }
}

/// A coefficient: small, or within 3 of `±2^40`.
fn coef() -> impl Strategy<Value = i64> + Clone {
    prop_oneof![
        1 => -3i64..=3,
        1 => (-3i64..=3, any::<bool>()).prop_map(|(d, neg)| if neg { -(BIG + d) } else { BIG + d }),
    ]
}

/// A constant: small plus a small multiple of `2^40`.
fn constant() -> impl Strategy<Value = i64> {
    (-3i64..=3, -12i64..=12).prop_map(|(k, c)| k * BIG + c)
}

fn atom(d: usize) -> impl Strategy<Value = Atom> {
    let coefs = proptest::collection::vec(coef(), d);
    prop_oneof![
        4 => (coefs.clone(), constant()).prop_map(|(a, c)| Atom::Ge(a, c)),
        1 => (coefs.clone(), constant()).prop_map(|(a, c)| Atom::Eq(a, c)),
        1 => (coefs.clone(), constant(), 2i64..=4, 0i64..4)
            .prop_map(|(a, c, m, r)| Atom::Mod(a, c, m, r % m)),
        1 => (coefs, constant(), 2i64..=4, -3i64..=3, -4i64..=6)
            .prop_map(|(a, c, m, k1, k2)| Atom::FloorLe(a, c, m, k1 * BIG / m + k2)),
    ]
}

fn rset_with(ext: Vec<i64>) -> impl Strategy<Value = RSet> {
    let d = ext.len();
    proptest::collection::vec(proptest::collection::vec(atom(d), 1..=3), 1..=2).prop_map(
        move |disj| RSet {
            ext: ext.clone(),
            disj,
        },
    )
}

fn two_sets(d: usize, max_ext: i64) -> impl Strategy<Value = (RSet, RSet)> {
    proptest::collection::vec(0..=max_ext, d)
        .prop_flat_map(|ext| (rset_with(ext.clone()), rset_with(ext)))
}

fn pts(s: &Set) -> Vec<Vec<i64>> {
    s.points().unwrap().into_iter().map(|p| p.1).collect()
}

fn sorted(s: &BTreeSet<Vec<i64>>) -> Vec<Vec<i64>> {
    s.iter().cloned().collect()
}

fn check_sets(a: &RSet, b: &RSet) {
    let (sa, sb) = (a.set(), b.set());
    let (pa, pb) = (a.points(), b.points());
    let d = a.ext.len();
    assert_eq!(pts(&sa), sorted(&pa), "points of {sa}");
    assert_eq!(sa.is_empty().unwrap(), pa.is_empty(), "is_empty of {sa}");
    assert_eq!(pts(&sa.intersect(&sb)), sorted(&(&pa & &pb)), "intersect");
    assert_eq!(pts(&sa.union(&sb)), sorted(&(&pa | &pb)), "union");
    let diff = sa.subtract(&sb).unwrap();
    assert_eq!(pts(&diff), sorted(&(&pa - &pb)), "subtract {sa} - {sb}");
    assert_eq!(sa.is_subset(&sb).unwrap(), pa.is_subset(&pb), "is_subset");
    assert_eq!(sa.is_equal(&sb).unwrap(), pa == pb, "is_equal");
    assert_eq!(sa.lexmin_point().unwrap(), pa.first().cloned(), "lexmin");
    assert_eq!(sa.lexmax_point().unwrap(), pa.last().cloned(), "lexmax");
    for k in 0..d {
        let r = sa.dim_range(k).unwrap().map(|r| (r.min, r.max));
        let lo = pa.iter().map(|p| p[k]).min();
        let hi = pa.iter().map(|p| p[k]).max();
        assert_eq!(r, lo.map(|l| (Some(l), hi)), "dim_range {k} of {sa}");
    }
    let hull = sa.box_hull().unwrap();
    assert!(sa.is_subset(&hull).unwrap(), "box hull {hull} of {sa}");
    assert_eq!(pts(&sa.simplify().unwrap()), sorted(&pa), "simplify {sa}");
    let proj: BTreeSet<Vec<i64>> = pa.iter().map(|p| p[..d - 1].to_vec()).collect();
    assert_eq!(
        pts(&sa.project_out(d - 1, 1)),
        sorted(&proj),
        "project_out of {sa}"
    );
    let printed = sa.to_string();
    let back: Set = printed.parse().unwrap_or_else(|e| panic!("{printed}: {e}"));
    assert_eq!(pts(&back), sorted(&pa), "round trip {printed}");
}

fn check_map(m: &RSet) {
    let mm = m.map();
    let pairs: Vec<(Vec<i64>, Vec<i64>)> = m
        .points()
        .into_iter()
        .map(|p| (p[..1].to_vec(), p[1..].to_vec()))
        .collect();
    let map_pairs = |m: &Map| -> Vec<(Vec<i64>, Vec<i64>)> {
        m.pairs().unwrap().into_iter().map(|p| (p.1, p.3)).collect()
    };
    let mut best: BTreeMap<Vec<i64>, (Vec<i64>, Vec<i64>)> = BTreeMap::new();
    for (x, y) in &pairs {
        let e = best.entry(x.clone()).or_insert((y.clone(), y.clone()));
        if *y < e.0 {
            e.0 = y.clone();
        }
        if *y > e.1 {
            e.1 = y.clone();
        }
    }
    let lexmin: Vec<_> = best
        .iter()
        .map(|(x, (lo, _))| (x.clone(), lo.clone()))
        .collect();
    let lexmax: Vec<_> = best
        .iter()
        .map(|(x, (_, hi))| (x.clone(), hi.clone()))
        .collect();
    assert_eq!(map_pairs(&mm.lexmin().unwrap()), lexmin, "lexmin of {mm}");
    assert_eq!(map_pairs(&mm.lexmax().unwrap()), lexmax, "lexmax of {mm}");
    let mut comp = BTreeSet::new();
    for (x, y) in &pairs {
        for (x2, y2) in &pairs {
            if y == y2 {
                comp.insert((x.clone(), x2.clone()));
            }
        }
    }
    let c = mm.apply_range(&mm.reverse());
    assert_eq!(
        map_pairs(&c),
        comp.into_iter().collect::<Vec<_>>(),
        "compose"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, failure_persistence: None, rng_seed: RngSeed::Fixed(SEED), ..ProptestConfig::default() })]

    /// 1,000 cases of the set operations on boxes of 1 to 3 dimensions up to 6³.
    #[test]
    fn wide_set_ops_1000_cases((a, b) in (1usize..=3).prop_flat_map(|d| two_sets(d, 5))) {
        check_sets(&a, &b);
    }

    /// 1,000 cases of per-domain-point lexmin / lexmax and composition of maps from one
    /// dimension to one or two, in boxes up to 6³.
    #[test]
    fn wide_map_ops_1000_cases(m in (2usize..=3).prop_flat_map(|d| {
        proptest::collection::vec(0i64..=5, d).prop_flat_map(rset_with)
    })) {
        check_map(&m);
    }
}

/// An answer that needs a number beyond 64 bits is an error that names what does not fit.
#[test]
fn answers_beyond_64_bits_are_errors() {
    // y = 2^40 and x = 2^40·y = 2^80.
    let s: Set = "{ [x, y] : x = 1099511627776y and y = 1099511627776 }"
        .parse()
        .unwrap();
    assert!(!s.is_empty().unwrap());
    assert_eq!(s.lexmin_point(), Err(Error::TooLarge("a coordinate")));
    assert_eq!(s.dim_range(0), Err(Error::TooLarge("a bound")));
    assert_eq!(
        s.dim_range(1).unwrap().map(|r| (r.min, r.max)),
        Some((Some(BIG), Some(BIG)))
    );
    let msg = Error::TooLarge("a coordinate").to_string();
    assert_eq!(msg, "a coordinate of the result does not fit in 64 bits");
}

/// Hand-checked cases whose eliminations overflow `i64` and would splinter about `2^40` times.
#[test]
fn textbook_wide_cases() {
    // (2^40+1)x − (2^40−1)y = 2^40(x − y) + x + y lies in [1, 2^40] exactly when x = y ≥ 1.
    let s: Set =
        "{ [x, y] : 0 <= x <= 3 and 0 <= y <= 3 and 1 <= 1099511627777x - 1099511627775y <= 1099511627776 }"
            .parse()
            .unwrap();
    assert_eq!(pts(&s), [[1, 1], [2, 2], [3, 3]]);
    let diag: Set = "{ [x, x] : 1 <= x <= 3 }".parse().unwrap();
    assert!(s.is_equal(&diag).unwrap());
    // Unbounded: a multiple of 2^40 − 1 in every window of 2^40 consecutive integers.
    let u: Set = "{ [x, y] : 1 <= 1099511627777x - 1099511627775y <= 1099511627776 }"
        .parse()
        .unwrap();
    assert!(!u.is_empty().unwrap());
    let ux = u.project_out(1, 1);
    assert!(ux.is_equal(&"{ [x] }".parse().unwrap()).unwrap());
    // 2^40·x = 2^40 + 1 has no integer solution.
    let e: Set = "{ [x] : 1099511627776x = 1099511627777 }".parse().unwrap();
    assert!(e.is_empty().unwrap());
    // Per x, the smallest y with (2^40 − 1)·y ≥ (2^40 + 1)·x − 2^40, on 0 ≤ x ≤ 5.
    let m: Map =
        "{ [x] -> [y] : 0 <= x <= 5 and 0 <= y <= 10 and 1099511627775y >= 1099511627777x - 1099511627776 }"
            .parse()
            .unwrap();
    let lm = m.lexmin().unwrap();
    for x in 0..=5i64 {
        let need = (BIG as i128 + 1) * x as i128 - BIG as i128;
        let y = (0..=10i64)
            .find(|&y| (BIG as i128 - 1) * y as i128 >= need)
            .unwrap();
        assert!(lm.contains(&[x], &[y]).unwrap(), "lexmin at {x} is {y}");
    }
}
