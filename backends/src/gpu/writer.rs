//! The WGSL writer: one module per program, one compute entry point per kernel.
//!
//! The module declares a uniform block `pf` (every size parameter, then every host loop
//! variable a kernel sees, all `i32`), one storage buffer per array (`array<f32>` for `f32`
//! elements and for `f16` ones unless the adapter has `shader-f16`, `array<i32>` for `i32`; read-only where no statement writes it; binding
//! `1 + k` for array `k`), the integer and `f16` helpers, the program's scalar functions, the
//! workgroup tiles of promotion and the entry points `k0`, `k1`, …
//!
//! Inside an entry point (see [`super::host`] for the mappings), code that every invocation of
//! a group runs together (grid loops, sequential loops around thread regions, copies into
//! workgroup memory) is in uniform control flow, and only there are barriers placed:
//! `workgroupBarrier()` after a copy into workgroup memory, `storageBarrier()` and
//! `workgroupBarrier()` after every thread region and every single-invocation statement, so
//! what one invocation wrote is seen by the others. Guards that differ per invocation (a
//! mapped loop's bound, `local_invocation_index == 0`) enclose statements, never a barrier.
//!
//! What holds on the way out: the module parses and validates with naga (a failure is a bug
//! of this writer, reported as [`Error::Validation`] with naga's message).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use polyhedral::ast::{Ast, AstCond, AstExpr};
use polyhedral::program::{ArrayId, Program, ScalarType};
use polyhedral::schedule::Mark;

use super::body::{self, BodyWriter, Leaves};
use super::host::{leading_parallel, split_host, HostOp, Kernel, KernelMapping, MappedLoop};
use super::{Error, Options};
use crate::loops::{accesses, evaluate};
use crate::promote::{register_candidates, shared_tiles, Region, SharedTile};

/// A written module: the WGSL text and what the runner needs to run it.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    pub wgsl: String,
    pub kernels: Vec<Kernel>,
    /// The workgroup size of each kernel.
    pub blocks: Vec<[u32; 3]>,
    pub host: Vec<HostOp>,
    /// The host loop variables in the uniform block, after the parameters.
    pub host_vars: Vec<String>,
    /// Arrays no statement writes (bound read-only).
    pub read_only: Vec<bool>,
    /// What a user should know about the generated code (serial kernels, `f16` emulation),
    /// one line each.
    pub notes: Vec<String>,
    /// Per kernel, the arrays it keeps in workgroup memory and in registers.
    pub promoted: Vec<(Vec<String>, Vec<String>)>,
    /// Whether the module checks that its loops ran to their ends: a `pf_status` word bound
    /// after the arrays, set to 1 when one did not.
    pub loop_guard: bool,
    /// Whether the `f16` arrays' buffers hold `f16` values (else `f32`).
    pub f16_storage: bool,
    /// Per array: a temporary that lives in workgroup memory only (one box per tile of the
    /// one kernel that accesses it), whose storage buffer is never accessed.
    pub tile_local: Vec<bool>,
}

/// Writes the WGSL module of a program's loop AST.
pub struct Writer<'a> {
    program: &'a Program,
    options: &'a Options,
}

struct KernelWriter<'a> {
    program: &'a Program,
    options: &'a Options,
    kernel: &'a Kernel,
    block: [u32; 3],
    out: String,
    shared_decls: String,
    shared: Vec<(SharedTile, String, Vec<String>)>,
    registers: Vec<(ArrayId, Vec<AstExpr>, String)>,
    written: BTreeSet<ArrayId>,
    /// The temporaries that live in workgroup memory for one tile of the kernel.
    locals: Vec<SharedTile>,
    budget: i64,
    counter: usize,
    promoted_shared: Vec<String>,
    promoted_registers: Vec<String>,
    /// Whether every loop is followed by a check that it ran to its end
    /// ([`super::Limits::loop_iterations`]).
    guard: bool,
    /// The conditions of the loops being written, innermost last.
    open_loops: Vec<String>,
}

const DIMS: [&str; 3] = ["x", "y", "z"];
const SYNC: &str = "storageBarrier();\nworkgroupBarrier();\n";

impl<'a> Writer<'a> {
    pub fn new(program: &'a Program, options: &'a Options) -> Writer<'a> {
        Writer { program, options }
    }

    /// The module for `ast`, validated with naga.
    pub fn write(&self, ast: &Ast) -> Result<Module, Error> {
        polyhedral::ast::verify(self.program, ast).map_err(|e| Error::InvalidAst(e.to_string()))?;
        let program = self.program;
        if program.arrays.iter().any(|a| a.elem == ScalarType::F64) {
            return Err(Error::F64);
        }
        if let Some(a) = program.arrays.iter().find(|a| a.elem == ScalarType::Bool) {
            return Err(Error::Unsupported(format!("the bool array `{}`", a.name)));
        }
        let (host, kernels) = split_host(ast, &self.options.limits);
        let mut host_vars: Vec<String> = Vec::new();
        for k in &kernels {
            for v in &k.host_vars {
                if !host_vars.contains(v) {
                    host_vars.push(v.clone());
                }
            }
        }
        let mut written = vec![false; program.arrays.len()];
        for s in &program.statements {
            written[s.write.array.index()] = true;
        }
        let read_only: Vec<bool> = written.iter().map(|w| !w).collect();
        let mut totals: BTreeMap<ArrayId, usize> = BTreeMap::new();
        for (a, _, _) in accesses(program, ast) {
            *totals.entry(a).or_default() += 1;
        }
        let budget = i64::from(self.options.limits.workgroup_memory_bytes);
        let locals: Vec<Vec<SharedTile>> = kernels
            .iter()
            .map(|k| {
                if self.options.promote {
                    tile_locals(program, k, &totals, budget)
                } else {
                    Vec::new()
                }
            })
            .collect();
        let mut tile_local = vec![false; program.arrays.len()];
        for t in locals.iter().flatten() {
            tile_local[t.array.index()] = true;
        }

        let mut notes = Vec::new();
        let f16 = program.arrays.iter().any(|a| a.elem == ScalarType::F16);
        let f16_storage = f16 && self.options.limits.f16_storage;
        if f16_storage {
            notes.push(
                "f16 values are stored as f16 (`enable f16`) and computed in f32, rounded to f16 \
                 after every operation"
                    .to_string(),
            );
        } else if f16 {
            notes.push(
                "f16 values are stored and computed in f32, rounded to f16 after every operation"
                    .to_string(),
            );
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "// kernel {}: WGSL generated by polyfuse",
            program.name
        );
        for n in &notes {
            let _ = writeln!(out, "// {n}");
        }
        if f16_storage {
            out += "enable f16;\n";
        }
        out += "\nstruct Params {\n";
        for p in &program.params {
            let _ = writeln!(out, "    p_{}: i32,", p.name);
        }
        for v in &host_vars {
            let _ = writeln!(out, "    h_{v}: i32,");
        }
        out += "    zero: f32,\n";
        out += "}\n\n@group(0) @binding(0) var<uniform> pf: Params;\n";
        for (k, a) in program.arrays.iter().enumerate() {
            let access = if read_only[k] { "read" } else { "read_write" };
            let _ = writeln!(
                out,
                "@group(0) @binding({}) var<storage, {access}> a_{}: array<{}>;",
                k + 1,
                a.name,
                if f16_storage && a.elem == ScalarType::F16 {
                    "f16"
                } else {
                    body::value_type(a.elem)
                }
            );
        }
        let guard = self.options.limits.loop_iterations.is_some();
        if guard {
            let _ = writeln!(
                out,
                "@group(0) @binding({}) var<storage, read_write> pf_status: atomic<u32>;\n\n\
                 // Set when a loop was left before its end (see the runner's loop check).\n\
                 var<private> pf_cut: bool;",
                program.arrays.len() + 1
            );
        }
        out += "\n";
        out += body::HELPERS;
        let param = |p: usize| format!("pf.p_{}", program.params[p].name);
        let bw = BodyWriter {
            program,
            param: &param,
            guard,
        };
        out += &super::uniform::functions(&bw);

        let mut blocks = Vec::new();
        let mut promoted = Vec::new();
        for (k, locals) in kernels.iter().zip(locals) {
            let block = k.block(&self.options.limits);
            let local_bytes: i64 = locals.iter().map(|t| 4 * t.len()).sum();
            blocks.push(block);
            let mut kw = KernelWriter {
                program,
                options: self.options,
                kernel: k,
                block,
                out: String::new(),
                shared_decls: String::new(),
                shared: Vec::new(),
                registers: Vec::new(),
                written: BTreeSet::new(),
                locals,
                budget: budget - local_bytes,
                counter: 0,
                promoted_shared: Vec::new(),
                promoted_registers: Vec::new(),
                guard,
                open_loops: Vec::new(),
            };
            for (a, _, w) in accesses(program, &k.body) {
                if w {
                    kw.written.insert(a);
                }
            }
            kw.entry_point()?;
            if k.mapping == KernelMapping::Serial {
                notes.push(format!(
                    "{} runs on one invocation: none of its loops can run in parallel",
                    k.name
                ));
            }
            out += "\n";
            out += &kw.shared_decls;
            out += &kw.out;
            promoted.push((kw.promoted_shared, kw.promoted_registers));
        }
        out += "\n";
        out += &host_comment(&host, program);

        validate(&out)?;
        Ok(Module {
            wgsl: out,
            kernels,
            blocks,
            host,
            host_vars,
            read_only,
            notes,
            promoted,
            loop_guard: guard,
            f16_storage,
            tile_local,
        })
    }
}

/// Parses and validates `source` with naga.
pub fn validate(source: &str) -> Result<(), Error> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| Error::Validation {
        message: e.emit_to_string(source),
        source_text: source.to_string(),
    })?;
    let mut validator = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::SHADER_FLOAT16,
    );
    validator.validate(&module).map_err(|e| Error::Validation {
        message: e.emit_to_string(source),
        source_text: source.to_string(),
    })?;
    Ok(())
}

/// Names as the host program's comment writes them.
struct HostSpelling<'a>(&'a Program);

impl polyhedral::ast::Spelling for HostSpelling<'_> {
    fn var(&self, name: &str) -> String {
        name.to_string()
    }
    fn param(&self, p: polyhedral::program::ParamId) -> String {
        self.0.params[p.index()].name.clone()
    }
}

fn show(e: &AstExpr, program: &Program) -> String {
    e.to_infix(&HostSpelling(program))
}

/// The host program as a comment: which loops run on the host and what they dispatch.
fn host_comment(host: &[HostOp], program: &Program) -> String {
    fn rec(ops: &[HostOp], program: &Program, depth: usize, out: &mut String) {
        let pad = "  ".repeat(depth);
        for op in ops {
            match op {
                HostOp::Loop {
                    var,
                    lower,
                    upper,
                    step,
                    body,
                } => {
                    let _ = writeln!(
                        out,
                        "//   {pad}for {var} = {} to {}{}:",
                        show(lower, program),
                        show(upper, program),
                        if *step == 1 {
                            String::new()
                        } else {
                            format!(" step {step}")
                        }
                    );
                    rec(body, program, depth + 1, out);
                }
                HostOp::If {
                    then, otherwise, ..
                } => {
                    let _ = writeln!(out, "//   {pad}if (condition):");
                    rec(then, program, depth + 1, out);
                    if !otherwise.is_empty() {
                        let _ = writeln!(out, "//   {pad}else:");
                        rec(otherwise, program, depth + 1, out);
                    }
                }
                HostOp::Launch { kernel } => {
                    let _ = writeln!(out, "//   {pad}dispatch k{kernel}");
                }
            }
        }
    }
    let mut out = String::from("// host:\n");
    rec(host, program, 0, &mut out);
    out
}

impl KernelWriter<'_> {
    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}{}", self.counter)
    }

    fn is_host_var(&self, v: &str) -> bool {
        self.kernel.host_vars.iter().any(|h| h == v)
    }

    fn expr(&self, e: &AstExpr) -> String {
        match e {
            AstExpr::Int(v) if *v < 0 => format!("({v}i)"),
            AstExpr::Int(v) => format!("{v}i"),
            AstExpr::Var(v) if self.is_host_var(v) => format!("pf.h_{v}"),
            AstExpr::Var(v) => format!("v_{v}"),
            AstExpr::Param(p) => format!("pf.p_{}", self.program.params[p.index()].name),
            AstExpr::Add(a, b) => format!("({} + {})", self.expr(a), self.expr(b)),
            AstExpr::Mul(k, a) => format!("({}i * {})", k, self.expr(a)),
            AstExpr::FloorDiv(a, k) => format!("pf_floord({}, {k}i)", self.expr(a)),
            AstExpr::CeilDiv(a, k) => format!("pf_ceild({}, {k}i)", self.expr(a)),
            AstExpr::Mod(a, k) => format!("pf_mod({}, {k}i)", self.expr(a)),
            AstExpr::Min(items) => self.fold("min", items),
            AstExpr::Max(items) => self.fold("max", items),
        }
    }

    fn fold(&self, f: &str, items: &[AstExpr]) -> String {
        let mut it = items.iter().rev();
        let Some(last) = it.next() else {
            return "0i".into();
        };
        let mut acc = self.expr(last);
        for e in it {
            acc = format!("{f}({}, {acc})", self.expr(e));
        }
        acc
    }

    fn cond(&self, conds: &[AstCond]) -> String {
        let parts: Vec<String> = conds
            .iter()
            .map(|c| match c {
                AstCond::NonNegative(e) => format!("{} >= 0i", self.expr(e)),
                AstCond::Zero(e) => format!("{} == 0i", self.expr(e)),
                AstCond::Divisible(e, k) => format!("pf_mod({}, {k}i) == 0i", self.expr(e)),
            })
            .collect();
        if parts.is_empty() {
            "true".into()
        } else {
            parts.join(" && ")
        }
    }

    fn line(&mut self, depth: usize, text: &str) {
        for l in text.lines() {
            let _ = writeln!(self.out, "{}{l}", "    ".repeat(depth));
        }
    }

    fn entry_point(&mut self) -> Result<(), Error> {
        let k = self.kernel;
        let [bx, by, bz] = self.block;
        let _ = writeln!(
            self.out,
            "@compute @workgroup_size({bx}, {by}, {bz})\nfn {}(@builtin(workgroup_id) pf_wid: vec3<u32>, @builtin(num_workgroups) pf_nwg: vec3<u32>, @builtin(local_invocation_id) pf_lid: vec3<u32>, @builtin(local_invocation_index) pf_lidx: u32) {{",
            k.name
        );
        match &k.mapping {
            KernelMapping::Serial => {
                self.invocation(&k.body, 1);
            }
            KernelMapping::Flat { loops, block } => {
                let n = loops.len();
                for (j, l) in loops.iter().enumerate() {
                    let d = DIMS[n - 1 - j];
                    let b = block[n - 1 - j];
                    let id = format!("(i32(pf_wid.{d}) * {b}i + i32(pf_lid.{d}))");
                    let stride = format!("i32(pf_nwg.{d}) * {b}i");
                    self.mapped_loop(l, &id, &stride, 1 + j);
                }
                self.invocation(&k.body, 1 + n);
                for j in (0..n).rev() {
                    self.close_loop(1 + j);
                }
            }
            KernelMapping::Groups { grid } => {
                let n = grid.len();
                for (j, l) in grid.iter().enumerate() {
                    let d = DIMS[n - 1 - j];
                    let id = format!("i32(pf_wid.{d})");
                    let stride = format!("i32(pf_nwg.{d})");
                    self.mapped_loop(l, &id, &stride, 1 + j);
                }
                let pushed = self.enter_tile(1 + n);
                self.group(&k.body, 1 + n)?;
                for _ in 0..pushed {
                    self.shared.pop();
                }
                for j in (0..n).rev() {
                    self.close_loop(1 + j);
                }
            }
        }
        if self.guard {
            self.line(1, "if (pf_cut) {\n    atomicStore(&pf_status, 1u);\n}");
        }
        self.out += "}\n";
        Ok(())
    }

    /// `for (v = lower + id·step; v <= upper; v += stride·step)`.
    fn mapped_loop(&mut self, l: &MappedLoop, id: &str, stride: &str, depth: usize) {
        let v = format!("v_{}", l.var);
        let init = format!("{} + {id} * {}i", self.expr(&l.lower), l.step);
        let cond = format!("{v} <= {}", self.expr(&l.upper));
        let update = format!("{v} = {v} + {stride} * {}i", l.step);
        self.open_loop(depth, &v, &init, cond, &update);
    }

    fn plain_loop(&mut self, var: &str, lower: &AstExpr, upper: &AstExpr, step: i64, depth: usize) {
        let v = format!("v_{var}");
        let init = self.expr(lower);
        let cond = format!("{v} <= {}", self.expr(upper));
        let update = format!("{v} = {v} + {step}i");
        self.open_loop(depth, &v, &init, cond, &update);
    }

    /// `for (var v: i32 = init; cond; update) {`, closed by [`Self::close_loop`]. Under a
    /// loop cap the variable is declared before the loop, so that the loop's condition can be
    /// tested again after it: still true means the driver left the loop early.
    fn open_loop(&mut self, depth: usize, v: &str, init: &str, cond: String, update: &str) {
        if self.guard {
            self.line(depth, &format!("{{ var {v}: i32 = {init};"));
            self.line(depth, &format!("for (; {cond}; {update}) {{"));
        } else {
            self.line(
                depth,
                &format!("for (var {v}: i32 = {init}; {cond}; {update}) {{"),
            );
        }
        self.open_loops.push(cond);
    }

    fn close_loop(&mut self, depth: usize) {
        let cond = self.open_loops.pop().expect("every closed loop was opened");
        self.line(depth, "}");
        if self.guard {
            self.line(depth, &format!("if ({cond}) {{ pf_cut = true; }} }}"));
        }
    }

    /// Code every invocation of the group runs together.
    fn group(&mut self, ast: &Ast, depth: usize) -> Result<(), Error> {
        match ast {
            Ast::Block(items) => {
                for a in items {
                    self.group(a, depth)?;
                }
            }
            Ast::For {
                var,
                lower,
                upper,
                step,
                body,
                ..
            } => {
                self.plain_loop(var, lower, upper, *step, depth);
                self.group(body, depth + 1)?;
                self.close_loop(depth);
            }
            Ast::If {
                conds,
                then,
                otherwise,
            } => {
                let c = self.cond(conds);
                self.line(depth, &format!("if ({c}) {{"));
                self.group(then, depth + 1)?;
                if let Some(o) = otherwise {
                    self.line(depth, "} else {");
                    self.group(o, depth + 1)?;
                }
                self.line(depth, "}");
            }
            Ast::Mark {
                mark: Mark::Thread,
                body,
            } => self.thread_region(body, depth)?,
            Ast::Mark { body, .. } => self.group(body, depth)?,
            Ast::User { .. } => {
                self.line(depth, "if (pf_lidx == 0u) {");
                self.invocation(ast, depth + 1);
                self.line(depth, "}");
                self.line(depth, SYNC);
            }
        }
        Ok(())
    }

    fn thread_region(&mut self, region: &Ast, depth: usize) -> Result<(), Error> {
        let mut tiles = Vec::new();
        if self.options.promote {
            let program = self.program;
            let elem_bytes = |a: ArrayId| -> i64 {
                let _ = program.array(a);
                4
            };
            let local: BTreeSet<ArrayId> = self.shared.iter().map(|(t, _, _)| t.array).collect();
            tiles = shared_tiles(
                program,
                region,
                &self.written,
                &local,
                &mut self.budget,
                &elem_bytes,
            );
        }
        let pushed = tiles.len();
        for tile in tiles {
            let name = format!("pf_sh_{}_{}", self.kernel.name, self.fresh("t"));
            let array = self.program.array(tile.array);
            let _ = writeln!(
                self.shared_decls,
                "var<workgroup> {name}: array<{}, {}>;",
                body::value_type(array.elem),
                tile.len()
            );
            self.promoted_shared.push(array.name.clone());
            if tile.written {
                let words = tile.flag_words();
                let _ = writeln!(
                    self.shared_decls,
                    "var<workgroup> {name}_w: array<atomic<u32>, {words}>;"
                );
                let w = self.fresh("pf_f");
                self.cooperative_loop(depth, &w, words);
                self.line(depth + 1, &format!("atomicStore(&{name}_w[{w}], 0u);"));
                self.close_loop(depth);
            }
            let lows = self.box_lows(&tile, depth);
            // The cooperative copy: invocation k copies elements k, k + n, … of the box.
            let extents = self.program.array_extents(tile.array);
            let f = self.fresh("pf_f");
            let idx = box_element(&tile, &lows, &f);
            let inside: Vec<String> = idx
                .iter()
                .zip(&extents)
                .map(|(i, n)| format!("{i} >= 0i && {i} < {n}i"))
                .collect();
            let flat = flat_index(&idx, &extents);
            self.cooperative_loop(depth, &f, tile.len());
            self.line(
                depth + 1,
                &format!(
                    "if ({}) {{\n    {name}[{f}] = {};\n}}",
                    inside.join(" && "),
                    if self.half(tile.array) {
                        format!("f32(a_{}[{flat}])", array.name)
                    } else {
                        format!("a_{}[{flat}]", array.name)
                    }
                ),
            );
            self.close_loop(depth);
            self.shared.push((tile, name, lows));
        }

        if pushed > 0 {
            self.line(depth, "workgroupBarrier();");
        }
        let n = leading_parallel(region, 3).0.len();
        let (loops, inner) = leading_parallel(region, n.min(3));
        if loops.is_empty() {
            self.line(depth, "if (pf_lidx == 0u) {");
            self.invocation(region, depth + 1);
            self.line(depth, "}");
        } else {
            let n = loops.len();
            // Invocations along block dimensions this region does not map sit it out.
            let idle: Vec<String> = (n..3)
                .filter(|&d| self.block[d] > 1)
                .map(|d| format!("pf_lid.{} == 0u", DIMS[d]))
                .collect();
            let depth = if idle.is_empty() {
                depth
            } else {
                self.line(depth, &format!("if ({}) {{", idle.join(" && ")));
                depth + 1
            };
            for (j, l) in loops.iter().enumerate() {
                let d = DIMS[n - 1 - j];
                let b = self.block[n - 1 - j];
                let id = format!("i32(pf_lid.{d})");
                let stride = format!("{b}i");
                self.mapped_loop(l, &id, &stride, depth + j);
            }
            self.invocation(inner, depth + n);
            for j in (0..n).rev() {
                self.close_loop(depth + j);
            }
            if !idle.is_empty() {
                self.line(depth - 1, "}");
            }
        }
        let first = self.shared.len() - pushed;
        let written: Vec<(SharedTile, String, Vec<String>)> = self.shared[first..]
            .iter()
            .filter(|(t, _, _)| t.written)
            .cloned()
            .collect();
        if !written.is_empty() {
            self.line(depth, "workgroupBarrier();");
        }
        // Back to global memory: the elements whose bit is set, and only those.
        for (tile, name, lows) in &written {
            let f = self.fresh("pf_f");
            let idx = box_element(tile, lows, &f);
            let extents = self.program.array_extents(tile.array);
            let global = format!(
                "a_{}[{}]",
                self.program.array(tile.array).name,
                flat_index(&idx, &extents)
            );
            let value = if self.half(tile.array) {
                format!("f16({name}[{f}])")
            } else {
                format!("{name}[{f}]")
            };
            self.cooperative_loop(depth, &f, tile.len());
            self.line(
                depth + 1,
                &format!(
                    "if (((atomicLoad(&{name}_w[{f} / 32i]) >> u32({f} % 32i)) & 1u) != 0u) {{\n    {global} = {value};\n}}"
                ),
            );
            self.close_loop(depth);
        }
        self.line(depth, SYNC);
        for _ in 0..pushed {
            self.shared.pop();
        }
        Ok(())
    }

    /// The workgroup boxes of the kernel's tile-local temporaries, at the start of one tile
    /// (in uniform control flow): their lowest subscripts, zeroed as the global buffers they
    /// stand for would be, after every invocation is done with the previous tile. Returns how
    /// many boxes were pushed on `shared`.
    fn enter_tile(&mut self, depth: usize) -> usize {
        let locals = self.locals.clone();
        if locals.is_empty() {
            return 0;
        }
        self.line(depth, "workgroupBarrier();");
        for tile in locals {
            let array = self.program.array(tile.array);
            let name = format!("pf_tl_{}_{}", self.kernel.name, array.name);
            let ty = body::value_type(array.elem);
            let _ = writeln!(
                self.shared_decls,
                "var<workgroup> {name}: array<{ty}, {}>;",
                tile.len()
            );
            self.promoted_shared.push(array.name.clone());
            let lows = self.box_lows(&tile, depth);
            let f = self.fresh("pf_f");
            self.cooperative_loop(depth, &f, tile.len());
            self.line(depth + 1, &format!("{name}[{f}] = {ty}();"));
            self.close_loop(depth);
            self.shared.push((tile, name, lows));
        }
        self.line(depth, "workgroupBarrier();");
        self.locals.len()
    }

    /// `for (f = local index; f < len; f += invocations)`, closed by [`Self::close_loop`]:
    /// invocation k of the group takes elements k, k + n, … of a box.
    fn cooperative_loop(&mut self, depth: usize, f: &str, len: i64) {
        let nthreads = self.block.iter().product::<u32>();
        self.open_loop(
            depth,
            f,
            "i32(pf_lidx)",
            format!("{f} < {len}i"),
            &format!("{f} = {f} + {nthreads}i"),
        );
    }

    /// The lowest subscripts of a box, as `let` constants.
    fn box_lows(&mut self, tile: &SharedTile, depth: usize) -> Vec<String> {
        let mut lows = Vec::new();
        for e in &tile.lower {
            let lo = self.fresh("pf_lo");
            let text = format!("let {lo}: i32 = {};", self.expr(e));
            self.line(depth, &text);
            lows.push(lo);
        }
        lows
    }

    /// Code one invocation runs on its own.
    fn invocation(&mut self, ast: &Ast, depth: usize) {
        match ast {
            Ast::Block(items) => {
                for a in items {
                    self.invocation(a, depth);
                }
            }
            Ast::For {
                var,
                lower,
                upper,
                step,
                body,
                ..
            } => {
                let candidates = if self.options.promote {
                    register_candidates(self.program, var, body)
                } else {
                    Vec::new()
                };
                if candidates.is_empty() {
                    self.plain_loop(var, lower, upper, *step, depth);
                    self.invocation(body, depth + 1);
                    self.close_loop(depth);
                    return;
                }
                let check = format!("if ({} <= {}) {{", self.expr(lower), self.expr(upper));
                self.line(depth, &check);
                let mut stores = Vec::new();
                for (array, subs) in &candidates {
                    let load = self.load(*array, subs);
                    let name = self.fresh("pf_r");
                    let ty = body::value_type(self.program.array(*array).elem);
                    self.line(depth + 1, &format!("var {name}: {ty} = {load};"));
                    stores.push(self.store(*array, subs, &name));
                    self.promoted_registers
                        .push(self.program.array(*array).name.clone());
                    self.registers.push((*array, subs.clone(), name));
                }
                self.plain_loop(var, lower, upper, *step, depth + 1);
                self.invocation(body, depth + 2);
                self.close_loop(depth + 1);
                for _ in &candidates {
                    self.registers.pop();
                }
                for s in stores {
                    self.line(depth + 1, &s);
                }
                self.line(depth, "}");
            }
            Ast::If {
                conds,
                then,
                otherwise,
            } => {
                let c = self.cond(conds);
                self.line(depth, &format!("if ({c}) {{"));
                self.invocation(then, depth + 1);
                if let Some(o) = otherwise {
                    self.line(depth, "} else {");
                    self.invocation(o, depth + 1);
                }
                self.line(depth, "}");
            }
            Ast::Mark { body, .. } => self.invocation(body, depth),
            Ast::User { stmt, args } => {
                let s = &self.program.statements[stmt.index()];
                let subs = |acc: &polyhedral::program::Access| -> Vec<AstExpr> {
                    acc.subscripts
                        .iter()
                        .map(|e| AstExpr::from_subscript(&s.divs, e, &|d| args[d].clone()))
                        .collect()
                };
                let reads: Vec<String> = s
                    .reads
                    .iter()
                    .map(|r| self.load(r.array, &subs(r)))
                    .collect();
                let iters: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                let types: Vec<ScalarType> = (0..s.exprs.len())
                    .map(|i| {
                        self.program
                            .expr_type(s, polyhedral::program::ExprId(i as u32))
                    })
                    .collect();
                let program = self.program;
                let param = |p: usize| format!("pf.p_{}", program.params[p].name);
                let bw = BodyWriter {
                    program,
                    param: &param,
                    guard: self.guard,
                };
                let value = bw.expr(
                    &s.exprs,
                    &types,
                    &Leaves::Statement {
                        iters: &iters,
                        reads: &reads,
                    },
                    s.body,
                );
                let store = self.store(s.write.array, &subs(&s.write), &value);
                self.line(depth, &store);
            }
        }
    }

    /// The value of element `subs` of `array`, as the statements compute with it.
    fn load(&self, array: ArrayId, subs: &[AstExpr]) -> String {
        let place = self.access(array, subs);
        if place.starts_with("a_") && self.half(array) {
            format!("f32({place})")
        } else {
            place
        }
    }

    /// The statement storing `value` to element `subs` of `array`.
    fn store(&self, array: ArrayId, subs: &[AstExpr], value: &str) -> String {
        let place = self.access(array, subs);
        let registered = self
            .registers
            .iter()
            .any(|(a, s, _)| *a == array && s == subs);
        if let Some((tile, name, lows)) = self.shared.iter().find(|(t, _, _)| t.array == array) {
            if tile.written && !registered {
                let at = self.tile_offset(tile, lows, subs);
                return format!(
                    "{place} = {value};\natomicOr(&{name}_w[({at}) / 32i], 1u << u32(({at}) % 32i));"
                );
            }
        }
        if place.starts_with("a_") && self.half(array) {
            // `value` is rounded to f16 already: the conversion is exact.
            format!("{place} = f16({value});")
        } else {
            format!("{place} = {value};")
        }
    }

    /// Whether `array`'s storage buffer holds `f16` values.
    fn half(&self, array: ArrayId) -> bool {
        self.options.limits.f16_storage && self.program.array(array).elem == ScalarType::F16
    }

    /// The offset of element `subs` in the workgroup box `tile` (lowest subscripts `lows`).
    fn tile_offset(&self, tile: &SharedTile, lows: &[String], subs: &[AstExpr]) -> String {
        let idx: Vec<String> = subs
            .iter()
            .zip(lows)
            .map(|(s, lo)| format!("({} - {lo})", self.expr(s)))
            .collect();
        flat_index(&idx, &tile.extent)
    }

    /// The WGSL place of element `subs` of `array`: a register, a workgroup tile or the
    /// storage buffer.
    fn access(&self, array: ArrayId, subs: &[AstExpr]) -> String {
        if let Some((_, _, name)) = self
            .registers
            .iter()
            .rev()
            .find(|(a, s, _)| *a == array && s == subs)
        {
            return name.clone();
        }
        if let Some((tile, name, lows)) = self.shared.iter().find(|(t, _, _)| t.array == array) {
            return format!("{name}[{}]", self.tile_offset(tile, lows, subs));
        }
        let idx: Vec<String> = subs.iter().map(|s| self.expr(s)).collect();
        let extents = self.program.array_extents(array);
        format!(
            "a_{}[{}]",
            self.program.array(array).name,
            flat_index(&idx, &extents)
        )
    }
}

/// The temporaries that live in workgroup memory for one tile of `kernel` (see
/// [`crate::promote`]): every access of them (`totals` counts those of the whole program) is
/// in the kernel's body below its grid loops, which carry no dependence, and the kernel is
/// launched once (no host loop carries a value from one launch to the next); their boxes fit
/// `budget` bytes together, taken in the order of the arrays.
fn tile_locals(
    program: &Program,
    kernel: &Kernel,
    totals: &BTreeMap<ArrayId, usize>,
    budget: i64,
) -> Vec<SharedTile> {
    let KernelMapping::Groups { grid } = &kernel.mapping else {
        return Vec::new();
    };
    if !kernel.host_vars.is_empty() {
        return Vec::new();
    }
    let values = program.param_values();
    let mut fixed = BTreeMap::new();
    for l in grid {
        let at = |e| evaluate(e, Some(&values), &fixed);
        if let (Some(lo), Some(hi)) = (at(&l.lower), at(&l.upper)) {
            if lo == hi {
                fixed.insert(l.var.clone(), lo);
            }
        }
    }
    let region = Region::new(program, &kernel.body, true);
    let mut left = budget;
    let mut out = Vec::new();
    for (a, lower, extent) in region.tile_local_boxes(program, totals, &fixed) {
        let tile = SharedTile {
            array: a,
            lower,
            extent,
            written: false,
        };
        if 4 * tile.len() <= left {
            left -= 4 * tile.len();
            out.push(tile);
        }
    }
    out
}

/// The subscripts of element `f` (row-major) of the box `tile` whose lowest subscripts are the
/// variables `lows`.
fn box_element(tile: &SharedTile, lows: &[String], f: &str) -> Vec<String> {
    let mut idx = Vec::new();
    let mut rest = f.to_string();
    let mut inner_len: i64 = tile.len();
    for (d, e) in tile.extent.iter().enumerate() {
        inner_len /= e.max(&1);
        idx.push(format!("({} + ({rest}) / {inner_len}i)", lows[d]));
        rest = format!("{rest} % {inner_len}i");
    }
    idx
}

/// The row-major offset of `idx` in an array of `extents`.
fn flat_index(idx: &[String], extents: &[i64]) -> String {
    if idx.is_empty() {
        return "0i".into();
    }
    let mut acc = idx[0].clone();
    for (i, e) in idx.iter().zip(extents).skip(1) {
        acc = format!("({acc}) * {e}i + {i}");
    }
    acc
}
