//! The printed form of a schedule tree, close to isl's YAML (`isl_schedule_dump`):
//!
//! ```text
//! domain: "[N] -> { S0[i] : 0 <= i < N; S1[i] : 0 <= i < N }"
//! child:
//!   schedule: "[N] -> [{ S0[i] -> [(i)]; S1[i] -> [(i)] }]"
//!   permutable: 0
//!   coincident: [ 0 ]
//!   child:
//!     sequence:
//!     - filter: "[N] -> { S0[i] }"
//!     - filter: "[N] -> { S1[i] }"
//! ```
//!
//! Leaves are not written, as in isl. Extension constraints name the outer dimensions
//! `c0, c1, …`.

use super::expr::QuasiConstraint;
use super::tree::{Node, NodeKind, ScheduleTree};
use crate::program::{ParamId, Program, StmtId};

impl ScheduleTree {
    /// The tree in isl's YAML-like notation, with the program's names.
    pub fn display(&self, program: &Program) -> String {
        let p = Printer { program };
        let mut out = String::new();
        for line in p.lines(&self.root) {
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}

struct Printer<'a> {
    program: &'a Program,
}

impl Printer<'_> {
    fn param_name(&self) -> impl Fn(ParamId) -> String + '_ {
        |p| self.program.params[p.index()].name.clone()
    }

    fn prefix(&self) -> String {
        if self.program.params.is_empty() {
            String::new()
        } else {
            let names: Vec<&str> = self
                .program
                .params
                .iter()
                .map(|p| p.name.as_str())
                .collect();
            format!("[{}] -> ", names.join(", "))
        }
    }

    fn tuple(&self, s: StmtId) -> String {
        let st = &self.program.statements[s.index()];
        format!("{}[{}]", st.name, st.iterators.join(", "))
    }

    fn constraints(&self, cs: &[QuasiConstraint], name: &dyn Fn(usize) -> String) -> String {
        let pn = self.param_name();
        cs.iter()
            .map(|c| c.display_with(name, &pn))
            .collect::<Vec<_>>()
            .join(" and ")
    }

    fn stmt_set(&self, stmts: &[(StmtId, Vec<QuasiConstraint>)]) -> String {
        let parts: Vec<String> = stmts
            .iter()
            .map(|(s, cs)| {
                let st = &self.program.statements[s.index()];
                let name = |j: usize| st.iterators[j].clone();
                if cs.is_empty() {
                    self.tuple(*s)
                } else {
                    format!("{} : {}", self.tuple(*s), self.constraints(cs, &name))
                }
            })
            .collect();
        format!("\"{}{{ {} }}\"", self.prefix(), parts.join("; "))
    }

    fn head(&self, node: &Node) -> Vec<String> {
        let pn = self.param_name();
        match &node.kind {
            NodeKind::Domain(stmts) => {
                let parts: Vec<String> = stmts
                    .iter()
                    .map(|s| {
                        let st = &self.program.statements[s.index()];
                        let full = self.program.display_domain(st);
                        // `[N] -> { S[i] : … }` → `S[i] : …`
                        let inner = full
                            .split_once("{ ")
                            .and_then(|(_, r)| r.rsplit_once(" }"))
                            .map_or(full.clone(), |(m, _)| m.to_string());
                        inner
                    })
                    .collect();
                vec![format!(
                    "domain: \"{}{{ {} }}\"",
                    self.prefix(),
                    parts.join("; ")
                )]
            }
            NodeKind::Context(cs) => {
                let no_iter = |_: usize| String::from("?");
                let text: Vec<String> = cs
                    .iter()
                    .map(|c| {
                        let q = QuasiConstraint {
                            expr: c.expr.clone().into(),
                            kind: c.kind,
                        };
                        q.display_with(&no_iter, &pn)
                    })
                    .collect();
                vec![format!(
                    "context: \"{}{{ : {} }}\"",
                    self.prefix(),
                    text.join(" and ")
                )]
            }
            NodeKind::Band(b) => {
                let members: Vec<String> = (0..b.n_members())
                    .map(|m| {
                        let parts: Vec<String> = b
                            .schedule
                            .iter()
                            .map(|(s, fs)| {
                                let st = &self.program.statements[s.index()];
                                let name = |j: usize| st.iterators[j].clone();
                                let f = fs.get(m).map_or(String::from("?"), |f| {
                                    f.display_with(&name, &pn).to_string()
                                });
                                format!("{} -> [({f})]", self.tuple(*s))
                            })
                            .collect();
                        format!("{{ {} }}", parts.join("; "))
                    })
                    .collect();
                let flags: Vec<&str> = b
                    .coincident
                    .iter()
                    .map(|&c| if c { "1" } else { "0" })
                    .collect();
                vec![
                    format!("schedule: \"{}[{}]\"", self.prefix(), members.join(", ")),
                    format!("permutable: {}", u8::from(b.permutable)),
                    format!("coincident: [ {} ]", flags.join(", ")),
                ]
            }
            NodeKind::Sequence => vec!["sequence:".into()],
            NodeKind::Set => vec!["set:".into()],
            NodeKind::Filter(f) => vec![format!("filter: {}", self.stmt_set(&f.stmts))],
            NodeKind::Extension(e) => {
                let outer: Vec<String> = (0..e.outer).map(|k| format!("c{k}")).collect();
                let parts: Vec<String> = e
                    .stmts
                    .iter()
                    .map(|(s, cs)| {
                        let st = &self.program.statements[s.index()];
                        let name = |j: usize| {
                            if j < e.outer {
                                format!("c{j}")
                            } else {
                                st.iterators[j - e.outer].clone()
                            }
                        };
                        let map = format!("[{}] -> {}", outer.join(", "), self.tuple(*s));
                        if cs.is_empty() {
                            map
                        } else {
                            format!("{map} : {}", self.constraints(cs, &name))
                        }
                    })
                    .collect();
                vec![format!(
                    "extension: \"{}{{ {} }}\"",
                    self.prefix(),
                    parts.join("; ")
                )]
            }
            NodeKind::Mark(mark) => vec![format!("mark: \"{mark}\"")],
            NodeKind::Leaf => vec!["leaf".into()],
        }
    }

    fn lines(&self, node: &Node) -> Vec<String> {
        let mut out = self.head(node);
        match &node.kind {
            NodeKind::Sequence | NodeKind::Set => {
                for c in &node.children {
                    for (i, l) in self.lines(c).into_iter().enumerate() {
                        out.push(if i == 0 {
                            format!("- {l}")
                        } else {
                            format!("  {l}")
                        });
                    }
                }
            }
            _ => {
                for c in &node.children {
                    if c.kind == NodeKind::Leaf && c.children.is_empty() {
                        continue;
                    }
                    out.push("child:".into());
                    out.extend(self.lines(c).into_iter().map(|l| format!("  {l}")));
                }
            }
        }
        out
    }
}
