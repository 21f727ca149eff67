//! Contractions: statements that reduce a product of two operands, recognised from their
//! access relations alone (never from names), so any target can map them to a matrix unit.
//!
//! A statement `W[..] = W[..] + f(X[..]) * g(Y[..])` whose reduction is a sum, with `f` and `g`
//! each a read optionally under a cast, optionally multiplied by a loop-invariant factor (a
//! literal or a scalar: `alpha * A[i, k] * B[k, j]` scales A), and whose subscripts are
//! affine (no division variables), is a contraction. Neither
//! operand may be the array the statement writes (an in-place update such as
//! `B[i, j] += A[k, i] * B[k, j]` reads elements other iterations write). Its iterators fall into four classes
//! by the accesses they appear in:
//!
//! | class | write `W` | operand `X` (A) | operand `Y` (B) |
//! | --- | --- | --- | --- |
//! | batch | yes | yes | yes |
//! | m | yes | yes | no |
//! | n | yes | no | yes |
//! | k (reduced) | no | yes | yes |
//!
//! Invariants of a [`Contraction`]: every iterator of the statement is in exactly one class, the
//! k class is the statement's reduction iterators, and m, n and k are not empty. An operand
//! subscript may combine an m or n iterator with a k iterator (`I(ci, y + ky, x + kx)` of a convolution): then
//! [`Contraction::windowed`] is true and a target needs an im2col to see a plain matrix.

use crate::program::{
    Access, BinaryOp, Expr, ExprId, ReductionOp, ScalarType, Statement, StmtId, Var,
};
use crate::Program;

/// A recognised contraction; iterators are indices into the statement's iterators.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contraction {
    pub stmt: StmtId,
    /// The read of the left operand (the one holding the m iterators).
    pub a: usize,
    /// The read of the right operand (the one holding the n iterators).
    pub b: usize,
    /// The read of the accumulated element itself.
    pub acc: usize,
    /// The loop-invariant factor each operand is multiplied by before the product, if any
    /// (a literal, or a read of a scalar): the product is `(scale_a · A) · (scale_b · B)`.
    pub scale_a: Option<ExprId>,
    pub scale_b: Option<ExprId>,
    pub batch: Vec<usize>,
    pub m: Vec<usize>,
    pub n: Vec<usize>,
    pub k: Vec<usize>,
    /// The element type the product and the sum are computed in.
    pub ty: ScalarType,
    /// Whether some operand subscript mixes an m or n iterator with a k one (a sliding window).
    pub windowed: bool,
}

/// Every contraction of `program`, in statement order.
pub fn contractions(program: &Program) -> Vec<Contraction> {
    program
        .statement_ids()
        .filter_map(|id| contraction(program, id))
        .collect()
}

/// The contraction structure of statement `id`, if it is one.
pub fn contraction(program: &Program, id: StmtId) -> Option<Contraction> {
    let stmt = &program.statements[id.index()];
    // The index roles below read iterators off affine subscripts; quasi-affine ones (division
    // variables) are no contraction.
    if stmt.has_divisions() {
        return None;
    }
    let reduction = stmt.reduction.as_ref()?;
    if reduction.op != ReductionOp::Add {
        return None;
    }
    let (acc, product) = match &stmt.exprs[stmt.body] {
        Expr::Binary(BinaryOp::Add, x, y) => match (self_read(stmt, *x), self_read(stmt, *y)) {
            (Some(r), _) => (r, *y),
            (None, Some(r)) => (r, *x),
            _ => return None,
        },
        _ => return None,
    };
    let Expr::Binary(BinaryOp::Mul, p, q) = &stmt.exprs[product] else {
        return None;
    };
    let ((p, scale_p), (q, scale_q)) = (operand(stmt, *p)?, operand(stmt, *q)?);
    if p == acc
        || q == acc
        || stmt.reads[p].array == stmt.write.array
        || stmt.reads[q].array == stmt.write.array
    {
        return None;
    }
    let ty = program.expr_type(stmt, product);
    let uses = |access: &Access| -> Vec<bool> {
        (0..stmt.depth())
            .map(|it| {
                access
                    .subscripts
                    .iter()
                    .any(|s| s.coeff(Var::Iter(it)) != 0)
            })
            .collect()
    };
    let (w, x, y) = (
        uses(&stmt.write),
        uses(&stmt.reads[p]),
        uses(&stmt.reads[q]),
    );
    let (mut batch, mut ms, mut ns, mut ks) = (vec![], vec![], vec![], vec![]);
    for it in 0..stmt.depth() {
        match (w[it], x[it], y[it]) {
            (true, true, true) => batch.push(it),
            (true, true, false) => ms.push(it),
            (true, false, true) => ns.push(it),
            (false, true, true) => ks.push(it),
            _ => return None,
        }
    }
    if reduction.iters != ks || ms.is_empty() || ns.is_empty() || ks.is_empty() {
        return None;
    }
    // A is the operand of the write's first non-batch subscript (rows of a matrix product),
    // whatever order the product was written in.
    let first = stmt.write.subscripts.iter().find_map(|s| {
        (0..stmt.depth()).find(|it| s.coeff(Var::Iter(*it)) != 0 && !batch.contains(it))
    });
    let ((a, scale_a), (b, scale_b)) = if first.is_some_and(|it| ns.contains(&it)) {
        std::mem::swap(&mut ms, &mut ns);
        ((q, scale_q), (p, scale_p))
    } else {
        ((p, scale_p), (q, scale_q))
    };
    let windowed = [a, b].iter().any(|&r| {
        stmt.reads[r].subscripts.iter().any(|s| {
            let has = |set: &[usize]| set.iter().any(|&it| s.coeff(Var::Iter(it)) != 0);
            (has(&ms) || has(&ns)) && has(&ks)
        })
    });
    Some(Contraction {
        stmt: id,
        a,
        b,
        acc,
        scale_a,
        scale_b,
        batch,
        m: ms,
        n: ns,
        k: ks,
        ty,
        windowed,
    })
}

/// `Read(r)` of the element the statement writes.
fn self_read(stmt: &Statement, e: ExprId) -> Option<usize> {
    match &stmt.exprs[e] {
        Expr::Read(r) if stmt.reads[*r] == stmt.write => Some(*r),
        Expr::Read(r)
            if stmt.reads[*r].array == stmt.write.array
                && stmt.reads[*r].subscripts == stmt.write.subscripts =>
        {
            Some(*r)
        }
        _ => None,
    }
}

/// An operand: a read (possibly under a cast), or a loop-invariant factor times one.
fn operand(stmt: &Statement, e: ExprId) -> Option<(usize, Option<ExprId>)> {
    if let Some(r) = operand_read(stmt, e) {
        return Some((r, None));
    }
    let Expr::Binary(BinaryOp::Mul, x, y) = &stmt.exprs[e] else {
        return None;
    };
    match (invariant(stmt, *x), invariant(stmt, *y)) {
        (false, true) => operand_read(stmt, *x).map(|r| (r, Some(*y))),
        (true, false) => operand_read(stmt, *y).map(|r| (r, Some(*x))),
        _ => None,
    }
}

/// A literal, or a read whose subscripts use no iterator (a scalar or a fixed element).
fn invariant(stmt: &Statement, e: ExprId) -> bool {
    match &stmt.exprs[e] {
        Expr::Literal(_) => true,
        Expr::Read(r) => stmt.reads[*r]
            .subscripts
            .iter()
            .all(|s| (0..stmt.depth()).all(|it| s.coeff(Var::Iter(it)) == 0)),
        _ => false,
    }
}

/// A read, possibly under a cast.
fn operand_read(stmt: &Statement, e: ExprId) -> Option<usize> {
    match &stmt.exprs[e] {
        Expr::Read(r) => Some(*r),
        Expr::Cast(_, inner) => match &stmt.exprs[*inner] {
            Expr::Read(r) => Some(*r),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::*;

    /// `C[i, j] += A[.. i, k ..] * B[.. k, j ..]` over `iters` with the given subscripts.
    fn stmt(
        a: Vec<AffineExpr>,
        b: Vec<AffineExpr>,
        w: Vec<AffineExpr>,
        red: Vec<usize>,
        depth: usize,
    ) -> Program {
        let arr = |name: &str, rank: usize, role| Array {
            name: name.into(),
            elem: ScalarType::F32,
            shape: vec![AffineExpr::constant(8); rank],
            role,
            span: Span::default(),
        };
        let mut exprs = ExprArena::new();
        let r0 = exprs.push(Expr::Read(0));
        let r1 = exprs.push(Expr::Read(1));
        let r2 = exprs.push(Expr::Read(2));
        let mul = exprs.push(Expr::Binary(BinaryOp::Mul, r1, r2));
        let body = exprs.push(Expr::Binary(BinaryOp::Add, r0, mul));
        let access = |array: u32, subscripts: Vec<AffineExpr>| Access {
            array: ArrayId(array),
            subscripts,
            span: Span::default(),
        };
        let write = access(2, w);
        Program {
            name: "t".into(),
            arrays: vec![
                arr("A", a.len(), ArrayRole::Input),
                arr("B", b.len(), ArrayRole::Input),
                arr("C", write.subscripts.len(), ArrayRole::Output),
            ],
            statements: vec![Statement {
                divs: Vec::new(),
                name: "S0".into(),
                iterators: (0..depth).map(|d| format!("i{d}")).collect(),
                domain: vec![],
                reads: vec![write.clone(), access(0, a), access(1, b)],
                write,
                exprs,
                body,
                position: vec![0; depth + 1],
                reduction: Some(Reduction {
                    op: ReductionOp::Add,
                    iters: red,
                }),
                span: Span::default(),
            }],
            ..Default::default()
        }
    }

    fn it(d: usize) -> AffineExpr {
        AffineExpr::var(Var::Iter(d))
    }

    #[test]
    fn matmul_is_a_contraction() {
        let p = stmt(
            vec![it(0), it(2)],
            vec![it(2), it(1)],
            vec![it(0), it(1)],
            vec![2],
            3,
        );
        let c = contraction(&p, StmtId(0)).expect("a contraction");
        assert_eq!(
            (c.m, c.n, c.k, c.batch),
            (vec![0], vec![1], vec![2], vec![])
        );
        assert_eq!((c.a, c.b, c.windowed), (1, 2, false));
    }

    #[test]
    fn operands_written_b_times_a_are_swapped() {
        let p = stmt(
            vec![it(2), it(1)],
            vec![it(0), it(2)],
            vec![it(0), it(1)],
            vec![2],
            3,
        );
        let c = contraction(&p, StmtId(0)).expect("a contraction");
        assert_eq!((c.a, c.b), (2, 1));
    }

    #[test]
    fn batched_and_permuted_operands() {
        // C[b, i, j] += A[k, l, b, i] * B[l, b, k, j]
        let p = stmt(
            vec![it(3), it(4), it(0), it(1)],
            vec![it(4), it(0), it(3), it(2)],
            vec![it(0), it(1), it(2)],
            vec![3, 4],
            5,
        );
        let c = contraction(&p, StmtId(0)).expect("a contraction");
        assert_eq!(
            (c.batch, c.m, c.n, c.k),
            (vec![0], vec![1], vec![2], vec![3, 4])
        );
    }

    #[test]
    fn a_convolution_is_a_windowed_contraction() {
        // O[co, y] += I[ci, y + ky] * W[co, ci, ky]
        let p = stmt(
            vec![it(2), it(1).add(&it(3))],
            vec![it(0), it(2), it(3)],
            vec![it(0), it(1)],
            vec![2, 3],
            4,
        );
        let c = contraction(&p, StmtId(0)).expect("a contraction");
        // The write's first subscript, co, is a row: the weights are A.
        assert_eq!((c.m, c.n, c.k), (vec![0], vec![1], vec![2, 3]));
        assert_eq!((c.a, c.b), (2, 1));
        assert!(c.windowed);
    }

    #[test]
    fn a_scalar_factor_scales_its_operand() {
        // C[i, j] += (alpha * A[i, k]) * B[k, j], alpha a scalar read.
        let mut p = stmt(
            vec![it(0), it(2)],
            vec![it(2), it(1)],
            vec![it(0), it(1)],
            vec![2],
            3,
        );
        p.arrays.push(Array {
            name: "alpha".into(),
            elem: ScalarType::F32,
            shape: vec![],
            role: ArrayRole::Input,
            span: Span::default(),
        });
        let s = &mut p.statements[0];
        s.reads.push(Access {
            array: ArrayId(3),
            subscripts: vec![],
            span: Span::default(),
        });
        let alpha = s.exprs.push(Expr::Read(3));
        let (r1, r2) = (ExprId(1), ExprId(2));
        let scaled = s.exprs.push(Expr::Binary(BinaryOp::Mul, alpha, r1));
        let mul = s.exprs.push(Expr::Binary(BinaryOp::Mul, scaled, r2));
        let r0 = ExprId(0);
        s.body = s.exprs.push(Expr::Binary(BinaryOp::Add, r0, mul));
        let c = contraction(&p, StmtId(0)).expect("a contraction");
        assert_eq!((c.a, c.b), (1, 2));
        assert_eq!((c.scale_a, c.scale_b), (Some(alpha), None));
    }

    #[test]
    fn an_in_place_update_is_not_a_contraction() {
        // C[i, j] += A[k, i] * C[k, j]: the second operand is the written array.
        let mut p = stmt(
            vec![it(2), it(0)],
            vec![it(2), it(1)],
            vec![it(0), it(1)],
            vec![2],
            3,
        );
        p.statements[0].reads[2].array = ArrayId(2);
        assert_eq!(contraction(&p, StmtId(0)), None);
    }

    #[test]
    fn a_sum_of_one_operand_is_not_a_contraction() {
        // C[i] += A[i, k] * B[i, k]: k is reduced but no n iterator exists.
        let p = stmt(
            vec![it(0), it(1)],
            vec![it(0), it(1)],
            vec![it(0)],
            vec![1],
            2,
        );
        assert_eq!(contraction(&p, StmtId(0)), None);
    }
}
