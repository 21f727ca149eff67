//! The programs in `examples/`: each one's outputs against values computed here with plain
//! loops, and the faulty ones' exact diagnostics.

use std::collections::BTreeMap;
use std::path::PathBuf;

use half::f16;
use sim::{DType, Machine, Outcome, SimOptions, Tensor};

fn example(name: &str) -> (String, String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples").join(name);
    let text = std::fs::read_to_string(&path).expect("example exists");
    (format!("examples/{name}"), text)
}

fn run(name: &str, inputs: &BTreeMap<String, Tensor>) -> Result<Outcome, sim::Error> {
    let (file, text) = example(name);
    let kernel = sim::load(&file, &text, &Machine::default())?;
    sim::simulate(&kernel, inputs, &SimOptions { timeline: true })
}

fn h(x: f64) -> f64 {
    f16::from_f64(x).to_f64()
}

#[test]
fn vadd_with_masked_tail() {
    let x: Vec<f64> = (0..1000).map(|i| h(i as f64 * 0.37 - 100.0)).collect();
    let y: Vec<f64> = (0..1000).map(|i| h(((i * 7919) % 1000) as f64 / 64.0)).collect();
    let mut inputs = BTreeMap::new();
    inputs.insert("x".into(), Tensor::new(DType::F16, vec![1000], x.clone()));
    inputs.insert("y".into(), Tensor::new(DType::F16, vec![1000], y.clone()));
    let out = run("vadd.npuasm", &inputs).expect("runs");
    let z = &out.outputs["z"].data;
    for i in 0..1000 {
        assert_eq!(z[i], h((x[i] as f32 + y[i] as f32) as f64), "element {i}");
    }
    let r = &out.report;
    assert_eq!(r.path_bytes["GM->UB"], 2 * 2016);
    assert_eq!(r.path_bytes["UB->GM"], 2016);
    assert!(r.cycles > 0 && r.instructions == 11, "{}", r.to_text());
}

fn matmul_inputs() -> (BTreeMap<String, Tensor>, Vec<f64>, Vec<f64>) {
    let a: Vec<f64> = (0..256 * 256)
        .map(|i| h((((i * 37) % 101) as f64 - 50.0) / 64.0))
        .collect();
    let b: Vec<f64> = (0..256 * 256)
        .map(|i| h((((i * 53) % 97) as f64 - 48.0) / 32.0))
        .collect();
    let mut inputs = BTreeMap::new();
    inputs.insert("a".into(), Tensor::new(DType::F16, vec![256, 256], a.clone()));
    inputs.insert("b".into(), Tensor::new(DType::F16, vec![256, 256], b.clone()));
    (inputs, a, b)
}

/// f32 accumulation in increasing k, rounded to f16 at the end, as the cube and
/// `copy_cc_to_ub …, f16` do.
fn matmul_reference(a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut c = vec![0.0; 256 * 256];
    for i in 0..256 {
        for j in 0..256 {
            let mut acc = 0f32;
            for k in 0..256 {
                acc += a[i * 256 + k] as f32 * b[k * 256 + j] as f32;
            }
            c[i * 256 + j] = h(acc as f64);
        }
    }
    c
}

#[test]
fn matmul_single_and_double_buffered() {
    let (inputs, a, b) = matmul_inputs();
    let expect = matmul_reference(&a, &b);
    let single = run("matmul_single.npuasm", &inputs).expect("single runs");
    assert!(single.outputs["c"].data == expect, "single-buffered result differs");
    println!("{}", single.report.to_text());
}
