//! The original loop nest of a [`Program`], rebuilt from its statements' positions.
//!
//! Statements that share a position at every depth above `d` share the loops of those depths;
//! the nest is what the original 2d+1 schedule denotes, as a tree: loops (by depth) and
//! statements, children in textual order. The interpreter runs it, and the original schedule
//! tree and AST are built from it.
//!
//! Invariant on the way out: a statement appears exactly once, under as many loops as it has
//! iterators, and the loop at depth `d` only holds statements with more than `d` iterators.

use std::collections::BTreeMap;

use super::{Program, StmtId};

/// One item of the original loop nest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NestNode {
    /// A loop over the iterator at `depth`, shared by every statement below it.
    Loop {
        depth: usize,
        body: Vec<NestNode>,
    },
    Stmt(StmtId),
}

/// The statements' positions do not describe a loop nest: two statements claim the same place.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the statements' positions do not form a loop nest ({0})")]
pub struct NestError(pub String);

/// The original loop nest of every statement of `program`.
pub fn build_nest(program: &Program) -> Result<Vec<NestNode>, NestError> {
    let all: Vec<StmtId> = program.statement_ids().collect();
    build_level(program, &all, 0)
}

fn build_level(
    program: &Program,
    stmts: &[StmtId],
    depth: usize,
) -> Result<Vec<NestNode>, NestError> {
    let mut groups: BTreeMap<usize, Vec<StmtId>> = BTreeMap::new();
    for &s in stmts {
        groups
            .entry(program.statements[s.index()].position[depth])
            .or_default()
            .push(s);
    }
    let mut nodes = Vec::new();
    for (_, group) in groups {
        let stmt = |s: StmtId| &program.statements[s.index()];
        match group.as_slice() {
            [single] if stmt(*single).depth() == depth => nodes.push(NestNode::Stmt(*single)),
            _ => {
                if let Some(s) = group.iter().find(|&&s| stmt(s).depth() == depth) {
                    return Err(NestError(format!(
                        "{} shares position {} at depth {depth} with another statement",
                        stmt(*s).name,
                        stmt(*s).position[depth]
                    )));
                }
                nodes.push(NestNode::Loop {
                    depth,
                    body: build_level(program, &group, depth + 1)?,
                });
            }
        }
    }
    Ok(nodes)
}

/// Appends every statement in `nodes`, in textual order.
pub fn collect_stmts(nodes: &[NestNode], out: &mut Vec<StmtId>) {
    for n in nodes {
        match n {
            NestNode::Stmt(s) => out.push(*s),
            NestNode::Loop { body, .. } => collect_stmts(body, out),
        }
    }
}
