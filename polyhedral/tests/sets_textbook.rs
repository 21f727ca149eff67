//! Textbook cases for the integer-set library: exactness over the integers, lexicographic
//! optima, hulls, counting and the notation round trip.

use polyhedral::sets::{DimRange, Map, Set, Tuple};

fn set(s: &str) -> Set {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn map(s: &str) -> Map {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn integer_emptiness() {
    assert!(set("{ [x] : 1 <= 3x <= 2 }").is_empty().unwrap());
    assert!(set("{ [x] : 4 <= 3x <= 5 }").is_empty().unwrap());
    // 3 lies between 2 and 4: x = 1 is the only point.
    let s = set("{ [x] : 2 <= 3x <= 4 }");
    assert_eq!(s.points().unwrap().len(), 1);
    assert!(s.contains(&[], &[1]).unwrap());
    // Thin unbounded strip without integer points.
    assert!(set("{ [x, y] : 1 <= 3x - 3y <= 2 }").is_empty().unwrap());
    // Needs splinters: rationally non-empty, no integer point.
    assert!(
        set("{ [x, y] : 27 <= 11x + 13y <= 45 and -10 <= 7x - 9y <= 4 }")
            .is_empty()
            .unwrap()
    );
    assert!(
        !set("{ [x, y] : 27 <= 11x + 13y <= 48 and -10 <= 7x - 9y <= 4 }")
            .is_empty()
            .unwrap()
    );
    assert!(
        set("{ [i] : exists (e : i = 2e) and exists (f : i = 2f + 1) }")
            .is_empty()
            .unwrap()
    );
}

#[test]
fn subtract_with_locals() {
    let all = set("{ [i] : 0 <= i < 12 }");
    let even = set("{ [i] : exists (e : i = 2e) }");
    let odd = all.subtract(&even).unwrap();
    assert_eq!(odd.count().unwrap(), 6);
    assert!(odd.contains(&[], &[3]).unwrap());
    assert!(!odd.contains(&[], &[4]).unwrap());
    let by3 = set("{ [i] : i mod 3 = 0 }");
    let rest = odd.subtract(&by3).unwrap();
    let pts: Vec<i64> = rest.points().unwrap().into_iter().map(|p| p.1[0]).collect();
    assert_eq!(pts, vec![1, 5, 7, 11]);
}

#[test]
fn lexmin_of_sets_and_maps() {
    let s = set("{ [i, j] : 0 <= i <= 5 and 0 <= j <= 5 and i + j >= 7 }");
    assert_eq!(s.lexmin_point().unwrap(), Some(vec![2, 5]));
    assert_eq!(s.lexmax_point().unwrap(), Some(vec![5, 5]));
    // Parametric: the last writer before a read at i among writes at 0..i-1 of step 2.
    let m = map("[N] -> { R[i] -> W[j] : 0 <= j < i < N and j mod 2 = 0 }");
    let last = m.lexmax().unwrap();
    let expect = map("[N] -> { R[i] -> W[j] : 0 <= j < i < N and j mod 2 = 0 and j >= i - 2 }");
    assert!(last.is_equal(&expect).unwrap(), "{last}");
    let first = map("{ [i] -> [j, k] : 0 <= i < 4 and i <= j < 4 and j - i <= k < 3 }")
        .lexmin()
        .unwrap();
    assert!(first
        .is_equal(&map("{ [i] -> [i, 0] : 0 <= i < 4 }"))
        .unwrap());
}

#[test]
fn image_preimage_compose() {
    let d = set("[N] -> { S[i, j] : 0 <= i < N and 0 <= j < N }");
    let acc = map("{ S[i, j] -> A[i + j] }");
    let img = d.apply(&acc);
    assert!(img
        .is_equal(&set("[N] -> { A[a] : 0 <= a <= 2N - 2 }"))
        .unwrap());
    let pre = set("{ A[a] : a = 3 }").preimage(&acc);
    let expect = set("{ S[i, j] : i + j = 3 }");
    assert!(pre.is_equal(&expect).unwrap());
    let m1 = map("{ S[i] -> T[2i] }");
    let m2 = map("{ T[j] -> U[j + 1] }");
    assert!(m1
        .apply_range(&m2)
        .is_equal(&map("{ S[i] -> U[2i + 1] }"))
        .unwrap());
    assert!(m1
        .reverse()
        .is_equal(&map("{ T[j] -> S[i] : j = 2i }"))
        .unwrap());
    let dom = map("{ S[i] -> T[j] : 0 <= i < 4 and i <= j < 2i }").domain();
    assert!(dom.is_equal(&set("{ S[i] : 1 <= i < 4 }")).unwrap());
}

#[test]
fn deltas_and_lex_order() {
    let dep = map("[N] -> { S[i, j] -> S[i + 1, j - 1] : 0 <= i < N and 0 < j < N }");
    let d = dep.deltas();
    assert!(
        d.is_equal(&set("[N] -> { [1, -1] : N >= 2 }")).unwrap(),
        "{d}"
    );
    let s = Tuple::anonymous_dims(Some("S"), 2);
    let lt = Map::lex_lt(&[], &s, &s);
    assert!(lt.contains(&[0, 5], &[1, 0]).unwrap());
    assert!(lt.contains(&[1, 0], &[1, 2]).unwrap());
    assert!(!lt.contains(&[1, 2], &[1, 2]).unwrap());
    let at1 = Map::lex_lt_at(&[], &s, &s, 1).unwrap();
    assert!(!at1.contains(&[0, 5], &[1, 0]).unwrap());
    assert!(at1.contains(&[1, 0], &[1, 2]).unwrap());
}

#[test]
fn hulls_and_ranges() {
    let s = set("{ [i, j] : 0 <= i <= 4 and i <= j <= 2i; [i, j] : i = 7 and j = 0 }");
    let b = s.box_hull().unwrap();
    assert!(b
        .is_equal(&set("{ [i, j] : 0 <= i <= 7 and 0 <= j <= 8 }"))
        .unwrap());
    assert_eq!(
        s.dim_range(1).unwrap(),
        Some(DimRange {
            min: Some(0),
            max: Some(8)
        })
    );
    let h = s.simple_hull().unwrap();
    assert!(s.is_subset(&h).unwrap());
    assert!(set("{ [i] : i >= 3 }")
        .dim_range(0)
        .unwrap()
        .unwrap()
        .max
        .is_none());
}

#[test]
fn counting_and_simplify() {
    let tri = set("{ [i, j] : 0 <= i < 10 and 0 <= j <= i }");
    assert_eq!(tri.count().unwrap(), 55);
    let tiles = set("{ [t, i] : 0 <= i < 100 and t = floor(i / 32) }");
    assert_eq!(tiles.count().unwrap(), 100);
    assert_eq!(tiles.project_out(1, 1).count().unwrap(), 4);
    let red = set("{ [i] : i >= 0 and i >= -3 and 2i >= 1 and i <= 5 and i <= 0 + 7 }");
    let s = red.simplify().unwrap();
    assert_eq!(s.to_string(), "{ [i] : i >= 1 and 5 >= i }");
    let impl_eq = set("{ [i, j] : i <= j and j <= i and 0 <= i <= 3 }")
        .simplify()
        .unwrap();
    assert!(impl_eq.to_string().contains('='));
}

#[test]
fn notation_round_trip() {
    for s in [
        "[N] -> { S[i, j] : 0 <= i < N and j >= i }",
        "{ S[i] -> A[i + 1] }",
        "{ S[i] : i mod 4 = 0 and 0 <= i < 20; T[j, k] : j = floor(k / 3) and 0 <= k < 9 }",
        "[N, M] -> { [i] : exists (e : i = 2e and 0 <= e < N) or i = M }",
        "[N] -> { : N > 0 }",
        "{ [] }",
        "{ }",
    ] {
        let (is_map, printed) = set_or_map(s);
        if is_map {
            assert!(map(s).is_equal(&map(&printed)).unwrap(), "{s} / {printed}");
        } else {
            assert!(set(s).is_equal(&set(&printed)).unwrap(), "{s} / {printed}");
        }
    }
}

fn set_or_map(s: &str) -> (bool, String) {
    match s.parse::<Set>() {
        Ok(x) => (false, x.to_string()),
        Err(_) => (true, map(s).to_string()),
    }
}

#[test]
fn parse_errors_have_positions() {
    let e = "{ [i] : i <= N }".parse::<Set>().unwrap_err();
    assert_eq!(e.pos, 13);
    let e = "{ [i] : i * i >= 0 }".parse::<Set>().unwrap_err();
    assert!(e.message.contains("affine"));
    assert!("{ [i] : 0 <= i ".parse::<Set>().is_err());
}
