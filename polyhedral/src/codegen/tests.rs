//! Tests of the pieces of AST generation against enumeration on small boxes: rational shadows
//! contain the integer projection (and are it when they say they are exact), statement ranges
//! hold at every instance, separated pieces partition the values of a dimension by the set of
//! active statements, in order, and hull loops cover every statement.

use super::range::{shadow, statement_range, Guard, Range};
use super::separate::{hull, separate, Region};
use crate::program::StmtId;
use crate::schedule::instances::Instances;
use crate::sets::conj::{Conj, Row};

use prng::Rng;

fn eval(r: &[i64], x: &[i64]) -> i64 {
    r[0] + r[1..].iter().zip(x).map(|(a, b)| a * b).sum::<i64>()
}

fn holds(c: &Conj, x: &[i64]) -> bool {
    c.eqs.iter().all(|r| eval(r, x) == 0) && c.ineqs.iter().all(|r| eval(r, x) >= 0)
}

/// Every point of `lo..=hi` in `n` dimensions.
fn points(n: usize, lo: i64, hi: i64) -> Vec<Vec<i64>> {
    let mut out = vec![vec![]];
    for _ in 0..n {
        out = out
            .into_iter()
            .flat_map(|p| {
                (lo..=hi).map(move |v| {
                    let mut q = p.clone();
                    q.push(v);
                    q
                })
            })
            .collect();
    }
    out
}

/// A random conjunction over `n` variables inside the box `|x| ≤ b`.
fn random_conj(rng: &mut Rng, n: usize, b: i64) -> Conj {
    let mut c = Conj::universe(n);
    for v in 0..n {
        let mut lo = vec![0; n + 1];
        lo[0] = b;
        lo[1 + v] = 1;
        let mut hi = vec![0; n + 1];
        hi[0] = b;
        hi[1 + v] = -1;
        c.ineqs.push(lo);
        c.ineqs.push(hi);
    }
    for _ in 0..rng.range(2, 4) {
        let mut r: Row = (0..=n).map(|_| rng.range(-3, 3)).collect();
        r[0] = rng.range(-4, 6);
        c.ineqs.push(r);
    }
    if rng.range(0, 2) == 0 {
        let mut r: Row = (0..=n).map(|_| rng.range(-2, 2)).collect();
        r[0] = rng.range(-2, 2);
        c.eqs.push(r);
    }
    c
}

#[test]
fn shadows_contain_the_integer_projection() {
    let mut rng = Rng::new(7);
    let (n, keep, b) = (4, 2, 4);
    let all = points(n, -b, b);
    let mut exact_seen = 0;
    for case in 0..150 {
        let c = random_conj(&mut rng, n, b);
        let sh = shadow(&c, keep).unwrap();
        let mut projection: Vec<Vec<i64>> = Vec::new();
        for x in all.iter().filter(|x| holds(&c, x)) {
            let p = x[..keep].to_vec();
            assert!(
                holds(&sh.conj, &p),
                "case {case}: {c:?} → {:?} misses {x:?}",
                sh.conj
            );
            if !projection.contains(&p) {
                projection.push(p);
            }
        }
        if sh.exact {
            exact_seen += 1;
            for p in points(keep, -b, b) {
                assert_eq!(
                    holds(&sh.conj, &p),
                    projection.contains(&p),
                    "case {case}: {c:?} → exact {:?} at {p:?}",
                    sh.conj
                );
            }
        }
    }
    assert!(exact_seen > 10);
}

#[test]
fn statement_ranges_hold_at_every_instance() {
    let mut rng = Rng::new(11);
    // [parameter | c0 | c1 | iterator | iterator]; the range is that of c1.
    let (n, b) = (5, 3);
    let all = points(n, -b, b);
    for case in 0..100 {
        let rel = random_conj(&mut rng, n, b);
        let inst = Instances {
            stmt: StmtId(0),
            n_iter: 2,
            np: 1,
            d: 2,
            rel: rel.clone(),
        };
        let mut ctx = Conj::universe(3);
        // What an enclosing loop on c0 would say.
        ctx.ineqs.push(vec![1, 0, 1, 0]);
        let inside: Vec<&Vec<i64>> = all
            .iter()
            .filter(|x| holds(&rel, x) && holds(&ctx, &x[..3]))
            .collect();
        let range = statement_range(&inst, &ctx, 2).unwrap();
        let Some(range) = range else {
            assert!(inside.is_empty(), "case {case}: {rel:?} is not empty");
            continue;
        };
        let rows = range.with_context(&Conj::universe(3));
        for x in inside {
            assert!(
                holds(&rows, &x[..3]),
                "case {case}: {rel:?} → {range:?} misses {x:?}"
            );
        }
    }
}

/// A random range of `c` (variable 1) over one parameter (variable 0).
fn random_range(rng: &mut Rng) -> Range {
    let row = |sign: i64, rng: &mut Rng| -> Row {
        vec![rng.range(-4, 4), rng.range(-1, 1), sign * rng.range(1, 2)]
    };
    let mut lower: Vec<Row> = (0..rng.range(1, 2)).map(|_| row(1, rng)).collect();
    let mut upper: Vec<Row> = (0..rng.range(1, 2)).map(|_| row(-1, rng)).collect();
    lower.sort();
    lower.dedup();
    upper.sort();
    upper.dedup();
    Range {
        lower,
        upper,
        eq: None,
        guard: Guard::default(),
    }
}

fn in_range(r: &Range, x: &[i64]) -> bool {
    r.lower.iter().chain(&r.upper).all(|row| eval(row, x) >= 0)
}

fn in_region(g: &Region, x: &[i64]) -> bool {
    let all = |rows: &[Row]| rows.iter().all(|row| eval(row, x) >= 0);
    all(&g.lower)
        && all(&g.upper)
        && (g.lower_any.is_empty() || g.lower_any.iter().any(|a| all(a)))
        && (g.upper_any.is_empty() || g.upper_any.iter().any(|a| all(a)))
}

/// `0 ≤ N ≤ 6`.
fn parameter_box() -> Conj {
    let mut ctx = Conj::universe(2);
    ctx.ineqs.push(vec![0, 1, 0]);
    ctx.ineqs.push(vec![6, -1, 0]);
    ctx
}

#[test]
fn separated_pieces_partition_the_dimension_in_order() {
    let mut rng = Rng::new(3);
    let ctx = parameter_box();
    let mut separated = 0;
    for case in 0..300 {
        let k = rng.range(2, 3) as usize;
        let ranges: Vec<Range> = (0..k).map(|_| random_range(&mut rng)).collect();
        let Some(pieces) = separate(&ctx, &ranges).unwrap() else {
            continue;
        };
        separated += 1;
        for n in 0..=6 {
            let mut last = 0;
            for c in -20..=20 {
                let x = [n, c];
                let active: Vec<usize> = (0..k).filter(|&s| in_range(&ranges[s], &x)).collect();
                let holding: Vec<usize> = (0..pieces.len())
                    .filter(|&g| in_region(&pieces[g], &x))
                    .collect();
                let what = format!("case {case}: {ranges:?} → {pieces:?} at N = {n}, c = {c}");
                if active.is_empty() {
                    assert!(holding.is_empty(), "{what}");
                    continue;
                }
                assert_eq!(holding.len(), 1, "{what}");
                let g = holding[0];
                assert_eq!(pieces[g].active, active, "{what}");
                assert!(g >= last, "{what}: out of order");
                last = g;
            }
        }
    }
    assert!(separated > 100);
}

#[test]
fn hulls_cover_every_statement() {
    let mut rng = Rng::new(5);
    let ctx = parameter_box();
    for case in 0..200 {
        let k = rng.range(2, 3) as usize;
        let ranges: Vec<Range> = (0..k).map(|_| random_range(&mut rng)).collect();
        for exact in [false, true] {
            let region = hull(&ctx, &ranges, exact).unwrap();
            for n in 0..=6 {
                for c in -20..=20 {
                    let x = [n, c];
                    let covered = region.as_ref().is_some_and(|g| in_region(g, &x));
                    let any = ranges.iter().any(|r| in_range(r, &x));
                    if any {
                        assert!(covered, "case {case}: {ranges:?} → {region:?} at {x:?}");
                    }
                    if exact && covered {
                        // Exactly the union: nothing outside every statement.
                        let lo = ranges
                            .iter()
                            .any(|r| r.lower.iter().all(|l| eval(l, &x) >= 0));
                        let hi = ranges
                            .iter()
                            .any(|r| r.upper.iter().all(|u| eval(u, &x) >= 0));
                        assert!(lo && hi, "case {case}: {ranges:?} → {region:?} at {x:?}");
                    }
                }
            }
        }
    }
}
