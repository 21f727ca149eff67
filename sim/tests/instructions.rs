//! One test per instruction family: results against plain loops, including masks, block and
//! repeat strides, repeats, fractal layouts and the runtime errors.

// Index loops mirror the hardware's lane and element numbering the tests are written in.
#![allow(clippy::needless_range_loop, clippy::type_complexity)]

use std::collections::BTreeMap;

use half::f16;
use sim::{DType, Machine, SimOptions, Tensor};

fn h(x: f64) -> f64 {
    f16::from_f64(x).to_f64()
}

fn ty_name(t: DType) -> &'static str {
    match t {
        DType::F16 => "f16",
        DType::F32 => "f32",
        DType::I32 => "i32",
    }
}

/// Runs `body` between "GM inputs -> UB" and "UB `out` -> GM". Each input `NAME` is in UB as
/// `u_NAME`; the output buffer `u_OUT` starts as zeros unless `body` writes it.
fn run_vec(
    inputs: &[(&str, DType, Vec<f64>)],
    out: (&str, DType, usize),
    body: &str,
) -> Result<Vec<f64>, String> {
    let mut text = String::from("kernel t\n");
    let blocks = |n: usize, t: DType| (n * t_size(t)).div_ceil(32);
    for (name, t, v) in inputs {
        text += &format!("param {name} : {}[{}] in\n", ty_name(*t), v.len());
    }
    text += &format!("param {} : {}[{}] out\n", out.0, ty_name(out.1), out.2);
    for (name, t, v) in inputs {
        text += &format!("buffer u_{name} : UB, {}\n", blocks(v.len(), *t) * 32);
    }
    text += &format!("buffer u_{} : UB, {}\n", out.0, blocks(out.2, out.1) * 32);
    for (name, t, v) in inputs {
        text += &format!("copy u_{name}[0], {name}[0], len={}\n", blocks(v.len(), *t));
    }
    text += "set_flag MTE2, V, 0\nwait_flag MTE2, V, 0\n";
    text += body;
    text += &format!(
        "\nset_flag V, MTE3, 0\nwait_flag V, MTE3, 0\ncopy {o}[0], u_{o}[0], len={}\n",
        blocks(out.2, out.1),
        o = out.0
    );
    let kernel = sim::load("t.npuasm", &text, &Machine::default()).map_err(|e| e.render(false))?;
    let mut tensors = BTreeMap::new();
    for (name, t, v) in inputs {
        tensors.insert(
            name.to_string(),
            Tensor::new(*t, vec![v.len() as u64], v.clone()),
        );
    }
    let o =
        sim::simulate(&kernel, &tensors, &SimOptions::default()).map_err(|e| e.render(false))?;
    Ok(o.outputs[out.0].data.clone())
}

fn t_size(t: DType) -> usize {
    match t {
        DType::F16 => 2,
        _ => 4,
    }
}

fn ramp(n: usize, f: impl Fn(usize) -> f64) -> Vec<f64> {
    (0..n).map(f).collect()
}

#[test]
fn vadd_block_and_repeat_strides() {
    // f32: 8 lanes per block. Source blocks 2 apart (every other block), 2 repeats 16 blocks
    // apart; destination contiguous.
    let x = ramp(512, |i| i as f64);
    let y = ramp(512, |i| 1000.0 + i as f64);
    let z = run_vec(
        &[("x", DType::F32, x.clone()), ("y", DType::F32, y.clone())],
        ("z", DType::F32, 128),
        "vadd.f32 u_z[0], u_x[0], u_y[0], repeat=2, blk=(1, 2, 2), rep=(8, 16, 16)",
    )
    .unwrap();
    for r in 0..2 {
        for l in 0..64 {
            let src = r * 16 * 8 + (l / 8) * 2 * 8 + l % 8;
            assert_eq!(z[r * 64 + l], x[src] + y[src], "r{r} l{l}");
        }
    }
}

#[test]
fn masked_lanes_keep_their_values() {
    let x = ramp(128, |i| h(i as f64 / 8.0));
    let z = run_vec(
        &[("x", DType::F16, x.clone())],
        ("z", DType::F16, 128),
        "vdup.f16 u_z[0], 7.0\nset_vector_mask 0x8000000000000000, 0x5\nvmuls.f16 u_z[0], u_x[0], 2.0",
    )
    .unwrap();
    for l in 0..128 {
        let on = l == 0 || l == 2 || l == 127;
        assert_eq!(z[l], if on { h(x[l] * 2.0) } else { 7.0 }, "lane {l}");
    }
}

#[test]
fn integer_binary_ops() {
    let x = ramp(64, |i| i as f64 * 3.0 - 90.0);
    let y = ramp(64, |i| (i % 7) as f64 - 3.0);
    let ops: [(&str, fn(i32, i32) -> i32); 8] = [
        ("vadd", |a, b| a + b),
        ("vsub", |a, b| a - b),
        ("vmul", |a, b| a * b),
        ("vdiv", |a, b| a.checked_div(b).unwrap_or(0)),
        ("vmax", |a, b| a.max(b)),
        ("vmin", |a, b| a.min(b)),
        ("vand", |a, b| a & b),
        ("vor", |a, b| a | b),
    ];
    for (op, f) in ops {
        let z = run_vec(
            &[("x", DType::I32, x.clone()), ("y", DType::I32, y.clone())],
            ("z", DType::I32, 64),
            &format!("{op}.i32 u_z[0], u_x[0], u_y[0]"),
        )
        .unwrap();
        for i in 0..64 {
            assert_eq!(z[i], f(x[i] as i32, y[i] as i32) as f64, "{op} {i}");
        }
    }
}

#[test]
fn f16_arithmetic_rounds_to_nearest_even() {
    let x = ramp(128, |i| h(1.0 + i as f64 / 1024.0));
    let y = ramp(128, |i| h(3.0 - i as f64 / 37.0));
    for (op, f) in [
        ("vadd", (|a, b| a + b) as fn(f32, f32) -> f32),
        ("vsub", |a, b| a - b),
        ("vmul", |a, b| a * b),
        ("vdiv", |a, b| a / b),
    ] {
        let z = run_vec(
            &[("x", DType::F16, x.clone()), ("y", DType::F16, y.clone())],
            ("z", DType::F16, 128),
            &format!("{op}.f16 u_z[0], u_x[0], u_y[0]"),
        )
        .unwrap();
        for i in 0..128 {
            let exact = f16::from_f32(f(x[i] as f32, y[i] as f32)).to_f64();
            assert_eq!(z[i], exact, "{op} {i}");
        }
    }
}

#[test]
fn vector_scalar_ops() {
    let x = ramp(64, |i| i as f64 - 32.5);
    for (op, s, f) in [
        ("vadds", "1.25", (|a: f32| a + 1.25) as fn(f32) -> f32),
        ("vmuls", "-2.0", |a| a * -2.0),
        ("vmaxs", "0.0", |a| a.max(0.0)),
    ] {
        let z = run_vec(
            &[("x", DType::F32, x.clone())],
            ("z", DType::F32, 64),
            &format!("{op}.f32 u_z[0], u_x[0], {s}"),
        )
        .unwrap();
        for i in 0..64 {
            assert_eq!(z[i], f(x[i] as f32) as f64, "{op} {i}");
        }
    }
}

#[test]
fn unary_ops() {
    let x = ramp(128, |i| h(0.05 + i as f64 / 16.0));
    let neg = ramp(128, |i| h(i as f64 / 16.0 - 4.0));
    let cases: [(&str, &Vec<f64>, fn(f64) -> f64); 7] = [
        ("vexp", &neg, f64::exp),
        ("vln", &x, f64::ln),
        ("vrec", &x, |a| 1.0 / a),
        ("vrsqrt", &x, |a| 1.0 / a.sqrt()),
        ("vsqrt", &x, f64::sqrt),
        ("vabs", &neg, f64::abs),
        ("vrelu", &neg, |a| a.max(0.0)),
    ];
    for (op, input, f) in cases {
        let z = run_vec(
            &[("x", DType::F16, input.clone())],
            ("z", DType::F16, 128),
            &format!("{op}.f16 u_z[0], u_x[0]"),
        )
        .unwrap();
        for i in 0..128 {
            assert_eq!(z[i], h(f(input[i])), "{op} {i}");
        }
    }
}

#[test]
fn duplicate_with_repeats_and_stride() {
    // 3 repeats of 64 f32 lanes, each 16 blocks apart: blocks 8..16 of each stride stay 0.
    let z = run_vec(
        &[],
        ("z", DType::F32, 64 * 6),
        "vdup.f32 u_z[0], 2.5, repeat=3, rep=16",
    )
    .unwrap();
    for i in 0..64 * 6 {
        let expect = if (i / 64) % 2 == 0 { 2.5 } else { 0.0 };
        assert_eq!(z[i], expect, "{i}");
    }
}

#[test]
fn compare_select_count_and_branch() {
    // Lanes where x < y take x, the others y; s0 counts the x < y lanes; the branch writes
    // that count into z[127] only when some lane is active.
    let x = ramp(128, |i| h(i as f64));
    let y = ramp(128, |i| h(100.0 - i as f64));
    let body = "vcmp.lt.f16 u_m[0], u_x[0], u_y[0]
vsel.f16 u_z[0], u_x[0], u_y[0], u_m[0]
set_flag V, S, 0
wait_flag V, S, 0
count s0, u_m[0], bits=128
if s0 != 0 {
    st.f16 u_z[254], s0
}";
    let text_body = body.to_string();
    // Declare the mask buffer through an extra input of 32 bytes.
    let z = run_vec(
        &[
            ("x", DType::F16, x.clone()),
            ("y", DType::F16, y.clone()),
            ("m", DType::F16, vec![0.0; 16]),
        ],
        ("z", DType::F16, 128),
        &text_body,
    )
    .unwrap();
    let active = (0..128).filter(|&i| x[i] < y[i]).count();
    assert_eq!(active, 50);
    for i in 0..127 {
        assert_eq!(z[i], if x[i] < y[i] { x[i] } else { y[i] }, "{i}");
    }
    assert_eq!(z[127], active as f64);
}

#[test]
fn reductions_within_a_repeat() {
    // 2 repeats of 64 f32 lanes; only lanes 0..9 are active; results 2 elements apart.
    let x = ramp(128, |i| ((i * 37) % 50) as f64 - 20.0);
    for (op, f) in [
        (
            "vcadd",
            (|v: &[f64]| v.iter().fold(0f32, |a, &b| a + b as f32) as f64) as fn(&[f64]) -> f64,
        ),
        ("vcmax", |v| v.iter().copied().fold(f64::MIN, f64::max)),
        ("vcmin", |v| v.iter().copied().fold(f64::MAX, f64::min)),
    ] {
        let z = run_vec(
            &[("x", DType::F32, x.clone())],
            ("z", DType::F32, 8),
            &format!("set_vector_mask 0x0, 0x3ff\n{op}.f32 u_z[0], u_x[0], repeat=2, rep=(2, 8)"),
        )
        .unwrap();
        assert_eq!(z[0], f(&x[0..10]), "{op}");
        assert_eq!(z[1], 0.0);
        assert_eq!(z[2], f(&x[64..74]), "{op}");
    }
}

#[test]
fn reductions_folded_onto_the_destination() {
    // `acc` starts each repeat's reduction from the destination element. With destination
    // stride 0 the repeats chain: the sum of a 128-lane row from 0.5, lane by lane in order,
    // rounding after every addition, as a sequential loop computes it.
    let x = ramp(256, |i| ((i * 29) % 61) as f64 * 0.1 - 3.0);
    let z = run_vec(
        &[("x", DType::F32, x.clone())],
        ("z", DType::F32, 8),
        "set_vector_mask 0x0, 0x1\nvdup.f32 u_z[0], 0.5\n\
         set_vector_mask 0xffffffffffffffff, 0xffffffffffffffff\n\
         vcadd.f32 u_z[0], u_x[0], repeat=2, rep=(0, 8), acc",
    )
    .unwrap();
    let sequential = x[..128].iter().fold(0.5f32, |a, &b| a + b as f32) as f64;
    assert_eq!(z[0], sequential);
    // Maxima folded onto the zeros already there, one per repeat: a repeat of negative lanes
    // leaves the 0.
    let neg = ramp(128, |i| {
        if i < 64 {
            i as f64 - 70.0
        } else {
            i as f64 - 100.0
        }
    });
    let z = run_vec(
        &[("x", DType::F32, neg)],
        ("z", DType::F32, 8),
        "vcmax.f32 u_z[0], u_x[0], repeat=2, acc",
    )
    .unwrap();
    assert_eq!(&z[..2], &[0.0, 27.0]);
}

#[test]
fn broadcast_fills_blocks_with_elements() {
    let x = ramp(16, |i| i as f64 + 1.0);
    let z = run_vec(
        &[("x", DType::F32, x.clone())],
        ("z", DType::F32, 128),
        "vbrcb.f32 u_z[0], u_x[0], repeat=2",
    )
    .unwrap();
    for (i, v) in z.iter().enumerate() {
        assert_eq!(*v, x[i / 8], "{i}");
    }
    // Every other block, repeats 8 blocks apart: 8 elements land in 4 blocks of each repeat.
    let z = run_vec(
        &[("x", DType::F32, x.clone())],
        ("z", DType::F32, 192),
        "vbrcb.f32 u_z[0], u_x[0], blk=2, rep=16",
    )
    .unwrap();
    for (i, v) in z.iter().enumerate() {
        let block = i / 8;
        let want = if block % 2 == 0 && block < 16 {
            x[block / 2]
        } else {
            0.0
        };
        assert_eq!(*v, want, "{i}");
    }
    let f16s = ramp(8, |i| h(i as f64 * 0.25));
    let z = run_vec(
        &[("x", DType::F16, f16s.clone())],
        ("z", DType::F16, 128),
        "vbrcb.f16 u_z[0], u_x[0]",
    )
    .unwrap();
    for (i, v) in z.iter().enumerate() {
        assert_eq!(*v, f16s[i / 16], "{i}");
    }
}

#[test]
fn padded_copies_move_bytes_off_the_block_grid() {
    // x and y are 3 rows of 10 f32. Elements 1..8 of each row (28 bytes from byte 4) go to one
    // UB block each, zero-padded, then 8 elements of each block (the 7 values and a padding
    // zero) back to elements 2..10 of y's rows; y's other elements keep their values.
    let text = "kernel pad
param x : f32[30] in
param y : f32[30] inout
buffer u : UB, 128
copy_pad u[0], x[4], n_burst=3, bytes=28, src_stride=40, dst_stride=32
set_flag MTE2, MTE3, 0
wait_flag MTE2, MTE3, 0
copy_pad y[8], u[0], n_burst=3, bytes=32, src_stride=32, dst_stride=40
";
    let kernel = sim::load("pad.npuasm", text, &Machine::default()).expect("assembles");
    let x: Vec<f64> = (0..30).map(|i| i as f64 + 1.0).collect();
    let y: Vec<f64> = (0..30).map(|i| 1000.0 + i as f64).collect();
    let mut inputs = BTreeMap::new();
    inputs.insert(
        "x".to_string(),
        Tensor::new(DType::F32, vec![30], x.clone()),
    );
    inputs.insert(
        "y".to_string(),
        Tensor::new(DType::F32, vec![30], y.clone()),
    );
    let out = sim::simulate(&kernel, &inputs, &SimOptions::default()).expect("runs");
    let got = &out.outputs["y"].data;
    for row in 0..3 {
        for col in 0..10 {
            let want = match col {
                2..=8 => x[row * 10 + col - 1],
                9 => 0.0,
                _ => y[row * 10 + col],
            };
            assert_eq!(got[row * 10 + col], want, "row {row} column {col}");
        }
    }
    // 3 × 28 bytes in, 3 × 32 out.
    assert_eq!(out.report.gm_read_bytes, 84);
    assert_eq!(out.report.gm_written_bytes, 96);
    // The UB side stays on blocks; L0A is no end of copy_pad.
    let e = sim::load(
        "pad.npuasm",
        &text.replace("copy_pad u[0], x[4]", "copy_pad u[4], x[4]"),
        &Machine::default(),
    )
    .and_then(|k| sim::simulate(&k, &inputs, &SimOptions::default()))
    .unwrap_err();
    assert!(
        e.message().contains("misaligned operand"),
        "{}",
        e.message()
    );
    let e = sim::load(
        "pad.npuasm",
        "kernel p\nparam x : f32[8] in\nbuffer l : L0A, 512\ncopy_pad l[0], x[0], bytes=32\n",
        &Machine::default(),
    )
    .unwrap_err();
    assert!(
        e.message()
            .contains("`copy_pad` has no path from GM to L0A"),
        "{}",
        e.message()
    );
}

#[test]
fn conversions() {
    let x = ramp(64, |i| i as f64 * 0.5 - 10.0);
    let z = run_vec(
        &[("x", DType::F32, x.clone())],
        ("z", DType::I32, 64),
        "vconv.f32.i32 u_z[0], u_x[0]",
    )
    .unwrap();
    for i in 0..64 {
        assert_eq!(z[i], x[i].round_ties_even(), "{i}");
    }
    let xi = ramp(64, |i| (i as f64 - 32.0) * 1001.0);
    let z = run_vec(
        &[("x", DType::I32, xi.clone())],
        ("z", DType::F16, 64),
        "vconv.i32.f16 u_z[0], u_x[0]",
    )
    .unwrap();
    for i in 0..64 {
        assert_eq!(z[i], h(xi[i]), "{i}");
    }
    let x16 = ramp(128, |i| h(i as f64 / 3.0));
    let z = run_vec(
        &[("x", DType::F16, x16.clone())],
        ("z", DType::F32, 128),
        "vconv.f16.f32 u_z[0], u_x[0], repeat=2",
    )
    .unwrap();
    assert_eq!(z, x16);
}

#[test]
fn dma_bursts_with_gaps() {
    // 4 bursts of 2 blocks, skipping 1 block in the source and 3 in the destination.
    let x = ramp(16 * 12, |i| h(i as f64));
    let z = run_vec(
        &[("x", DType::F16, x.clone())],
        ("z", DType::F16, 16 * 20),
        "copy u_z[0], u_x[0], n_burst=4, len=2, src_gap=1, dst_gap=3",
    )
    .unwrap();
    for burst in 0..4 {
        for e in 0..32 {
            assert_eq!(z[burst * 5 * 16 + e], x[burst * 3 * 16 + e]);
        }
    }
    assert_eq!(z[2 * 16], 0.0);
}

/// A 32×32×48 matmul through the fractal layouts, with f16 output through copy_cc_to_ub's
/// conversion and ReLU, checked element by element.
#[test]
fn load2d_mmad_fractal_layouts() {
    let (m, k, n) = (32usize, 48usize, 32usize);
    let a = ramp(m * k, |i| h(((i * 7) % 23) as f64 / 8.0 - 1.0));
    let b = ramp(k * n, |i| h(((i * 5) % 19) as f64 / 8.0 - 1.0));
    let text = "kernel mm
param a : f16[32, 48] in
param b : f16[48, 32] in
param c : f16[32, 32] out
buffer l1a : L1, 3072
buffer l1b : L1, 3072
buffer l0a : L0A, 3072
buffer l0b : L0B, 3072
buffer l0c : L0C, 4096
buffer ub : UB, 2048
// A into L1 as [K1=3][M=32][16]; B as [N1=2][K=48][16].
for j in 0..3 {
    copy l1a[j*1024], a[j*32], n_burst=32, len=1, src_gap=2
}
for j in 0..2 {
    copy l1b[j*1536], b[j*32], n_burst=48, len=1, src_gap=1
}
set_flag MTE2, MTE1, 0
wait_flag MTE2, MTE1, 0
// zZ: per row of fractals m1, its 3 k-fractals, 2 apart in L1.
for m1 in 0..2 {
    load2d l0a[m1*1536], l1a[m1*512], repeat=3, src_stride=2
}
// zN: per k1, its 2 n-fractals (3 apart), transposed.
for k1 in 0..3 {
    load2d l0b[k1*1024], l1b[k1*512], repeat=2, src_stride=3, transpose
}
set_flag MTE1, M, 0
wait_flag MTE1, M, 0
mmad.f32 l0c[0], l0a[0], l0b[0], m=32, k=48, n=32, init
set_flag M, V, 0
wait_flag M, V, 0
copy_cc_to_ub ub[0], l0c[0], len=4, f16, relu
set_flag V, MTE3, 0
wait_flag V, MTE3, 0
// UB is [N1=2][M=32][16]: rows of 32 bytes go to GM rows 64 bytes apart.
for n1 in 0..2 {
    copy c[n1*32], ub[n1*1024], n_burst=32, len=1, dst_gap=1
}
";
    let kernel = sim::load("mm", text, &Machine::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let mut inputs = BTreeMap::new();
    inputs.insert("a".into(), Tensor::new(DType::F16, vec![32, 48], a.clone()));
    inputs.insert("b".into(), Tensor::new(DType::F16, vec![48, 32], b.clone()));
    let out = sim::simulate(&kernel, &inputs, &SimOptions::default()).unwrap();
    let c = &out.outputs["c"].data;
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for kk in 0..k {
                acc += a[i * k + kk] as f32 * b[kk * n + j] as f32;
            }
            assert_eq!(c[i * n + j], h(acc.max(0.0) as f64), "c[{i}][{j}]");
        }
    }
    assert_eq!(out.report.cube_fractal_macs, 2 * 3 * 2);
    assert_eq!(out.report.path_bytes["L1->L0A"], 6 * 512);
}

#[test]
fn pipe_barrier_orders_without_flags() {
    let x = ramp(128, |i| h(i as f64));
    let body = "pipe_barrier MTE2\nvadds.f16 u_z[0], u_x[0], 1.0";
    // run_vec inserts the MTE2 -> V flag; build the program by hand without it.
    let text = format!(
        "kernel t\nparam x : f16[128] in\nparam z : f16[128] out\nbuffer u_x : UB, 256\nbuffer u_z : UB, 256\n\
         copy u_x[0], x[0], len=8\n{body}\npipe_barrier V\ncopy z[0], u_z[0], len=8\n"
    );
    let kernel = sim::load("t", &text, &Machine::default()).unwrap();
    let mut inputs = BTreeMap::new();
    inputs.insert("x".into(), Tensor::new(DType::F16, vec![128], x.clone()));
    let out = sim::simulate(&kernel, &inputs, &SimOptions::default()).unwrap();
    for i in 0..128 {
        assert_eq!(out.outputs["z"].data[i], h(x[i] + 1.0));
    }
}

#[test]
fn misaligned_and_out_of_bounds_operands_are_errors() {
    let x = ramp(256, |i| i as f64);
    let e = run_vec(
        &[("x", DType::F16, x.clone())],
        ("z", DType::F16, 256),
        "vabs.f16 u_z[0], u_x[16]",
    )
    .unwrap_err();
    assert!(
        e.contains("misaligned operand: `vabs.f16 u_z[0], u_x[16]` reads UB byte 16 (`u_x` + 16), which is not a multiple of 32"),
        "{e}"
    );
    let e = run_vec(
        &[("x", DType::F16, x)],
        ("z", DType::F16, 256),
        "for i in 0..3 {\n    vabs.f16 u_z[i*256], u_z[0]\n}",
    )
    .unwrap_err();
    assert!(
        e.contains("`vabs.f16 u_z[i*256], u_z[0]` writes bytes 512..768 of `u_z` (512 bytes in UB) (at i=2)"),
        "{e}"
    );
    assert!(e.contains("t.npuasm:"), "{e}");
}

#[test]
fn scalar_registers_loops_and_stores() {
    // z[i] = i*i for i < 10, through s-registers, a float register and scalar stores.
    let body = "for i in 0..10 {
    mul s1, i, i
    mov f0, s1
    mul s2, i, 4
    st.f32 u_z[s2], f0
}";
    let z = run_vec(&[], ("z", DType::F32, 16), body).unwrap();
    for i in 0..16 {
        assert_eq!(z[i], if i < 10 { (i * i) as f64 } else { 0.0 });
    }
}

#[test]
fn while_loop_runs_until_no_lane_is_active() {
    // Each lane halves its value while it is at least 1: a loop that ends when the mask of
    // lanes still above 1 is empty, counted by S at the head of every iteration; s1 counts the
    // iterations.
    let x: Vec<f64> = (0..64).map(|i| (i * i) as f64).collect();
    let body = "vdup.f32 u_one[0], 1.0
vcmp.ge.f32 u_m[0], u_z[0], u_one[0]
set_flag V, S, 0
wait_flag V, S, 0
count s0, u_m[0], bits=64
mov s1, 0
while s0 != 0 {
    vmuls.f32 u_h[0], u_z[0], 0.5
    vsel.f32 u_z[0], u_h[0], u_z[0], u_m[0]
    vcmp.ge.f32 u_m[0], u_z[0], u_one[0]
    set_flag V, S, 0
    wait_flag V, S, 0
    count s0, u_m[0], bits=64
    add s1, s1, 1
}
mov f0, s1
st.f32 u_z[0], f0";
    let text = format!("vmuls.f32 u_z[0], u_x[0], 1.0\n{body}");
    let z = run_vec(
        &[
            ("x", DType::F32, x.clone()),
            ("one", DType::F32, vec![0.0; 64]),
            ("h", DType::F32, vec![0.0; 64]),
            ("m", DType::F32, vec![0.0; 8]),
        ],
        ("z", DType::F32, 64),
        &text,
    )
    .unwrap();
    let mut trips = 0;
    for i in 1..64 {
        let (mut v, mut k) = (x[i], 0);
        while v >= 1.0 {
            v *= 0.5;
            k += 1;
        }
        trips = trips.max(k);
        assert_eq!(z[i], v, "{i}");
    }
    // The largest value, 63², takes 12 halvings.
    assert_eq!((z[0], trips), (12.0, 12));
}

#[test]
fn blocks_run_on_cores_and_share_gm_bandwidth() {
    let text = |blocks: u32| {
        format!(
            "kernel par blockdim={blocks}\nparam x : f32[{n}] in\nparam z : f32[{n}] out\nbuffer u : UB, 8192\n\
             copy u[0], x[block_idx*8192], len=256\nset_flag MTE2, V, 0\nwait_flag MTE2, V, 0\n\
             vmuls.f32 u[0], u[0], 3.0, repeat=32\nset_flag V, MTE3, 0\nwait_flag V, MTE3, 0\n\
             copy z[block_idx*8192], u[0], len=256\n",
            n = blocks * 2048
        )
    };
    let run = |blocks: u32| {
        let k = sim::load("par", &text(blocks), &Machine::default()).unwrap();
        let x = ramp(blocks as usize * 2048, |i| i as f64);
        let mut inputs = BTreeMap::new();
        inputs.insert(
            "x".into(),
            Tensor::new(DType::F32, vec![x.len() as u64], x.clone()),
        );
        let o = sim::simulate(&k, &inputs, &SimOptions::default()).unwrap();
        for (i, v) in o.outputs["z"].data.iter().enumerate() {
            assert_eq!(*v, x[i] * 3.0);
        }
        o.report
    };
    let one = run(1);
    let many = run(32);
    let twice = run(64);
    assert_eq!(
        (one.cores_used, many.cores_used, twice.cores_used),
        (1, 32, 32)
    );
    // 32 cores copy at the same time and share 1024 bytes/cycle of GM, less than 60 each.
    assert!(
        many.cycles > one.cycles,
        "{} vs {}",
        many.cycles,
        one.cycles
    );
    // Two blocks per core run one after the other, each core's second as its first ends.
    assert!(
        twice.cycles > many.cycles * 3 / 2,
        "{} vs {}",
        twice.cycles,
        many.cycles
    );
    // Nothing beats the shared bus: 8 KiB in and 8 KiB out per block at 1024 bytes/cycle.
    assert!(many.cycles >= 32 * 16384 / 1024 && twice.cycles >= 64 * 16384 / 1024);
}

#[test]
fn unset_flags_at_the_end_are_reported() {
    let z = "set_flag V, MTE3, 1";
    let text = format!("kernel t\nparam z : f16[16] out\nbuffer u : UB, 32\n{z}\n");
    let k = sim::load("t", &text, &Machine::default()).unwrap();
    let o = sim::simulate(&k, &BTreeMap::new(), &SimOptions::default()).unwrap();
    assert_eq!(
        o.report.warnings,
        vec!["block 0: flag V->MTE3 event 1 was set 1 more time(s) than waited for".to_string()]
    );
}

/// Unmasked contiguous operations take a whole-repeat path; a split mask forces the lane by
/// lane path. Both must give the same bits.
#[test]
fn whole_repeat_and_lane_paths_agree() {
    let x = ramp(256, |i| h((i as f64 * 0.731).sin() * 70.0));
    let y = ramp(256, |i| h((i as f64 * 0.377).cos() * 3.0));
    for ty in [DType::F16, DType::F32] {
        let t = ty_name(ty);
        let (lo, hi) = if ty == DType::F16 {
            ("0x0, 0xffffffffffffffff", "0xffffffffffffffff, 0x0")
        } else {
            ("0x0, 0xffffffff", "0x0, 0xffffffff00000000")
        };
        for op in [
            format!("vadd.{t} u_z[0], u_x[0], u_y[0], repeat=2"),
            format!("vsub.{t} u_z[0], u_x[0], u_y[0], repeat=2"),
            format!("vmul.{t} u_z[0], u_x[0], u_y[0], repeat=2"),
            format!("vdiv.{t} u_z[0], u_x[0], u_y[0], repeat=2"),
            format!("vmax.{t} u_z[0], u_x[0], u_y[0], repeat=2"),
            format!("vmin.{t} u_z[0], u_x[0], u_y[0], repeat=2"),
            format!("vadds.{t} u_z[0], u_x[0], 0.3, repeat=2"),
            format!("vmuls.{t} u_z[0], u_x[0], -1.7, repeat=2"),
            format!("vmaxs.{t} u_z[0], u_x[0], 0.5, repeat=2"),
            format!("vabs.{t} u_z[0], u_x[0], repeat=2"),
            format!("vrelu.{t} u_z[0], u_x[0], repeat=2"),
            format!("vdup.{t} u_z[0], 0.1, repeat=2"),
        ] {
            let n = if ty == DType::F16 { 256 } else { 128 };
            let xs: Vec<f64> = x[..n].to_vec();
            let ys: Vec<f64> = y[..n].to_vec();
            let inputs = [("x", ty, xs), ("y", ty, ys)];
            let whole = run_vec(&inputs, ("z", ty, n), &op).unwrap();
            let split = format!(
                "set_vector_mask {lo}\n{op}\nset_vector_mask {hi}\n{op}\nset_vector_mask 0xffffffffffffffff, 0xffffffffffffffff"
            );
            let lanes = run_vec(&inputs, ("z", ty, n), &split).unwrap();
            for i in 0..n {
                assert_eq!(whole[i].to_bits(), lanes[i].to_bits(), "{op}: element {i}");
            }
        }
    }
}

/// Simulator speed in release builds: `cargo test -p sim --release -- --ignored --nocapture`
/// (or `cargo run -p sim --release --example simrun -- examples/stream.npuasm --throughput 20`).
#[test]
#[ignore]
fn simulated_instructions_per_second() {
    let text = include_str!("../examples/stream.npuasm");
    let k = sim::load("stream", text, &Machine::default()).unwrap();
    let inputs = sim::random_inputs(k.program(), 1);
    let start = std::time::Instant::now();
    let mut n = 0;
    for _ in 0..20 {
        n += sim::simulate(&k, &inputs, &SimOptions::default())
            .unwrap()
            .report
            .instructions;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    println!("{:.2} M simulated instructions/s", rate / 1e6);
    assert!(rate >= 5e6 || cfg!(debug_assertions), "{rate}");
}

/// Runs `img2col` on an f16 feature map [c1][h][w][16] and reads the L0A matrix back through
/// the cube (A·I, exact) and L0C -> UB -> GM, against a plain-loop im2col.
fn img2col_case(h: usize, w: usize, c1: usize, k: usize, stride: usize, pad: usize, pos: usize) {
    let oh = (h + 2 * pad - k) / stride + 1;
    let ow = (w + 2 * pad - k) / stride + 1;
    let k1 = c1 * k * k;
    let m1 = (oh * ow - pos).div_ceil(16).min(2);
    let fmap = ramp(c1 * h * w * 16, |i| ((i * 37) % 101) as f64 - 50.0);
    // B = I (144 × 144 at most) in zN, fractal by fractal.
    let mut eye = vec![0.0; k1 * k1 * 256];
    for f in 0..k1 {
        for d in 0..16 {
            eye[(f * k1 + f) * 256 + d * 16 + d] = 1.0;
        }
    }
    let text = format!(
        "kernel im2col
param x : f16[{xs}] in
param eye : f16[{es}] in
param y : f16[{ys}] out
buffer l1 : L1, {l1}
buffer l1e : L1, {eb}
buffer l0a : L0A, {ab}
buffer l0b : L0B, {eb}
buffer l0c : L0C, {cb}
buffer ub : UB, {ub}
copy l1[0], x[0], len={xl}
copy l1e[0], eye[0], len={el}
set_flag MTE2, MTE1, 0
wait_flag MTE2, MTE1, 0
img2col l0a[0], l1[0], h={h}, w={w}, c1={c1}, kh={k}, kw={k}, stride={stride}, pad={pad}, pos={pos}, m1={m1}
load2d l0b[0], l1e[0], repeat={kk}
set_flag MTE1, M, 0
wait_flag MTE1, M, 0
mmad.f32 l0c[0], l0a[0], l0b[0], m={m}, k={kn}, n={kn}, init
set_flag M, V, 0
wait_flag M, V, 0
copy_cc_to_ub ub[0], l0c[0], len={cf}, f16
set_flag V, MTE3, 0
wait_flag V, MTE3, 0
copy y[0], ub[0], len={yl}
",
        xs = fmap.len(),
        es = eye.len(),
        ys = m1 * k1 * 256,
        l1 = fmap.len() * 2,
        eb = eye.len() * 2,
        ab = m1 * k1 * 512,
        cb = m1 * k1 * 1024,
        ub = m1 * k1 * 512,
        xl = fmap.len() / 16,
        el = eye.len() / 16,
        kk = k1 * k1,
        m = m1 * 16,
        kn = k1 * 16,
        cf = m1 * k1,
        yl = m1 * k1 * 16,
    );
    let kernel = sim::load("im2col", &text, &Machine::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let mut inputs = BTreeMap::new();
    inputs.insert(
        "x".into(),
        Tensor::new(DType::F16, vec![fmap.len() as u64], fmap.clone()),
    );
    inputs.insert(
        "eye".into(),
        Tensor::new(DType::F16, vec![eye.len() as u64], eye),
    );
    let out = sim::simulate(&kernel, &inputs, &SimOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let y = &out.outputs["y"].data;
    // C is nZ: [N1][M1][16][16]; column n of the im2col matrix is (c, i, j, c0).
    for row in 0..m1 * 16 {
        for col in 0..k1 * 16 {
            let (f, c0) = (col / 16, col % 16);
            let (c, i, j) = (f / (k * k), (f / k) % k, f % k);
            let p = pos + row;
            let expect = if p < oh * ow {
                let y0 = (p / ow * stride + i) as i64 - pad as i64;
                let x0 = (p % ow * stride + j) as i64 - pad as i64;
                if (0..h as i64).contains(&y0) && (0..w as i64).contains(&x0) {
                    fmap[((c * h + y0 as usize) * w + x0 as usize) * 16 + c0]
                } else {
                    0.0
                }
            } else {
                0.0
            };
            let got = y[((f * m1 + row / 16) * 16 + row % 16) * 16 + c0];
            assert_eq!(got, expect, "row {row} column {col}");
        }
    }
}

#[test]
fn img2col_matches_a_plain_loop_im2col() {
    // 3×3 kernel, padding 1: the padded border and the positions past the output read 0.
    img2col_case(4, 5, 1, 3, 1, 1, 0);
    // Two channel slices, stride 2, no padding, starting at output position 3.
    img2col_case(7, 6, 2, 2, 2, 0, 3);
}

/// Rows of 5 f32 (20 bytes, off the 32-byte grid) into UB padded with zeros to one block
/// each, then back out to GM rows of another length, writing only their bytes.
#[test]
fn copy_pad_moves_rows_off_the_block_grid() {
    let x = ramp(7 * 5, |i| 1.0 + i as f64);
    let text = "kernel pad
param x : f32[7, 5] in
param z : f32[7, 6] inout
buffer u : UB, 224
// Rows 1..7 of x (starting at byte 20), one block per row.
copy_pad u[0], x[20], n_burst=6, bytes=20, src_stride=20, dst_stride=32
set_flag MTE2, MTE3, 0
wait_flag MTE2, MTE3, 0
// Each UB row's first 6 elements (the 5 values and a padding zero) to row i of z.
copy_pad z[0], u[0], n_burst=6, bytes=24, src_stride=32, dst_stride=24
";
    let kernel = sim::load("pad", text, &Machine::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let mut inputs = BTreeMap::new();
    inputs.insert("x".into(), Tensor::new(DType::F32, vec![7, 5], x.clone()));
    inputs.insert(
        "z".into(),
        Tensor::new(DType::F32, vec![7, 6], vec![-1.0; 42]),
    );
    let out = sim::simulate(&kernel, &inputs, &SimOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let z = &out.outputs["z"].data;
    for r in 0..6 {
        for c in 0..5 {
            assert_eq!(z[r * 6 + c], x[(r + 1) * 5 + c], "z[{r}][{c}]");
        }
        assert_eq!(z[r * 6 + 5], 0.0, "the padding of row {r}");
    }
    assert!(z[36..].iter().all(|&v| v == -1.0), "row 6 is untouched");
    assert_eq!(out.report.gm_read_bytes, 6 * 20);
    assert_eq!(out.report.gm_written_bytes, 6 * 24);

    // A burst past the tensor's last element is an error, even inside its last 32-byte block.
    let past =
        "kernel past\nparam x : f32[7, 5] in\nbuffer u : UB, 64\ncopy_pad u[0], x[120], bytes=24\n";
    let kernel = sim::load("past", past, &Machine::default()).unwrap();
    let mut inputs = BTreeMap::new();
    inputs.insert("x".into(), Tensor::new(DType::F32, vec![7, 5], x));
    let e = sim::simulate(&kernel, &inputs, &SimOptions::default()).unwrap_err();
    let e = e.render(false);
    assert!(
        e.contains("reads bytes 120..144 of `x`, which has 140 bytes"),
        "{e}"
    );
    // Bytes that are not whole elements, and a destination stride off the block grid.
    for (bad, why) in [
        (
            "copy_pad u[0], x[0], bytes=6",
            "multiples of the 4-byte elements",
        ),
        (
            "copy_pad u[0], x[0], n_burst=2, bytes=8, dst_stride=16",
            "not a multiple of 32",
        ),
        (
            "copy_pad u[0], x[0], bytes=40, len=1",
            "cannot hold a burst of 40 bytes",
        ),
    ] {
        let text = format!("kernel bad\nparam x : f32[7, 5] in\nbuffer u : UB, 64\n{bad}\n");
        let e = sim::load("bad", &text, &Machine::default()).unwrap_err();
        assert!(e.to_string().contains(why), "{bad}: {e}");
    }
}

/// A 16×32×16 product of f32 operands: A row-major, B through `load2d … transpose, f32`, on
/// top of an initial C copied from UB; each product is rounded to f32 before it is added.
#[test]
fn f32_operands_and_an_initial_accumulator() {
    let (m, k, n) = (16usize, 32usize, 16usize);
    let a = ramp(m * k, |i| ((i * 7) % 23) as f64 / 7.0 - 1.3);
    let b = ramp(k * n, |i| ((i * 5) % 19) as f64 / 3.0 - 2.9);
    let c0 = ramp(m * n, |i| i as f64 / 9.0);
    let text = "kernel mm32
param a : f32[16, 32] in
param b : f32[32, 16] in
param c0 : f32[16, 16] in
param c : f32[16, 16] out
buffer l1a : L1, 2048
buffer l1b : L1, 2048
buffer l0a : L0A, 2048
buffer l0b : L0B, 2048
buffer l0c : L0C, 1024
buffer ub : UB, 1024
// A as [K1=2][16 m][16 k]: 64-byte pieces of its rows; B as [16 k rows][16 n] twice.
for j in 0..2 {
    copy l1a[j*1024], a[j*64], n_burst=16, len=2, src_gap=2
}
copy l1b[0], b[0], len=64
copy ub[0], c0[0], len=32
set_flag MTE2, MTE1, 0
set_flag MTE2, V, 0
wait_flag MTE2, MTE1, 0
wait_flag MTE2, V, 0
load2d l0a[0], l1a[0], repeat=2, f32
load2d l0b[0], l1b[0], repeat=2, transpose, f32
copy_ub_to_cc l0c[0], ub[0], len=1
set_flag MTE1, M, 0
set_flag V, M, 0
wait_flag MTE1, M, 0
wait_flag V, M, 0
mmad.f32 l0c[0], l0a[0], l0b[0], m=16, k=32, n=16, acc, src_f32
set_flag M, V, 0
wait_flag M, V, 0
copy_cc_to_ub ub[0], l0c[0], len=1
set_flag V, MTE3, 0
wait_flag V, MTE3, 0
copy c[0], ub[0], len=32
";
    let kernel = sim::load("mm32", text, &Machine::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let mut inputs = BTreeMap::new();
    inputs.insert("a".into(), Tensor::new(DType::F32, vec![16, 32], a.clone()));
    inputs.insert("b".into(), Tensor::new(DType::F32, vec![32, 16], b.clone()));
    inputs.insert(
        "c0".into(),
        Tensor::new(DType::F32, vec![16, 16], c0.clone()),
    );
    let out = sim::simulate(&kernel, &inputs, &SimOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let c = &out.outputs["c"].data;
    let (a, b, c0): (Vec<f32>, Vec<f32>, Vec<f32>) = (
        a.iter().map(|&v| v as f32).collect(),
        b.iter().map(|&v| v as f32).collect(),
        c0.iter().map(|&v| v as f32).collect(),
    );
    for i in 0..m {
        for j in 0..n {
            let mut acc = c0[i * n + j];
            for kk in 0..k {
                let p = a[i * k + kk] * b[kk * n + j];
                acc += p;
            }
            assert_eq!(c[i * n + j], acc as f64, "c[{i}][{j}]");
        }
    }
    // Two fractal-MACs at the f32 rate.
    let m = Machine::default();
    assert_eq!(out.report.cube_fractal_macs, 2);
    assert_eq!(
        out.report
            .pipes
            .iter()
            .find(|p| p.pipe == "M")
            .map(|p| p.busy_cycles),
        Some(m.cube_startup + 2 * m.cube_per_fractal_f32 + 3 * m.sync_cost)
    );
}

/// MTE3 writing the even 64-byte rows of a GM tensor while MTE2 reads its odd rows does not
/// race: a strided copy touches its bursts, not the gaps between them. Reading the even rows
/// instead does.
#[test]
fn strided_copies_touch_only_their_bursts() {
    let run = |read_from: u32| {
        let text = format!(
            "kernel rows
param x : f32[8, 16] in
param z : f32[8, 16] inout
buffer u : UB, 512
buffer v : UB, 512
copy u[0], x[0], n_burst=4, len=2, src_gap=2
set_flag MTE2, MTE3, 0
wait_flag MTE2, MTE3, 0
copy z[0], u[0], n_burst=4, len=2, dst_gap=2
copy v[0], z[{read_from}], n_burst=4, len=2, src_gap=2
"
        );
        let kernel = sim::load("rows", &text, &Machine::default()).unwrap();
        let mut inputs = BTreeMap::new();
        for name in ["x", "z"] {
            inputs.insert(
                name.into(),
                Tensor::new(DType::F32, vec![8, 16], ramp(128, |i| i as f64)),
            );
        }
        sim::simulate(&kernel, &inputs, &SimOptions::default()).map_err(|e| e.render(false))
    };
    run(64).unwrap_or_else(|e| panic!("{e}"));
    let e = run(0).expect_err("the even rows race");
    assert!(e.contains("race on GM"), "{e}");
}

/// One output row of a 3-channel 3×3 convolution through `load3d`: each channel's three input
/// rows in L1, the im2col matrix built in L0B, the weights (27 taps padded to 32) in L0A, an
/// f32 product, against a plain loop.
#[test]
fn load3d_builds_the_im2col_rows_of_a_convolution() {
    let (c, h, w) = (3usize, 4usize, 10usize);
    let x = ramp(c * h * w, |i| ((i * 7) % 13) as f64 / 4.0 - 1.5);
    let wt = ramp(16 * 32, |i| ((i * 5) % 11) as f64 / 3.0 - 1.7);
    let text = "kernel conv
param x : f32[3, 4, 10] in
param wt : f32[16, 32] in
param c : f32[16, 16] out
buffer l1x : L1, 416
buffer l1w : L1, 2048
buffer l0a : L0A, 2048
buffer l0b : L0B, 2048
buffer l0c : L0C, 1024
buffer ub : UB, 1024
// Output row 1 reads input rows 1..3 of each channel: 30 elements, 128 bytes apart.
copy_pad l1x[0], x[40], n_burst=3, bytes=120, src_stride=160, dst_stride=128
for j in 0..2 {
    copy l1w[j*1024], wt[j*64], n_burst=16, len=2, src_gap=2
}
set_flag MTE2, MTE1, 0
wait_flag MTE2, MTE1, 0
load2d l0a[0], l1w[0], repeat=2, f32
load3d l0b[0], l1x[0], c=3, cs=32, w=10, kh=3, kw=3, k=32, n=16, f32
set_flag MTE1, M, 0
wait_flag MTE1, M, 0
mmad.f32 l0c[0], l0a[0], l0b[0], m=16, k=32, n=16, init, src_f32
set_flag M, V, 0
wait_flag M, V, 0
copy_cc_to_ub ub[0], l0c[0], len=1
set_flag V, MTE3, 0
wait_flag V, MTE3, 0
copy c[0], ub[0], len=32
";
    let kernel = sim::load("conv", text, &Machine::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let mut inputs = BTreeMap::new();
    inputs.insert(
        "x".into(),
        Tensor::new(DType::F32, vec![3, 4, 10], x.clone()),
    );
    inputs.insert(
        "wt".into(),
        Tensor::new(DType::F32, vec![16, 32], wt.clone()),
    );
    let out = sim::simulate(&kernel, &inputs, &SimOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let got = &out.outputs["c"].data;
    for m in 0..16 {
        // The 8 output columns the 10-wide rows give; the others read past them.
        for col in 0..w - 2 {
            let mut acc = 0f32;
            for ci in 0..c {
                for i in 0..3 {
                    for j in 0..3 {
                        let tap = wt[m * 32 + (ci * 3 + i) * 3 + j] as f32;
                        acc += tap * x[(ci * h + 1 + i) * w + col + j] as f32;
                    }
                }
            }
            assert_eq!(got[m * 16 + col], acc as f64, "c[{m}][{col}]");
        }
    }
    assert_eq!(out.report.path_bytes["L1->L0B"], 32 * 16 * 4);
    // L0A is not a destination.
    let bad = text.replace("load3d l0b[0]", "load3d l0a[0]");
    let e = sim::load("conv", &bad, &Machine::default()).unwrap_err();
    assert!(
        e.to_string().contains("into L0A is not supported yet"),
        "{e}"
    );
}

/// Two kernels in one file: the second reads what the first wrote, after every block of the
/// first; the report adds them up; errors point into the whole file.
#[test]
fn kernels_of_one_file_run_one_after_another() {
    let text = "kernel first blockdim=2
param x : f32[64] in
param t : f32[64] out
buffer u : UB, 256
copy u[0], x[block_idx*128], len=4
set_flag MTE2, V, 0
wait_flag MTE2, V, 0
vadds.f32 u[0], u[0], 1.0
set_flag V, MTE3, 0
wait_flag V, MTE3, 0
copy t[block_idx*128], u[0], len=4

// The second kernel reads t reversed in halves: each block the other block's half.
kernel second blockdim=2
param t : f32[64] in
param y : f32[64] out
buffer u : UB, 128
copy u[0], t[128 - block_idx*128], len=4
set_flag MTE2, MTE3, 0
wait_flag MTE2, MTE3, 0
copy y[block_idx*128], u[0], len=4
";
    let kernels = sim::load_all("two.npuasm", text, &Machine::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    assert_eq!(kernels.len(), 2);
    let x = ramp(64, |i| i as f64);
    let mut inputs = BTreeMap::new();
    inputs.insert(
        "x".to_string(),
        Tensor::new(DType::F32, vec![64], x.clone()),
    );
    assert_eq!(
        sim::inputs_of(&kernels),
        vec![(0, "x".to_string())],
        "t is the first kernel's"
    );
    let out = sim::simulate_all(&kernels, &inputs, &SimOptions::default())
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let y = &out.outputs["y"].data;
    for i in 0..32 {
        assert_eq!(y[i], x[i + 32] + 1.0);
        assert_eq!(y[i + 32], x[i] + 1.0);
    }
    assert_eq!(out.outputs["t"].data[0], 1.0);
    assert_eq!(out.report.kernel, "first + second");
    assert_eq!(out.report.blocks, 4);
    assert_eq!(out.report.gm_read_bytes, 2 * 256);
    // An error in the second kernel points at its line of the file.
    let bad = text.replace("copy y[block_idx*128]", "copy z[block_idx*128]");
    let e = sim::load_all("two.npuasm", &bad, &Machine::default()).unwrap_err();
    assert!(
        e.render(false).contains("two.npuasm:21"),
        "{}",
        e.render(false)
    );
    // One tensor, two shapes.
    let bad = text.replace("param t : f32[64] in", "param t : f32[32] in");
    let e = sim::load_all("two.npuasm", &bad, &Machine::default()).unwrap_err();
    assert!(e.to_string().contains("one type and shape"), "{e}");
}

#[test]
fn tally_counts_statement_instances_and_takes_no_time() {
    let run = |text: &str| {
        let kernel = sim::load("tally.npuasm", text, &Machine::default()).expect("assembles");
        sim::simulate(&kernel, &BTreeMap::new(), &SimOptions::default())
            .expect("runs")
            .report
    };
    let body = |tally: &str| {
        format!(
            "kernel t\nbuffer u : UB, 64\nfor i in 0..5 {{\n{tally}    st.f32 u[4*i], 1.0\n}}\n"
        )
    };
    let (plain, tallied) = (run(&body("")), run(&body("    tally\n")));
    assert_eq!((plain.scalar_instances, tallied.scalar_instances), (0, 5));
    assert_eq!(plain.cycles, tallied.cycles);
    assert_eq!(plain.instructions, tallied.instructions);
    assert!(tallied
        .to_text()
        .contains("statement instances on the scalar unit: 5\n"));
}
