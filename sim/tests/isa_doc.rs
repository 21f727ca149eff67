//! Every example in ISA.md parses, prints back to an equal program, assembles and runs; and
//! every mnemonic of the instruction set appears in at least one example. The instruction
//! table also checks the text: every keyword argument is mentioned, and the pipe table names
//! the pipe of every copy and of the cube.

use sim::isa::{Operand, Pipe, PipeRule, Stmt, TimingClass};
use sim::{Machine, SimOptions};

fn blocks() -> Vec<(usize, String)> {
    let text = include_str!("../ISA.md");
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match (&mut current, line.trim_end()) {
            (None, "```npuasm") => current = Some((n + 2, String::new())),
            (Some(_), "```") => out.extend(current.take()),
            (Some((_, body)), l) => {
                body.push_str(l);
                body.push('\n');
            }
            _ => {}
        }
    }
    out
}

#[test]
fn every_isa_example_runs() {
    let blocks = blocks();
    assert!(blocks.len() >= 16, "{} examples", blocks.len());
    for (line, text) in &blocks {
        let name = format!("ISA.md:{line}");
        // Files of several kernels run them one after another.
        let kernels = sim::load_all(&name, text, &Machine::default())
            .unwrap_or_else(|e| panic!("{}", e.render(false)));
        for k in &kernels {
            let p = k.program();
            assert_eq!(&sim::parse(&name, &sim::print(p)).expect("reparses"), p);
        }
        let inputs = sim::random_inputs_all(&kernels, 3);
        sim::simulate_all(&kernels, &inputs, &SimOptions::default())
            .unwrap_or_else(|e| panic!("{}", e.render(false)));
    }
}

#[test]
fn every_mnemonic_has_an_example() {
    let all: String = blocks().into_iter().map(|(_, b)| b).collect();
    let words: Vec<&str> = all
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let mnemonics = [
        "copy",
        "load2d",
        "img2col",
        "load3d",
        "mmad",
        "copy_cc_to_ub",
        "copy_pad",
        "copy_ub_to_cc",
        "vadd",
        "vsub",
        "vmul",
        "vdiv",
        "vmax",
        "vmin",
        "vand",
        "vor",
        "vadds",
        "vmuls",
        "vmaxs",
        "vexp",
        "vln",
        "vrec",
        "vrsqrt",
        "vsqrt",
        "vabs",
        "vrelu",
        "vdup",
        "vcmp",
        "vsel",
        "vcadd",
        "vcmax",
        "vcmin",
        "vbrcb",
        "vconv",
        "set_vector_mask",
        "set_flag",
        "wait_flag",
        "pipe_barrier",
        "sync_all",
        "mov",
        "add",
        "sub",
        "mul",
        "div",
        "min",
        "max",
        "ld",
        "st",
        "count",
        "tally",
        "for",
        "if",
        "else",
    ];
    for m in mnemonics {
        assert!(words.contains(&m), "no ISA.md example uses `{m}`");
    }
}

/// Every instruction of the examples, in program order.
fn example_instrs() -> Vec<sim::isa::Instr> {
    fn walk(body: &[Stmt], out: &mut Vec<sim::isa::Instr>) {
        for s in body {
            match s {
                Stmt::Instr { instr, .. } => out.push((**instr).clone()),
                Stmt::For { body, .. } | Stmt::While { body, .. } => walk(body, out),
                Stmt::If {
                    then, otherwise, ..
                } => {
                    walk(then, out);
                    walk(otherwise, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    for (line, text) in blocks() {
        let name = format!("ISA.md:{line}");
        for k in sim::load_all(&name, &text, &Machine::default()).expect("loads") {
            walk(&k.program().body, &mut out);
        }
    }
    out
}

#[test]
fn every_mnemonic_of_the_table_has_an_example() {
    let seen: Vec<&str> = example_instrs().iter().map(|i| i.mnemonic()).collect();
    for m in sim::isa::mnemonics() {
        assert!(seen.contains(&m), "no ISA.md example uses `{m}`");
    }
}

#[test]
fn every_keyword_argument_is_documented() {
    let text = include_str!("../ISA.md");
    for i in example_instrs() {
        for op in i.operands() {
            let written = match op {
                Operand::Keyword { key, .. } => format!("{key}="),
                Operand::Flag { key, .. } => key.to_string(),
                _ => continue,
            };
            assert!(
                text.contains(&written),
                "ISA.md does not mention `{written}` of `{}`",
                i.mnemonic()
            );
        }
    }
}

#[test]
fn the_pipe_table_names_each_copy_and_the_cube() {
    let text = include_str!("../ISA.md");
    let row = |pipe: Pipe| {
        let head = format!("| {} |", pipe.name());
        text.lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no row for {}", pipe.name()))
    };
    for i in example_instrs() {
        if !matches!(i.timing_class(), TimingClass::Transfer | TimingClass::Cube) {
            continue;
        }
        let pipe = match i.pipe_rule() {
            PipeRule::Fixed(p) => p,
            PipeRule::CopyPath | PipeRule::GmDirection => Pipe::Mte2,
            PipeRule::Signal | PipeRule::Wait => continue,
        };
        let name = format!("`{}`", i.mnemonic());
        assert!(
            row(pipe).contains(&name),
            "the {} row of ISA.md's pipe table does not name {name}",
            pipe.name()
        );
    }
}
