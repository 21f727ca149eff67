//! A target defined entirely in this file — a description, a command-line flag of its own and
//! a writer that prints the loop AST — driven through the same command line, pipeline and
//! drivers as the targets of the table.

use backends::compare::compare;
use backends::target::{self, Emit, RunOutput, Source, Target, TargetOptions};
use polyhedral::ast::run_ast;
use polyhedral::interp::{random_inputs, run};
use polyhedral::pipeline::{self, Compiled};
use polyhedral::program::{Program, ScalarType};
use polyhedral::target::{MemoryKind, MemoryTree, ParallelLevel, TargetDescription};
use snapshots::{kernels, load_small};

/// A machine with a scratchpad per core (4 KiB unless `--toy-scratchpad` says otherwise) and
/// four cores; its "code" is the loop AST.
struct Toy;

/// The toy target's own command-line options.
#[derive(clap::Args, Clone, Debug, Default)]
struct ToyArgs {
    /// toy: the bytes of each core's scratchpad (default 4096).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(256..))]
    toy_scratchpad: Option<u64>,
}

impl Target for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn args(&self, command: clap::Command) -> clap::Command {
        target::own_args::<ToyArgs>(command)
    }

    fn read_args(
        &self,
        matches: &clap::ArgMatches,
        options: TargetOptions,
    ) -> Result<TargetOptions, clap::Error> {
        target::read_own::<ToyArgs>(self.name(), matches, options)
    }

    fn about(&self) -> &'static str {
        "prints the loop AST"
    }

    fn code(&self) -> Option<&'static str> {
        Some("loops")
    }

    fn description(&self, options: &TargetOptions) -> Option<TargetDescription> {
        let own: ToyArgs = options.own(self.name());
        let mut memory = MemoryTree::global("global", 1 << 24);
        let bytes = own.toy_scratchpad.unwrap_or(4096);
        memory.add("local", MemoryKind::Scratchpad, bytes, memory.root());
        Some(TargetDescription {
            name: "toy".into(),
            memory,
            parallel: vec![ParallelLevel::Cores { count: 4 }],
            vector: None,
            tlb: None,
            element_types: vec![ScalarType::F32, ScalarType::F64, ScalarType::I32],
        })
    }

    fn write(
        &self,
        _: &Source,
        compiled: &Compiled,
        _: &TargetOptions,
    ) -> Result<String, target::Error> {
        Ok(format!(
            "// toy code\n{}",
            compiled.ast.display(&compiled.program)
        ))
    }

    fn run(
        &self,
        program: &Program,
        pipeline: &pipeline::Options,
        options: &TargetOptions,
        seed: u64,
    ) -> Result<RunOutput, target::Error> {
        let compiled = target::compile(self, program, pipeline, options)?;
        let mut expected = random_inputs(program, seed);
        run(program, &mut expected)?;
        let mut actual = random_inputs(&compiled.program, seed);
        run_ast(&compiled.program, &compiled.ast, &mut actual)?;
        let outputs: Vec<_> = program
            .arrays
            .iter()
            .enumerate()
            .filter(|(_, a)| a.role.is_live_out())
            .map(|(k, _)| (k, actual.arrays[k].clone()))
            .map(|(k, v)| (polyhedral::program::ArrayId(k as u32), v))
            .collect();
        let comparison = compare(program, &expected, &outputs);
        Ok(RunOutput {
            text: comparison.to_text(program),
            json: serde_json::Value::Null,
            matches: comparison.passed(),
        })
    }
}

#[test]
fn a_target_outside_the_table_compiles_and_runs_kernels() {
    let options = TargetOptions::default();
    let pipeline = pipeline::Options::default();
    let mut ran = 0;
    for path in kernels() {
        let program = load_small(&path);
        let what = path.display();
        let source = Source {
            program: &program,
            text: None,
        };
        let emit = Emit::parse("loops", &Toy).unwrap();
        let supported = program.arrays.iter().all(|a| a.elem != ScalarType::F16);
        match target::emit(&Toy, &source, &emit, &pipeline, &options) {
            Ok(code) => {
                assert!(supported, "{what}: f16 is not a toy element type");
                assert!(code.starts_with("// toy code\n"), "{what}");
                let out = Toy.run(&program, &pipeline, &options, 3).unwrap();
                assert!(out.matches, "{what}:\n{}", out.text);
                ran += 1;
            }
            Err(e) => {
                assert!(!supported, "{what}: {e}");
                assert!(e.to_string().contains("not supported on toy: f16"), "{e}");
            }
        }
    }
    assert!(ran > 10);
    // The tree after each stage that ran, by name; stages that did not run are refused.
    let program = load_small(&kernels()[0]);
    let source = Source {
        program: &program,
        text: None,
    };
    let emit = Emit::parse("tree=after:tile", &Toy).unwrap();
    let tree = target::emit(&Toy, &source, &emit, &pipeline, &options).unwrap();
    assert!(
        tree.starts_with("domain:") || tree.contains("band"),
        "{tree}"
    );
    assert!(Emit::parse("tree=after:intra-tile", &Toy).is_ok());
    assert!(target::emit(
        &Toy,
        &source,
        &Emit::parse("tree=after:intra-tile", &Toy).unwrap(),
        &pipeline,
        &options
    )
    .is_err());
    assert!(Emit::parse("c", &Toy).is_err());
    assert!(Emit::parse("tree=after:nothing", &Toy).is_err());
}

/// The toy's flag goes on the command line beside the table's targets' flags, its value
/// reaches its description, and a bad value is the command line's error.
#[test]
fn a_target_outside_the_table_brings_its_own_flag() {
    let command = |c: clap::Command| target::with_args(c, &[&Toy, backends::target::TARGETS[1]]);
    let parse = |words: &[&str]| {
        let matches = command(clap::Command::new("compile")).try_get_matches_from(words)?;
        target::read_args(&[&Toy], &matches, TargetOptions::default())
    };
    let small = parse(&["compile"]).unwrap();
    let large = parse(&["compile", "--toy-scratchpad", "65536", "--cpu", "x86-64-v4"]).unwrap();
    let bytes = |o: &TargetOptions| {
        let d = Toy.description(o).unwrap();
        let local = d.memory.children(d.memory.root()).next().unwrap();
        d.memory.node(local).bytes
    };
    assert_eq!(bytes(&small), 4096);
    assert_eq!(bytes(&large), 65536);
    let e = parse(&["compile", "--toy-scratchpad", "12"]).unwrap_err();
    assert!(e.to_string().contains("--toy-scratchpad"), "{e}");
    assert!(parse(&["compile", "--toy-cores", "2"]).is_err());
    let help = command(clap::Command::new("compile"))
        .render_help()
        .to_string();
    assert!(
        help.contains("toy: the bytes of each core's scratchpad"),
        "{help}"
    );
    assert!(help.contains("CPU: the CPU to optimize for"), "{help}");
}
