//! The accelerator target: kernels lowered onto the Cube and Vector units of the simulated
//! DaVinci-like core (`sim`), as `.npuasm` programs the simulator runs.
//!
//! [`NpuTarget`] is the machine as the compiler sees it, read from the simulator's own machine
//! description (capacities and alignments of L1, L0A, L0B, L0C and UB, copy bandwidths, the
//! number of cores) plus the ISA's fixed shapes (the Cube's 16×16×16 fractal, 256-byte vector
//! repeats), so the two never disagree. [`compile`] recognises the kernel's structure from its
//! polyhedral representation ([`plan`]), chooses tile sizes from the capacities ([`tiles`]) and
//! writes the program ([`cube`], with the element-wise part on the Vector unit in
//! [`epilogue`], a triangular result's write-out in [`band`]); a contraction that updates its
//! result in place runs after a kernel that copies what it reads ([`in_place`]); a kernel
//! without a contraction goes to the Vector unit alone ([`vector`]); a kernel neither takes
//! as it is may once its reused temporaries are privatized ([`privatize`]).
//! [`check`] assembles the program, runs it on the simulator on the interpreter's random
//! inputs and compares every output with the interpreter's.
//!
//! Invariants of every program [`compile`] returns:
//! - GM tensors are the kernel's arrays, row-major as given; layouts change only on chip (GM→L1
//!   copies of one 32-byte block per row put operands in fractal order, `load2d` reaches the
//!   zZ / zN layouts of L0A / L0B, L0C's nZ tiles go to UB as they are and leave for GM one row
//!   of 16 columns per burst). Temporaries that never leave a tile have no GM tensor.
//! - Nothing is read or written outside a tensor: a row tail (rows not a multiple of the tile)
//!   is copied with fewer bursts; the rows of the on-chip tile past it are never written out.
//! - Every pair of accesses from different pipes to the same buffer bytes is ordered by a
//!   `set_flag` / `wait_flag` pair derived from the producer / consumer pipes of that buffer, and
//!   every wait's set is issued before it in program order (or pre-set), so programs are free of
//!   races and deadlocks.

mod band;
mod buffers;
mod conv_rows;
mod copies;
mod cube;
mod epilogue;
mod function;
mod general;
mod in_place;
pub mod plan;
mod prefill;
mod privatize;
mod runner;
mod tile_ops;
pub mod tiles;
mod tune;
mod unfused;
mod vector;

pub use function::lane_stats;
pub use runner::{check, simulate, NpuCheck};

use polyhedral::interp::InterpError;
use polyhedral::pipeline::{self, Compiled};
use polyhedral::program::{ArrayId, ScalarType};
use polyhedral::target::{
    MatrixMemories, MemoryKind, MemoryTree, ParallelLevel, TargetDescription, VectorUnit,
};
use polyhedral::Program;

use crate::report;
use crate::target::{self as table, RunOutput, Source, Target, TargetOptions};
use sim::isa::{CopyPath, Mem};
use sim::Machine;

/// Edge of the Cube's fractal: `mmad` works on 16×16 (A, B) and 16×16 (C) blocks.
pub const FRACTAL: u64 = 16;
/// Bytes one vector repeat covers.
pub const VECTOR_BYTES: u64 = 256;
/// Bytes of one DMA block (the unit of `len` and gaps of `copy`).
pub const BLOCK_BYTES: u64 = 32;

/// The accelerator as the compiler sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NpuTarget {
    pub machine: Machine,
}

impl NpuTarget {
    /// The target of a machine description (as `sim` parses it).
    pub fn new(machine: Machine) -> NpuTarget {
        NpuTarget { machine }
    }

    pub fn capacity(&self, mem: Mem) -> u64 {
        self.machine.mem(mem).capacity
    }

    pub fn align(&self, mem: Mem) -> u64 {
        self.machine.mem(mem).align
    }

    pub fn cores(&self) -> u64 {
        self.machine.cores as u64
    }

    /// The machine with only its first `cores` cores (`None`: all of them): every lowering
    /// spreads its blocks over those, and the simulator runs them there.
    pub fn with_cores(&self, cores: Option<usize>) -> Result<NpuTarget, Error> {
        let Some(n) = cores else {
            return Ok(self.clone());
        };
        let machine_cores = self.machine.cores as usize;
        if n == 0 || n > machine_cores {
            return Err(Error::Cores {
                asked: n,
                machine: machine_cores,
            });
        }
        let mut machine = self.machine.clone();
        // At most the machine's cores, which are a u32.
        machine.cores = n as u32;
        Ok(NpuTarget { machine })
    }

    /// Bytes per cycle of a copy path.
    pub fn bandwidth(&self, path: CopyPath) -> u64 {
        self.machine.path(path).bandwidth.max(1)
    }

    pub fn startup(&self, path: CopyPath) -> u64 {
        self.machine.path(path).startup
    }

    /// The middle end's view: GM feeds L1 (which feeds L0A and L0B) and UB (which L0C drains
    /// to), all scratchpads; the cores and the Cube's fractal; 256-byte vectors; f16 and f32
    /// (and f64 when it is computed in f32).
    pub fn description(&self, f64_as_f32: bool) -> TargetDescription {
        let mut memory = MemoryTree::global("GM", self.capacity(Mem::Gm));
        let l1 = memory.add(
            "L1",
            MemoryKind::Scratchpad,
            self.capacity(Mem::L1),
            memory.root(),
        );
        let a = memory.add("L0A", MemoryKind::Scratchpad, self.capacity(Mem::L0a), l1);
        let b = memory.add("L0B", MemoryKind::Scratchpad, self.capacity(Mem::L0b), l1);
        let ub = memory.add(
            "UB",
            MemoryKind::Scratchpad,
            self.capacity(Mem::Ub),
            memory.root(),
        );
        let acc = memory.add("L0C", MemoryKind::Scratchpad, self.capacity(Mem::L0c), ub);
        // i32 values run on the Vector unit (counters and masks of scalar functions).
        let mut element_types = vec![ScalarType::F16, ScalarType::F32, ScalarType::I32];
        if f64_as_f32 {
            element_types.push(ScalarType::F64);
        }
        TargetDescription {
            name: "npu".to_string(),
            memory,
            parallel: vec![
                ParallelLevel::Cores {
                    count: self.machine.cores,
                },
                ParallelLevel::Matrix {
                    m: FRACTAL as u32,
                    n: FRACTAL as u32,
                    k: FRACTAL as u32,
                    memories: Some(MatrixMemories { a, b, acc }),
                },
            ],
            vector: Some(VectorUnit {
                bytes: VECTOR_BYTES as u32,
                tile_iterations: 128,
                // The Vector unit computes from and into the unified buffer.
                registers: 0,
                tile_registers: 0,
                fma_latency: 0,
                fma_pipes: 0,
            }),
            tlb: None,
            element_types,
        }
    }
}

/// How a kernel is lowered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Double-buffer the L1, L0 and UB tiles so copies overlap the Cube and Vector units.
    pub double_buffer: bool,
    /// Compute f64 arithmetic in f32 (the machine has no f64); compared with f32 tolerance.
    pub f64_as_f32: bool,
    /// Cap on the tile sizes `(m, n, k)` of the Cube (multiples of 16), e.g. to test
    /// that a smaller tile is chosen; `None`: chosen from the capacities alone.
    pub max_tile: Option<(u64, u64, u64)>,
    /// A chain of contractions as one kernel per stage with the intermediates in GM (`true`)
    /// or as one kernel keeping them on chip (`false`); `None`: whichever is estimated faster.
    pub launches: Option<bool>,
    /// Fuse statements into tiles (stages on the Vector unit, element-wise statements on the
    /// Cube's result tiles, intermediates in L1 or UB); `false`: every statement group is its
    /// own kernel, or its own stage inside a loop, and intermediates pass through GM
    /// ([`unfused`]).
    pub fuse: bool,
    /// How the middle end optimizes a kernel that the general lowering takes.
    pub pipeline: pipeline::Options,
    /// Lower the kernel from the middle end's AST ([`general`]) even where a dedicated
    /// lowering would take it (to compare the two).
    pub general: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            double_buffer: true,
            f64_as_f32: false,
            max_tile: None,
            launches: None,
            fuse: true,
            pipeline: pipeline::Options::default(),
            general: false,
        }
    }
}

/// Why a kernel could not be compiled or run for the accelerator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The machine lacks what the kernel needs (f64 or i32 arithmetic).
    #[error("not supported on npu: {0}")]
    Unsupported(String),
    /// The lowering does not handle this kernel's structure yet.
    #[error("not supported on npu yet: {0}")]
    NotYet(String),
    /// No tile sizes fit the on-chip memories.
    #[error("`{kernel}` does not fit the on-chip memories: no tiling fits ({why})")]
    NoTiling { kernel: String, why: String },
    /// More cores asked for than the machine has.
    #[error("`--npu-cores {asked}`: the machine has {machine} cores (1 to {machine})")]
    Cores { asked: usize, machine: usize },
    /// The simulator rejected the program (a bug in the lowering) or stopped on it.
    #[error("the simulator stopped: {0}")]
    Simulator(String),
    /// The simulation ran out of its instruction or cycle budget.
    #[error("the simulator stopped: {0}")]
    Budget(String),
    #[error("the reference interpreter stopped: {0}")]
    Interp(#[from] InterpError),
    /// The middle end stopped on the kernel.
    #[error("{0}")]
    Pipeline(String),
}

/// The `.npuasm` program of `program`.
///
/// Kernels of the shapes the dedicated lowerings recognise go to them; every other kernel goes
/// to the general lowering of the middle end's AST ([`general`]), and so does every kernel
/// with quasi-affine subscripts (the dedicated lowerings read subscripts as affine functions
/// of the iterators; the general one reads them from the AST, divisions included).
pub fn compile(program: &Program, target: &NpuTarget, options: &Options) -> Result<String, Error> {
    if options.general || has_divisions(program) {
        return general::compile(program, target, options);
    }
    let shaped = if options.fuse {
        lower(program, target, options)
    } else {
        unfused::compile(program, target, options)
    };
    match shaped {
        Err(e) if falls_back(program, &e) => general::compile(program, target, options),
        r => r,
    }
}

/// Whether some statement's subscripts use division variables (`A[t % 2]`).
fn has_divisions(program: &Program) -> bool {
    program.statements.iter().any(|s| s.has_divisions())
}

/// Whether a dedicated lowering's refusal leaves the kernel to the general one: anything but
/// f64 arithmetic, which no lowering has.
fn falls_back(program: &Program, e: &Error) -> bool {
    match e {
        Error::NotYet(_) | Error::NoTiling { .. } => true,
        Error::Unsupported(_) => !uses_f64(program),
        _ => false,
    }
}

fn uses_f64(program: &Program) -> bool {
    program.arrays.iter().any(|a| a.elem == ScalarType::F64)
        || program.statements.iter().any(|s| {
            s.exprs
                .iter()
                .any(|(id, _)| program.expr_type(s, id) == ScalarType::F64)
        })
}

/// The `.npuasm` program of `program` as one unit (fused as [`Options::fuse`] says inside it).
fn lower(program: &Program, target: &NpuTarget, options: &Options) -> Result<String, Error> {
    if let Some(rw) = in_place::rewrite(program)? {
        return rewritten(program, &rw, target, options);
    }
    match direct(program, target, options) {
        Ok(asm) => Ok(asm),
        Err(e) => match privatize::privatize(program)? {
            Some(rw) => rewritten(program, &rw, target, options),
            None => Err(e),
        },
    }
}

/// The shape of an array's GM parameter as `.npuasm` writes it (`1` for a scalar).
fn gm_shape(program: &Program, id: ArrayId) -> String {
    let extents = program.array_extents(id);
    if extents.is_empty() {
        return "1".to_string();
    }
    let dims: Vec<String> = extents.iter().map(|d| d.to_string()).collect();
    dims.join(", ")
}

/// The role of an output's GM parameter: `inout` where the kernel leaves some of its elements
/// unwritten (the caller's contents show through there, as in the interpreter), else `out`.
fn output_role(program: &Program, id: ArrayId) -> &'static str {
    match polyhedral::deps::writes_every_element(program, id) {
        Ok(true) => "out",
        _ => "inout",
    }
}

/// The program of a kernel taken as it is.
fn direct(program: &Program, target: &NpuTarget, options: &Options) -> Result<String, Error> {
    if function::applies(program) {
        return function::compile(&function::narrowed(program, options), target);
    }
    if vector::applies(program) {
        plan::refuse_in_place(program)?;
        return vector::compile(program, target, options);
    }
    let plan = plan::plan(program, options)?;
    cube::write(program, &plan, target, options)
}

/// The program of a rewritten kernel: the kernel that prepares its copies, its own, and the
/// one that copies results back.
fn rewritten(
    program: &Program,
    rw: &in_place::Rewrite,
    target: &NpuTarget,
    options: &Options,
) -> Result<String, Error> {
    let mut plan = plan::plan(&rw.program, options)?;
    plan.gm.extend(rw.preps.iter().map(|p| p.to));
    let cube = cube::write(&rw.program, &plan, target, options)?;
    let name = cube::kernel_name(&program.name);
    let mut text = String::new();
    if !rw.preps.is_empty() {
        text += &in_place::prep_kernel(
            &rw.program,
            &rw.preps,
            target.cores(),
            (
                &format!("{name}_prep"),
                "the operands the contraction reads, as they are before it updates them",
            ),
        );
        text += "\n";
    }
    text += &cube;
    if !rw.posts.is_empty() {
        text += "\n";
        text += &in_place::prep_kernel(
            &rw.program,
            &rw.posts,
            target.cores(),
            (
                &format!("{name}_post"),
                "the final contents of the privatized temporaries",
            ),
        );
    }
    Ok(text)
}

/// Whether the lowering takes `program` (without choosing tiles or writing code), or why not.
pub fn supported(program: &Program, options: &Options) -> Result<(), Error> {
    if options.general || has_divisions(program) {
        return general::supports(program, options.f64_as_f32);
    }
    let shaped = if options.fuse {
        lowers(program, options)
    } else {
        unfused::supported(program, options)
    };
    match shaped {
        Err(e) if falls_back(program, &e) => general::supports(program, options.f64_as_f32),
        r => r,
    }
}

/// Whether [`lower`] takes `program`, or why not.
fn lowers(program: &Program, options: &Options) -> Result<(), Error> {
    if let Some(rw) = in_place::rewrite(program)? {
        return plan::plan(&rw.program, options).map(|_| ());
    }
    let direct = if function::applies(program) {
        function::compile(&function::narrowed(program, options), &NpuTarget::default()).map(|_| ())
    } else if vector::applies(program) {
        plan::refuse_in_place(program).and_then(|_| vector::lower(program, options).map(|_| ()))
    } else {
        plan::plan(program, options).map(|_| ())
    };
    match direct {
        Ok(()) => Ok(()),
        Err(e) => match privatize::privatize(program)? {
            Some(rw) => plan::plan(&rw.program, options).map(|_| ()),
            None => Err(e),
        },
    }
}

/// The accelerator target of the table.
pub struct Npu;

/// The accelerator target's own command-line options.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct NpuArgs {
    /// npu: one buffer per tile in L1, L0 and UB instead of two (for comparison).
    #[arg(long)]
    pub no_double_buffer: bool,
    /// npu: compute f64 arithmetic in f32 (compared with f32 tolerance).
    #[arg(long)]
    pub npu_f32: bool,
    /// npu: use at most N of the machine's cores (default: all); the kernel's blocks are
    /// spread over those, fused or not, and `run` simulates it on them.
    #[arg(long, value_name = "N", value_parser = parse_cores)]
    pub npu_cores: Option<usize>,
}

fn parse_cores(text: &str) -> Result<usize, String> {
    let cores = NpuTarget::default().cores();
    match text.trim().parse::<u64>() {
        Ok(n) if (1..=cores).contains(&n) => Ok(n as usize),
        _ => Err(format!(
            "the machine has {cores} cores: N must be 1 to {cores}, found `{text}`"
        )),
    }
}

impl Npu {
    fn options(options: &TargetOptions, pipeline: &pipeline::Options) -> Options {
        let own: NpuArgs = options.own(Npu.name());
        Options {
            double_buffer: !own.no_double_buffer,
            f64_as_f32: own.npu_f32,
            fuse: !options.unfused,
            pipeline: pipeline.clone(),
            ..Options::default()
        }
    }

    /// The machine the options ask for: the default one, on at most `--npu-cores` cores.
    fn target(program: &Program, options: &TargetOptions) -> Result<NpuTarget, table::Error> {
        let own: NpuArgs = options.own(Npu.name());
        NpuTarget::default()
            .with_cores(own.npu_cores)
            .map_err(|e| Npu::error(program, e))
    }

    fn error(program: &Program, error: Error) -> table::Error {
        table::Error::target(&program.name, error)
    }
}

impl table::TargetError for Error {
    fn is_budget(&self) -> bool {
        match self {
            Error::Interp(e) => table::interp_budget(e),
            Error::Budget(_) => true,
            _ => false,
        }
    }
}

impl Target for Npu {
    fn name(&self) -> &'static str {
        "npu"
    }

    fn about(&self) -> &'static str {
        "the DaVinci-like accelerator: .npuasm run on the simulator"
    }

    fn args(&self, command: clap::Command) -> clap::Command {
        table::own_args::<NpuArgs>(command)
    }

    fn read_args(
        &self,
        matches: &clap::ArgMatches,
        options: TargetOptions,
    ) -> Result<TargetOptions, clap::Error> {
        table::read_own::<NpuArgs>(self.name(), matches, options)
    }

    fn code(&self) -> Option<&'static str> {
        Some("npuasm")
    }

    fn description(&self, options: &TargetOptions) -> Option<TargetDescription> {
        let own: NpuArgs = options.own(self.name());
        let target = NpuTarget::default();
        Some(
            target
                .with_cores(own.npu_cores)
                .unwrap_or(target)
                .description(own.npu_f32),
        )
    }

    /// The lowering reads the kernel's statements and access relations directly (its own
    /// tiling of the contraction replaces the middle end's tiles).
    fn write(
        &self,
        source: &Source,
        compiled: &Compiled,
        options: &TargetOptions,
    ) -> Result<String, table::Error> {
        let target = Npu::target(source.program, options)?;
        let options = Npu::options(options, &compiled.options);
        let narrowed = function::narrowed(source.program, &options);
        compile(&narrowed, &target, &options).map_err(|e| Npu::error(source.program, e))
    }

    fn run(
        &self,
        program: &Program,
        pipeline: &pipeline::Options,
        options: &TargetOptions,
        seed: u64,
    ) -> Result<RunOutput, table::Error> {
        let target = Npu::target(program, options)?;
        let checked = check(
            program,
            &target,
            &Npu::options(options, pipeline),
            seed,
            options.timeline,
        )
        .map_err(|e| Npu::error(program, e))?;
        let results = report::summarize_outputs(program, &checked.outputs);
        let mut json = report::to_value(program, self.name(), seed, &results);
        let mut text = checked.to_text(program);
        // The lanes of a vectorised function, where the function lowering took the kernel.
        let lanes = if function::applies(program) {
            let narrowed = function::narrowed(program, &Npu::options(options, pipeline));
            match lane_stats(&narrowed, &target, seed) {
                Err(e) if falls_back(program, &e) => None,
                r => Some(r.map_err(|e| Npu::error(program, e))?),
            }
        } else {
            None
        };
        if let Some((lanes, width)) = lanes {
            let loops = if lanes.masked_loop_iterations == 0 {
                "no divergent loop".to_string()
            } else {
                format!(
                    "{} divergent loop iterations, {:.1}% of their lanes active",
                    lanes.masked_loop_iterations,
                    100.0 * lanes.active_lane_iterations as f64
                        / (lanes.masked_loop_iterations * width) as f64
                )
            };
            text += &format!(
                "vectorised function: {} of {} skip tests skipped their block; {loops}\n",
                lanes.boscc_skips, lanes.boscc_tests,
            );
            json["vector_lanes"] = serde_json::json!({
                "boscc_tests": lanes.boscc_tests,
                "boscc_skips": lanes.boscc_skips,
                "masked_loop_iterations": lanes.masked_loop_iterations,
                "active_lane_iterations": lanes.active_lane_iterations,
                "tile_lanes": width,
            });
        }
        json["simulator"] =
            serde_json::to_value(&checked.report).unwrap_or(serde_json::Value::Null);
        report::add_comparison(&mut json, &checked.comparison);
        if let Some(t) = &checked.timeline {
            json["timeline_svg"] = serde_json::json!(t.to_svg());
        }
        Ok(RunOutput {
            text,
            json,
            matches: checked.comparison.passed(),
        })
    }

    /// With `--npu-f32`, the kernel computed in f32: the program the general lowering takes,
    /// so that `--emit tree` and `--emit ast` show what its code comes from.
    fn program_for(
        &self,
        program: &Program,
        options: &TargetOptions,
    ) -> Result<Program, table::Error> {
        let own: NpuArgs = options.own(self.name());
        Ok(if own.npu_f32 {
            crate::narrow::narrow_f64(program)
        } else {
            program.clone()
        })
    }

    fn supports(&self, program: &Program, options: &TargetOptions) -> Result<(), table::Error> {
        Npu::target(program, options)?;
        supported(
            program,
            &Npu::options(options, &pipeline::Options::default()),
        )
        .map_err(|e| Npu::error(program, e))
    }
}
