//! The `polyfuse` command line.
//!
//! Every subcommand that reads a kernel takes the same kernel options (`--size`, `-D`, `-I`);
//! the file's extension picks the language (`.pf` kernel language, `.c` SCoP). Errors in the
//! user's input are printed as located diagnostics and exit with status 1.

mod report;

use std::path::PathBuf;
use std::process::ExitCode;

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
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    kernel: KernelArgs,
    /// What to print: the kernel as read (`program`) or its dependences (`deps`).
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
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Target {
    /// The reference interpreter.
    Interp,
    /// OpenMP C built with the system C compiler, checked against the interpreter.
    Cpu,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    kernel: KernelArgs,
    /// Where to run the kernel.
    #[arg(long, value_enum, default_value = "interp")]
    target: Target,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the results as JSON (format documented in the README).
    #[arg(long)]
    json: bool,
    /// OpenMP threads for `--target cpu` (default: every core).
    #[arg(long)]
    threads: Option<usize>,
}

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

/// A failure already explained to the user; the message is printed to stderr.
struct Failure(String);

impl From<frontend::LoadError> for Failure {
    fn from(e: frontend::LoadError) -> Failure {
        use std::io::IsTerminal;
        Failure(e.render(std::io::stderr().is_terminal()))
    }
}

fn load(args: &KernelArgs) -> Result<polyhedral::Program, Failure> {
    let options = frontend::Options {
        sizes: args.sizes.clone(),
        defines: args.defines.clone(),
        include_dirs: args.include_dirs.clone(),
    };
    Ok(frontend::load(&args.file, &options)?)
}

fn original_tree(
    program: &polyhedral::Program,
) -> Result<polyhedral::schedule::ScheduleTree, Failure> {
    polyhedral::schedule_tree_of(program).map_err(|e| Failure(format!("error: {e}\n")))
}

/// The loops of the original order, generated from its schedule tree.
fn original_loops(program: &polyhedral::Program) -> Result<polyhedral::ast::Ast, Failure> {
    let tree = original_tree(program)?;
    polyhedral::generate_ast(program, &tree).map_err(|e| Failure(format!("error: {e}\n")))
}

fn check(args: &CheckArgs) -> Result<(), Failure> {
    let program = load(&args.kernel)?;
    match args.emit {
        CheckEmit::Program => print!("{program}"),
        CheckEmit::Deps => {
            let deps = polyhedral::deps::compute_dependences(&program)
                .map_err(|e| Failure(format!("error: {e}\n")))?;
            print!("{}", deps.display(&program));
        }
        CheckEmit::Tree => print!("{}", original_tree(&program)?.display(&program)),
        CheckEmit::Ast => print!("{}", original_loops(&program)?.display(&program)),
    }
    Ok(())
}

fn run(args: &RunArgs) -> Result<(), Failure> {
    let program = load(&args.kernel)?;
    match args.target {
        Target::Interp => {
            let mut memory = polyhedral::interp::random_inputs(&program, args.seed);
            let start = std::time::Instant::now();
            polyhedral::interp::run(&program, &mut memory)
                .map_err(|e| Failure(format!("error: the interpreter stopped: {e}\n")))?;
            let elapsed = start.elapsed();
            let results = report::summarize(&program, &memory);
            if args.json {
                println!(
                    "{}",
                    report::to_json(&program, "interp", args.seed, &results)
                );
            } else {
                print!(
                    "{}",
                    report::to_text(&program, "interp", args.seed, &results, elapsed)
                );
            }
        }
        Target::Cpu => {
            if args.json {
                return Err(Failure(
                    "error: --json is not supported yet for --target cpu\n".into(),
                ));
            }
            let ast = original_loops(&program)?;
            let options = backends::cpu::Options {
                threads: args.threads,
                ..Default::default()
            };
            let report = backends::cpu::check(&program, &ast, &options, args.seed)
                .map_err(|e| Failure(format!("error: {e}\n")))?;
            print!("{}", report.to_text(&program));
            if !report.comparison.passed() {
                return Err(Failure(
                    "error: the cpu outputs differ from the interpreter's\n".into(),
                ));
            }
        }
    }
    Ok(())
}

fn simulate(args: &SimArgs) -> Result<(), Failure> {
    let out = sim::run_command_on(
        args.machine.as_deref(),
        &args.file,
        args.inputs.as_deref(),
        args.json,
        args.timeline.as_deref(),
    )
    .map_err(Failure)?;
    print!("{out}");
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Check(args) => check(args),
        Command::Run(args) => run(args),
        Command::Sim(args) => simulate(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(message)) => {
            eprint!("{message}");
            if !message.ends_with('\n') {
                eprintln!();
            }
            ExitCode::from(1)
        }
    }
}
