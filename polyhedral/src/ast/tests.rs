//! Tests of the AST: the original nest reproduces the reference interpreter, the verifier and
//! the domain check reject wrong trees, the printer's form is stable.

use super::*;
use crate::interp::{random_inputs, run, InterpError};
use crate::program::{
    Access, AffineExpr, Array, ArrayId, ArrayRole, BinaryOp, Constraint, Expr, ExprArena, Literal,
    Param, ParamId, Program, ScalarType, Span, Statement, StmtId, Var,
};

fn it(d: usize) -> AffineExpr {
    AffineExpr::var(Var::Iter(d))
}

fn n() -> AffineExpr {
    AffineExpr::var(Var::Param(ParamId(0)))
}

fn c(v: i64) -> AffineExpr {
    AffineExpr::constant(v)
}

/// `lo <= it(d) < hi`
fn range(d: usize, lo: AffineExpr, hi: AffineExpr) -> Vec<Constraint> {
    vec![Constraint::le(&lo, &it(d)), Constraint::lt(&it(d), &hi)]
}

fn access(a: u32, subs: Vec<AffineExpr>) -> Access {
    Access {
        array: ArrayId(a),
        subscripts: subs,
        span: Span::default(),
    }
}

/// A statement whose body is `reads[0] op reads[1] op …` (or a literal when it reads nothing).
fn statement(
    name: &str,
    iterators: &[&str],
    domain: Vec<Constraint>,
    write: Access,
    reads: Vec<Access>,
    op: BinaryOp,
    position: Vec<usize>,
) -> Statement {
    let mut exprs = ExprArena::new();
    let mut body = exprs.push(Expr::Literal(Literal {
        value: 0.5,
        ty: ScalarType::F32,
    }));
    for r in 0..reads.len() {
        let x = exprs.push(Expr::Read(r));
        body = if r == 0 {
            x
        } else {
            exprs.push(Expr::Binary(op, body, x))
        };
    }
    Statement {
        divs: Vec::new(),
        name: name.into(),
        iterators: iterators.iter().map(|s| s.to_string()).collect(),
        domain,
        write,
        reads,
        exprs,
        body,
        position,
        reduction: None,
        span: Span::default(),
    }
}

fn program(arrays: &[(&str, usize, ArrayRole)], statements: Vec<Statement>) -> Program {
    let p = Program {
        name: "test".into(),
        params: vec![Param {
            name: "N".into(),
            value: 7,
        }],
        arrays: arrays
            .iter()
            .map(|&(name, dims, role)| Array {
                name: name.into(),
                elem: ScalarType::F32,
                shape: vec![n(); dims],
                role,
                span: Span::default(),
            })
            .collect(),
        statements,
        ..Program::default()
    };
    p.verify().expect("test programs are valid");
    p
}

/// A 1-D Jacobi stencil in a time loop: two statements sharing the `t` loop, the second with
/// different bounds on its inner loop than the first.
fn stencil() -> Program {
    let mut s0_dom = range(0, c(0), c(3));
    s0_dom.extend(range(1, c(1), n().sub(&c(1))));
    let s0 = statement(
        "S0",
        &["t", "i"],
        s0_dom,
        access(1, vec![it(1)]),
        vec![
            access(0, vec![it(1).sub(&c(1))]),
            access(0, vec![it(1)]),
            access(0, vec![it(1).add(&c(1))]),
        ],
        BinaryOp::Add,
        vec![0, 0, 0],
    );
    let mut s1_dom = range(0, c(0), c(3));
    s1_dom.extend(range(1, c(0), n()));
    let s1 = statement(
        "S1",
        &["t", "j"],
        s1_dom,
        access(0, vec![it(1)]),
        vec![access(1, vec![it(1)]), access(0, vec![it(1)])],
        BinaryOp::Mul,
        vec![0, 1, 0],
    );
    program(
        &[("A", 1, ArrayRole::InOut), ("B", 1, ArrayRole::InOut)],
        vec![s0, s1],
    )
}

/// Two statements sharing both loops of a triangular nest with different inner bounds,
/// followed by a statement outside any loop.
fn shared_triangle() -> Program {
    let mut d0 = range(0, c(0), n());
    d0.extend(range(1, c(0), it(0).add(&c(1))));
    let mut d1 = range(0, c(0), n());
    d1.extend(range(1, it(0), n()));
    let s0 = statement(
        "S0",
        &["i", "j"],
        d0,
        access(1, vec![it(0), it(1)]),
        vec![access(0, vec![it(1), it(0)]), access(1, vec![it(0), it(1)])],
        BinaryOp::Sub,
        vec![0, 0, 0],
    );
    let s1 = statement(
        "S1",
        &["i", "k"],
        d1,
        access(1, vec![it(1), it(0)]),
        vec![access(1, vec![it(0), it(1)]), access(0, vec![it(0), it(0)])],
        BinaryOp::Max,
        vec![0, 0, 1],
    );
    let s2 = statement(
        "S2",
        &[],
        vec![],
        access(2, vec![]),
        vec![access(1, vec![c(2), c(3)])],
        BinaryOp::Add,
        vec![1],
    );
    program(
        &[
            ("X", 2, ArrayRole::Input),
            ("Y", 2, ArrayRole::InOut),
            ("s", 0, ArrayRole::Output),
        ],
        vec![s0, s1, s2],
    )
}

fn check_original(p: &Program) {
    let ast = original_ast(p).unwrap();
    verify(p, &ast).unwrap();
    let mut expected = random_inputs(p, 3);
    let mut actual = expected.clone();
    let a = run(p, &mut expected).unwrap();
    let b = run_ast(p, &ast, &mut actual).unwrap();
    assert_eq!(actual, expected, "{}", ast.display(p));
    assert_eq!(a.instances, b.instances);
}

#[test]
fn original_ast_runs_like_the_interpreter() {
    check_original(&stencil());
    check_original(&shared_triangle());
}

#[test]
fn original_ast_prints_its_guards() {
    let p = shared_triangle();
    let text = original_ast(&p).unwrap().display(&p).to_string();
    let expected = "\
for (i = 0; i <= N - 1; i += 1) {
  for (c1 = min(0, i); c1 <= max(i, N - 1); c1 += 1) {
    if (c1 >= 0 && i >= c1) {
      S0(i, c1);
    }
    if (c1 >= i && N >= c1 + 1) {
      S1(i, c1);
    }
  }
}
S2();
";
    assert_eq!(text, expected);
}

#[test]
fn exact_loops_need_no_guards() {
    let p = stencil();
    let text = original_ast(&p).unwrap().display(&p).to_string();
    assert_eq!(
        text,
        "\
for (t = 0; t <= 2; t += 1) {
  for (i = 1; i <= N - 2; i += 1) {
    S0(t, i);
  }
  for (j = 0; j <= N - 1; j += 1) {
    S1(t, j);
  }
}
"
    );
}

#[test]
fn instances_outside_the_domain_are_reported() {
    let p = stencil();
    let ast = Ast::For {
        var: "x".into(),
        lower: AstExpr::Int(0),
        upper: AstExpr::Param(ParamId(0)),
        step: 2,
        body: Box::new(Ast::User {
            stmt: StmtId(0),
            args: vec![AstExpr::Int(1), AstExpr::var("x")],
        }),
        annotations: LoopAnnotations::default(),
    };
    let mut mem = random_inputs(&p, 1);
    let err = run_ast(&p, &ast, &mut mem).unwrap_err();
    assert_eq!(
        err,
        InterpError::OutsideDomain {
            stmt: "S0".into(),
            point: "1, 0".into()
        }
    );
}

#[test]
fn verifier_rejects_unbound_variables_and_bad_arities() {
    let p = stencil();
    let unbound = Ast::User {
        stmt: StmtId(0),
        args: vec![AstExpr::Int(0), AstExpr::var("y")],
    };
    assert!(verify(&p, &unbound).unwrap_err().contains("`y`"));
    let arity = Ast::User {
        stmt: StmtId(1),
        args: vec![AstExpr::Int(0)],
    };
    assert!(verify(&p, &arity).unwrap_err().contains("2 iterators"));
    let rebinding = Ast::For {
        var: "x".into(),
        lower: AstExpr::Int(0),
        upper: AstExpr::Int(1),
        step: 1,
        body: Box::new(Ast::For {
            var: "x".into(),
            lower: AstExpr::Int(0),
            upper: AstExpr::Int(1),
            step: 1,
            body: Box::new(Ast::Block(vec![])),
            annotations: LoopAnnotations::default(),
        }),
        annotations: LoopAnnotations::default(),
    };
    assert!(verify(&p, &rebinding).unwrap_err().contains("rebinds"));
    let mut mem = random_inputs(&p, 1);
    assert!(matches!(
        run_ast(&p, &unbound, &mut mem),
        Err(InterpError::InvalidAst(_))
    ));
}
