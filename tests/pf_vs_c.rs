//! A `.pf` kernel and its PolyBench-style C version, read with the same sizes, get the same
//! random inputs and compute bit-identical outputs on the reference interpreter.

use std::path::Path;

use frontend::Options;
use polyhedral::interp;

fn kernel(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("kernels")
        .join(name)
}

fn compare(pf: &str, c: &str, sizes: &[(&str, i64)]) {
    let options = Options {
        sizes: sizes.iter().map(|&(n, v)| (n.to_string(), v)).collect(),
        ..Options::default()
    };
    let a = frontend::load(&kernel(pf), &options).unwrap_or_else(|e| panic!("{e}"));
    let b = frontend::load(&kernel(c), &options).unwrap_or_else(|e| panic!("{e}"));
    let mut ma = interp::random_inputs(&a, 11);
    let mut mb = interp::random_inputs(&b, 11);
    interp::run(&a, &mut ma).unwrap();
    interp::run(&b, &mut mb).unwrap();
    let mut compared = 0;
    for (ka, array) in a.arrays.iter().enumerate() {
        let Some(kb) = b.array_by_name(&array.name) else {
            continue;
        };
        if !(array.role.is_live_out() && b.array(kb).role.is_live_out()) {
            continue;
        }
        let (va, vb) = (&ma.arrays[ka], &mb.arrays[kb.index()]);
        assert_eq!(va.len(), vb.len(), "{}: sizes differ", array.name);
        for (i, (x, y)) in va.iter().zip(vb).enumerate() {
            assert_eq!(x.to_bits(), y.to_bits(), "{}[{i}]: {x} vs {y}", array.name);
        }
        compared += 1;
    }
    assert!(compared > 0, "{pf} and {c} share no output");
}

#[test]
fn gemm() {
    compare("gemm.pf", "gemm.c", &[("NI", 20), ("NJ", 25), ("NK", 30)]);
}

#[test]
fn mm2() {
    compare(
        "2mm.pf",
        "2mm.c",
        &[("NI", 16), ("NJ", 18), ("NK", 22), ("NL", 24)],
    );
}

#[test]
fn jacobi_2d() {
    compare("jacobi2d.pf", "jacobi-2d.c", &[("N", 30), ("TSTEPS", 5)]);
}
