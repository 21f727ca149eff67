//! Every example in ISA.md parses, prints back to an equal program, assembles and runs; and
//! every mnemonic of the instruction set appears in at least one example.

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
        "for",
        "if",
        "else",
    ];
    for m in mnemonics {
        assert!(words.contains(&m), "no ISA.md example uses `{m}`");
    }
}
