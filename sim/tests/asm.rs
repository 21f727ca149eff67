//! The assembly text: located parse and assembly errors, printer round trips, and no panics on
//! malformed input.

use sim::{Machine, SimOptions};

fn parse_err(text: &str) -> sim::Error {
    match sim::load("k.npuasm", text, &Machine::default()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn parse_errors_have_line_column_caret_and_hint() {
    let e = parse_err("kernel k\nbuffer u : UB, 64\nvadd.f16 u[0], u[0]\n");
    assert_eq!(e.line_col(), (3, 20));
    assert_eq!(e.message(), "expected `,`, found end of line");
    let r = e.render(false);
    assert!(
        r.contains("k.npuasm:3:20")
            && r.contains('^')
            && r.contains("hint: operands are separated by commas"),
        "{r}"
    );

    let e = parse_err("kernel k\nbuffer u : UB, 64\nvfoo.f16 u[0], u[0]\n");
    assert_eq!(
        (e.line_col(), e.message()),
        ((3, 1), "unknown instruction `vfoo.f16`")
    );

    let e = parse_err("kernel k\nbuffer u : UB, 64\nvadd.f16 u[0], u[0], u[0], repeat=300\n");
    assert_eq!(
        (e.line_col(), e.message()),
        ((3, 28), "`repeat` must be in 0..=255")
    );

    let e = parse_err("kernel k\nbuffer u : UB, 64\nvadd.f16 u[0], u[0], u[0], blk=(1, 2)\n");
    assert_eq!(e.message(), "`blk` needs 3 values, one per vector operand");

    let e = parse_err("kernel k\nbuffer u : XB, 64\n");
    assert_eq!(
        (e.line_col(), e.message()),
        ((2, 12), "`XB` is not an on-chip memory")
    );

    let e = parse_err("kernel k\nset_flag V, V, 0\n");
    assert_eq!(e.message(), "a flag links two different pipes");

    let e = parse_err("kernel k\nwait_flag V, MTE3, 9\n");
    assert_eq!(
        (e.line_col(), e.message()),
        ((2, 20), "event ids are 0..=7")
    );

    let e = parse_err("kernel k\nfor i in 0..4 {\nmov s0, i\n");
    assert_eq!(e.message(), "expected `}`, found end of file");

    let e = parse_err("kernel k\nbuffer u : UB, 64\nmmad.f32 u[0], u[0], u[0], m=16, k=16, n=16\n");
    assert_eq!(e.message(), "`mmad` needs exactly one of `init` or `acc`");

    let e = parse_err("kernel k\nbuffer u : UB, 64\ncopy u[0], u[0]\n");
    assert_eq!((e.line_col(), e.message()), ((3, 1), "missing `len=`"));
}

#[test]
fn assembly_errors_name_the_problem() {
    let e = parse_err("kernel k\nbuffer u : UB, 64\nvadd.f16 u[0], v[0], u[0]\n");
    assert_eq!((e.line_col(), e.message()), ((3, 16), "unknown buffer `v`"));

    let e = parse_err("kernel k\nbuffer u : UB, 64\nbuffer u : L1, 64\n");
    assert_eq!(e.message(), "`u` is declared twice");

    let e =
        parse_err("kernel k\nbuffer a : L0A, 512\nbuffer u : UB, 512\nvadd.f16 u[0], a[0], u[0]\n");
    assert_eq!(
        e.message(),
        "vector operands must be in UB, but `a` is in L0A"
    );

    let e =
        parse_err("kernel k\nbuffer a : L1, 512\nbuffer u : L0A, 512\ncopy u[0], a[0], len=1\n");
    assert_eq!(e.message(), "`copy` has no path from L1 to L0A");

    let e = parse_err("kernel k\nbuffer u : UB, 64\nvadd.f16 u[j], u[0], u[0]\n");
    assert_eq!(e.message(), "unknown variable `j`");

    let e = parse_err("kernel k\nbuffer u : L0A, 512 @ 100\n");
    assert_eq!(
        e.message(),
        "buffer `u` at byte 100 is not aligned to 512 bytes, as L0A requires"
    );

    let e = parse_err("kernel k\nbuffer u : UB, 64\nvexp.i32 u[0], u[0]\n");
    assert_eq!(e.message(), "`vexp` is defined for f16 and f32 only");

    let e = parse_err("kernel k\nbuffer u : UB, 64\nld.f32 s0, u[0]\n");
    assert_eq!(
        e.message(),
        "the register kind does not match the element type"
    );

    let e = parse_err("kernel k\nmov s0, 1.5\n");
    assert_eq!(e.message(), "an integer register cannot hold a float");
}

#[test]
fn printer_round_trips_tricky_forms() {
    let text = "kernel t blockdim=4
param x : f32[2, 64] inout
buffer u : UB, 512 @ 64
buffer w : UB, 512
for i in 0..8 step 3 {
    vadd.f32 u[-i*32 + 96 + block_idx*0], u[0], w[i + i], repeat=2, blk=(1, 2, 1), rep=(8, 16, 0)
    vcadd.f32 w[i*4], u[0], rep=(3, 8)
    if s1 >= -2 {
        vdup.f16 u[0], -inf
    } else {
        mov f3, 1e-3
    }
}
set_vector_mask 0xffffffffffffffff, 0x1
vconv.f32.f16 w[0], u[0], rep=(4, 8)
";
    let p = sim::parse("t", text).unwrap();
    let printed = sim::print(&p);
    let q = sim::parse("t", &printed).unwrap_or_else(|e| panic!("{}\n{printed}", e.render(false)));
    assert_eq!(p, q);
    assert!(printed.contains("u[-i*32 + 96]"), "{printed}");
    assert!(printed.contains("w[i*2]"), "{printed}");
    assert!(
        printed.contains("vconv.f32.f16 w[0], u[0]\n"),
        "defaults are left out: {printed}"
    );
    assert!(printed.contains("mov f3, 0.001"), "{printed}");
}

/// Deterministic mutations of the examples (truncation, deleted and duplicated characters)
/// must give errors or results, never panics.
#[test]
fn malformed_programs_do_not_panic() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut seed = 0x1234_5678u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut sources = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "npuasm")
            && !path.to_string_lossy().contains("matmul")
        {
            sources.push(std::fs::read_to_string(path).unwrap());
        }
    }
    let alphabet = b"0123456789[](){},.=-+*@:\n abfsivx_";
    for _ in 0..300 {
        let src = &sources[(next() % sources.len() as u64) as usize];
        let mut bytes = src.as_bytes().to_vec();
        for _ in 0..1 + next() % 3 {
            let at = (next() % bytes.len() as u64) as usize;
            match next() % 3 {
                0 => {
                    bytes.remove(at);
                }
                1 => bytes.insert(at, alphabet[(next() % alphabet.len() as u64) as usize]),
                _ => bytes[at] = alphabet[(next() % alphabet.len() as u64) as usize],
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if let Ok(k) = sim::load("m", &text, &Machine::default()) {
            let inputs = sim::random_inputs(k.program(), 9);
            let _ = sim::simulate(&k, &inputs, &SimOptions::default());
        }
    }
}

#[test]
fn limits_end_with_diagnostics() {
    let e = parse_err("kernel k\nparam x : f32[100000, 100000] in\n");
    assert_eq!(e.message(), "tensor `x` is too large to simulate");
    let k = sim::load(
        "k",
        "kernel k\nfor i in 0..1000000000 {\n    mov s0, i\n}\n",
        &Machine::default(),
    )
    .unwrap();
    let options = SimOptions {
        max_instructions: 1000,
        ..SimOptions::default()
    };
    let e = sim::simulate(&k, &Default::default(), &options).unwrap_err();
    assert_eq!(
        e.message(),
        "stopped after 1000 instructions at `mov s0, i` (at i=1000)"
    );
    assert!(e.budget);
    let options = SimOptions {
        max_cycles: 5000,
        ..SimOptions::default()
    };
    let e = sim::simulate(&k, &Default::default(), &options).unwrap_err();
    assert!(
        e.message()
            .starts_with("stopped after 5000 cycles at `mov s0, i`"),
        "{}",
        e.message()
    );
    assert!(e.budget);
}
