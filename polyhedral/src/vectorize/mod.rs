//! Function-level vectorization: scalar functions (and the statement bodies that call them)
//! turned into code that runs `width` consecutive iterations of a vectorised loop at once, one
//! per SIMD lane.
//!
//! The analysis is target-independent and runs in four steps, one module each:
//! - [`ssa`]: the body in SSA form, control flow still structured;
//! - [`classify`]: each value uniform, linear(stride) or varying across the lanes, from the
//!   classes of the leaves (the call site's arguments for a function; the vectorised loop's
//!   iterator and the reads' subscripts for a statement body);
//! - [`mask`]: if-conversion: varying branches become masked regions joined by selects,
//!   divergent loops run until their active mask is empty, and regions worth it get a branch on
//!   superword condition (skipped when no lane is active);
//! - [`exec`]: the masked form run lane by lane, the reference its emitters follow.
//!
//! [`aligned`] adds the alignment of a vectorised loop's contiguous accesses.
//!
//! A [`VectorProgram`] holds the vector variants a kernel needs: one per statement body that is
//! vectorised and one per (function, parameter classes) reached from them, as a call site with
//! a uniform argument gets a variant with a scalar parameter. Emitters print the variants;
//! [`VectorProgram::display`] prints them for `polyfuse check --emit vector`.

pub mod aligned;
pub mod classify;
pub mod exec;
pub mod frozen;
pub mod mask;
pub mod ssa;

use std::collections::HashMap;
use std::fmt::Write;

use crate::program::{
    Access, BinaryOp, Expr, FunctionId, MathFn, ParamId, Program, ScalarType, StmtId, UnaryOp, Var,
};
use classify::Class;
use mask::{MNode, MaskDef, Masked, Region};
use ssa::{Join, Op, Ssa, ValueId};

/// One vector variant: a function for given parameter classes, or a statement body for a
/// vectorised loop.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorFunction {
    /// The function, or `None` for a statement body.
    pub function: Option<FunctionId>,
    /// The statement whose body this is.
    pub statement: Option<StmtId>,
    /// The parameters' classes (a function) or the vectorised iterator's depth (a statement).
    pub params: Vec<Class>,
    pub depth: usize,
    pub ssa: Ssa,
    pub classes: Vec<Class>,
    pub masked: Masked,
    /// For every call, the variant of the callee it calls.
    pub calls: HashMap<ValueId, usize>,
    /// For every value, whether it is a phi of a divergent loop frozen in lanes that left the
    /// loop ([`frozen::frozen_phis`]); the other phis of such loops take the latch in every lane.
    pub frozen: Vec<bool>,
}

/// How a statement reads (or writes) an array across the lanes of a vectorised loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessPattern {
    /// The same element in every lane.
    Uniform,
    /// Consecutive elements of the innermost dimension: one vector load or store.
    Contiguous,
    /// Anything else: an element per lane.
    Gather,
}

/// How `access` moves with iterator `depth`. A subscript with a division variable may move
/// with any iterator its division reads: a gather.
pub fn access_pattern(access: &Access, depth: usize) -> AccessPattern {
    if access.subscripts.iter().any(|s| s.has_divisions()) {
        return AccessPattern::Gather;
    }
    let coeffs: Vec<i64> = access
        .subscripts
        .iter()
        .map(|s| s.coeff(Var::Iter(depth)))
        .collect();
    match coeffs.split_last() {
        None => AccessPattern::Uniform,
        Some(_) if coeffs.iter().all(|c| *c == 0) => AccessPattern::Uniform,
        Some((1, outer)) if outer.iter().all(|c| *c == 0) => AccessPattern::Contiguous,
        Some(_) => AccessPattern::Gather,
    }
}

/// The vector variants of one program.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VectorProgram {
    pub variants: Vec<VectorFunction>,
    index: HashMap<(FunctionId, Vec<Class>), usize>,
    statements: HashMap<(StmtId, usize), usize>,
    sizes: Vec<i64>,
}

/// Whether a statement's body calls a scalar function (what function-level vectorization
/// works on).
pub fn calls_function(program: &Program, stmt: StmtId) -> bool {
    program.statements[stmt.index()]
        .exprs
        .iter()
        .any(|(_, e)| matches!(e, Expr::Call(..)))
}

impl VectorProgram {
    pub fn new(program: &Program) -> VectorProgram {
        VectorProgram {
            sizes: program.param_values(),
            ..VectorProgram::default()
        }
    }

    /// The value of a size parameter.
    pub fn size(&self, p: ParamId) -> i64 {
        self.sizes[p.index()]
    }

    /// The variant of statement `stmt`'s body vectorised over its iterator `depth`.
    pub fn statement_variant(&mut self, program: &Program, stmt: StmtId, depth: usize) -> usize {
        if let Some(&k) = self.statements.get(&(stmt, depth)) {
            return k;
        }
        let s = &program.statements[stmt.index()];
        let ssa = ssa::statement_ssa(program, s);
        let classes = classify::classify(&ssa, &|op| match op {
            Op::Iter(d) if *d == depth => Class::Linear(1),
            Op::Iter(_) => Class::Uniform,
            Op::Read(r) => match access_pattern(&s.reads[*r], depth) {
                AccessPattern::Uniform => Class::Uniform,
                _ => Class::Varying,
            },
            _ => Class::Varying,
        });
        let k = self.finish(program, ssa, classes, None, Some(stmt), Vec::new(), depth);
        self.statements.insert((stmt, depth), k);
        k
    }

    /// The variant of function `f` for parameters of classes `params`.
    pub fn function_variant(
        &mut self,
        program: &Program,
        f: FunctionId,
        params: &[Class],
    ) -> usize {
        if let Some(&k) = self.index.get(&(f, params.to_vec())) {
            return k;
        }
        let ssa = ssa::function_ssa(program, f);
        let classes = classify::classify(&ssa, &|op| match op {
            Op::Param(k) => params[*k],
            _ => Class::Varying,
        });
        let k = self.finish(program, ssa, classes, Some(f), None, params.to_vec(), 0);
        self.index.insert((f, params.to_vec()), k);
        k
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        program: &Program,
        ssa: Ssa,
        classes: Vec<Class>,
        function: Option<FunctionId>,
        statement: Option<StmtId>,
        params: Vec<Class>,
        depth: usize,
    ) -> usize {
        let masked = mask::if_convert(&ssa, &classes);
        let frozen = frozen::frozen_phis(&ssa, &masked);
        let mut calls = HashMap::new();
        for (k, v) in ssa.values.iter().enumerate() {
            if let Op::Call(f, args) = &v.op {
                let arg_classes: Vec<Class> = args.iter().map(|a| classes[a.index()]).collect();
                calls.insert(
                    ValueId(k as u32),
                    self.function_variant(program, *f, &arg_classes),
                );
            }
        }
        self.variants.push(VectorFunction {
            function,
            statement,
            params,
            depth,
            ssa,
            classes,
            masked,
            calls,
            frozen,
        });
        self.variants.len() - 1
    }

    /// The variants of every statement that calls a function, each vectorised over its
    /// innermost iterator, and of the functions they reach.
    pub fn for_program(program: &Program) -> VectorProgram {
        let mut vp = VectorProgram::new(program);
        for k in 0..program.statements.len() {
            let id = StmtId(k as u32);
            let depth = program.statements[k].depth();
            if depth > 0 && calls_function(program, id) {
                vp.statement_variant(program, id, depth - 1);
            }
        }
        vp
    }

    /// Whether variant `variant`, or a function it calls, has a value of type `ty` (a variant
    /// with `f64` values runs on 64-bit lanes).
    pub fn has_type(&self, variant: usize, ty: ScalarType) -> bool {
        let v = &self.variants[variant];
        v.ssa.values.iter().any(|x| x.ty == ty) || v.calls.values().any(|c| self.has_type(*c, ty))
    }

    /// The printed form of every variant: its parameters' classes, and its masked form with
    /// the class of every value; `note` adds a line to a statement's variant (a target's cost
    /// model: whether it runs the masked form), given the variant's index.
    pub fn display(&self, program: &Program, note: &dyn Fn(usize) -> Option<String>) -> String {
        let mut out = String::new();
        for (k, v) in self.variants.iter().enumerate() {
            if k > 0 {
                out.push('\n');
            }
            print_variant(&mut out, program, self, v, note);
        }
        out
    }
}

fn print_variant(
    out: &mut String,
    program: &Program,
    vp: &VectorProgram,
    v: &VectorFunction,
    note: &dyn Fn(usize) -> Option<String>,
) {
    match (v.function, v.statement) {
        (Some(f), _) => {
            let params: Vec<String> = v
                .params
                .iter()
                .enumerate()
                .map(|(k, c)| format!("{}: {c}", v.ssa.locals[k].name))
                .collect();
            let _ = writeln!(
                out,
                "function {}({}) -> {}",
                program.function(f).name,
                params.join(", "),
                v.ssa.ret
            );
        }
        (None, Some(s)) => {
            let stmt = &program.statements[s.index()];
            let _ = writeln!(
                out,
                "statement {} vectorised over `{}`",
                stmt.name, stmt.iterators[v.depth]
            );
            let how = |access: &Access| {
                let pattern = access_pattern(access, v.depth);
                match aligned::alignment(program, access, v.depth) {
                    Some(a) => format!("{pattern:?}, aligned to {a} elements"),
                    None => format!("{pattern:?}"),
                }
            };
            for (r, access) in stmt.reads.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "  read {r} `{}`: {}",
                    program.array(access.array).name,
                    how(access)
                );
            }
            let _ = writeln!(
                out,
                "  write `{}`: {}",
                program.array(stmt.write.array).name,
                how(&stmt.write)
            );
            let index = vp.statements[&(s, v.depth)];
            if vp.has_type(index, ScalarType::F64) {
                let _ = writeln!(
                    out,
                    "  lanes: 64-bit (f64 values): masks are 64-bit, i32 and f32 comparisons \
                     widened to them"
                );
            }
            if let Some(line) = note(index) {
                let _ = writeln!(out, "  {line}");
            }
        }
        (None, None) => {}
    }
    let p = Printer { program, vp, v };
    let _ = writeln!(out, "  m0 = entry");
    p.nodes(out, &v.masked.body, 1);
}

struct Printer<'a> {
    program: &'a Program,
    vp: &'a VectorProgram,
    v: &'a VectorFunction,
}

impl Printer<'_> {
    fn nodes(&self, out: &mut String, nodes: &[MNode], indent: usize) {
        for n in nodes {
            self.node(out, n, indent);
        }
    }

    fn value(&self, v: ValueId) -> String {
        let value = self.v.ssa.value(v);
        let name = |x: &ValueId| format!("%{}", x.0);
        let list = |xs: &[ValueId]| xs.iter().map(name).collect::<Vec<_>>().join(", ");
        let op = match &value.op {
            Op::Param(k) => format!("param {}", self.v.ssa.locals[*k].name),
            Op::Size(p) => format!("size {}", self.program.params[p.index()].name),
            Op::Iter(d) => {
                let stmt = &self.program.statements[self.v.statement.map_or(0, |s| s.index())];
                format!("iter {}", stmt.iterators[*d])
            }
            Op::Read(r) => format!("read {r}"),
            Op::Const(l) => format!("const {}", l.value),
            Op::Unary(UnaryOp::Neg, a) => format!("neg {}", name(a)),
            Op::Unary(UnaryOp::Not, a) => format!("not {}", name(a)),
            Op::Binary(op, a, b) => format!("{} {}, {}", binary_name(*op), name(a), name(b)),
            Op::Select(c, t, e) => format!("select {}, {}, {}", name(c), name(t), name(e)),
            Op::Math(m, args) => format!("{} {}", MathFn::name(*m), list(args)),
            Op::Cast(to, a) => format!("cast.{to} {}", name(a)),
            Op::Call(f, args) => {
                let variant = &self.vp.variants[self.v.calls[&v]];
                let codes: String = variant.params.iter().map(|c| c.code()).collect();
                format!(
                    "call {}[{codes}] {}",
                    self.program.function(*f).name,
                    list(args)
                )
            }
            Op::Phi(l, inputs) => {
                let local = self
                    .v
                    .ssa
                    .locals
                    .get(l.index())
                    .map_or("?", |x| x.name.as_str());
                format!("phi {local} {}", list(inputs))
            }
        };
        format!(
            "%{} = {op} : {} {}",
            v.0,
            value.ty,
            self.v.classes[v.index()]
        )
    }

    fn joins(&self, out: &mut String, joins: &[Join], pad: &str, how: &str) {
        for j in joins {
            let _ = writeln!(out, "{pad}{}    ; {how}", self.value(j.phi));
        }
    }

    fn mask(&self, m: mask::MaskId) -> String {
        match self.v.masked.masks[m.index()] {
            MaskDef::Entry => "entry".to_string(),
            MaskDef::And(o, c) => format!("m{} & %{}", o.0, c.0),
            MaskDef::AndNot(o, c) => format!("m{} & !%{}", o.0, c.0),
            MaskDef::Loop(o) => format!("m{} while active", o.0),
        }
    }

    fn region(&self, out: &mut String, name: &str, m: mask::MaskId, r: &Region, indent: usize) {
        let pad = "  ".repeat(indent);
        let boscc = if r.boscc {
            format!("skip if none(m{}), cost {}", m.0, r.cost)
        } else {
            format!("no skip test, cost {}", r.cost)
        };
        let _ = writeln!(
            out,
            "{pad}{name} under m{} = {}  ; {boscc}",
            m.0,
            self.mask(m)
        );
        self.nodes(out, &r.nodes, indent + 1);
    }

    fn node(&self, out: &mut String, n: &MNode, indent: usize) {
        let pad = "  ".repeat(indent);
        match n {
            MNode::Def(v) => {
                let _ = writeln!(out, "{pad}{}", self.value(*v));
            }
            MNode::Return(v) => {
                let _ = writeln!(out, "{pad}return %{}", v.0);
            }
            MNode::UniformIf {
                cond,
                then,
                otherwise,
                joins,
            } => {
                let _ = writeln!(out, "{pad}if %{} (uniform branch) {{", cond.0);
                self.nodes(out, then, indent + 1);
                let _ = writeln!(out, "{pad}}} else {{");
                self.nodes(out, otherwise, indent + 1);
                let _ = writeln!(out, "{pad}}}");
                self.joins(out, joins, &pad, "phi of a uniform branch");
            }
            MNode::MaskedIf {
                then_mask,
                else_mask,
                then,
                otherwise,
                joins,
                ..
            } => {
                self.region(out, "then", *then_mask, then, indent);
                self.region(out, "else", *else_mask, otherwise, indent);
                let how = format!("select(m{}, then, else)", then_mask.0);
                self.joins(out, joins, &pad, &how);
            }
            MNode::UniformLoop {
                phis,
                header,
                cond,
                body,
            } => {
                let _ = writeln!(out, "{pad}loop (uniform exit) {{");
                self.joins(out, phis, &format!("{pad}  "), "entry, latch");
                self.nodes(out, header, indent + 1);
                let _ = writeln!(out, "{pad}  exit unless %{}", cond.0);
                self.nodes(out, body, indent + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            MNode::MaskedLoop {
                active,
                phis,
                header,
                cond,
                body,
            } => {
                let _ = writeln!(
                    out,
                    "{pad}loop under m{} = {} {{",
                    active.0,
                    self.mask(*active)
                );
                for j in phis {
                    let how = if self.v.frozen[j.phi.index()] {
                        format!("latch kept where m{} holds", active.0)
                    } else {
                        "latch in every lane (not read after the loop)".to_string()
                    };
                    self.joins(out, std::slice::from_ref(j), &format!("{pad}  "), &how);
                }
                self.nodes(out, header, indent + 1);
                let _ = writeln!(
                    out,
                    "{pad}  m{} &= %{}; exit when none(m{})",
                    active.0, cond.0, active.0
                );
                self.nodes(out, body, indent + 1);
                let _ = writeln!(out, "{pad}}}");
            }
        }
    }
}

fn binary_name(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "add",
        BinaryOp::Sub => "sub",
        BinaryOp::Mul => "mul",
        BinaryOp::Div => "div",
        BinaryOp::Rem => "rem",
        BinaryOp::Min => "min",
        BinaryOp::Max => "max",
        BinaryOp::Lt => "lt",
        BinaryOp::Le => "le",
        BinaryOp::Gt => "gt",
        BinaryOp::Ge => "ge",
        BinaryOp::Eq => "eq",
        BinaryOp::Ne => "ne",
        BinaryOp::And => "and",
        BinaryOp::Or => "or",
    }
}
