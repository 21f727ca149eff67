//! If-conversion: the SSA body turned into its masked form.
//!
//! Every node runs under a mask of active lanes. A branch on a uniform condition stays a
//! branch ([`MNode::UniformIf`], [`MNode::UniformLoop`]); a branch on a varying condition runs
//! both sides, each under its mask (`m & c`, `m & !c`), and its phis become selects on the then
//! mask ([`MNode::MaskedIf`]); a loop whose condition varies runs until its active mask is
//! empty, each lane's loop-carried values frozen (by a select on the active mask) from the
//! iteration where that lane's condition failed ([`MNode::MaskedLoop`]).
//!
//! Values are computed in every lane whatever the mask: inactive lanes compute values nobody
//! reads, which is harmless because the operations have no side effects (integer division by
//! zero is defined as 0 in the generated code, the only operation that could trap).
//!
//! Branch on superword condition: a masked side whose mask may be all false is skipped at run
//! time when [`Region::boscc`] is set: the cost model sets it when the side's estimated cost is
//! at least [`BOSCC_MIN_COST`] operations, several times the test (a mask reduction and a
//! branch).

use super::classify::Class;
use super::ssa::{Join, Node, Op, Ssa, ValueId};
use crate::program::BinaryOp;

/// Handle of a mask in [`Masked::masks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MaskId(pub u32);

impl MaskId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaskDef {
    /// The lanes the function is called for.
    Entry,
    /// `outer & cond`
    And(MaskId, ValueId),
    /// `outer & !cond`
    AndNot(MaskId, ValueId),
    /// The active lanes of a divergent loop: `outer` on entry, `& cond` at every header.
    Loop(MaskId),
}

/// The nodes of one side of a masked branch, and whether they are skipped when no lane is
/// active.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    pub nodes: Vec<MNode>,
    pub boscc: bool,
    /// The estimated cost of the nodes (operations).
    pub cost: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum MNode {
    Def(ValueId),
    UniformIf {
        cond: ValueId,
        then: Vec<MNode>,
        otherwise: Vec<MNode>,
        joins: Vec<Join>,
    },
    MaskedIf {
        cond: ValueId,
        then_mask: MaskId,
        else_mask: MaskId,
        then: Region,
        otherwise: Region,
        /// Each phi becomes `select(then_mask, inputs[0], inputs[1])`.
        joins: Vec<Join>,
    },
    UniformLoop {
        phis: Vec<Join>,
        header: Vec<MNode>,
        cond: ValueId,
        body: Vec<MNode>,
    },
    /// `active = outer; loop { header; active &= cond; if none(active) break; body;
    /// phi = select(active, latch, phi) }`
    MaskedLoop {
        active: MaskId,
        phis: Vec<Join>,
        header: Vec<MNode>,
        cond: ValueId,
        body: Vec<MNode>,
    },
    Return(ValueId),
}

/// The least estimated cost of a masked side for which a branch on superword condition is
/// inserted.
pub const BOSCC_MIN_COST: u32 = 8;

/// The masked form of a body.
#[derive(Clone, Debug, PartialEq)]
pub struct Masked {
    pub masks: Vec<MaskDef>,
    pub body: Vec<MNode>,
}

impl Masked {
    pub fn entry(&self) -> MaskId {
        MaskId(0)
    }

    /// How many regions carry a branch on superword condition.
    pub fn boscc_regions(&self) -> usize {
        fn count(nodes: &[MNode]) -> usize {
            nodes
                .iter()
                .map(|n| match n {
                    MNode::MaskedIf {
                        then, otherwise, ..
                    } => {
                        then.boscc as usize
                            + otherwise.boscc as usize
                            + count(&then.nodes)
                            + count(&otherwise.nodes)
                    }
                    MNode::UniformIf {
                        then, otherwise, ..
                    } => count(then) + count(otherwise),
                    MNode::UniformLoop { header, body, .. }
                    | MNode::MaskedLoop { header, body, .. } => count(header) + count(body),
                    MNode::Def(_) | MNode::Return(_) => 0,
                })
                .sum()
        }
        count(&self.body)
    }
}

/// If-converts `ssa`, whose values have classes `classes`.
pub fn if_convert(ssa: &Ssa, classes: &[Class]) -> Masked {
    let mut c = Converter {
        ssa,
        classes,
        masks: vec![MaskDef::Entry],
    };
    let body = c.nodes(&ssa.body, MaskId(0));
    Masked {
        masks: c.masks,
        body,
    }
}

struct Converter<'a> {
    ssa: &'a Ssa,
    classes: &'a [Class],
    masks: Vec<MaskDef>,
}

impl Converter<'_> {
    fn mask(&mut self, def: MaskDef) -> MaskId {
        self.masks.push(def);
        MaskId(self.masks.len() as u32 - 1)
    }

    fn nodes(&mut self, nodes: &[Node], mask: MaskId) -> Vec<MNode> {
        nodes.iter().map(|n| self.node(n, mask)).collect()
    }

    fn node(&mut self, node: &Node, mask: MaskId) -> MNode {
        match node {
            Node::Def(v) => MNode::Def(*v),
            Node::Return(v) => MNode::Return(*v),
            Node::If {
                cond,
                then,
                otherwise,
                joins,
            } => {
                if self.classes[cond.index()].is_uniform() {
                    return MNode::UniformIf {
                        cond: *cond,
                        then: self.nodes(then, mask),
                        otherwise: self.nodes(otherwise, mask),
                        joins: joins.clone(),
                    };
                }
                let then_mask = self.mask(MaskDef::And(mask, *cond));
                let else_mask = self.mask(MaskDef::AndNot(mask, *cond));
                let then = self.region(then, then_mask);
                let otherwise = self.region(otherwise, else_mask);
                MNode::MaskedIf {
                    cond: *cond,
                    then_mask,
                    else_mask,
                    then,
                    otherwise,
                    joins: joins.clone(),
                }
            }
            Node::Loop {
                phis,
                header,
                cond,
                body,
            } => {
                if self.classes[cond.index()].is_uniform() {
                    return MNode::UniformLoop {
                        phis: phis.clone(),
                        header: self.nodes(header, mask),
                        cond: *cond,
                        body: self.nodes(body, mask),
                    };
                }
                let active = self.mask(MaskDef::Loop(mask));
                MNode::MaskedLoop {
                    active,
                    phis: phis.clone(),
                    header: self.nodes(header, active),
                    cond: *cond,
                    body: self.nodes(body, active),
                }
            }
        }
    }

    fn region(&mut self, nodes: &[Node], mask: MaskId) -> Region {
        let nodes = self.nodes(nodes, mask);
        let cost = cost(self.ssa, self.classes, &nodes);
        Region {
            boscc: cost >= BOSCC_MIN_COST,
            nodes,
            cost,
        }
    }
}

/// The estimated cost of nodes in vector operations: one per varying operation, more for
/// those that run lane by lane (math functions, integer division, calls), a guess of ten
/// iterations for a loop.
pub fn cost(ssa: &Ssa, classes: &[Class], nodes: &[MNode]) -> u32 {
    nodes
        .iter()
        .map(|n| match n {
            MNode::Def(v) => {
                if classes[v.index()].is_uniform() {
                    0
                } else {
                    match &ssa.value(*v).op {
                        Op::Math(..) => 8,
                        Op::Call(..) => 16,
                        Op::Binary(BinaryOp::Div | BinaryOp::Rem, ..)
                            if !ssa.value(*v).ty.is_float() =>
                        {
                            8
                        }
                        Op::Const(_) => 0,
                        _ => 1,
                    }
                }
            }
            MNode::UniformIf {
                then, otherwise, ..
            } => cost(ssa, classes, then).max(cost(ssa, classes, otherwise)) + 1,
            MNode::MaskedIf {
                then,
                otherwise,
                joins,
                ..
            } => then.cost + otherwise.cost + joins.len() as u32 + 2,
            MNode::UniformLoop {
                phis, header, body, ..
            }
            | MNode::MaskedLoop {
                phis, header, body, ..
            } => {
                10 * (cost(ssa, classes, header) + cost(ssa, classes, body) + phis.len() as u32 + 2)
            }
            MNode::Return(_) => 0,
        })
        .sum()
}
