//! Tests of the interpreter: hand-computed results, value semantics, and the compiled
//! interpreter against the tree walker.

use super::*;
use crate::program::{
    Access, AffineExpr, Array, BinaryOp, Constraint, Expr, ExprArena, Literal, Param, ParamId,
    Reduction, ReductionOp, Span, Statement, Var,
};

fn it(d: usize) -> AffineExpr {
    AffineExpr::var(Var::Iter(d))
}

fn range(d: usize, lo: i64, hi: AffineExpr) -> Vec<Constraint> {
    vec![
        Constraint::le(&AffineExpr::constant(lo), &it(d)),
        Constraint::lt(&it(d), &hi),
    ]
}

/// s[i] = sum_{j <= i} x[j], as an init statement and a triangular update.
fn prefix_sum(n: i64) -> Program {
    let np = AffineExpr::var(Var::Param(ParamId(0)));
    let array = |name: &str, role| Array {
        name: name.into(),
        elem: ScalarType::F32,
        shape: vec![np.clone()],
        role,
        span: Span::default(),
    };
    let access = |a: u32, sub: AffineExpr| Access {
        array: ArrayId(a),
        subscripts: vec![sub],
        span: Span::default(),
    };
    let mut init_exprs = ExprArena::new();
    let zero = init_exprs.push(Expr::Literal(Literal {
        value: 0.0,
        ty: ScalarType::F32,
    }));
    let init = Statement {
        divs: Vec::new(),
        name: "S0".into(),
        iterators: vec!["i".into()],
        domain: range(0, 0, np.clone()),
        write: access(1, it(0)),
        reads: vec![],
        exprs: init_exprs,
        body: zero,
        position: vec![0, 0],
        reduction: None,
        span: Span::default(),
    };
    let mut exprs = ExprArena::new();
    let acc = exprs.push(Expr::Read(0));
    let x = exprs.push(Expr::Read(1));
    let sum = exprs.push(Expr::Binary(BinaryOp::Add, acc, x));
    let mut domain = range(0, 0, np.clone());
    domain.extend(range(1, 0, it(0).add(&AffineExpr::constant(1))));
    let update = Statement {
        divs: Vec::new(),
        name: "S1".into(),
        iterators: vec!["i".into(), "j".into()],
        domain,
        write: access(1, it(0)),
        reads: vec![access(1, it(0)), access(0, it(1))],
        exprs,
        body: sum,
        position: vec![1, 0, 0],
        reduction: Some(Reduction {
            op: ReductionOp::Add,
            iters: vec![1],
        }),
        span: Span::default(),
    };
    Program {
        name: "prefix_sum".into(),
        params: vec![Param {
            name: "N".into(),
            value: n,
        }],
        arrays: vec![array("x", ArrayRole::Input), array("s", ArrayRole::Output)],
        statements: vec![init, update],
        ..Program::default()
    }
}

#[test]
fn triangular_reduction_matches_hand_computation() {
    let p = prefix_sum(4);
    p.verify().unwrap();
    let mut mem = random_inputs(&p, 1);
    mem.arrays[0] = vec![1.0, 2.0, 3.0, 4.0];
    let mut walked = mem.clone();
    let stats = run(&p, &mut mem).unwrap();
    assert_eq!(mem.arrays[1], vec![1.0, 3.0, 6.0, 10.0]);
    assert_eq!(stats.instances, 4 + 10);
    assert_eq!(run_tree_walker(&p, &mut walked).unwrap(), stats);
    assert_eq!(walked, mem);
}

#[test]
fn out_of_bounds_in_the_middle_of_a_loop_stops_there() {
    // x[j + 2] leaves x (of 6 elements) at the fourth instance of the last row.
    let mut p = prefix_sum(6);
    p.statements[1].reads[1].subscripts[0] = it(1).add(&AffineExpr::constant(2));
    let mut mem = random_inputs(&p, 3);
    let mut walked = mem.clone();
    let err = run(&p, &mut mem).unwrap_err();
    assert_eq!(err.to_string(), "S1 accesses x[6] outside its extents [6]");
    assert_eq!(run_tree_walker(&p, &mut walked).unwrap_err(), err);
    // Everything before the failing instance was done, as the tree walker did it.
    assert_eq!(walked, mem);
}

#[test]
fn memory_of_the_wrong_shape_is_an_error() {
    let p = prefix_sum(4);
    let mut mem = random_inputs(&p, 1);
    mem.arrays[0].pop();
    let err = run(&p, &mut mem).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the memory does not fit the program: `x` has 3 elements, not 4"
    );
}

#[test]
fn random_inputs_depend_on_name_not_order() {
    let p = prefix_sum(8);
    let mut q = p.clone();
    q.arrays.reverse();
    let a = random_inputs(&p, 7);
    let b = random_inputs(&q, 7);
    assert_eq!(a.arrays[0], b.arrays[1]);
    assert_ne!(a.arrays[0], random_inputs(&p, 8).arrays[0]);
    assert!(a.arrays[0].iter().all(|v| (-1.0..1.0).contains(v)));
}

#[test]
fn out_of_bounds_is_reported() {
    let mut p = prefix_sum(4);
    p.statements[1].reads[1].subscripts[0] = it(1).add(&AffineExpr::constant(1));
    let mut mem = random_inputs(&p, 1);
    let err = run(&p, &mut mem).unwrap_err();
    assert_eq!(err.to_string(), "S1 accesses x[4] outside its extents [4]");
}

/// The correctly rounded f16 of a finite `x` below 65504 in magnitude, by brute force: the
/// nearest of the three f16 values around `half`'s answer (which can be one ulp off just
/// above ties), ties to the even bit pattern. Differences are exact in f64 here.
fn reference_f16(x: f64) -> f64 {
    let guess = half::f16::from_f64(x).to_bits();
    let mut best: Option<(f64, u16)> = None;
    for bits in [guess.wrapping_sub(1), guess, guess.wrapping_add(1)] {
        let h = half::f16::from_bits(bits).to_f64();
        if !h.is_finite() || (h == 0.0 && bits != guess) {
            continue;
        }
        let d = (x - h).abs();
        best = match best {
            Some((bd, bb)) if bd < d || (bd == d && bb % 2 == 0) => Some((bd, bb)),
            _ => Some((d, bits)),
        };
    }
    half::f16::from_bits(best.unwrap().1).to_f64()
}

#[test]
fn f16_rounding_is_correct() {
    let mut rng = prng::Rng::new(0x1234_5678_9abc_def0);
    for k in 0..200_000u64 {
        let x = rng.next_u64();
        // Magnitudes from 2^-30 to 2^15 cover subnormals and normals.
        let v = f64::from_bits(x >> 12 | 0x3ff0_0000_0000_0000) - 1.0;
        let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
        let scaled = sign * v * f64::powi(2.0, (k % 45) as i32 - 30);
        assert_eq!(round_f16(scaled), reference_f16(scaled), "{scaled:e}");
    }
    for bits in 0..0x7bffu16 {
        let h = half::f16::from_bits(bits).to_f64();
        let next = half::f16::from_bits(bits + 1).to_f64();
        let mid = (h + next) / 2.0;
        assert_eq!(round_f16(h), h);
        // Ties go to the even pattern; just above a tie goes up.
        let even = if bits % 2 == 0 { h } else { next };
        assert_eq!(round_f16(mid), even, "tie {mid:e}");
        assert_eq!(round_f16(mid + mid * f64::EPSILON), next, "above {mid:e}");
    }
    assert_eq!(round_f16(65519.99), 65504.0);
    assert_eq!(round_f16(65520.0), f64::INFINITY);
    assert_eq!(round_f16(-1e9), f64::NEG_INFINITY);
}

#[test]
fn f16_rounds_to_nearest_even() {
    // 1 + 2^-11 lies halfway between 1 and the next f16 (1 + 2^-10): ties go to even (1).
    assert_eq!(round(ScalarType::F16, 1.0 + f64::powi(2.0, -11)), 1.0);
    assert_eq!(
        round(ScalarType::F16, 1.0 + 3.0 * f64::powi(2.0, -11)),
        1.0 + f64::powi(2.0, -9)
    );
    assert_eq!(round(ScalarType::I32, 2147483648.0), -2147483648.0);
}
