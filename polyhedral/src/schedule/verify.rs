//! The schedule-tree verifier: the structural rules of [`super::tree`] and the exactly-once
//! property.
//!
//! The walk carries, per statement, the [`Instances`] reaching each node (with the band
//! members above as dimensions). At a sequence or a set, the children's filters must
//! partition every statement's instances (pairwise disjoint, together complete), with the
//! outer dimensions fixed; a filter elsewhere must keep every instance that reaches it; a band
//! must give every statement reaching it a function per member; an extension must add only
//! statements that do not reach it already. A subtree below a [`Mark::Skipped`] mark is not walked:
//! its instances run where extensions put them, and the pass that marks it checks that they
//! run exactly once there. With these rules every instance reaches exactly one leaf.

use super::instances::Instances;
use super::mark::Mark;
use super::tree::{Node, NodeKind, ScheduleTree};
use super::ScheduleError;
use crate::program::Program;
use crate::sets::conj::Conj;
use crate::sets::omega::is_feasible;
use crate::sets::rel::{Basic, Rel};
use crate::sets::{Set, Tuple};

/// Checks `tree` against `program`; see the module docs for the rules.
pub fn verify(program: &Program, tree: &ScheduleTree) -> Result<(), ScheduleError> {
    let NodeKind::Domain(stmts) = &tree.root.kind else {
        return Err(ScheduleError::Invalid(
            "the root is not a domain node".into(),
        ));
    };
    let mut seen = Vec::new();
    for &s in stmts {
        if seen.contains(&s) {
            return Err(ScheduleError::Invalid("a statement is listed twice".into()));
        }
        seen.push(s);
    }
    let actives = stmts
        .iter()
        .map(|&s| Instances::domain(program, s))
        .collect::<Result<Vec<_>, _>>()?;
    let v = Verifier { program };
    v.single_child(&tree.root)?;
    v.node(&tree.root.children[0], actives, 0)
}

struct Verifier<'a> {
    program: &'a Program,
}

fn invalid<T>(msg: impl Into<String>) -> Result<T, ScheduleError> {
    Err(ScheduleError::Invalid(msg.into()))
}

impl Verifier<'_> {
    fn name(&self, a: &Instances) -> &str {
        &self.program.statements[a.stmt.index()].name
    }

    fn single_child(&self, node: &Node) -> Result<(), ScheduleError> {
        if node.children.len() != 1 {
            return invalid(format!(
                "a {} node needs exactly one child",
                kind_name(&node.kind)
            ));
        }
        Ok(())
    }

    fn node(&self, node: &Node, actives: Vec<Instances>, d: usize) -> Result<(), ScheduleError> {
        match &node.kind {
            NodeKind::Leaf => {
                if !node.children.is_empty() {
                    return invalid("a leaf has children");
                }
                Ok(())
            }
            NodeKind::Sequence | NodeKind::Set => {
                if node.children.is_empty() {
                    return invalid("a sequence or set without children");
                }
                let mut parts: Vec<Vec<Instances>> = Vec::new();
                for c in &node.children {
                    let NodeKind::Filter(f) = &c.kind else {
                        return invalid("a child of a sequence or set is not a filter");
                    };
                    let mut kept = Vec::new();
                    for a in &actives {
                        if let Some(cs) = f.constraints(a.stmt) {
                            let mut a = a.clone();
                            for q in cs {
                                a.add_iter_constraint(q)?;
                            }
                            kept.push(a);
                        }
                    }
                    parts.push(kept);
                }
                for a in &actives {
                    let pieces: Vec<&Instances> = parts
                        .iter()
                        .flat_map(|p| p.iter().filter(|b| b.stmt == a.stmt))
                        .collect();
                    for (i, x) in pieces.iter().enumerate() {
                        for y in &pieces[i + 1..] {
                            if is_feasible(&intersect(x, y))? {
                                return invalid(format!(
                                    "two filters of a sequence or set share instances of {}",
                                    self.name(a)
                                ));
                            }
                        }
                    }
                    self.check_covered(a, &pieces)?;
                }
                for (c, kept) in node.children.iter().zip(parts) {
                    self.single_child(c)?;
                    self.node(&c.children[0], kept, d)?;
                }
                Ok(())
            }
            _ => {
                self.single_child(node)?;
                let child = &node.children[0];
                match &node.kind {
                    NodeKind::Domain(_) => invalid("a domain node below the root"),
                    NodeKind::Context(cs) => {
                        if cs.iter().any(|c| c.expr.innermost_iter().is_some()) {
                            return invalid("a context constraint uses an iterator");
                        }
                        self.node(child, actives, d)
                    }
                    NodeKind::Band(band) => {
                        let n = band.n_members();
                        if n == 0 {
                            return invalid("a band without members");
                        }
                        let mut next = Vec::with_capacity(actives.len());
                        for mut a in actives {
                            let Some(fs) = band.functions(a.stmt) else {
                                return invalid(format!(
                                    "a band does not schedule {}",
                                    self.name(&a)
                                ));
                            };
                            if fs.len() != n {
                                return invalid(format!(
                                    "a band gives {} {} functions for {n} members",
                                    self.name(&a),
                                    fs.len()
                                ));
                            }
                            for f in fs {
                                a.add_dim(f)?;
                            }
                            next.push(a);
                        }
                        self.node(child, next, d + n)
                    }
                    NodeKind::Filter(f) => {
                        let mut kept = Vec::new();
                        for a in actives {
                            let Some(cs) = f.constraints(a.stmt) else {
                                if is_feasible(&a.rel)? {
                                    return invalid(format!(
                                        "a filter drops the instances of {}",
                                        self.name(&a)
                                    ));
                                }
                                continue;
                            };
                            let mut b = a.clone();
                            for q in cs {
                                b.add_iter_constraint(q)?;
                            }
                            self.check_covered(&a, &[&b])?;
                            kept.push(b);
                        }
                        self.node(child, kept, d)
                    }
                    NodeKind::Extension(e) => {
                        if e.outer != d {
                            return invalid(format!(
                                "an extension over {} outer dimensions below {d} band members",
                                e.outer
                            ));
                        }
                        let mut all = actives;
                        for (s, cs) in &e.stmts {
                            if all.iter().any(|a| a.stmt == *s) {
                                return invalid(
                                    "an extension adds a statement that already reaches it",
                                );
                            }
                            all.push(Instances::extension(self.program, *s, d, cs)?);
                        }
                        self.node(child, all, d)
                    }
                    // The pass that marks a subtree skipped checks that its extensions run
                    // every instance of it exactly once.
                    NodeKind::Mark(Mark::Skipped) => Ok(()),
                    NodeKind::Mark(_) => self.node(child, actives, d),
                    NodeKind::Leaf | NodeKind::Sequence | NodeKind::Set => {
                        invalid("a leaf, sequence or set checked as a single-child node")
                    }
                }
            }
        }
    }

    /// Fails unless the union of `pieces` (restrictions of `a`) holds every instance of `a`.
    fn check_covered(&self, a: &Instances, pieces: &[&Instances]) -> Result<(), ScheduleError> {
        let whole = self.as_set(a);
        let mut rest = whole;
        for p in pieces {
            rest = rest.subtract(&self.as_set(p))?;
        }
        if !rest.is_empty()? {
            return invalid(format!(
                "some instances of {} reach no child of a filter",
                self.name(a)
            ));
        }
        Ok(())
    }

    /// The instances as a set of the integer-set library over `[dimensions, iterators]`.
    fn as_set(&self, a: &Instances) -> Set {
        let tuple = Tuple::anonymous_dims(Some(self.name(a)), a.d + a.n_iter);
        let nfix = a.np + a.d + a.n_iter;
        Set(Rel {
            params: self.program.params.iter().map(|p| p.name.clone()).collect(),
            parts: vec![Basic {
                dom: None,
                ran: tuple,
                np: a.np,
                nd: a.rel.n - nfix,
                c: a.rel.clone(),
            }],
        })
    }
}

/// Both restrictions at once (their locals side by side).
fn intersect(x: &Instances, y: &Instances) -> Conj {
    let nfix = x.np + x.d + x.n_iter;
    let n = x.rel.n + (y.rel.n - nfix);
    let mut c = x.rel.remap(n, &(0..x.rel.n).collect::<Vec<_>>());
    let ymap: Vec<usize> = (0..nfix)
        .chain((nfix..y.rel.n).map(|v| v - nfix + x.rel.n))
        .collect();
    c.and(&y.rel.remap(n, &ymap));
    c
}

fn kind_name(k: &NodeKind) -> &'static str {
    match k {
        NodeKind::Domain(_) => "domain",
        NodeKind::Context(_) => "context",
        NodeKind::Band(_) => "band",
        NodeKind::Sequence => "sequence",
        NodeKind::Set => "set",
        NodeKind::Filter(_) => "filter",
        NodeKind::Extension(_) => "extension",
        NodeKind::Mark(_) => "mark",
        NodeKind::Leaf => "leaf",
    }
}
