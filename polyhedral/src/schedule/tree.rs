//! Schedule trees with isl's node kinds, the tree of a program's original order, and the
//! rewrites later passes use.
//!
//! A [`ScheduleTree`] owns its nodes; a node is addressed by its [`NodePath`] (child indices
//! from the root). Structural invariants, which [`super::verify`] checks together with the
//! exactly-once property:
//! - the root is a [`NodeKind::Domain`], and no other node is;
//! - `Sequence` and `Set` nodes have at least one child and every child is a `Filter`;
//! - `Leaf` has no child; every other node has exactly one;
//! - a band has at least one member and gives every statement below it one quasi-affine
//!   function per member, over that statement's iterators and the parameters;
//! - an extension's constraints range over the `outer` enclosing band members first, then the
//!   new statement's iterators.

use super::expr::{QuasiAffine, QuasiConstraint};
use super::mark::Mark;
use super::ScheduleError;
use crate::program::{build_nest, collect_stmts, Constraint, NestNode, Program, StmtId, Var};

/// A multi-dimensional schedule piece: one member per dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Band {
    /// Per statement, one function per member (its iterators and the parameters).
    pub schedule: Vec<(StmtId, Vec<QuasiAffine>)>,
    /// Any order of the members' loops is legal (the members can be tiled together).
    pub permutable: bool,
    /// Per member: no dependence is carried by it (its loop can run in parallel).
    pub coincident: Vec<bool>,
}

impl Band {
    pub fn n_members(&self) -> usize {
        self.coincident.len()
    }

    /// The functions of `stmt`, if the band schedules it.
    pub fn functions(&self, stmt: StmtId) -> Option<&[QuasiAffine]> {
        self.schedule
            .iter()
            .find(|(s, _)| *s == stmt)
            .map(|(_, f)| f.as_slice())
    }
}

/// A subset of statement instances: for each listed statement, the instances satisfying all
/// its constraints (over its iterators and the parameters). Unlisted statements are excluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    pub stmts: Vec<(StmtId, Vec<QuasiConstraint>)>,
}

impl Filter {
    /// Every instance of the given statements.
    pub fn of_statements(stmts: &[StmtId]) -> Filter {
        Filter {
            stmts: stmts.iter().map(|&s| (s, Vec::new())).collect(),
        }
    }

    pub fn constraints(&self, stmt: StmtId) -> Option<&[QuasiConstraint]> {
        self.stmts
            .iter()
            .find(|(s, _)| *s == stmt)
            .map(|(_, c)| c.as_slice())
    }
}

/// New statement instances as a function of the outer schedule dimensions: for outer band
/// values `c[0..outer]`, the instances of each listed statement whose iterators satisfy its
/// constraints. Constraints use `Var::Iter(k)` for `c[k]` when `k < outer` and for the
/// statement's iterator `k - outer` otherwise. The instances are also limited to the
/// statement's domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extension {
    pub outer: usize,
    pub stmts: Vec<(StmtId, Vec<QuasiConstraint>)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// The statement instances the tree schedules: the domains of these statements.
    Domain(Vec<StmtId>),
    /// Constraints on the parameters that hold everywhere below.
    Context(Vec<Constraint>),
    Band(Band),
    /// Children (filters) run one after the other.
    Sequence,
    /// Children (filters) run in any order.
    Set,
    Filter(Filter),
    Extension(Extension),
    /// A decision about the subtree ([`Mark`]), carried to the AST.
    Mark(Mark),
    Leaf,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub kind: NodeKind,
    pub children: Vec<Node>,
}

impl Node {
    /// Splits this band after its first `k` members: it keeps them, and a new band child holds
    /// the rest (with the same `permutable` flag).
    pub fn split_band(&mut self, k: usize) -> Result<(), ScheduleError> {
        let NodeKind::Band(band) = &mut self.kind else {
            return Err(ScheduleError::Rewrite("split_band: not a band".into()));
        };
        let n = band.n_members();
        if k == 0 || k >= n {
            return Err(ScheduleError::Rewrite(format!(
                "split_band: cannot split a band of {n} members after {k}"
            )));
        }
        let inner = Band {
            schedule: band
                .schedule
                .iter_mut()
                .map(|(s, f)| (*s, f.split_off(k)))
                .collect(),
            permutable: band.permutable,
            coincident: band.coincident.split_off(k),
        };
        let children = std::mem::take(&mut self.children);
        self.children = vec![Node {
            kind: NodeKind::Band(inner),
            children,
        }];
        Ok(())
    }

    pub fn leaf() -> Node {
        Node {
            kind: NodeKind::Leaf,
            children: Vec::new(),
        }
    }

    /// A node with one child.
    pub fn with_child(kind: NodeKind, child: Node) -> Node {
        Node {
            kind,
            children: vec![child],
        }
    }

    /// A sequence of `(filter, subtree)` children.
    pub fn sequence(children: Vec<(Filter, Node)>) -> Node {
        Node {
            kind: NodeKind::Sequence,
            children: children
                .into_iter()
                .map(|(f, c)| Node::with_child(NodeKind::Filter(f), c))
                .collect(),
        }
    }

    /// Calls `f` on this node and every node below it, parents first.
    pub fn walk(&self, f: &mut dyn FnMut(&Node)) {
        f(self);
        for c in &self.children {
            c.walk(f);
        }
    }
}

/// Child indices from the root to a node.
pub type NodePath = [usize];

/// A schedule tree; the root is a domain node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleTree {
    pub root: Node,
}

impl ScheduleTree {
    pub fn node(&self, path: &NodePath) -> Option<&Node> {
        let mut n = &self.root;
        for &i in path {
            n = n.children.get(i)?;
        }
        Some(n)
    }

    pub fn node_mut(&mut self, path: &NodePath) -> Option<&mut Node> {
        let mut n = &mut self.root;
        for &i in path {
            n = n.children.get_mut(i)?;
        }
        Some(n)
    }

    fn node_or_err(&mut self, path: &NodePath) -> Result<&mut Node, ScheduleError> {
        self.node_mut(path)
            .ok_or_else(|| ScheduleError::Rewrite(format!("no node at path {path:?}")))
    }

    /// The paths of every node of the given kind, parents first.
    pub fn find(&self, pred: &dyn Fn(&NodeKind) -> bool) -> Vec<Vec<usize>> {
        fn rec(
            n: &Node,
            path: &mut Vec<usize>,
            pred: &dyn Fn(&NodeKind) -> bool,
            out: &mut Vec<Vec<usize>>,
        ) {
            if pred(&n.kind) {
                out.push(path.clone());
            }
            for (i, c) in n.children.iter().enumerate() {
                path.push(i);
                rec(c, path, pred, out);
                path.pop();
            }
        }
        let mut out = Vec::new();
        rec(&self.root, &mut Vec::new(), pred, &mut out);
        out
    }

    /// The statements whose instances reach the node at `path` (ignoring the filters'
    /// constraints: a statement is listed when some filter on the way lets it through).
    pub fn statements_at(&self, path: &NodePath) -> Result<Vec<StmtId>, ScheduleError> {
        let mut n = &self.root;
        let mut stmts: Vec<StmtId> = Vec::new();
        for depth in 0..=path.len() {
            match &n.kind {
                NodeKind::Domain(s) => stmts = s.clone(),
                NodeKind::Filter(f) => stmts.retain(|s| f.constraints(*s).is_some()),
                NodeKind::Extension(e) => {
                    for &(s, _) in &e.stmts {
                        if !stmts.contains(&s) {
                            stmts.push(s);
                        }
                    }
                }
                _ => {}
            }
            if depth < path.len() {
                n = n
                    .children
                    .get(path[depth])
                    .ok_or_else(|| ScheduleError::Rewrite(format!("no node at path {path:?}")))?;
            }
        }
        stmts.sort();
        Ok(stmts)
    }

    /// Splits the band at `path` after its first `k` members: the band keeps them, and a new
    /// band child holds the rest (with the same `permutable` flag).
    pub fn split_band(&mut self, path: &NodePath, k: usize) -> Result<(), ScheduleError> {
        self.node_or_err(path)?.split_band(k)
    }

    /// Puts `mark` above the node at `path`.
    pub fn insert_mark(&mut self, path: &NodePath, mark: Mark) -> Result<(), ScheduleError> {
        self.insert_above(path, NodeKind::Mark(mark))
    }

    /// Puts a node of the given kind (one that takes one child) above the node at `path`.
    pub fn insert_above(&mut self, path: &NodePath, kind: NodeKind) -> Result<(), ScheduleError> {
        if matches!(
            kind,
            NodeKind::Domain(_) | NodeKind::Leaf | NodeKind::Sequence | NodeKind::Set
        ) || path.is_empty()
        {
            return Err(ScheduleError::Rewrite(
                "insert_above: only single-child kinds below the domain".into(),
            ));
        }
        let node = self.node_or_err(path)?;
        let old = std::mem::replace(node, Node::leaf());
        *node = Node::with_child(kind, old);
        Ok(())
    }

    /// Replaces the functions of the band at `path`; each statement needs one function per
    /// member.
    pub fn set_band_schedule(
        &mut self,
        path: &NodePath,
        schedule: Vec<(StmtId, Vec<QuasiAffine>)>,
    ) -> Result<(), ScheduleError> {
        let node = self.node_or_err(path)?;
        let NodeKind::Band(band) = &mut node.kind else {
            return Err(ScheduleError::Rewrite(
                "set_band_schedule: not a band".into(),
            ));
        };
        if schedule.iter().any(|(_, f)| f.len() != band.n_members()) {
            return Err(ScheduleError::Rewrite(
                "set_band_schedule: wrong number of members".into(),
            ));
        }
        band.schedule = schedule;
        Ok(())
    }

    /// Grafts new statement instances at `path`: the node is replaced by an extension node
    /// whose child is a sequence of two filters, the extension's statements (scheduled by
    /// `subtree`) and the instances that reached the node (scheduled by the node as before),
    /// in that order when `before`, the other way round otherwise. The extension's `outer`
    /// must be the number of band members above `path`.
    pub fn insert_extension(
        &mut self,
        path: &NodePath,
        extension: Extension,
        subtree: Node,
        before: bool,
    ) -> Result<(), ScheduleError> {
        let outer = self.band_members_above(path)?;
        if extension.outer != outer {
            return Err(ScheduleError::Rewrite(format!(
                "insert_extension: the extension spans {} outer dimensions, the node has {outer}",
                extension.outer
            )));
        }
        let old_stmts = self.statements_at(path)?;
        if extension.stmts.iter().any(|(s, _)| old_stmts.contains(s)) {
            return Err(ScheduleError::Rewrite(
                "insert_extension: the statement already reaches the node".into(),
            ));
        }
        let new_stmts: Vec<StmtId> = extension.stmts.iter().map(|(s, _)| *s).collect();
        if path.is_empty() {
            return Err(ScheduleError::Rewrite(
                "insert_extension: not at the root".into(),
            ));
        }
        let node = self.node_or_err(path)?;
        let old = std::mem::replace(node, Node::leaf());
        let new_part = (Filter::of_statements(&new_stmts), subtree);
        let old_part = (Filter::of_statements(&old_stmts), old);
        let seq = if before {
            Node::sequence(vec![new_part, old_part])
        } else {
            Node::sequence(vec![old_part, new_part])
        };
        *node = Node::with_child(NodeKind::Extension(extension), seq);
        Ok(())
    }

    /// The number of band members on the way from the root to `path` (the node excluded).
    pub fn band_members_above(&self, path: &NodePath) -> Result<usize, ScheduleError> {
        let mut n = &self.root;
        let mut count = 0;
        for &i in path {
            if let NodeKind::Band(b) = &n.kind {
                count += b.n_members();
            }
            n = n
                .children
                .get(i)
                .ok_or_else(|| ScheduleError::Rewrite(format!("no node at path {path:?}")))?;
        }
        Ok(count)
    }
}

/// The schedule tree of the program's original order (its 2d+1 positions): a sequence where
/// statements are textually apart, a one-member band per loop, as isl builds it from the
/// original schedule. No member is marked coincident and no band permutable: nothing here
/// knows about dependences.
pub fn schedule_tree_of(program: &Program) -> Result<ScheduleTree, ScheduleError> {
    let nest = build_nest(program).map_err(|e| ScheduleError::Program(e.to_string()))?;
    let stmts: Vec<StmtId> = program.statement_ids().collect();
    let child = if nest.is_empty() {
        Node::leaf()
    } else {
        items(&nest)
    };
    Ok(ScheduleTree {
        root: Node::with_child(NodeKind::Domain(stmts), child),
    })
}

fn items(nodes: &[NestNode]) -> Node {
    if nodes.len() == 1 {
        return item(&nodes[0]);
    }
    Node::sequence(
        nodes
            .iter()
            .map(|n| {
                let mut stmts = Vec::new();
                collect_stmts(std::slice::from_ref(n), &mut stmts);
                (Filter::of_statements(&stmts), item(n))
            })
            .collect(),
    )
}

fn item(node: &NestNode) -> Node {
    match node {
        NestNode::Stmt(_) => Node::leaf(),
        NestNode::Loop { depth, body } => {
            let mut stmts = Vec::new();
            collect_stmts(body, &mut stmts);
            let band = Band {
                schedule: stmts
                    .iter()
                    .map(|&s| (s, vec![QuasiAffine::var(Var::Iter(*depth))]))
                    .collect(),
                permutable: false,
                coincident: vec![false],
            };
            let child = if body.is_empty() {
                Node::leaf()
            } else {
                items(body)
            };
            Node::with_child(NodeKind::Band(band), child)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_member_band() -> ScheduleTree {
        let f = |j| QuasiAffine::var(Var::Iter(j));
        let band = Band {
            schedule: vec![(StmtId(0), vec![f(0), f(1)])],
            permutable: true,
            coincident: vec![true, false],
        };
        ScheduleTree {
            root: Node::with_child(
                NodeKind::Domain(vec![StmtId(0)]),
                Node::with_child(NodeKind::Band(band), Node::leaf()),
            ),
        }
    }

    #[test]
    fn split_band_keeps_members_in_order() {
        let mut t = two_member_band();
        t.split_band(&[0], 1).unwrap();
        let NodeKind::Band(outer) = &t.node(&[0]).unwrap().kind else {
            panic!("a band stays at the path")
        };
        let NodeKind::Band(inner) = &t.node(&[0, 0]).unwrap().kind else {
            panic!("the rest of the band is its child")
        };
        assert_eq!(outer.coincident, vec![true]);
        assert_eq!(inner.coincident, vec![false]);
        assert_eq!(
            inner.functions(StmtId(0)).unwrap()[0],
            QuasiAffine::var(Var::Iter(1))
        );
        assert_eq!(t.node(&[0, 0, 0]).unwrap().kind, NodeKind::Leaf);
    }

    #[test]
    fn bad_rewrites_are_errors() {
        let mut t = two_member_band();
        assert!(t.split_band(&[0], 0).is_err());
        assert!(t.split_band(&[0], 2).is_err());
        assert!(t.split_band(&[0, 0], 1).is_err());
        assert!(t.split_band(&[5], 1).is_err());
        assert!(t.insert_mark(&[], Mark::Skipped).is_err());
        assert!(t.insert_above(&[0], NodeKind::Sequence).is_err());
        assert!(t
            .set_band_schedule(&[0], vec![(StmtId(0), vec![QuasiAffine::constant(0)])])
            .is_err());
        let ext = Extension {
            outer: 0,
            stmts: vec![(StmtId(0), Vec::new())],
        };
        assert!(t.insert_extension(&[0], ext, Node::leaf(), true).is_err());
        assert_eq!(t, two_member_band());
    }
}
