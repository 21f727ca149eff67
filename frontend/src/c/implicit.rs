//! Names a SCoP uses without declaring them, as clan reads a bare fragment.
//!
//! A name that is neither declared (at file scope, as a parameter or as a local), nor a loop
//! iterator, nor a size (a size macro, `--size`, `-D`) is
//! - an array of the kernel when it is used with subscripts, with as many dimensions as it has
//!   subscripts (the same number at every use);
//! - a scalar of the kernel when it is used without subscripts and written, or read only as
//!   data (in the statements' values);
//! - a size otherwise: never written and read in loop bounds, conditions or subscripts (the
//!   lowering then asks `--size` or `-D` for its value).
//!
//! Arrays and scalars found so are `double`, as clan assumes, and are the caller's data (their
//! roles follow their reads and writes, as a parameter's do). An undeclared array's extents
//! are given with `--extent NAME=AxB` or inferred from its accesses at the given sizes
//! ([`infer_extents`]): each dimension is one more than the largest index any access reaches,
//! and an access that can reach a negative index is refused.

use std::collections::HashMap;

use polyhedral::program::{AffineExpr, Program, Statement};

use super::ast::{Expr, ExprKind, Stmt, StmtKind};
use super::quasi::Divisions;
use super::{CError, Loc};

/// An undeclared name that holds data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Implicit {
    pub name: String,
    /// Its first use.
    pub loc: Loc,
    /// Number of subscripts; 0 for a scalar.
    pub dims: usize,
}

/// How a name is used, gathered over the SCoP.
#[derive(Default)]
struct Uses {
    first: Loc,
    /// Subscript count and where, of the first subscripted use.
    subscripted: Option<(usize, Loc)>,
    /// Where it is first used without subscripts.
    plain: Option<Loc>,
    written: bool,
    /// Read in a bound, a condition or a subscript.
    affine: bool,
}

/// The undeclared names of `body` that hold data, in order of first use, and those that are
/// sizes; `known` says which names are declared, iterators or sizes.
pub(crate) fn undeclared(
    body: &[Stmt],
    known: &dyn Fn(&Expr) -> bool,
) -> Result<(Vec<Implicit>, Vec<String>), CError> {
    let mut order: Vec<String> = Vec::new();
    let mut uses: HashMap<String, Uses> = HashMap::new();
    let mut walker = Walker {
        known,
        order: &mut order,
        uses: &mut uses,
        error: None,
    };
    for s in body {
        walker.stmt(s);
    }
    if let Some(e) = walker.error {
        return Err(e);
    }
    let mut out = Vec::new();
    let mut sizes = Vec::new();
    for name in order {
        let u = &uses[&name];
        match (u.subscripted, u.plain) {
            (Some((dims, _)), None) => out.push(Implicit {
                name,
                loc: u.first,
                dims,
            }),
            (Some((_, at)), Some(plain)) => {
                let later = if at.span.start < plain.span.start {
                    plain
                } else {
                    at
                };
                return Err(CError::new(
                    later,
                    format!("`{name}` is used both with and without subscripts"),
                    "an undeclared name is an array where it has subscripts; declare it to use it otherwise",
                ));
            }
            (None, _) if u.written || !u.affine => out.push(Implicit {
                name,
                loc: u.first,
                dims: 0,
            }),
            // Never written and read where sizes are: a size, resolved by the lowering.
            (None, _) => sizes.push(name),
        }
    }
    Ok((out, sizes))
}

struct Walker<'a> {
    known: &'a dyn Fn(&Expr) -> bool,
    order: &'a mut Vec<String>,
    uses: &'a mut HashMap<String, Uses>,
    error: Option<CError>,
}

impl Walker<'_> {
    fn entry(&mut self, name: &str, loc: Loc) -> &mut Uses {
        if !self.uses.contains_key(name) {
            self.order.push(name.to_string());
        }
        self.uses.entry(name.to_string()).or_insert_with(|| Uses {
            first: loc,
            ..Uses::default()
        })
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::For {
                init,
                cond,
                step,
                body,
            } => {
                if let Some(e) = init {
                    match &e.kind {
                        // The iterator itself is known; its start is where sizes are.
                        ExprKind::Assign(None, _, lb) => self.expr(lb, false),
                        _ => self.expr(e, false),
                    }
                }
                for e in [cond, step].into_iter().flatten() {
                    self.expr(e, false);
                }
                self.stmt(body);
            }
            StmtKind::If {
                cond,
                then,
                otherwise,
            } => {
                self.expr(cond, false);
                self.stmt(then);
                if let Some(o) = otherwise {
                    self.stmt(o);
                }
            }
            StmtKind::Block(b) => b.iter().for_each(|s| self.stmt(s)),
            StmtKind::Expr(e) => self.expr(e, true),
            StmtKind::Empty => {}
        }
    }

    /// Records the names of `e`; `data` when `e` is a statement's value rather than a bound,
    /// a condition or a subscript.
    fn expr(&mut self, e: &Expr, data: bool) {
        match &e.kind {
            ExprKind::Name { name, .. } => {
                if !(self.known)(e) {
                    let u = self.entry(name, e.loc);
                    u.plain.get_or_insert(e.loc);
                    u.affine |= !data;
                }
            }
            ExprKind::Index(..) => {
                let mut subs = Vec::new();
                let mut root = e;
                while let ExprKind::Index(base, index) = &root.kind {
                    subs.push(index.as_ref());
                    root = base;
                }
                for s in &subs {
                    self.expr(s, false);
                }
                let ExprKind::Name { name, .. } = &root.kind else {
                    self.expr(root, data);
                    return;
                };
                if (self.known)(root) {
                    return;
                }
                let n = subs.len();
                let u = self.entry(name, root.loc);
                match u.subscripted {
                    None => u.subscripted = Some((n, root.loc)),
                    Some((m, _)) if m != n => {
                        if self.error.is_none() {
                            self.error = Some(CError::new(
                                root.loc,
                                format!(
                                    "`{name}` is used with {n} subscript{} here and {m} elsewhere",
                                    if n == 1 { "" } else { "s" }
                                ),
                                "an undeclared array has as many dimensions as subscripts, the same at every use",
                            ));
                        }
                    }
                    Some(_) => {}
                }
            }
            ExprKind::Assign(_, target, value) => {
                self.expr(target, data);
                self.written(target);
                self.expr(value, data);
            }
            ExprKind::Step { target, .. } => {
                self.expr(target, data);
                self.written(target);
            }
            ExprKind::Int(_) | ExprKind::Float { .. } => {}
            ExprKind::Call { args, .. } => args.iter().for_each(|a| self.expr(a, data)),
            ExprKind::Unary(_, a) | ExprKind::Cast(_, a) => self.expr(a, data),
            ExprKind::Binary(_, a, b) => {
                self.expr(a, data);
                self.expr(b, data);
            }
            ExprKind::Cond(c, a, b) => {
                self.expr(c, data);
                self.expr(a, data);
                self.expr(b, data);
            }
        }
    }

    fn written(&mut self, target: &Expr) {
        let mut root = target;
        while let ExprKind::Index(base, _) = &root.kind {
            root = base;
        }
        if let ExprKind::Name { name, .. } = &root.kind {
            if let Some(u) = self.uses.get_mut(name) {
                u.written = true;
            }
        }
    }
}

/// The extents of an undeclared array from the accesses of the program's statements at its
/// sizes (see the module docs): per dimension one more than the largest index, at least 1.
pub(crate) fn infer_extents(
    program: &Program,
    array: polyhedral::program::ArrayId,
    dims: usize,
) -> Result<Vec<i64>, CError> {
    let params = program.param_values();
    let name = &program.array(array).name;
    let mut extents = vec![1i64; dims];
    for s in &program.statements {
        for (_, acc) in s.accesses().filter(|(_, a)| a.array == array) {
            let loc = Loc {
                file: 0,
                span: acc.span,
            };
            for (d, sub) in acc.subscripts.iter().enumerate() {
                let Some((lo, hi)) = subscript_range(s, sub, &params).map_err(|e| {
                    CError::new(
                        loc,
                        format!("cannot infer the extents of `{name}`: {e}"),
                        format!("give them with --extent {name}=…"),
                    )
                })?
                else {
                    continue;
                };
                if lo < 0 {
                    return Err(CError::new(
                        loc,
                        format!(
                            "`{name}` is not declared and this access reaches index {lo} of \
                             dimension {d}"
                        ),
                        "an undeclared array's indices must not be negative; declare it or shift the subscripts",
                    ));
                }
                let limit = i64::from(i32::MAX);
                if hi >= limit {
                    return Err(CError::new(
                        loc,
                        format!("the inferred extent of `{name}` exceeds int range"),
                        format!("give its extents with --extent {name}=…"),
                    ));
                }
                extents[d] = extents[d].max(hi + 1);
            }
        }
    }
    Ok(extents)
}

/// The least and greatest value of a subscript over its statement's domain.
fn subscript_range(
    s: &Statement,
    sub: &AffineExpr,
    params: &[i64],
) -> Result<Option<(i64, i64)>, polyhedral::sets::Error> {
    let divisions = Divisions {
        divs: s.divs.clone(),
    };
    divisions.range(&s.domain, sub, s.depth(), params)
}
