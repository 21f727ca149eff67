//! Hand-built programs for the back-end tests, and a small builder to write them.

#![allow(dead_code)]

use polyhedral::program::*;

pub fn it(d: usize) -> AffineExpr {
    AffineExpr::var(Var::Iter(d))
}

pub fn param(k: u32) -> AffineExpr {
    AffineExpr::var(Var::Param(ParamId(k)))
}

pub fn cst(v: i64) -> AffineExpr {
    AffineExpr::constant(v)
}

/// `lo <= it(d) < hi`
pub fn range(d: usize, lo: AffineExpr, hi: AffineExpr) -> Vec<Constraint> {
    vec![Constraint::le(&lo, &it(d)), Constraint::lt(&it(d), &hi)]
}

/// The expressions of one statement body under construction.
#[derive(Default)]
pub struct Body {
    pub exprs: ExprArena,
    pub reads: Vec<Access>,
}

impl Body {
    pub fn read(&mut self, a: ArrayId, subs: Vec<AffineExpr>) -> ExprId {
        self.reads.push(Access {
            array: a,
            subscripts: subs,
            span: Span::default(),
        });
        self.exprs.push(Expr::Read(self.reads.len() - 1))
    }
    pub fn lit(&mut self, value: f64, ty: ScalarType) -> ExprId {
        self.exprs.push(Expr::Literal(Literal { value, ty }))
    }
    pub fn bin(&mut self, op: BinaryOp, a: ExprId, b: ExprId) -> ExprId {
        self.exprs.push(Expr::Binary(op, a, b))
    }
    pub fn push(&mut self, e: Expr) -> ExprId {
        self.exprs.push(e)
    }
}

pub struct Builder {
    pub p: Program,
}

impl Builder {
    pub fn new(name: &str, params: &[(&str, i64)]) -> Builder {
        Builder {
            p: Program {
                name: name.into(),
                params: params
                    .iter()
                    .map(|&(n, v)| Param {
                        name: n.into(),
                        value: v,
                    })
                    .collect(),
                ..Program::default()
            },
        }
    }

    pub fn array(
        &mut self,
        name: &str,
        elem: ScalarType,
        shape: Vec<AffineExpr>,
        role: ArrayRole,
    ) -> ArrayId {
        self.p.arrays.push(Array {
            name: name.into(),
            elem,
            shape,
            role,
            span: Span::default(),
        });
        ArrayId(self.p.arrays.len() as u32 - 1)
    }

    pub fn stmt(
        &mut self,
        iterators: &[&str],
        domain: Vec<Constraint>,
        position: Vec<usize>,
        write: (ArrayId, Vec<AffineExpr>),
        build: impl FnOnce(&mut Body) -> ExprId,
    ) -> StmtId {
        let mut body = Body::default();
        let root = build(&mut body);
        let id = self.p.statements.len();
        self.p.statements.push(Statement {
            divs: Vec::new(),
            name: format!("S{id}"),
            iterators: iterators.iter().map(|s| s.to_string()).collect(),
            domain,
            write: Access {
                array: write.0,
                subscripts: write.1,
                span: Span::default(),
            },
            reads: body.reads,
            exprs: body.exprs,
            body: root,
            position,
            reduction: None,
            span: Span::default(),
        });
        StmtId(id as u32)
    }

    pub fn finish(self) -> Program {
        self.p.verify().expect("test programs are valid");
        self.p
    }
}

const F32: ScalarType = ScalarType::F32;

/// `T = A·B` (a temporary), then `C = max(T + bias, 0)`: a reduction, a temporary, a second
/// nest.
pub fn gemm_bias_relu() -> Program {
    let mut b = Builder::new("gemm_bias_relu", &[("M", 5), ("N", 6), ("K", 7)]);
    let (m, n, k) = (param(0), param(1), param(2));
    let a = b.array("A", F32, vec![m.clone(), k.clone()], ArrayRole::Input);
    let bb = b.array("B", F32, vec![k.clone(), n.clone()], ArrayRole::Input);
    let bias = b.array("bias", F32, vec![n.clone()], ArrayRole::Input);
    let c = b.array("C", F32, vec![m.clone(), n.clone()], ArrayRole::Output);
    let t = b.array("T", F32, vec![m.clone(), n.clone()], ArrayRole::Temporary);
    let ij = [range(0, cst(0), m.clone()), range(1, cst(0), n.clone())].concat();
    b.stmt(
        &["i", "j"],
        ij.clone(),
        vec![0, 0, 0],
        (t, vec![it(0), it(1)]),
        |e| e.lit(0.0, F32),
    );
    let ijk = [ij.clone(), range(2, cst(0), k.clone())].concat();
    b.stmt(
        &["i", "j", "k"],
        ijk,
        vec![0, 0, 1, 0],
        (t, vec![it(0), it(1)]),
        |e| {
            let acc = e.read(t, vec![it(0), it(1)]);
            let x = e.read(a, vec![it(0), it(2)]);
            let y = e.read(bb, vec![it(2), it(1)]);
            let p = e.bin(BinaryOp::Mul, x, y);
            e.bin(BinaryOp::Add, acc, p)
        },
    );
    b.stmt(
        &["i", "j"],
        ij,
        vec![1, 0, 0],
        (c, vec![it(0), it(1)]),
        |e| {
            let x = e.read(t, vec![it(0), it(1)]);
            let y = e.read(bias, vec![it(1)]);
            let s = e.bin(BinaryOp::Add, x, y);
            let z = e.lit(0.0, F32);
            e.bin(BinaryOp::Max, s, z)
        },
    );
    b.finish()
}

/// `L[i][j] = sum_{k <= j} X[i][k] * alpha` for `j <= i` (f64): a triangular nest, a scalar
/// input and a scalar output (the trace).
pub fn triangular() -> Program {
    let f64t = ScalarType::F64;
    let mut b = Builder::new("triangular", &[("N", 6)]);
    let n = param(0);
    let x = b.array("X", f64t, vec![n.clone(), n.clone()], ArrayRole::Input);
    let alpha = b.array("alpha", f64t, vec![], ArrayRole::Input);
    let l = b.array("L", f64t, vec![n.clone(), n.clone()], ArrayRole::InOut);
    let tr = b.array("trace", f64t, vec![], ArrayRole::Output);
    let tri = [
        range(0, cst(0), n.clone()),
        range(1, cst(0), it(0).add(&cst(1))),
    ]
    .concat();
    let dom = [tri.clone(), range(2, cst(0), it(1).add(&cst(1)))].concat();
    b.stmt(
        &["i", "j", "k"],
        dom,
        vec![0, 0, 0, 0],
        (l, vec![it(0), it(1)]),
        |e| {
            let acc = e.read(l, vec![it(0), it(1)]);
            let v = e.read(x, vec![it(0), it(2)]);
            let s = e.read(alpha, vec![]);
            let p = e.bin(BinaryOp::Mul, v, s);
            e.bin(BinaryOp::Add, acc, p)
        },
    );
    b.stmt(&[], vec![], vec![1], (tr, vec![]), |e| e.lit(0.0, f64t));
    b.stmt(
        &["d"],
        range(0, cst(0), n.clone()),
        vec![2, 0],
        (tr, vec![]),
        |e| {
            let acc = e.read(tr, vec![]);
            let v = e.read(l, vec![it(0), it(0)]);
            e.bin(BinaryOp::Add, acc, v)
        },
    );
    b.finish()
}

/// A 1-D Jacobi stencil: `B[i] = (A[i-1] + A[i] + A[i+1]) / 3` then `A[i] = B[i]`, in a time
/// loop.
pub fn jacobi_1d() -> Program {
    let mut b = Builder::new("jacobi_1d", &[("T", 4), ("N", 10)]);
    let (t, n) = (param(0), param(1));
    let a = b.array("A", F32, vec![n.clone()], ArrayRole::InOut);
    let bb = b.array("B", F32, vec![n.clone()], ArrayRole::InOut);
    let inner = [
        range(0, cst(0), t.clone()),
        range(1, cst(1), n.clone().sub(&cst(1))),
    ]
    .concat();
    b.stmt(
        &["t", "i"],
        inner.clone(),
        vec![0, 0, 0],
        (bb, vec![it(1)]),
        |e| {
            let l = e.read(a, vec![it(1).sub(&cst(1))]);
            let c = e.read(a, vec![it(1)]);
            let r = e.read(a, vec![it(1).add(&cst(1))]);
            let s = e.bin(BinaryOp::Add, l, c);
            let s = e.bin(BinaryOp::Add, s, r);
            let three = e.lit(3.0, F32);
            e.bin(BinaryOp::Div, s, three)
        },
    );
    b.stmt(&["t", "j"], inner, vec![0, 1, 0], (a, vec![it(1)]), |e| {
        e.read(bb, vec![it(1)])
    });
    b.finish()
}

/// `count(y, x) = escape(re(x), im(y), 20)` with the scalar function of DESIGN.md.
pub fn mandelbrot() -> Program {
    let mut b = Builder::new("mandelbrot", &[("H", 5), ("W", 6)]);
    let (h, w) = (param(0), param(1));
    let re = b.array("re", F32, vec![w.clone()], ArrayRole::Input);
    let im = b.array("im", F32, vec![h.clone()], ArrayRole::Input);
    let count = b.array(
        "count",
        ScalarType::I32,
        vec![h.clone(), w.clone()],
        ArrayRole::Output,
    );
    b.p.functions.push(escape());
    let dom = [range(0, cst(0), h.clone()), range(1, cst(0), w.clone())].concat();
    b.stmt(
        &["y", "x"],
        dom,
        vec![0, 0, 0],
        (count, vec![it(0), it(1)]),
        |e| {
            let cr = e.read(re, vec![it(1)]);
            let ci = e.read(im, vec![it(0)]);
            let two = e.lit(2.0, F32);
            let cr = e.bin(BinaryOp::Mul, cr, two);
            let ci = e.bin(BinaryOp::Mul, ci, two);
            let limit = e.lit(20.0, ScalarType::I32);
            e.push(Expr::Call(FunctionId(0), vec![cr, ci, limit]))
        },
    );
    b.finish()
}

fn escape() -> Function {
    let i32t = ScalarType::I32;
    let local = |name: &str, ty| Local {
        name: name.into(),
        ty,
    };
    let mut x = ExprArena::new();
    let (cr, ci, limit) = (
        x.push(Expr::Local(LocalId(0))),
        x.push(Expr::Local(LocalId(1))),
        x.push(Expr::Local(LocalId(2))),
    );
    let (zr, zi, n) = (
        x.push(Expr::Local(LocalId(3))),
        x.push(Expr::Local(LocalId(4))),
        x.push(Expr::Local(LocalId(5))),
    );
    let lit = |x: &mut ExprArena, value, ty| x.push(Expr::Literal(Literal { value, ty }));
    let zero_f = lit(&mut x, 0.0, F32);
    let zero_i = lit(&mut x, 0.0, i32t);
    let one = lit(&mut x, 1.0, i32t);
    let two = lit(&mut x, 2.0, F32);
    let four = lit(&mut x, 4.0, F32);
    let zr2 = x.push(Expr::Binary(BinaryOp::Mul, zr, zr));
    let zi2 = x.push(Expr::Binary(BinaryOp::Mul, zi, zi));
    let mag = x.push(Expr::Binary(BinaryOp::Add, zr2, zi2));
    let inside = x.push(Expr::Binary(BinaryOp::Lt, mag, four));
    let more = x.push(Expr::Binary(BinaryOp::Lt, n, limit));
    let cond = x.push(Expr::Binary(BinaryOp::And, more, inside));
    let diff = x.push(Expr::Binary(BinaryOp::Sub, zr2, zi2));
    let t = x.push(Expr::Binary(BinaryOp::Add, diff, cr));
    let tzr = x.push(Expr::Binary(BinaryOp::Mul, two, zr));
    let tzrzi = x.push(Expr::Binary(BinaryOp::Mul, tzr, zi));
    let new_zi = x.push(Expr::Binary(BinaryOp::Add, tzrzi, ci));
    let n1 = x.push(Expr::Binary(BinaryOp::Add, n, one));
    let t_local = x.push(Expr::Local(LocalId(6)));
    // An early exit through `if` inside the loop: escape when |z|² exceeds 16.
    let sixteen = lit(&mut x, 16.0, F32);
    let far = x.push(Expr::Binary(BinaryOp::Gt, mag, sixteen));
    let neg_n = x.push(Expr::Unary(UnaryOp::Neg, n));
    Function {
        name: "escape".into(),
        params: 3,
        locals: vec![
            local("cr", F32),
            local("ci", F32),
            local("limit", i32t),
            local("zr", F32),
            local("zi", F32),
            local("n", i32t),
            local("t", F32),
        ],
        ret: i32t,
        exprs: x,
        body: vec![
            Stmt::Assign(LocalId(3), zero_f),
            Stmt::Assign(LocalId(4), zero_f),
            Stmt::Assign(LocalId(5), zero_i),
            Stmt::While {
                cond,
                body: vec![
                    Stmt::If {
                        cond: far,
                        then: vec![Stmt::Return(neg_n)],
                        otherwise: vec![],
                    },
                    Stmt::Assign(LocalId(6), t),
                    Stmt::Assign(LocalId(4), new_zi),
                    Stmt::Assign(LocalId(3), t_local),
                    Stmt::Assign(LocalId(5), n1),
                ],
            },
            Stmt::Return(n),
        ],
    }
}

/// f16 arithmetic: `C = f16(sqrt(|A| * B) - exp(A) / (B + 2)) + f16(float(A) * 3)`, every
/// operation rounded to f16.
pub fn f16_ops() -> Program {
    let h = ScalarType::F16;
    let mut b = Builder::new("f16_ops", &[("N", 40)]);
    let n = param(0);
    let a = b.array("A", h, vec![n.clone()], ArrayRole::Input);
    let bb = b.array("B", h, vec![n.clone()], ArrayRole::Input);
    let c = b.array("C", h, vec![n.clone()], ArrayRole::Output);
    let d = b.array("D", ScalarType::F64, vec![n.clone()], ArrayRole::Output);
    b.stmt(
        &["i"],
        range(0, cst(0), n.clone()),
        vec![0, 0],
        (c, vec![it(0)]),
        |e| {
            let x = e.read(a, vec![it(0)]);
            let y = e.read(bb, vec![it(0)]);
            let ax = e.push(Expr::Math(MathFn::Abs, vec![x]));
            let p = e.bin(BinaryOp::Mul, ax, y);
            let ap = e.push(Expr::Math(MathFn::Abs, vec![p]));
            let s = e.push(Expr::Math(MathFn::Sqrt, vec![ap]));
            let ex = e.push(Expr::Math(MathFn::Exp, vec![x]));
            let two = e.lit(2.0, h);
            let y2 = e.bin(BinaryOp::Add, y, two);
            let q = e.bin(BinaryOp::Div, ex, y2);
            let r = e.bin(BinaryOp::Sub, s, q);
            let xf = e.push(Expr::Cast(ScalarType::F32, x));
            let three = e.lit(3.0, F32);
            let m = e.bin(BinaryOp::Mul, xf, three);
            let mh = e.push(Expr::Cast(h, m));
            e.bin(BinaryOp::Add, r, mh)
        },
    );
    b.stmt(
        &["i"],
        range(0, cst(0), n.clone()),
        vec![1, 0],
        (d, vec![it(0)]),
        |e| {
            let x = e.read(a, vec![it(0)]);
            let y = e.read(bb, vec![it(0)]);
            let q = e.bin(BinaryOp::Div, x, y);
            let tiny = e.lit(1e-4, h);
            let t = e.bin(BinaryOp::Mul, q, tiny);
            e.push(Expr::Cast(ScalarType::F64, t))
        },
    );
    b.finish()
}

/// i32 semantics: wrapping `+ - *`, truncating `/` and `%` (by a non-zero divisor),
/// negation, `abs`, and saturating float-to-integer casts.
pub fn i32_ops() -> Program {
    let i = ScalarType::I32;
    let mut b = Builder::new("i32_ops", &[("N", 32)]);
    let n = param(0);
    let x = b.array("x", i, vec![n.clone()], ArrayRole::Input);
    let y = b.array("y", i, vec![n.clone()], ArrayRole::Input);
    let f = b.array("f", F32, vec![n.clone()], ArrayRole::Input);
    let z = b.array("z", i, vec![n.clone(), cst(4)], ArrayRole::Output);
    let dom = range(0, cst(0), n.clone());
    b.stmt(
        &["k"],
        dom.clone(),
        vec![0, 0],
        (z, vec![it(0), cst(0)]),
        |e| {
            // x * 2^27 + (2^31 - 1) - k: wraps for most x.
            let a = e.read(x, vec![it(0)]);
            let big = e.lit(134_217_728.0, i);
            let m = e.bin(BinaryOp::Mul, a, big);
            let max = e.lit(2_147_483_647.0, i);
            let s = e.bin(BinaryOp::Add, m, max);
            let k = e.push(Expr::Iter(0));
            e.bin(BinaryOp::Sub, s, k)
        },
    );
    b.stmt(
        &["k"],
        dom.clone(),
        vec![1, 0],
        (z, vec![it(0), cst(1)]),
        |e| {
            // (x - 3) / (y == 0 ? 7 : y) + (x % 5) * -1, and INT32_MIN / -1.
            let a = e.read(x, vec![it(0)]);
            let c = e.read(y, vec![it(0)]);
            let three = e.lit(3.0, i);
            let a3 = e.bin(BinaryOp::Sub, a, three);
            let zero = e.lit(0.0, i);
            let is0 = e.bin(BinaryOp::Eq, c, zero);
            let seven = e.lit(7.0, i);
            let d = e.push(Expr::Select {
                cond: is0,
                then: seven,
                otherwise: c,
            });
            let q = e.bin(BinaryOp::Div, a3, d);
            let five = e.lit(5.0, i);
            let r = e.bin(BinaryOp::Rem, a, five);
            let nr = e.push(Expr::Unary(UnaryOp::Neg, r));
            let s = e.bin(BinaryOp::Add, q, nr);
            let min = e.lit(-2_147_483_648.0, i);
            let m1 = e.lit(-1.0, i);
            let w = e.bin(BinaryOp::Div, min, m1);
            e.bin(BinaryOp::Add, s, w)
        },
    );
    b.stmt(
        &["k"],
        dom.clone(),
        vec![2, 0],
        (z, vec![it(0), cst(2)]),
        |e| {
            // Saturating casts: f * 3e9 leaves the i32 range for |f| > 0.72.
            let v = e.read(f, vec![it(0)]);
            let big = e.lit(3e9, F32);
            let p = e.bin(BinaryOp::Mul, v, big);
            e.push(Expr::Cast(i, p))
        },
    );
    b.stmt(&["k"], dom, vec![3, 0], (z, vec![it(0), cst(3)]), |e| {
        let a = e.read(x, vec![it(0)]);
        let c = e.read(y, vec![it(0)]);
        let ab = e.push(Expr::Math(MathFn::Abs, vec![a]));
        let mx = e.bin(BinaryOp::Max, ab, c);
        let mn = e.bin(BinaryOp::Min, mx, a);
        let n = e.push(Expr::Param(ParamId(0)));
        e.bin(BinaryOp::Mul, mn, n)
    });
    b.finish()
}

/// Every test program.
pub fn all() -> Vec<Program> {
    vec![
        gemm_bias_relu(),
        triangular(),
        jacobi_1d(),
        mandelbrot(),
        f16_ops(),
        i32_ops(),
    ]
}

/// A kernel of `kernels/` with some sizes changed.
pub fn kernel_file(file: &str, sizes: &[(&str, i64)]) -> Program {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kernels")
        .join(file);
    let options = frontend::Options {
        sizes: sizes.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        ..frontend::Options::default()
    };
    frontend::load(&path, &options).unwrap_or_else(|e| panic!("{}", e.render(false)))
}
