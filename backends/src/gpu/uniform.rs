//! Scalar functions as WGSL functions, written from their SSA form with the uniform analysis
//! of [`polyhedral::vectorize`]: each invocation runs the function for its own element (the
//! GPU's own model of divergence), and values that are uniform across the invocations of the
//! innermost parallel loop, but sit inside a branch or loop whose condition is not, are
//! computed before that region, where every invocation of a wave computes them together.
//! Comments give each parameter's and value's class.
//!
//! Values are WGSL `let`s (`v<N>`), the phis of a join `var`s assigned on each incoming path
//! (at the end of an `if`'s branches, before a loop and at its latch), parameters `p<k>`.
//! Hoisting is always valid: values have no side effects, and a value is moved only to a point
//! where all its operands are defined.

use std::collections::HashSet;

use polyhedral::program::{FunctionId, Program, UnaryOp};
use polyhedral::vectorize::classify::Class;
use polyhedral::vectorize::ssa::{Join, Node, Op, ValueId};
use polyhedral::vectorize::{VectorFunction, VectorProgram};

use super::body::{binary, cast, function_name, literal, math, value_type, BodyWriter};

/// The variant of `f` whose parameters' classes join those of every call site the program's
/// statements reach (vectorised over their innermost iterators); every parameter varying
/// when no statement calls it.
fn variant_for(program: &Program, vp: &mut VectorProgram, f: FunctionId) -> VectorFunction {
    let n = program.function(f).params;
    let mut joined: Option<Vec<Class>> = None;
    for v in &vp.variants {
        if v.function != Some(f) {
            continue;
        }
        joined = Some(match joined {
            None => v.params.clone(),
            Some(j) => j
                .iter()
                .zip(&v.params)
                .map(|(a, b)| if a == b { *a } else { Class::Varying })
                .collect(),
        });
    }
    let params = joined.unwrap_or_else(|| vec![Class::Varying; n]);
    let k = vp.function_variant(program, f, &params);
    vp.variants[k].clone()
}

/// Every scalar function of `program` in WGSL, with its uniform analysis as comments.
pub(crate) fn functions(bw: &BodyWriter) -> String {
    let program = bw.program;
    let mut vp = VectorProgram::for_program(program);
    let mut out = String::new();
    for k in 0..program.functions.len() {
        let v = variant_for(program, &mut vp, FunctionId(k as u32));
        out += "\n";
        out += &function(bw, &v);
    }
    out
}

fn function(bw: &BodyWriter, v: &VectorFunction) -> String {
    let program = bw.program;
    let f = program.function(v.function.expect("function variant"));
    let classes: Vec<String> = v
        .params
        .iter()
        .enumerate()
        .map(|(k, c)| format!("{} {c}", f.locals[k].name))
        .collect();
    let mut w = Wgsl {
        bw,
        v,
        out: format!(
            "// uniform analysis over the invocations of the innermost parallel loop: {}\n",
            classes.join(", ")
        ),
        hoisted: 0,
    };
    let params: Vec<String> = (0..f.params)
        .map(|k| format!("p{k}: {}", value_type(f.locals[k].ty)))
        .collect();
    w.out += &format!(
        "fn {}({}) -> {} {{\n",
        function_name(f),
        params.join(", "),
        value_type(f.ret)
    );
    // Phis, and loop conditions the guard reads after their loop, are variables.
    for (k, value) in v.ssa.values.iter().enumerate() {
        if matches!(value.op, Op::Phi(..)) {
            w.out += &format!("    var v{k}: {};\n", value_type(value.ty));
        }
    }
    let mut defined: HashSet<ValueId> = HashSet::new();
    w.nodes(&v.ssa.body, 1, &mut defined);
    w.out += "}\n";
    if w.hoisted > 0 {
        let note = format!(
            "// {} uniform value(s) hoisted out of divergent regions\n",
            w.hoisted
        );
        w.out.insert_str(0, &note);
    }
    w.out
}

struct Wgsl<'a> {
    bw: &'a BodyWriter<'a>,
    v: &'a VectorFunction,
    out: String,
    hoisted: usize,
}

impl Wgsl<'_> {
    fn class(&self, v: ValueId) -> Class {
        self.v.classes[v.index()]
    }

    fn name(&self, v: ValueId) -> String {
        match self.v.ssa.value(v).op {
            Op::Param(k) => format!("p{k}"),
            _ => format!("v{}", v.0),
        }
    }

    fn line(&mut self, indent: usize, text: &str) {
        self.out += &"    ".repeat(indent);
        self.out += text;
        self.out.push('\n');
    }

    fn nodes(&mut self, nodes: &[Node], indent: usize, defined: &mut HashSet<ValueId>) {
        for n in nodes {
            self.node(n, indent, defined);
        }
    }

    /// Writes, before a divergent region, the uniform values of `nodes` (not inside nested
    /// loops whose exit is uniform: those depend on the loop's own phis) whose operands are
    /// already defined.
    fn hoist(&mut self, nodes: &[Node], indent: usize, defined: &mut HashSet<ValueId>) {
        for n in nodes {
            match n {
                Node::Def(v) => {
                    let ops = self.v.ssa.value(*v).op.operands();
                    if self.class(*v).is_uniform()
                        && !defined.contains(v)
                        && ops.iter().all(|o| defined.contains(o))
                    {
                        self.def(*v, indent, " (hoisted)");
                        self.hoisted += 1;
                        defined.insert(*v);
                    }
                }
                Node::If {
                    then, otherwise, ..
                } => {
                    self.hoist(then, indent, defined);
                    self.hoist(otherwise, indent, defined);
                }
                Node::Loop { header, body, .. } => {
                    self.hoist(header, indent, defined);
                    self.hoist(body, indent, defined);
                }
                Node::Return(_) => {}
            }
        }
    }

    fn joins(&mut self, joins: &[Join], input: usize, indent: usize) {
        if joins.len() == 1 {
            let text = format!(
                "{} = {};",
                self.name(joins[0].phi),
                self.name(joins[0].inputs[input])
            );
            self.line(indent, &text);
            return;
        }
        // Inputs may be phis of the same joins: read them all first.
        for (k, j) in joins.iter().enumerate() {
            let text = format!("let t{}_{k} = {};", j.phi.0, self.name(j.inputs[input]));
            self.line(indent, &text);
        }
        for (k, j) in joins.iter().enumerate() {
            let text = format!("{} = t{}_{k};", self.name(j.phi), j.phi.0);
            self.line(indent, &text);
        }
    }

    fn node(&mut self, n: &Node, indent: usize, defined: &mut HashSet<ValueId>) {
        match n {
            Node::Def(v) => {
                if defined.insert(*v) {
                    self.def(*v, indent, "");
                }
            }
            Node::Return(v) => {
                let text = format!("return {};", self.name(*v));
                self.line(indent, &text);
            }
            Node::If {
                cond,
                then,
                otherwise,
                joins,
            } => {
                if !self.class(*cond).is_uniform() {
                    self.hoist(then, indent, defined);
                    self.hoist(otherwise, indent, defined);
                }
                let text = format!("if ({}) {{ // {}", self.name(*cond), self.class(*cond));
                self.line(indent, &text);
                let mut inner = defined.clone();
                self.nodes(then, indent + 1, &mut inner);
                self.joins(joins, 0, indent + 1);
                self.line(indent, "} else {");
                let mut inner = defined.clone();
                self.nodes(otherwise, indent + 1, &mut inner);
                self.joins(joins, 1, indent + 1);
                self.line(indent, "}");
                defined.extend(joins.iter().map(|j| j.phi));
            }
            Node::Loop {
                phis,
                header,
                cond,
                body,
            } => {
                self.joins(phis, 0, indent);
                defined.extend(phis.iter().map(|j| j.phi));
                if !self.class(*cond).is_uniform() {
                    self.hoist(header, indent, defined);
                    self.hoist(body, indent, defined);
                }
                let text = format!("loop {{ // exit {}", self.class(*cond));
                self.line(indent, &text);
                let mut inner = defined.clone();
                self.nodes(header, indent + 1, &mut inner);
                let c = self.name(*cond);
                self.line(indent + 1, &format!("if (!{c}) {{"));
                self.line(indent + 2, "break;");
                self.line(indent + 1, "}");
                self.nodes(body, indent + 1, &mut inner);
                self.joins(phis, 1, indent + 1);
                self.line(indent, "}");
                if self.bw.guard {
                    // The loop ran to its end unless the iteration cap cut it: its condition,
                    // computed again from the final values, is false.
                    self.line(indent, "{");
                    let mut again = defined.clone();
                    self.nodes(header, indent + 1, &mut again);
                    self.line(indent + 1, &format!("if ({c}) {{ pf_cut = true; }}"));
                    self.line(indent, "}");
                }
            }
        }
    }

    fn def(&mut self, v: ValueId, indent: usize, note: &str) {
        let value = self.v.ssa.value(v).clone();
        let n = |x: &ValueId| self.name(*x);
        let text = match &value.op {
            Op::Param(_) | Op::Phi(..) => return,
            Op::Const(l) => literal(*l),
            Op::Size(p) => (self.bw.param)(p.index()),
            Op::Iter(_) | Op::Read(_) => "0i".to_string(),
            Op::Unary(UnaryOp::Not, a) => format!("(!{})", n(a)),
            Op::Unary(UnaryOp::Neg, a) => format!("(-{})", n(a)),
            Op::Binary(op, a, b) => binary(*op, self.v.ssa.value(*a).ty, n(a), n(b)),
            Op::Select(c, t, e) => format!("select({}, {}, {})", n(e), n(t), n(c)),
            Op::Math(m, args) => {
                let args: Vec<String> = args.iter().map(n).collect();
                math(*m, value.ty, &args)
            }
            Op::Cast(to, a) => cast(*to, self.v.ssa.value(*a).ty, n(a)),
            Op::Call(f, args) => {
                let args: Vec<String> = args.iter().map(n).collect();
                format!(
                    "{}({})",
                    function_name(self.bw.program.function(*f)),
                    args.join(", ")
                )
            }
        };
        let class = self.class(v);
        let line = format!("let v{} = {text}; // {class}{note}", v.0);
        self.line(indent, &line);
    }
}
