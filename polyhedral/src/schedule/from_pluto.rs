//! A flat [`PlutoSchedule`] as a schedule tree.
//!
//! The flat schedule's dimensions are read outermost first for the statements that reach the
//! current node:
//! - a scalar dimension whose constants differ among those statements becomes a sequence
//!   whose filters take the statements of each constant, in increasing order (statement
//!   distribution); one whose constants agree is dropped;
//! - the loop dimensions of one band of the flat schedule become one band node, with the
//!   band's permutable flag and each member's coincident flag, recomputed exactly for the
//!   statements of the node when they are fewer than all (a member may carry a dependence in
//!   one loop nest and none in another); a member that is the same
//!   constant for every statement reaching it orders nothing and is dropped. Tiling's tile and
//!   point bands are two bands, so they become a tile band node with a point band node as its
//!   child; a wavefront tile band (its first member the sum of the tile members) keeps that
//!   form, with the later members coincident where the tiled schedule found them so.
//!
//! What holds on the way out: the tree schedules every statement instance exactly once and in
//! the order of the flat schedule (ties between different statements, which the flat
//! schedule leaves to them being independent, run in statement order), so
//! [`super::verify`] accepts it whenever the flat schedule is well formed.

use super::expr::QuasiAffine;
use super::pluto::{coincident_dims_among, DimKind, PlutoSchedule};
use super::tree::{Band, Filter, Node, NodeKind, ScheduleTree};
use super::ScheduleError;
use crate::deps::Dependences;
use crate::program::{Program, StmtId};

/// The schedule tree of a flat Pluto schedule of `program` (see the module docs).
pub fn tree_of_schedule(
    program: &Program,
    deps: &Dependences,
    schedule: &PlutoSchedule,
) -> Result<ScheduleTree, ScheduleError> {
    let n = program.statements.len();
    if let Some(d) = schedule.dims.iter().position(|d| d.exprs.len() != n) {
        return Err(ScheduleError::Program(format!(
            "schedule dimension {d} has {} expressions for {n} statements",
            schedule.dims[d].exprs.len()
        )));
    }
    let stmts: Vec<StmtId> = program.statement_ids().collect();
    let builder = Builder {
        program,
        deps,
        schedule,
    };
    let child = builder.build(&stmts, 0)?;
    Ok(ScheduleTree {
        root: Node::with_child(NodeKind::Domain(stmts), child),
    })
}

struct Builder<'a> {
    program: &'a Program,
    deps: &'a Dependences,
    schedule: &'a PlutoSchedule,
}

impl Builder<'_> {
    /// The subtree scheduling `stmts` by dimensions `d..`.
    fn build(&self, stmts: &[StmtId], d: usize) -> Result<Node, ScheduleError> {
        let schedule = self.schedule;
        let Some(dim) = schedule.dims.get(d) else {
            return Ok(Node::leaf());
        };
        if dim.kind == DimKind::Scalar {
            let mut groups: Vec<(i64, Vec<StmtId>)> = Vec::new();
            for &s in stmts {
                let e = &dim.exprs[s.index()];
                let value = match e.as_affine() {
                    Some(a) if a.is_constant() => a.constant,
                    _ => {
                        return Err(ScheduleError::Program(format!(
                            "scalar dimension {d} is not a constant"
                        )))
                    }
                };
                match groups.iter_mut().find(|(v, _)| *v == value) {
                    Some((_, g)) => g.push(s),
                    None => groups.push((value, vec![s])),
                }
            }
            if groups.len() < 2 {
                return self.build(stmts, d + 1);
            }
            groups.sort_by_key(|(v, _)| *v);
            let children = groups
                .into_iter()
                .map(|(_, g)| Ok((Filter::of_statements(&g), self.build(&g, d + 1)?)))
                .collect::<Result<Vec<_>, ScheduleError>>()?;
            return Ok(Node::sequence(children));
        }
        // A loop dimension outside every band is a band of its own that is not permutable.
        let (end, permutable) = match schedule.band_of(d) {
            Some(b) => (b.start + b.len, b.permutable),
            None => (d + 1, false),
        };
        let exact = if stmts.len() < self.program.statements.len() {
            Some(
                coincident_dims_among(self.program, self.deps, schedule, stmts).map_err(|e| {
                    ScheduleError::Program(format!("coincidence of a loop nest: {e}"))
                })?,
            )
        } else {
            None
        };
        let mut functions: Vec<Vec<QuasiAffine>> = vec![Vec::new(); stmts.len()];
        let mut coincident = Vec::new();
        for (k, member) in schedule.dims[d..end].iter().enumerate() {
            let first = &member.exprs[stmts[0].index()];
            let same_constant = first.as_affine().is_some_and(|a| a.is_constant())
                && stmts.iter().all(|s| &member.exprs[s.index()] == first);
            if same_constant {
                continue;
            }
            for (f, s) in functions.iter_mut().zip(stmts) {
                f.push(member.exprs[s.index()].clone());
            }
            coincident.push(exact.as_ref().map_or(member.coincident, |e| e[d + k]));
        }
        let child = self.build(stmts, end)?;
        if coincident.is_empty() {
            return Ok(child);
        }
        let band = Band {
            schedule: stmts.iter().copied().zip(functions).collect(),
            permutable,
            coincident,
        };
        Ok(Node::with_child(NodeKind::Band(band), child))
    }
}
