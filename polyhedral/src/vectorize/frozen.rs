//! Which loop-carried values of a divergent loop must be frozen in the lanes that left it.
//!
//! A lane leaves a divergent loop ([`MNode::MaskedLoop`]) while others go on. Its loop-carried
//! values matter after that only if something outside the loop reads them: directly, or through
//! a value the loop computes from them (in SSA form only the phis and the header's values can
//! be read after the loop, as the loop exits at its header). A phi that nothing outside its
//! loop depends on takes its latch value in every lane: lanes that left compute on values
//! nobody reads, which the masked form allows (its operations have no side effects). Dropping
//! the select shortens the chain of dependent operations of every iteration.

use super::mask::{MNode, Masked};
use super::ssa::{Join, Ssa, ValueId};

/// For every value, whether it is a phi of a divergent loop that keeps, in lanes that left the
/// loop, the value it had when they left (a select on the loop's active mask at the latch).
pub fn frozen_phis(ssa: &Ssa, masked: &Masked) -> Vec<bool> {
    let mut frozen = vec![false; ssa.values.len()];
    let mut loops = Vec::new();
    collect_loops(&masked.body, &mut loops);
    for l in loops {
        let MNode::MaskedLoop { phis, .. } = l else {
            continue;
        };
        let mut inside = vec![false; ssa.values.len()];
        let mut inner_joins = Vec::new();
        defined(std::slice::from_ref(l), &mut inside, &mut inner_joins);
        // A return inside the loop reads its values on the way out: keep every select.
        if contains_return(std::slice::from_ref(l)) {
            for j in phis {
                frozen[j.phi.index()] = true;
            }
            continue;
        }
        let mut outside_refs = Vec::new();
        references(&masked.body, l, ssa, &inside, &mut outside_refs);
        let mut needed = vec![false; ssa.values.len()];
        let mut work: Vec<ValueId> = outside_refs
            .into_iter()
            .filter(|v| inside[v.index()])
            .collect();
        while let Some(v) = work.pop() {
            if needed[v.index()] {
                continue;
            }
            needed[v.index()] = true;
            // A phi of the loop (or of a branch or loop inside it) depends on its inputs; any
            // other value on its operands.
            let inputs: Vec<ValueId> = match inner_joins.iter().find(|j| j.phi == v) {
                Some(j) => j.inputs.to_vec(),
                None => ssa.value(v).op.operands(),
            };
            work.extend(inputs.into_iter().filter(|u| inside[u.index()]));
        }
        for j in phis {
            frozen[j.phi.index()] = needed[j.phi.index()];
        }
    }
    frozen
}

/// Every divergent loop of `nodes`, nested ones included.
fn collect_loops<'a>(nodes: &'a [MNode], out: &mut Vec<&'a MNode>) {
    for n in nodes {
        match n {
            MNode::Def(_) | MNode::Return(_) => {}
            MNode::UniformIf {
                then, otherwise, ..
            } => {
                collect_loops(then, out);
                collect_loops(otherwise, out);
            }
            MNode::MaskedIf {
                then, otherwise, ..
            } => {
                collect_loops(&then.nodes, out);
                collect_loops(&otherwise.nodes, out);
            }
            MNode::UniformLoop { header, body, .. } => {
                collect_loops(header, out);
                collect_loops(body, out);
            }
            MNode::MaskedLoop { header, body, .. } => {
                out.push(n);
                collect_loops(header, out);
                collect_loops(body, out);
            }
        }
    }
}

/// Marks the values `nodes` define (phis included) and collects their joins.
fn defined(nodes: &[MNode], inside: &mut [bool], joins: &mut Vec<Join>) {
    for n in nodes {
        match n {
            MNode::Def(v) => inside[v.index()] = true,
            MNode::Return(_) => {}
            MNode::UniformIf {
                then,
                otherwise,
                joins: js,
                ..
            } => {
                defined(then, inside, joins);
                defined(otherwise, inside, joins);
                mark_joins(js, inside, joins);
            }
            MNode::MaskedIf {
                then,
                otherwise,
                joins: js,
                ..
            } => {
                defined(&then.nodes, inside, joins);
                defined(&otherwise.nodes, inside, joins);
                mark_joins(js, inside, joins);
            }
            MNode::UniformLoop {
                phis, header, body, ..
            }
            | MNode::MaskedLoop {
                phis, header, body, ..
            } => {
                mark_joins(phis, inside, joins);
                defined(header, inside, joins);
                defined(body, inside, joins);
            }
        }
    }
}

fn mark_joins(js: &[Join], inside: &mut [bool], joins: &mut Vec<Join>) {
    for j in js {
        inside[j.phi.index()] = true;
        joins.push(*j);
    }
}

fn contains_return(nodes: &[MNode]) -> bool {
    nodes.iter().any(|n| match n {
        MNode::Def(_) => false,
        MNode::Return(_) => true,
        MNode::UniformIf {
            then, otherwise, ..
        } => contains_return(then) || contains_return(otherwise),
        MNode::MaskedIf {
            then, otherwise, ..
        } => contains_return(&then.nodes) || contains_return(&otherwise.nodes),
        MNode::UniformLoop { header, body, .. } | MNode::MaskedLoop { header, body, .. } => {
            contains_return(header) || contains_return(body)
        }
    })
}

/// The values read by the nodes of `nodes` outside loop `skip`: operands of the values they
/// define, conditions, join inputs and returns.
fn references(nodes: &[MNode], skip: &MNode, ssa: &Ssa, inside: &[bool], out: &mut Vec<ValueId>) {
    let joins = |js: &[Join], out: &mut Vec<ValueId>| {
        for j in js {
            out.extend(j.inputs);
        }
    };
    for n in nodes {
        if std::ptr::eq(n, skip) {
            continue;
        }
        match n {
            MNode::Def(v) => {
                if !inside[v.index()] {
                    out.extend(ssa.value(*v).op.operands());
                }
            }
            MNode::Return(v) => out.push(*v),
            MNode::UniformIf {
                cond,
                then,
                otherwise,
                joins: js,
            } => {
                out.push(*cond);
                references(then, skip, ssa, inside, out);
                references(otherwise, skip, ssa, inside, out);
                joins(js, out);
            }
            MNode::MaskedIf {
                cond,
                then,
                otherwise,
                joins: js,
                ..
            } => {
                out.push(*cond);
                references(&then.nodes, skip, ssa, inside, out);
                references(&otherwise.nodes, skip, ssa, inside, out);
                joins(js, out);
            }
            MNode::UniformLoop {
                phis,
                header,
                cond,
                body,
            }
            | MNode::MaskedLoop {
                phis,
                header,
                cond,
                body,
                ..
            } => {
                out.push(*cond);
                joins(phis, out);
                references(header, skip, ssa, inside, out);
                references(body, skip, ssa, inside, out);
            }
        }
    }
}
