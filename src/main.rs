//! The `polyfuse` command line.
//!
//! Every subcommand that reads a kernel takes the same kernel options (`--size`, `-D`, `-I`);
//! the file's extension picks the language (`.pf` kernel language, `.c` SCoP). Errors in the
//! user's input are printed as located diagnostics and exit with status 1; a run that a budget
//! ended (the interpreter's loop limit, the simulator's instruction or cycle budget) exits with
//! status 3.

mod pipe;

/// The pipeline's sets, relations and cache-model distributions are many small, short-lived
/// allocations; mimalloc serves them faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use backends::target::{self, Emit, Source, Target, TargetOptions, TARGETS};
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "polyfuse",
    version,
    about = "A polyhedral compiler for tensor kernels",
    long_about = "polyfuse compiles a tensor kernel, written in the .pf kernel language or as a C \
                  SCoP, through one polyhedral middle end to OpenMP C, WGSL and a DaVinci-like \
                  accelerator, and checks every result against a reference interpreter."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and check a kernel; print its arrays, statements, domains and accesses.
    Check(CheckArgs),
    /// Optimize a kernel for a target and write the generated code (or a stage of the
    /// pipeline: dependences, schedule tree, loop AST).
    Compile(CompileArgs),
    /// Run a kernel on deterministic random inputs and print a checksum and samples per output.
    Run(RunArgs),
    /// Simulate an accelerator program (`.npuasm`): cycles, pipe utilization, buffer usage.
    Sim(SimArgs),
}

#[derive(Args)]
struct SimArgs {
    /// The accelerator program.
    file: PathBuf,
    /// Read kernel parameters from DIR (`NAME.bin`, raw little-endian, or `NAME.txt`) instead
    /// of generating random inputs.
    #[arg(long, value_name = "DIR")]
    inputs: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Write an SVG Gantt chart of the pipes with buffer occupancy below it.
    #[arg(long, value_name = "OUT.svg")]
    timeline: Option<PathBuf>,
    /// A machine description file instead of the built-in 910-like core.
    #[arg(long, value_name = "FILE")]
    machine: Option<PathBuf>,
    /// Stop with an error (exit status 3) after this many executed instructions; 0: no limit.
    #[arg(long, value_name = "N", default_value_t = sim::SimOptions::MAX_INSTRUCTIONS)]
    max_instructions: u64,
    /// Stop with an error (exit status 3) once a core's clock passes this many cycles; 0: no
    /// limit.
    #[arg(long, value_name = "N", default_value_t = sim::SimOptions::MAX_CYCLES)]
    max_cycles: u64,
}

/// How a kernel is read: sizes, macros and include folders.
#[derive(Args)]
struct KernelArgs {
    /// The kernel: a `.pf` file or a C file with a `#pragma scop` region.
    file: PathBuf,
    /// Override a size: `--size M=1024` (repeatable).
    #[arg(long = "size", value_name = "NAME=VALUE", value_parser = parse_size)]
    sizes: Vec<(String, i64)>,
    /// Define a macro for C input (`-D N=1000`, `-D LARGE_DATASET`); a definition of a kernel
    /// size also overrides it for `.pf` input.
    #[arg(short = 'D', value_name = "NAME[=VALUE]", value_parser = parse_define)]
    defines: Vec<(String, Option<String>)>,
    /// Look for quoted `#include`s in DIR too (repeatable).
    #[arg(short = 'I', value_name = "DIR")]
    include_dirs: Vec<PathBuf>,
    /// The extents of an array a C SCoP uses without declaring it: `--extent A=100x200`
    /// (repeatable); without it they are inferred from the accesses at the given sizes.
    #[arg(long = "extent", value_name = "NAME=AxB", value_parser = parse_extent)]
    extents: Vec<(String, Vec<i64>)>,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    kernel: KernelArgs,
    /// What to print: the kernel as read (`program`), its dependences (`deps`), the schedule
    /// tree of its original order (`tree`), the loops generated from it (`ast`), or the
    /// vectorised forms of the scalar functions it calls (`vector`).
    #[arg(long, value_enum, default_value = "program")]
    emit: CheckEmit,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CheckEmit {
    /// Arrays, statements, domains, schedules and accesses.
    Program,
    /// Memory-based and value-based dependences, live-in reads and live-out writes.
    Deps,
    /// The schedule tree of the original order.
    Tree,
    /// The loop AST generated from that tree.
    Ast,
    /// Function-level vectorization of the statements that call scalar functions (over their
    /// innermost loop): per function variant, the class of every parameter and value
    /// (uniform, linear, varying) and the masked form.
    Vector,
}

/// The `--target` values of `compile`: every target of the table that generates code.
fn code_targets() -> PossibleValuesParser {
    PossibleValuesParser::new(
        TARGETS
            .iter()
            .filter(|t| t.code().is_some())
            .map(|t| PossibleValue::new(t.name()).help(t.about())),
    )
}

/// The first target of the table that generates code: what `compile` targets by default.
fn default_code_target() -> &'static str {
    TARGETS
        .iter()
        .find(|t| t.code().is_some())
        .map_or("", |t| t.name())
}

/// The `--target` values of `run`: every target of the table, and `all`.
fn run_targets() -> PossibleValuesParser {
    PossibleValuesParser::new(
        TARGETS
            .iter()
            .map(|t| PossibleValue::new(t.name()).help(t.about()))
            .chain([PossibleValue::new("all").help("every target, one after the other")]),
    )
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FuseArg {
    /// Distribute every strongly connected component of the dependence graph. (npu: every
    /// statement group is its own kernel and intermediates pass through GM.)
    Nofuse,
    /// Pluto's default: distribute statements of different loop depth first.
    Smartfuse,
    /// Fuse wherever a legal schedule allows it.
    Maxfuse,
    /// Schedule with smartfuse and tile, then pull into each tile of the statements that write
    /// the outputs the producer instances that tile reads (extension nodes; the producers'
    /// own subtrees are marked `skipped`); producers that cannot be fused so stay where
    /// smartfuse put them, with an `unfused` mark saying why. (The npu target fuses stages
    /// into tiles by its own rules under every strategy but nofuse.)
    #[value(name = "post-tiling")]
    PostTiling,
}

/// How the optimizing pipeline runs.
#[derive(Args)]
struct OptimizeArgs {
    /// Tile sizes of the deepest permutable band, outermost first (`--tile 32,32,32`);
    /// default: sized by the target's caches.
    #[arg(
        long,
        value_name = "A,B,…",
        value_delimiter = ',',
        value_parser = parse_tile,
        conflicts_with = "no_tile"
    )]
    tile: Option<Vec<i64>>,
    /// Do not tile.
    #[arg(long)]
    no_tile: bool,
    /// The fusion strategy of the scheduler.
    #[arg(long, value_enum, default_value = "smartfuse")]
    fuse: FuseArg,
    /// OpenMP threads of the generated code (default: every core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: Option<u32>,
    /// CPU: do not pack arrays into contiguous buffers.
    #[arg(long)]
    no_pack: bool,
    /// CPU: do not unroll and jam point loops into register tiles (nor rows into innermost
    /// reductions).
    #[arg(long)]
    no_register_tile: bool,
    /// CPU: keep statements that pass values between iterations of an innermost loop in one
    /// loop (by default each gets its own innermost loop where that is legal).
    #[arg(long)]
    no_fission: bool,
    /// CPU: keep the statements of a tile's point loops in one loop nest even where they walk
    /// memory with stride one along different loops (by default each group gets its own loop
    /// nest inside the tile, with its stride-one loop innermost, where that is legal).
    #[arg(long)]
    no_distribute: bool,
}

impl OptimizeArgs {
    fn pipeline(&self) -> polyhedral::pipeline::Options {
        use polyhedral::passes::tile_size::TileSizes;
        use polyhedral::schedule::pluto::Fusion;
        let tiling = match (&self.tile, self.no_tile) {
            (_, true) => TileSizes::Off,
            (Some(sizes), false) => TileSizes::Fixed(sizes.clone()),
            (None, false) => TileSizes::FromTarget,
        };
        polyhedral::pipeline::Options {
            fuse: match self.fuse {
                FuseArg::Nofuse => Fusion::NoFuse,
                FuseArg::Smartfuse => Fusion::SmartFuse,
                FuseArg::Maxfuse => Fusion::MaxFuse,
                FuseArg::PostTiling => Fusion::SmartFuse,
            },
            post_tiling_fusion: self.fuse == FuseArg::PostTiling,
            pack: !self.no_pack,
            register_tile: !self.no_register_tile,
            fission: !self.no_fission,
            distribute: !self.no_distribute,
            tiling,
            ..Default::default()
        }
    }

    /// The options every target gets, without the targets' own ([`target::read_args`] adds
    /// them).
    fn target(&self) -> TargetOptions {
        let mut options = TargetOptions::default();
        options.threads = self.threads.map(|n| n as usize);
        options.unfused = self.fuse == FuseArg::Nofuse;
        options
    }
}

/// The help of `--emit`, with the stages of the pipeline.
fn emit_help() -> String {
    let stages: Vec<&str> = polyhedral::passes::stages().collect();
    format!(
        "What to write: the target's code (`c` for cpu; the default), `tree` (the optimized \
         schedule tree), `tree=after:STAGE` (the tree after one stage: {}), `ast` (the loop \
         AST), `deps` (the dependences the scheduler worked from), `program` (the program they \
         are for: arrays the pipeline expanded for parallelism appear expanded) or \
         `cache-model` (predicted cache misses per tile band and cache level, for the chosen \
         tile sizes and the runner-up)",
        stages.join(", ")
    )
}

#[derive(Args)]
struct CompileArgs {
    #[command(flatten)]
    kernel: KernelArgs,
    /// The target to generate code for.
    #[arg(long, default_value = default_code_target(), value_parser = code_targets())]
    target: String,
    /// Where to write the output (default: standard output).
    #[arg(short = 'o', value_name = "OUT")]
    output: Option<PathBuf>,
    #[arg(long, value_name = "WHAT", help = emit_help())]
    emit: Option<String>,
    #[command(flatten)]
    optimize: OptimizeArgs,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    kernel: KernelArgs,
    /// Where to run the kernel.
    #[arg(long, default_value = "interp", value_parser = run_targets())]
    target: String,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the results as JSON (format documented in docs/usage.md).
    #[arg(long)]
    json: bool,
    /// npu: write an SVG Gantt chart of the accelerator's pipes (core 0).
    #[arg(long, value_name = "OUT.svg")]
    timeline: Option<PathBuf>,
    #[command(flatten)]
    optimize: OptimizeArgs,
}

/// One tile size: a positive integer.
fn parse_tile(text: &str) -> Result<i64, String> {
    match text.trim().parse::<i64>() {
        Ok(t) if t >= 1 => Ok(t),
        _ => Err(format!(
            "tile sizes must be positive integers, found `{text}`"
        )),
    }
}

/// A number of the accelerator's cores: 1 to the machine's.
fn parse_size(text: &str) -> Result<(String, i64), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, found `{text}`"))?;
    let value = value
        .trim()
        .parse::<i64>()
        .map_err(|_| format!("the size `{name}` must be an integer, found `{value}`"))?;
    if value < 1 {
        return Err(format!(
            "the size `{name}` must be at least 1, found {value}"
        ));
    }
    Ok((name.trim().to_string(), value))
}

/// `A=100x200`: an array's name and its extents, outermost first.
fn parse_extent(text: &str) -> Result<(String, Vec<i64>), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=AxB, found `{text}`"))?;
    let extents = value
        .split('x')
        .map(|d| match d.trim().parse::<i64>() {
            Ok(n) if (1..=i64::from(i32::MAX)).contains(&n) => Ok(n),
            _ => Err(format!(
                "the extents of `{name}` must be positive integers joined by `x`, found `{value}`"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((name.trim().to_string(), extents))
}

fn parse_define(text: &str) -> Result<(String, Option<String>), String> {
    let (name, value) = match text.split_once('=') {
        Some((n, v)) => (n, Some(v.to_string())),
        None => (text, None),
    };
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!("`{name}` is not a macro name"));
    }
    Ok((name.to_string(), value))
}

/// A failure already explained to the user; the message is printed to stderr, and the process
/// exits with `status`.
struct Failure {
    message: String,
    status: u8,
}

/// The exit status of every failure but a budget's: bad input, a refusal, a mismatch.
const STATUS_FAILURE: u8 = 1;
/// The exit status of a run that a budget ended: the interpreter's loop limit, the simulator's
/// instruction or cycle budget.
const STATUS_BUDGET: u8 = 3;

impl Failure {
    fn new(message: String) -> Failure {
        Failure {
            message,
            status: STATUS_FAILURE,
        }
    }
}

impl From<frontend::LoadError> for Failure {
    fn from(e: frontend::LoadError) -> Failure {
        use std::io::IsTerminal;
        Failure::new(e.render(std::io::stderr().is_terminal()))
    }
}

fn load(args: &KernelArgs) -> Result<polyhedral::Program, Failure> {
    load_with_notes(args).map(|(p, _)| p)
}

/// The kernel, with the front end's notes on what it inferred.
fn load_with_notes(args: &KernelArgs) -> Result<(polyhedral::Program, Vec<String>), Failure> {
    let options = frontend::Options {
        sizes: args.sizes.clone(),
        defines: args.defines.clone(),
        include_dirs: args.include_dirs.clone(),
        extents: args.extents.clone(),
    };
    Ok(frontend::load_with_notes(&args.file, &options)?)
}

/// `check`'s program listing followed by what the front end inferred (index ranges, undeclared
/// data and its extents).
fn print_program(program: &polyhedral::Program, notes: &[String]) {
    print!("{program}");
    let counts: Vec<String> = (0..program.statements.len())
        .map(|k| {
            let id = polyhedral::program::StmtId(k as u32);
            let n = program
                .instances(id)
                .map_or("too many to count".to_string(), |n| n.to_string());
            format!("{} {n}", program.statements[k].name)
        })
        .collect();
    if !counts.is_empty() {
        println!("instances: {}", counts.join(", "));
    }
    if !notes.is_empty() {
        println!("inferred:");
        for n in notes {
            println!("  {n}");
        }
    }
}

fn original_tree(
    program: &polyhedral::Program,
) -> Result<polyhedral::schedule::ScheduleTree, Failure> {
    polyhedral::schedule_tree_of(program).map_err(|e| Failure::new(format!("error: {e}\n")))
}

/// The loops of the original order, generated from its schedule tree.
fn original_loops(program: &polyhedral::Program) -> Result<polyhedral::ast::Ast, Failure> {
    let tree = original_tree(program)?;
    polyhedral::generate_ast(program, &tree).map_err(|e| Failure::new(format!("error: {e}\n")))
}

/// The masked forms run lane by lane on random inputs (8 lanes, every statement that calls a
/// function and reads only inputs): how often a branch on superword condition skipped its
/// block, and how full the lanes of divergent loops were.
fn print_lane_statistics(program: &polyhedral::Program) {
    use polyhedral::vectorize::exec::{run_statement, LaneStats};
    const LANES: usize = 8;
    let inputs = polyhedral::interp::random_inputs(program, 1);
    let mut stats = LaneStats::default();
    for k in 0..program.statements.len() {
        let id = polyhedral::program::StmtId(k as u32);
        let s = &program.statements[k];
        let reads_inputs = s
            .reads
            .iter()
            .all(|r| program.array(r.array).role == polyhedral::program::ArrayRole::Input);
        if !polyhedral::vectorize::calls_function(program, id) || !reads_inputs {
            continue;
        }
        if let Err(e) = run_statement(program, &inputs, id, LANES, &mut stats) {
            println!("\nlanes: not run ({e})");
            return;
        }
    }
    let utilisation = if stats.masked_loop_iterations == 0 {
        "no divergent loop".to_string()
    } else {
        format!(
            "{:.1}% of lanes active in divergent loop iterations",
            100.0 * stats.active_lane_iterations as f64
                / (stats.masked_loop_iterations as f64 * LANES as f64)
        )
    };
    println!(
        "\nlanes on random inputs ({LANES} lanes): {} of {} skip tests skipped their block; {utilisation}",
        stats.boscc_skips, stats.boscc_tests
    );
}

fn check(args: &CheckArgs) -> Result<(), Failure> {
    let (program, notes) = load_with_notes(&args.kernel)?;
    match args.emit {
        CheckEmit::Program => print_program(&program, &notes),
        CheckEmit::Deps => {
            let deps = polyhedral::deps::compute_dependences(&program)
                .map_err(|e| Failure::new(format!("error: {e}\n")))?;
            print!("{}", deps.display(&program));
        }
        CheckEmit::Tree => print!("{}", original_tree(&program)?.display(&program)),
        CheckEmit::Ast => print!("{}", original_loops(&program)?.display(&program)),
        CheckEmit::Vector => {
            let vp = polyhedral::vectorize::VectorProgram::for_program(&program);
            if vp.variants.is_empty() {
                println!("no statement calls a scalar function");
            } else {
                let note = |v| Some(backends::cpu::profit::note(&vp, v));
                print!("{}", vp.display(&program, &note));
                print_lane_statistics(&program);
            }
        }
    }
    Ok(())
}

impl From<target::Error> for Failure {
    fn from(e: target::Error) -> Failure {
        Failure {
            status: if e.is_budget() {
                STATUS_BUDGET
            } else {
                STATUS_FAILURE
            },
            message: format!("error: {e}\n"),
        }
    }
}

fn compile(args: &CompileArgs, matches: &clap::ArgMatches) -> Result<(), Failure> {
    let program = load(&args.kernel)?;
    let target = target::find(&args.target)?;
    let emit = match &args.emit {
        Some(text) => Emit::parse(text, target)?,
        None => Emit::Code,
    };
    let text = match (&emit, &program.source) {
        (Emit::Code, polyhedral::program::SourceKind::CScop { .. }) => {
            let bytes = std::fs::read(&args.kernel.file).map_err(|e| {
                Failure::new(format!(
                    "error: cannot read {}: {e}\n",
                    args.kernel.file.display()
                ))
            })?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
        _ => None,
    };
    let source = Source {
        program: &program,
        text: text.as_deref(),
    };
    let out = target::emit(
        target,
        &source,
        &emit,
        &args.optimize.pipeline(),
        &target::read_args(TARGETS, matches, args.optimize.target()).map_err(usage)?,
    )?;
    match &args.output {
        Some(path) => std::fs::write(path, out)
            .map_err(|e| Failure::new(format!("error: cannot write {}: {e}\n", path.display())))?,
        None => print!("{out}"),
    }
    Ok(())
}

/// This machine's memory in bytes, where the system says (`/proc/meminfo`).
fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Refuses a kernel whose arrays the interpreter could not hold in this machine's memory (sizes
/// far too large), rather than failing to allocate them.
fn check_memory(program: &polyhedral::Program) -> Result<(), Failure> {
    let bytes = polyhedral::interp::memory_bytes(program);
    let limit = physical_memory().unwrap_or(u64::MAX);
    match bytes {
        Some(b) if b <= limit => Ok(()),
        _ => Err(Failure::new(format!(
            "error: {}: does not fit in memory: its arrays take {} bytes in the interpreter, \
             more than the {limit} bytes of this machine's memory; run it with smaller `--size` \
             values\n",
            program.name,
            bytes.map_or_else(|| "more than 2^64".to_string(), |b| b.to_string()),
        ))),
    }
}

fn run(args: &RunArgs, matches: &clap::ArgMatches) -> Result<(), Failure> {
    let program = load(&args.kernel)?;
    check_memory(&program)?;
    let mut options = target::read_args(TARGETS, matches, args.optimize.target()).map_err(usage)?;
    options.progress = !args.json;
    options.timeline = args.timeline.is_some();
    let targets: Vec<&dyn Target> = if args.target == "all" {
        TARGETS
            .iter()
            .copied()
            .filter(|t| t.available().is_ok() && t.supports(&program, &options).is_ok())
            .collect()
    } else {
        vec![target::find(&args.target)?]
    };
    let pipeline = args.optimize.pipeline();
    let mut mismatch = Vec::new();
    let mut documents = Vec::new();
    for (k, target) in targets.iter().enumerate() {
        if k > 0 && !args.json {
            println!();
        }
        target.available()?;
        let mut out = target.run(&program, &pipeline, &options, args.seed)?;
        if let Some(svg) = out
            .json
            .as_object_mut()
            .and_then(|o| o.remove("timeline_svg"))
        {
            if let (Some(path), Some(svg)) = (&args.timeline, svg.as_str()) {
                std::fs::write(path, svg).map_err(|e| {
                    Failure::new(format!("error: cannot write {}: {e}\n", path.display()))
                })?;
            }
        }
        if !out.matches {
            mismatch.push(target.name());
        }
        if !args.json {
            print!("{}", out.text);
        }
        documents.push(out.json);
    }
    if args.json {
        let doc = if documents.len() == 1 {
            documents.pop().unwrap_or_default()
        } else {
            serde_json::Value::Array(documents)
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("JSON values always serialise")
        );
    }
    if mismatch.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(format!(
            "error: the {} outputs differ from the interpreter's\n",
            mismatch.join(", ")
        )))
    }
}

fn simulate(args: &SimArgs) -> Result<(), Failure> {
    let limits = sim::SimOptions {
        max_instructions: args.max_instructions,
        max_cycles: args.max_cycles,
        ..sim::SimOptions::default()
    };
    let out = sim::run_command_on(
        args.machine.as_deref(),
        &args.file,
        args.inputs.as_deref(),
        args.json,
        args.timeline.as_deref(),
        &limits,
    )
    .map_err(|e| Failure {
        message: e.message,
        status: if e.budget {
            STATUS_BUDGET
        } else {
            STATUS_FAILURE
        },
    })?;
    print!("{out}");
    Ok(())
}

/// A target's own arguments that do not read as its options.
fn usage(e: clap::Error) -> Failure {
    Failure::new(format!("error: {}", e.kind()))
}

/// What the command line's parser found wrong, as one line with status 1 (help and version
/// are printed as asked, with status 0).
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => e.exit(),
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprintln!(
                "error: a command is needed: check, compile, run or sim (see `polyfuse --help`)"
            );
            ExitCode::from(1)
        }
        _ => {
            // clap's first paragraph says what and where (the option and its value); the rest
            // is usage and tips.
            let text = e.render().to_string();
            let first: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            eprintln!("{} (see `polyfuse --help`)", first.join(" "));
            ExitCode::from(1)
        }
    }
}

/// The command line: [`Cli`] with every target's own arguments on `compile` and `run`.
fn command() -> clap::Command {
    use clap::CommandFactory;
    Cli::command()
        .mut_subcommand("compile", |c| target::with_args(c, TARGETS))
        .mut_subcommand("run", |c| target::with_args(c, TARGETS))
}

fn main() -> ExitCode {
    use clap::FromArgMatches;
    pipe::restore_default_sigpipe();
    let matches = match command().try_get_matches() {
        Ok(matches) => matches,
        Err(e) => return usage_error(e),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let (_, sub) = matches
        .subcommand()
        .expect("clap requires a subcommand before parsing succeeds");
    let result = match &cli.command {
        Command::Check(args) => check(args),
        Command::Compile(args) => compile(args, sub),
        Command::Run(args) => run(args, sub),
        Command::Sim(args) => simulate(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure { message, status }) => {
            eprint!("{message}");
            if !message.ends_with('\n') {
                eprintln!();
            }
            ExitCode::from(status)
        }
    }
}
