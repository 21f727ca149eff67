//! The event-driven timing model and the multi-core model: waits issued before their sets,
//! bounded pipe queues, deadlocks that only show once nothing can run, GM bandwidth shared over
//! time between cores, and GM races between blocks.

use std::collections::BTreeMap;

use sim::{DType, Machine, Outcome, SimOptions, Tensor, DEFAULT_MACHINE};

fn machine(replace: &[(&str, &str)]) -> Machine {
    let mut text = DEFAULT_MACHINE.to_string();
    for (from, to) in replace {
        assert!(text.contains(from), "{from}");
        text = text.replace(from, to);
    }
    Machine::parse("test.machine", &text).expect("machine parses")
}

fn run_on(
    m: &Machine,
    text: &str,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<Outcome, sim::Error> {
    let kernel = sim::load("test.npuasm", text, m)?;
    sim::simulate(&kernel, inputs, &SimOptions::default())
}

fn ramp(name: &str, n: usize) -> BTreeMap<String, Tensor> {
    let mut inputs = BTreeMap::new();
    inputs.insert(
        name.to_string(),
        Tensor::new(DType::F16, vec![n as u64], (0..n).map(|i| i as f64)),
    );
    inputs
}

/// V's wait is issued before MTE2's copy and set: V's queue holds it until the set has run, so
/// the add reads the copied values, and S is never blocked.
const WAIT_FIRST: &str = "kernel wait_first
param x : f16[128] in
param z : f16[128] out
buffer ub_x : UB, 256
buffer ub_z : UB, 256
wait_flag MTE2, V, 0
vadds.f16 ub_z[0], ub_x[0], 1.0
set_flag V, MTE3, 0
copy ub_x[0], x[0], len=8
set_flag MTE2, V, 0
wait_flag V, MTE3, 0
copy z[0], ub_z[0], len=8
";

#[test]
fn a_wait_issued_before_its_set_runs_once_the_set_has_run() {
    let out = run_on(&Machine::default(), WAIT_FIRST, &ramp("x", 128)).expect("runs");
    let z = &out.outputs["z"].data;
    assert!(
        z.iter().enumerate().all(|(i, &v)| v == i as f64 + 1.0),
        "{z:?}"
    );
    // The copy in (10 + 256/60 rounded up = 15 cycles) starts at issue 4 and ends at 19; the
    // set runs 19..20, V's wait 20..21, the add 21..26 (4 + 1 repeat), the set 26..27, MTE3's
    // wait 27..28 and the copy out 28..41 (10 + 256/110 rounded up).
    assert_eq!(out.report.cycles, 41, "{}", out.report.to_text());
}

#[test]
fn a_wait_whose_set_never_comes_is_a_deadlock_at_the_end() {
    let text = WAIT_FIRST.replace("set_flag MTE2, V, 0\n", "");
    let e = run_on(&Machine::default(), &text, &ramp("x", 128)).unwrap_err();
    assert_eq!(
        e.message(),
        "deadlock: `wait_flag MTE2, V, 0` (line 6) waits on pipe V for event 0 from pipe MTE2, \
         which no `set_flag MTE2, V, 0` sets; pipe V would stall forever"
    );
}

#[test]
fn a_full_queue_stalls_the_scalar_unit_and_can_deadlock() {
    // Depth 2: V's queue holds the wait and the add; the third V instruction would need a slot
    // that frees only when the wait runs, after a set S has not issued yet.
    let m = machine(&[("queue.depth = 32", "queue.depth = 2")]);
    let text = WAIT_FIRST.replace(
        "set_flag V, MTE3, 0\n",
        "vadds.f16 ub_z[0], ub_z[0], 1.0\nset_flag V, MTE3, 0\n",
    );
    let e = run_on(&m, &text, &ramp("x", 128)).unwrap_err();
    assert!(
        e.message().contains(
            "the scalar unit cannot issue `vadds.f16 ub_z[0], ub_z[0], 1.0` (line 8) because \
             pipe V's queue is full (depth 2)"
        ),
        "{}",
        e.message()
    );
    // With the set first the same program runs, and a deeper queue runs it either way.
    assert!(run_on(&Machine::default(), &text, &ramp("x", 128)).is_ok());
    // A full queue only delays S: 40 copies on MTE2 with depth 2 take as long as with 32.
    let copies = "kernel many
param x : f16[128] in
buffer ub : UB, 256
for i in 0..40 {
    copy ub[0], x[0], len=8
}
";
    let deep = run_on(&Machine::default(), copies, &ramp("x", 128)).expect("runs");
    let shallow = run_on(&m, copies, &ramp("x", 128)).expect("runs");
    assert_eq!(deep.report.cycles, shallow.report.cycles);
    // The loop's setup takes S one cycle, the first issue one more.
    assert_eq!(deep.report.cycles, 2 + 40 * 15);
}

/// Each block copies its 16 KiB half of `x` into UB and back out; block 1 first keeps its
/// vector unit busy for `DELAY` repeats when `delay` is set, so its copies start later.
fn two_cores(delay: bool) -> String {
    let wait = if delay {
        "if block_idx == 1 {
    for i in 0..40 {
        vexp.f16 ub[0], ub[0], repeat=64
    }
    pipe_barrier V
}
"
    } else {
        ""
    };
    format!(
        "kernel halves blockdim=2
param x : f16[16384] in
param y : f16[16384] out
buffer ub : UB, 16384
{wait}copy ub[0], x[block_idx*16384], len=512
set_flag MTE2, MTE3, 0
wait_flag MTE2, MTE3, 0
copy y[block_idx*16384], ub[0], len=512
"
    )
}

#[test]
fn gm_copies_of_cores_that_overlap_share_the_bandwidth() {
    // 100 bytes/cycle for the whole GM: one core alone copies in at 60, two at once must share.
    let m = machine(&[
        ("gm.bandwidth = 1024", "gm.bandwidth = 100"),
        ("cores = 32", "cores = 2"),
    ]);
    let inputs = ramp("x", 16384);
    let alone = run_on(
        &m,
        &two_cores(false).replace("blockdim=2", "blockdim=1"),
        &inputs,
    )
    .expect("runs");
    let mte2 = |o: &Outcome| {
        o.report
            .pipes
            .iter()
            .find(|p| p.pipe == "MTE2")
            .expect("MTE2 reported")
            .busy_cycles
    };
    // 16 KiB at the GM->UB path's 60 bytes/cycle after a 10-cycle startup, and the set_flag.
    assert_eq!(mte2(&alone), 10 + 16384u64.div_ceil(60) + 1);
    let together = run_on(&m, &two_cores(false), &inputs).expect("runs");
    let apart = run_on(&m, &two_cores(true), &inputs).expect("runs");
    for o in [&together, &apart] {
        assert_eq!(o.outputs["y"].data, inputs["x"].data);
    }
    // Overlapping copies take longer each than a copy alone; copies apart in time do not.
    assert!(
        mte2(&together) > 2 * mte2(&alone),
        "{}",
        together.report.to_text()
    );
    assert_eq!(mte2(&apart), 2 * mte2(&alone), "{}", apart.report.to_text());
    // Together the two moved 32 KiB at no more than 100 bytes/cycle.
    assert!(together.report.cycles >= 32768 / 100);
    assert!(together.report.cycles < apart.report.cycles);
}

#[test]
fn blocks_writing_the_same_gm_bytes_race() {
    let text = "kernel clash blockdim=2
param x : f16[256] in
param y : f16[256] out
buffer ub : UB, 512
copy ub[0], x[0], len=16
set_flag MTE2, MTE3, 0
wait_flag MTE2, MTE3, 0
copy y[0], ub[0], len=16
";
    let e = run_on(&Machine::default(), text, &ramp("x", 256)).unwrap_err();
    assert_eq!(
        e.message(),
        "race on GM bytes 512..1024 (`y` + 0..512) between blocks: `copy y[0], ub[0], len=16` \
         (line 8) of block 0 writes them and `copy y[0], ub[0], len=16` (line 8) of block 1 \
         writes them, and nothing orders two blocks"
    );
    // Reading the same input is no race, and interleaved columns of one output do not overlap.
    let ok = text.replace(
        "copy y[0], ub[0], len=16",
        "copy y[block_idx*32], ub[0], n_burst=8, len=1, dst_gap=1",
    );
    run_on(&Machine::default(), &ok, &ramp("x", 256)).expect("no race");
}

/// Two stages with GM in between: each block copies its half of x to y, then, after
/// `sync_all`, the other block's half of y to z.
const STAGES: &str = "kernel stages blockdim=2
param x : f32[128] in
param y : f32[128] out
param z : f32[128] out
buffer ub : UB, 512
copy ub[0], x[256*block_idx], len=8
set_flag MTE2, MTE3, 0
wait_flag MTE2, MTE3, 0
copy y[256*block_idx], ub[0], len=8
sync_all
copy ub[256], y[256 - 256*block_idx], len=8
set_flag MTE2, MTE3, 1
wait_flag MTE2, MTE3, 1
copy z[256*block_idx], ub[256], len=8
";

#[test]
fn sync_all_orders_the_blocks_gm_accesses() {
    let mut inputs = BTreeMap::new();
    inputs.insert(
        "x".to_string(),
        Tensor::new(DType::F32, vec![128], (0..128).map(|i| i as f64)),
    );
    let out = run_on(&Machine::default(), STAGES, &inputs).expect("runs");
    let z = &out.outputs["z"].data;
    for (i, v) in z.iter().enumerate() {
        assert_eq!(*v, ((i + 64) % 128) as f64, "{i}");
    }
    // Without it, block 1 reads the half of y that block 0 writes.
    let e = run_on(
        &Machine::default(),
        &STAGES.replace("sync_all\n", ""),
        &inputs,
    )
    .unwrap_err();
    assert!(
        e.message().starts_with("race on GM bytes"),
        "{}",
        e.message()
    );
    // A block that works longer before the barrier holds the other one back: the second
    // stage (two copies of at least their 10-cycle startups) starts after block 1's two
    // vector instructions (4 + 255 cycles each).
    let slow = STAGES.replace(
        "sync_all\n",
        "if block_idx == 1 {\n    vdup.f32 ub[256], 0.0, repeat=255, rep=0\n    vdup.f32 ub[256], 0.0, repeat=255, rep=0\n}\nsync_all\n",
    );
    let slow_out = run_on(&Machine::default(), &slow, &inputs).expect("runs");
    assert!(
        slow_out.report.cycles >= 2 * (4 + 255) + 2 * 10,
        "{} vs {}",
        slow_out.report.cycles,
        out.report.cycles
    );
}

#[test]
fn sync_all_needs_every_block_on_a_core_and_at_the_barrier() {
    let m = machine(&[("cores = 32", "cores = 1")]);
    let e = sim::load("test.npuasm", STAGES, &m).unwrap_err();
    assert!(
        e.message().contains("`sync_all` needs every block on a core of its own: blockdim=2 but the machine has 1 cores"),
        "{}",
        e.message()
    );
    let mut inputs = BTreeMap::new();
    inputs.insert(
        "x".to_string(),
        Tensor::new(DType::F32, vec![128], (0..128).map(|i| i as f64)),
    );
    let skipped = STAGES.replace("sync_all\n", "if block_idx == 0 {\n    sync_all\n}\n");
    let e = run_on(&Machine::default(), &skipped, &inputs).unwrap_err();
    assert_eq!(
        e.message(),
        "deadlock: block 0 waits at a `sync_all` that block 1 ended without reaching"
    );
}
