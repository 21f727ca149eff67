//! What the Vector unit computes of a kernel without a contraction, read from its polyhedral
//! representation: each statement's iteration domain, the roles of its iterators and the
//! pattern of every access, and the sequential loops around the statements.
//!
//! A statement the lowering takes is one of
//! - **element-wise**: it writes `X[r + a, c + b]` over a box of rows `r` and columns `c`;
//! - **per row**: it writes `X[r + a]` over a range of rows;
//! - **a row reduction**: it folds `X[r + a] = X[r + a] ⊕ e` over the columns `c` of a box
//!   (`⊕` one of `+`, `max`, `min`; `-` folds the negation);
//!
//! with every iterator either the row, the column (or reduced) iterator, or an outermost
//! **sequential** iterator that no subscript mentions (a time loop, at most one level). Reads
//! are tiles `Y[r + a, c + b]` or transposed tiles `Y[c + b, r + a]`, per-row vectors
//! `Y[r + a]`, per-column vectors `Y[c + b]` and scalars. Statements below the sequential loop each have a loop nest of their own (the
//! original order runs them one after the other, whole), so every dependence between two of
//! them goes forward in statement order; a statement that reads the array it writes at another
//! element (a recurrence along its own loops) is refused.

use polyhedral::program::{
    ArrayId, BinaryOp, ConstraintKind, Expr, ExprId, ReductionOp, ScalarType, Statement, StmtId,
    Var,
};
use polyhedral::Program;

use crate::npu::{Error, Options};

/// Where an access falls relative to the statement's row and column iterators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum At {
    /// `X[r + row, c + col]`
    Tile { row: i64, col: i64 },
    /// `X[r + row]`
    Row { row: i64 },
    /// `X[c + col]`
    Col { col: i64 },
    /// `X[c + col, r + row]`: a tile read across its array's rows (a read only)
    Transposed { row: i64, col: i64 },
    /// `X[]`
    Scalar,
}

impl At {
    /// The row offset of a tile or per-row access.
    pub(crate) fn row(self) -> i64 {
        match self {
            At::Tile { row, .. } | At::Row { row } | At::Transposed { row, .. } => row,
            At::Col { .. } | At::Scalar => 0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    pub array: ArrayId,
    pub at: At,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One value per row and column.
    Full,
    /// One value per row.
    Row,
    /// `X[r] = X[r] ⊕ contribution` over the columns; `acc` is the read of `X[r]` and
    /// `negate` says the body subtracts the contribution.
    Reduce {
        op: ReductionOp,
        acc: usize,
        contribution: ExprId,
        negate: bool,
    },
}

/// One statement as the Vector unit sees it.
#[derive(Clone, Debug)]
pub(crate) struct VStmt {
    pub id: StmtId,
    pub kind: Kind,
    /// Rows `[lo, hi)` of the iteration domain.
    pub rows: (i64, i64),
    /// Columns `[lo, hi)` (element-wise statements and reductions).
    pub cols: Option<(i64, i64)>,
    pub write: Access,
    /// In the order of the statement's reads.
    pub reads: Vec<Access>,
}

/// The statements of a loop body or of the top level, in program order.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    Stmts(Vec<VStmt>),
    /// A sequential loop of `trips` iterations around its statements.
    Loop {
        trips: i64,
        body: Vec<VStmt>,
    },
}

/// Reads the structure of `program`, or says why the Vector unit does not take it.
pub(crate) fn analyse(program: &Program, options: &Options) -> Result<Vec<Item>, Error> {
    crate::npu::plan::check_types(program, options)?;
    for arr in &program.arrays {
        if arr.elem == ScalarType::F16 {
            return Err(Error::NotYet(format!(
                "f16 arrays on the Vector unit alone (`{}` is f16); it computes f32 kernels",
                arr.name
            )));
        }
    }
    let mut items: Vec<Item> = Vec::new();
    // The position and trip range of the sequential loop around the statements of the last
    // loop item.
    let mut loop_key: Option<(usize, (i64, i64))> = None;
    for id in program.statement_ids() {
        let s = &program.statements[id.index()];
        let bounds = bounds(program, s)?;
        if bounds.iter().any(|&(lo, hi)| lo >= hi) {
            // No instance runs.
            continue;
        }
        let (v, time) = statement(program, s, id, &bounds)?;
        match time {
            None => {
                if let Some(Item::Stmts(list)) = items.last_mut() {
                    list.push(v);
                } else {
                    items.push(Item::Stmts(vec![v]));
                }
                loop_key = None;
            }
            Some(range) => {
                let key = (s.position[0], range);
                match items.last_mut() {
                    Some(Item::Loop { body, .. }) if loop_key == Some(key) => body.push(v),
                    _ => {
                        if loop_key.is_some_and(|(p, _)| p == key.0) {
                            return Err(Error::NotYet(format!(
                                "statement {} runs a different number of sequential iterations than the statements before it in its loop",
                                s.name
                            )));
                        }
                        items.push(Item::Loop {
                            trips: range.1 - range.0,
                            body: vec![v],
                        });
                        loop_key = Some(key);
                    }
                }
            }
        }
    }
    for item in &items {
        let (list, depth) = match item {
            Item::Stmts(l) => (l, 0),
            Item::Loop { body, .. } => (body, 1),
        };
        for (k, a) in list.iter().enumerate() {
            for b in &list[k + 1..] {
                let (sa, sb) = (
                    &program.statements[a.id.index()],
                    &program.statements[b.id.index()],
                );
                if sa.position[depth] == sb.position[depth] {
                    return Err(Error::NotYet(format!(
                        "statements {} and {} share a loop nest; the Vector unit runs each statement's nest whole, one after the other",
                        sa.name, sb.name
                    )));
                }
            }
        }
    }
    Ok(items)
}

/// `it + c` of a subscript (parameters bound): the iterator and the constant.
fn iter_plus(program: &Program, e: &polyhedral::program::AffineExpr) -> Option<(usize, i64)> {
    let e = e.bind_params(&program.param_values());
    match e.terms() {
        [(Var::Iter(i), 1)] => Some((*i, e.constant)),
        _ => None,
    }
}

/// The statement's kind and accesses, and the range of its sequential iterator if it has one.
fn statement(
    program: &Program,
    s: &Statement,
    id: StmtId,
    bounds: &[(i64, i64)],
) -> Result<(VStmt, Option<(i64, i64)>), Error> {
    let not_yet = |why: String| Error::NotYet(format!("statement {}: {why}", s.name));
    let element = |acc: &polyhedral::program::Access| program.display_element(s, acc);
    let subs: Vec<Option<(usize, i64)>> = s
        .write
        .subscripts
        .iter()
        .map(|e| iter_plus(program, e))
        .collect();
    let (row, col, write_at) = match (subs.as_slice(), &s.reduction) {
        ([Some((r, a)), Some((c, b))], None) if r != c => (*r, Some(*c), At::Tile { row: *a, col: *b }),
        ([Some((r, a))], None) => (*r, None, At::Row { row: *a }),
        ([Some((r, a))], Some(red)) if red.iters.len() == 1 => {
            (*r, Some(red.iters[0]), At::Row { row: *a })
        }
        (_, Some(_)) => {
            return Err(not_yet(format!(
                "it reduces into {}; the Vector unit reduces along the columns of a row into a per-row vector",
                element(&s.write)
            )))
        }
        _ => {
            return Err(not_yet(format!(
                "it writes {}; the Vector unit writes tiles X[r + a, c + b] and per-row vectors X[r + a]",
                element(&s.write)
            )))
        }
    };
    let mut time = None;
    for (d, &range) in bounds.iter().enumerate() {
        if d == row || Some(d) == col {
            continue;
        }
        let outermost = d == 0 && row > 0 && col.is_none_or(|c| c > 0);
        if !outermost || s.depth() > 3 {
            return Err(not_yet(format!(
                "its iterator `{}` is neither its row, its column nor an outermost sequential loop",
                s.iterators[d]
            )));
        }
        time = Some(range);
    }
    let mut reads = Vec::with_capacity(s.reads.len());
    for acc in &s.reads {
        let subs: Vec<Option<(usize, i64)>> = acc
            .subscripts
            .iter()
            .map(|e| iter_plus(program, e))
            .collect();
        let at = match subs.as_slice() {
            [] => At::Scalar,
            [Some((r, a)), Some((c, b))] if *r == row && Some(*c) == col => {
                At::Tile { row: *a, col: *b }
            }
            [Some((c, b)), Some((r, a))] if *r == row && Some(*c) == col => {
                At::Transposed { row: *a, col: *b }
            }
            [Some((r, a))] if *r == row => At::Row { row: *a },
            [Some((c, b))] if Some(*c) == col => At::Col { col: *b },
            _ => {
                return Err(not_yet(format!(
                    "it reads {}; the Vector unit reads tiles Y[r + a, c + b] and Y[c + b, r + a], per-row vectors Y[r + a], per-column vectors Y[c + b] and scalars",
                    element(acc)
                )))
            }
        };
        reads.push(Access {
            array: acc.array,
            at,
        });
    }
    let write = Access {
        array: s.write.array,
        at: write_at,
    };
    let kind = match &s.reduction {
        None => Kind::Full,
        Some(red) => reduction(s, red.op, &reads, write).ok_or_else(|| {
            not_yet(format!(
                "its body `{}` is not a fold of {} by `+`, `-`, `max` or `min`",
                program.display_body(s),
                element(&s.write)
            ))
        })?,
    };
    let kind = match (kind, write_at) {
        (Kind::Full, At::Row { .. }) => Kind::Row,
        (k, _) => k,
    };
    for (r, read) in reads.iter().enumerate() {
        let acc_read = matches!(kind, Kind::Reduce { acc, .. } if acc == r);
        if read.array == write.array && !acc_read && read.at != write.at {
            return Err(not_yet(format!(
                "it reads {} and writes {} (a recurrence along its own loops)",
                element(&s.reads[r]),
                element(&s.write)
            )));
        }
    }
    Ok((
        VStmt {
            id,
            kind,
            rows: bounds[row],
            cols: col.map(|c| bounds[c]),
            write,
            reads,
        },
        time,
    ))
}

/// The fold of a reduction statement's body: `acc ⊕ e` (or `acc - e`).
fn reduction(s: &Statement, op: ReductionOp, reads: &[Access], write: Access) -> Option<Kind> {
    let is_acc = |e: ExprId| match s.exprs[e] {
        Expr::Read(r) => (reads[r] == write).then_some(r),
        _ => None,
    };
    let Expr::Binary(bop, x, y) = s.exprs[s.body] else {
        return None;
    };
    let (acc, contribution, negate) = match (is_acc(x), is_acc(y)) {
        (Some(r), None) => (r, y, bop == BinaryOp::Sub),
        (None, Some(r)) if bop != BinaryOp::Sub => (r, x, false),
        _ => return None,
    };
    let fits = matches!(
        (op, bop),
        (ReductionOp::Add, BinaryOp::Add | BinaryOp::Sub)
            | (ReductionOp::Max, BinaryOp::Max)
            | (ReductionOp::Min, BinaryOp::Min)
    );
    // The contribution must not read the accumulator again.
    let mut stack = vec![contribution];
    while let Some(e) = stack.pop() {
        if is_acc(e).is_some() {
            return None;
        }
        stack.extend(s.exprs[e].operands());
    }
    fits.then_some(Kind::Reduce {
        op,
        acc,
        contribution,
        negate,
    })
}

/// `[lo, hi)` of every iterator when the domain is a box (at the program's sizes).
fn bounds(program: &Program, s: &Statement) -> Result<Vec<(i64, i64)>, Error> {
    let params = program.param_values();
    let mut lo = vec![None::<i64>; s.depth()];
    let mut hi = vec![None::<i64>; s.depth()];
    let not_box = || {
        Error::NotYet(format!(
            "the domain {} of statement {} is not a box",
            program.display_domain(s),
            s.name
        ))
    };
    for c in &s.domain {
        let e = c.expr.bind_params(&params);
        match (e.terms(), c.kind) {
            ([], _) => {}
            ([(Var::Iter(d), 1)], ConstraintKind::NonNegative) => {
                let v = -e.constant;
                lo[*d] = Some(lo[*d].map_or(v, |l: i64| l.max(v)));
            }
            ([(Var::Iter(d), -1)], ConstraintKind::NonNegative) => {
                let v = e.constant + 1;
                hi[*d] = Some(hi[*d].map_or(v, |h: i64| h.min(v)));
            }
            _ => return Err(not_box()),
        }
    }
    lo.iter()
        .zip(&hi)
        .map(|(l, h)| match (l, h) {
            (Some(l), Some(h)) => Ok((*l, *h)),
            _ => Err(not_box()),
        })
        .collect()
}
