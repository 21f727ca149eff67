//! The simulator driver: runs every block of a kernel, executing each instruction's numerics in
//! program order while the timing model and the hazard checker follow along.
//!
//! The scalar pipe S runs the program in order: it executes scalar instructions itself and
//! issues every other instruction, with its operand values of that moment, into its pipe's
//! bounded queue. A pipe runs its queue in order as soon as the head can run: a `wait_flag`
//! head waits until a matching `set_flag` has run, which may come later in program order. So
//! instructions execute (numerics, hazard checks, timing) in an order consistent with
//! happens-before; a race-free program computes the same values in every such order, and a
//! program that is not race-free is rejected. S stalls on a full queue, on a `wait_flag` to S
//! and on `pipe_barrier`; when nothing can run any more while work is left, that is a deadlock.
//!
//! Blocks on one core run one after another; cores run side by side, interleaved by issue
//! time, and their GM copies share the total GM bandwidth over time (`gmbus`). GM accesses of
//! different blocks to overlapping bytes, one a write, are races unless a `sync_all` separates
//! them: the k-th `sync_all` of every block (each on a core of its own) ends the k-th epoch, and
//! a block leaves it once all blocks have arrived with their pipes drained.

mod cube;
mod dma;
mod operands;
mod scalar;
mod sync;
mod vector;

use std::collections::{BTreeMap, VecDeque};

use crate::assemble::{Exec, Kernel, Lin, Op, SVal, Var};
use crate::diagnostic::{Diagnostic, Error};
use crate::exec;
use crate::gmbus::GmBus;
use crate::hazards::{Clock, Hazards};
use crate::isa::*;
use crate::report::{Occupancy, Report, Timeline};
use crate::timing::Timing;
use crate::Tensor;

/// What a simulation returns.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub outputs: BTreeMap<String, Tensor>,
    pub report: Report,
    pub timeline: Option<Timeline>,
}

/// Options of one run.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Record per-pipe busy intervals and occupancy for an SVG timeline (core 0).
    pub timeline: bool,
    /// Stop with an error after this many executed instructions (0: no limit), so that a
    /// program that loops for too long ends with a diagnostic.
    pub max_instructions: u64,
    /// Stop with an error once a core's issue time passes this many cycles (0: no limit).
    pub max_cycles: u64,
}

impl SimOptions {
    /// The default instruction budget: a runaway loop of vector instructions and flags, the
    /// slowest mix to simulate (about two million a second), stops within ten seconds; the
    /// kernels of `kernels/` execute at most six million instructions.
    pub const MAX_INSTRUCTIONS: u64 = 20_000_000;
    /// The default cycle budget: a hundred seconds of a 1 GHz core, far beyond any kernel's
    /// run (the longest of `kernels/` takes 30 million cycles).
    pub const MAX_CYCLES: u64 = 100_000_000_000;
}

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions {
            timeline: false,
            max_instructions: SimOptions::MAX_INSTRUCTIONS,
            max_cycles: SimOptions::MAX_CYCLES,
        }
    }
}

struct FlagToken {
    time: u64,
    clock: Clock,
}

struct Stats {
    instructions: u64,
    /// Statement instances computed on the scalar unit (`tally`).
    tallied: u64,
    busy: [u64; Pipe::COUNT],
    fractal_macs: u64,
    path_bytes: [u64; CopyPath::COUNT],
    gm_read: u64,
    gm_written: u64,
    /// Per core, per buffer: first touch start and last touch end.
    touch: Vec<Vec<Option<(u64, u64)>>>,
    warnings: Vec<String>,
}

/// A GM byte range one block read or wrote (adjacent accesses of one kind merged).
#[derive(Clone, Copy)]
struct GmAccess {
    lo: u64,
    hi: u64,
    write: bool,
    block: u32,
    site: u32,
    /// The `sync_all`s the block had passed.
    epoch: u32,
}

/// The bytes an operand touches: `len` bytes every `period` bytes from `lo` up to `hi`
/// (`period` 0: all of `lo..hi`).
#[derive(Clone, Copy)]
pub(super) struct Burst {
    op: usize,
    lo: u64,
    hi: u64,
    period: u64,
    len: u64,
    write: bool,
}

impl Burst {
    /// `n` bursts of `len` bytes every `period` bytes from `lo` (nothing when `n` or `len` is 0).
    pub(super) fn strided(op: usize, lo: u64, n: u64, len: u64, period: u64, write: bool) -> Burst {
        let hi = if n == 0 || len == 0 {
            lo
        } else {
            lo + (n - 1) * period + len
        };
        Burst {
            op,
            lo,
            hi,
            period: if n > 1 && period > len { period } else { 0 },
            len,
            write,
        }
    }
}

/// The operand values an instruction had when S issued it, and where it stands.
struct Frame {
    offs: [i64; 4],
    scalar: Option<SVal>,
    mask: (u64, u64),
    /// The loop counters (slot 0: the block index), for messages.
    slots: Vec<i64>,
    issued: u64,
    clock: Clock,
}

/// An instruction issued to a pipe that has not run yet.
struct Pending {
    pc: u32,
    frame: Frame,
}

struct Machine<'k> {
    k: &'k Kernel,
    gm: Vec<u8>,
    local: Vec<[Vec<u8>; Mem::COUNT]>,
    stats: Stats,
    /// The shared GM bandwidth, when the cores can ask for more than it gives.
    bus: Option<GmBus>,
    /// Every block's GM accesses, when there is more than one block.
    gm_log: Option<Vec<GmAccess>>,
    /// Reused staging buffer for copies between two memories.
    scratch: Vec<u8>,
    max_instructions: u64,
    max_cycles: u64,
}

/// Per-block state.
struct Block {
    id: usize,
    core: usize,
    /// S's next operation.
    pc: usize,
    slots: Vec<i64>,
    sregs: [i64; REGS as usize],
    fregs: [f32; REGS as usize],
    mask: (u64, u64),
    timing: Timing,
    hazards: Hazards,
    flags: Vec<VecDeque<FlagToken>>,
    queues: [VecDeque<Pending>; Pipe::COUNT],
    /// The frame of the instruction executing now.
    f: Frame,
    /// Slot vectors of finished frames, for reuse.
    pool: Vec<Vec<i64>>,
    /// The `sync_all`s passed.
    epoch: u32,
    /// When the block arrived at the `sync_all` it waits at (its pipes drained).
    arrived: Option<u64>,
}

/// How far `run_block` got.
enum Ran {
    /// S's issue time passed the limit.
    Paused,
    /// At a `sync_all`, waiting for the other blocks.
    Waiting,
    Finished,
}

impl Block {
    fn new(k: &Kernel, id: usize, core: usize, start: u64, record: bool) -> Block {
        let mut slots = vec![0; k.slots.max(1)];
        slots[0] = id as i64;
        Block {
            id,
            core,
            pc: 0,
            f: Frame {
                offs: [0; 4],
                scalar: None,
                mask: (u64::MAX, u64::MAX),
                slots: slots.clone(),
                issued: start,
                clock: [0; Pipe::COUNT],
            },
            slots,
            sregs: [0; REGS as usize],
            fregs: [0.0; REGS as usize],
            mask: (u64::MAX, u64::MAX),
            timing: Timing::new(start, k.machine.queue_depth as usize, record),
            hazards: Hazards::new(),
            flags: (0..Pipe::COUNT * Pipe::COUNT * 8)
                .map(|_| VecDeque::new())
                .collect(),
            queues: Default::default(),
            pool: Vec::new(),
            epoch: 0,
            arrived: None,
        }
    }

    /// Runs an instruction of the current frame on `pipe`.
    fn dispatch(&mut self, pipe: Pipe, cost: u64, not_before: u64) -> (u64, u64) {
        self.timing.run(pipe, self.f.issued, cost, not_before)
    }

    /// The current frame's instruction starts on `pipe`: its hazard tick.
    fn begin(&mut self, pipe: Pipe) -> u32 {
        if pipe == Pipe::S {
            self.hazards.begin(Pipe::S)
        } else {
            self.hazards.begin_at(pipe, &self.f.clock)
        }
    }

    fn pending(&self) -> bool {
        self.queues.iter().any(|q| !q.is_empty())
    }
}

fn flag_index(src: Pipe, dst: Pipe, ev: u8) -> usize {
    (src as usize * Pipe::COUNT + dst as usize) * 8 + ev as usize
}

pub(crate) fn simulate(
    k: &Kernel,
    inputs: &BTreeMap<String, Tensor>,
    options: &SimOptions,
) -> Result<Outcome, Error> {
    let machine = &k.machine;
    let cores_used = (k.program.blockdim as usize).min(machine.cores as usize);
    let mut m = Machine {
        k,
        gm: vec![0; k.gm_size as usize],
        local: (0..cores_used)
            .map(|_| {
                let mut mems: [Vec<u8>; Mem::COUNT] = Default::default();
                for mem in Mem::ALL {
                    if mem != Mem::Gm {
                        mems[mem as usize] = vec![0; machine.mem(mem).capacity as usize];
                    }
                }
                mems
            })
            .collect(),
        stats: Stats {
            instructions: 0,
            tallied: 0,
            busy: [0; Pipe::COUNT],
            fractal_macs: 0,
            path_bytes: [0; CopyPath::COUNT],
            gm_read: 0,
            gm_written: 0,
            touch: vec![vec![None; k.bufs.len()]; cores_used],
            warnings: Vec::new(),
        },
        bus: {
            // Contention is possible only if the cores' GM paths together can ask for more
            // than the bus gives; otherwise every copy runs at its path's bandwidth.
            let demand: u64 = CopyPath::ALL
                .iter()
                .filter(|p| {
                    let (from, to) = p.ends();
                    from == Mem::Gm || to == Mem::Gm
                })
                .map(|p| machine.path(*p).bandwidth)
                .sum();
            (demand.saturating_mul(cores_used as u64) > machine.gm_bandwidth)
                .then(|| GmBus::new(machine.gm_bandwidth))
        },
        gm_log: (k.program.blockdim > 1).then(Vec::new),
        scratch: Vec::new(),
        max_instructions: options.max_instructions,
        max_cycles: options.max_cycles,
    };
    for (i, p) in k.program.params.iter().enumerate() {
        let buf = &k.bufs[i];
        match inputs.get(&p.name) {
            Some(t) => {
                if t.data.len() as u64 != p.elements() {
                    return Err(Error::shared(
                        &k.file,
                        &k.text,
                        Diagnostic::new(
                            p.span,
                            format!(
                                "input `{}` has {} elements, the parameter {}",
                                p.name,
                                t.data.len(),
                                p.elements()
                            ),
                        )
                        .with_hint("give a tensor of the declared shape"),
                    ));
                }
                let es = p.dtype.size() as usize;
                for (j, v) in t.data.iter().enumerate() {
                    exec::store(&mut m.gm, buf.base as usize + j * es, p.dtype, *v);
                }
            }
            None if p.role == Role::Out => {}
            None => {
                return Err(Error::shared(
                    &k.file,
                    &k.text,
                    Diagnostic::new(p.span, format!("no input given for `{}`", p.name))
                        .with_hint("every `in` and `inout` parameter needs a tensor"),
                ))
            }
        }
    }
    let mut core_time = vec![0u64; cores_used];
    let mut running: Vec<Option<Block>> = (0..cores_used).map(|_| None).collect();
    let mut next_block: Vec<usize> = (0..cores_used).collect();
    let blockdim = k.program.blockdim as usize;
    let mut timeline: Option<Timeline> = None;
    loop {
        // The core furthest behind in issue time runs next, up to the next core's time, so GM
        // transfers are arbitrated in about the order they are issued.
        let now = |c: usize, running: &[Option<Block>]| {
            running[c].as_ref().map_or(core_time[c], |b| b.timing.issue)
        };
        let mut order: Vec<(u64, usize)> = (0..cores_used)
            .filter(|&c| match &running[c] {
                Some(b) => b.arrived.is_none(),
                None => next_block[c] < blockdim,
            })
            .map(|c| (now(c, &running), c))
            .collect();
        if order.is_empty() {
            if running.iter().all(Option::is_none) {
                break;
            }
            m.release(&mut running)?;
            continue;
        }
        order.sort_unstable();
        let core = order[0].1;
        let limit = order.get(1).map_or(u64::MAX, |o| o.0);
        if let Some(bus) = &mut m.bus {
            let horizon = (0..cores_used)
                .map(|c| match &running[c] {
                    Some(b) => b
                        .queues
                        .iter()
                        .filter_map(|q| q.front().map(|p| p.frame.issued))
                        .fold(b.timing.issue, u64::min),
                    None => core_time[c],
                })
                .min()
                .unwrap_or(0);
            bus.forget_before(horizon);
        }
        let mut block = match running[core].take() {
            Some(b) => b,
            None => {
                let id = next_block[core];
                next_block[core] += cores_used;
                let record = options.timeline && core == 0;
                Block::new(k, id, core, core_time[core], record)
            }
        };
        match m.run_block(&mut block, limit)? {
            Ran::Paused | Ran::Waiting => {
                running[core] = Some(block);
                continue;
            }
            Ran::Finished => {}
        }
        let b = block.id;
        for (i, q) in block.flags.iter().enumerate() {
            if !q.is_empty() {
                let (src, rest) = (i / (Pipe::COUNT * 8), i % (Pipe::COUNT * 8));
                m.stats.warnings.push(format!(
                    "block {b}: flag {}->{} event {} was set {} more time(s) than waited for",
                    Pipe::ALL[src].name(),
                    Pipe::ALL[rest / 8].name(),
                    rest % 8,
                    q.len()
                ));
            }
        }
        for p in Pipe::ALL {
            m.stats.busy[p as usize] += block.timing.busy[p as usize];
        }
        core_time[core] = block.timing.end();
        if let Some(iv) = block.timing.intervals.take() {
            let t = timeline.get_or_insert_with(|| Timeline {
                pipes: vec![Vec::new(); Pipe::COUNT],
                occupancy: Vec::new(),
                end: 0,
            });
            for (dst, src) in t.pipes.iter_mut().zip(iv) {
                dst.extend(src);
            }
        }
    }
    m.cross_block_races()?;
    let total = core_time.iter().copied().max().unwrap_or(0);
    let occupancy = m.occupancy(cores_used);
    if let Some(t) = &mut timeline {
        t.end = total;
        t.occupancy = occupancy.iter().filter(|o| o.core == 0).cloned().collect();
    }
    let mut outputs = BTreeMap::new();
    for (i, p) in k.program.params.iter().enumerate() {
        if p.role == Role::In {
            continue;
        }
        let base = k.bufs[i].base as usize;
        let es = p.dtype.size() as usize;
        let data = (0..p.elements() as usize)
            .map(|j| exec::load(&m.gm, base + j * es, p.dtype))
            .collect();
        outputs.insert(
            p.name.clone(),
            Tensor {
                dtype: p.dtype,
                shape: p.shape.clone(),
                data,
            },
        );
    }
    let report = Report::build(
        k,
        cores_used,
        total,
        (m.stats.instructions, m.stats.tallied),
        m.stats.busy,
        m.stats.fractal_macs,
        m.stats.path_bytes,
        (m.stats.gm_read, m.stats.gm_written),
        &occupancy,
        m.stats.warnings,
        &outputs,
    );
    Ok(Outcome {
        outputs,
        report,
        timeline,
    })
}

impl Machine<'_> {
    fn error(&self, d: Diagnostic) -> Error {
        Error::shared(&self.k.file, &self.k.text, d)
    }

    /// The error of a budget `(limit, what it counts, its option)` that ran out at `e`.
    fn budget_error(&self, b: &Block, e: &Exec, (limit, unit, option): (u64, &str, &str)) -> Error {
        let site = &self.k.sites[e.site as usize];
        let message = format!(
            "stopped after {limit} {unit} at `{}`{}",
            site.text,
            self.context(&b.slots, e.site)
        );
        let hint = format!(
            "the program runs longer than the simulation allows (`{option}`); check its loop bounds"
        );
        self.error(Diagnostic::new(site.span, message).with_hint(hint))
            .budget()
    }

    fn context(&self, slots: &[i64], site: u32) -> String {
        let mut parts = Vec::new();
        if self.k.program.blockdim > 1 {
            parts.push(format!("block_idx={}", slots[0]));
        }
        for (name, slot) in &self.k.sites[site as usize].scope {
            parts.push(format!("{name}={}", slots[*slot as usize]));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" (at {})", parts.join(", "))
        }
    }

    fn eval(&self, b: &Block, l: &Lin) -> i64 {
        let mut v = l.c;
        for (var, k) in &l.terms {
            let x = match var {
                Var::Slot(s) => b.slots[*s as usize],
                Var::SReg(r) => b.sregs[*r as usize],
            };
            v = v.wrapping_add(x.wrapping_mul(*k));
        }
        v
    }

    fn sval(&self, b: &Block, s: SVal) -> (f64, bool) {
        match s {
            SVal::Int(v) => (v as f64, false),
            SVal::Float(v) => (v as f64, true),
            SVal::FReg(r) => (b.fregs[r as usize] as f64, true),
            SVal::Var(var) => (
                match var {
                    Var::Slot(s) => b.slots[s as usize],
                    Var::SReg(r) => b.sregs[r as usize],
                } as f64,
                false,
            ),
        }
    }

    fn sint(&self, b: &Block, s: SVal) -> i64 {
        match s {
            SVal::Int(v) => v,
            SVal::Var(Var::Slot(x)) => b.slots[x as usize],
            SVal::Var(Var::SReg(r)) => b.sregs[r as usize],
            // The assembler rejects float operands of integer instructions.
            SVal::Float(v) => v as i64,
            SVal::FReg(r) => b.fregs[r as usize] as i64,
        }
    }

    /// Runs S until its issue time passes `limit`, it arrives at a `sync_all` or the program
    /// ends (every queue drained).
    fn run_block(&mut self, b: &mut Block, limit: u64) -> Result<Ran, Error> {
        let k = self.k;
        let issue = k.machine.scalar_issue;
        while b.pc < k.code.len() {
            if b.timing.issue > limit {
                return Ok(Ran::Paused);
            }
            match &k.code[b.pc] {
                Op::Exec(e) if matches!(e.instr, Instr::Tally) => {
                    self.stats.tallied += 1;
                    b.pc += 1;
                }
                Op::Exec(e) => {
                    self.stats.instructions += 1;
                    if self.max_instructions != 0 && self.stats.instructions > self.max_instructions
                    {
                        let limit = (self.max_instructions, "instructions", "--max-instructions");
                        return Err(self.budget_error(b, e, limit));
                    }
                    if self.max_cycles != 0 && b.timing.issue > self.max_cycles {
                        return Err(self.budget_error(
                            b,
                            e,
                            (self.max_cycles, "cycles", "--max-cycles"),
                        ));
                    }
                    let pipe = e.pipe;
                    if matches!(e.instr, Instr::SyncAll) {
                        self.arrive(b)?;
                        b.pc += 1;
                        return Ok(Ran::Waiting);
                    }
                    if pipe == Pipe::S {
                        self.load_frame(b, e);
                        self.exec(b, e)?;
                    } else {
                        self.issue(b, e, pipe)?;
                    }
                    b.pc += 1;
                }
                Op::LoopInit {
                    slot,
                    start,
                    end,
                    exit,
                } => {
                    b.timing.scalar(issue, 0);
                    b.slots[*slot as usize] = *start;
                    b.pc = if start < end {
                        b.pc + 1
                    } else {
                        *exit as usize
                    };
                }
                Op::LoopNext {
                    slot,
                    step,
                    end,
                    body,
                } => {
                    b.timing.scalar(issue, 0);
                    let v = b.slots[*slot as usize].saturating_add(*step);
                    b.slots[*slot as usize] = v;
                    b.pc = if v < *end { *body as usize } else { b.pc + 1 };
                }
                Op::Branch {
                    lhs,
                    op,
                    rhs,
                    otherwise,
                } => {
                    b.timing.scalar(issue, 0);
                    let (x, _) = self.sval(b, *lhs);
                    let (y, _) = self.sval(b, *rhs);
                    b.pc = if exec::compare(*op, x, y) {
                        b.pc + 1
                    } else {
                        *otherwise as usize
                    };
                }
                Op::Jump(t) => b.pc = *t as usize,
            }
        }
        self.pump(b)?;
        if b.pending() {
            return Err(self.deadlock(b, None));
        }
        Ok(Ran::Finished)
    }

    /// The operand values of `e` in S's current state.
    fn frame_values(&self, b: &Block, e: &Exec, f: &mut Frame) {
        for (i, op) in e.ops.iter().enumerate().take(4) {
            f.offs[i] = self.eval(b, &op.off);
        }
        f.scalar = e.scalars.first().map(|&sv| match self.sval(b, sv) {
            (v, true) => SVal::Float(v as f32),
            (v, false) => SVal::Int(v as i64),
        });
        f.mask = b.mask;
        f.slots.clear();
        f.slots.extend_from_slice(&b.slots);
        f.issued = b.timing.issue;
        f.clock = b.hazards.snapshot(Pipe::S);
    }

    /// Makes S's current state the frame of a scalar instruction S executes now.
    fn load_frame(&self, b: &mut Block, e: &Exec) {
        let mut f = std::mem::replace(
            &mut b.f,
            Frame {
                offs: [0; 4],
                scalar: None,
                mask: (0, 0),
                slots: Vec::new(),
                issued: 0,
                clock: [0; Pipe::COUNT],
            },
        );
        self.frame_values(b, e, &mut f);
        b.f = f;
    }

    /// S issues `e` into `pipe`'s queue, stalling while the queue is full.
    fn issue(&mut self, b: &mut Block, e: &Exec, pipe: Pipe) -> Result<(), Error> {
        let slot = match b.timing.slot_free(pipe, b.queues[pipe as usize].len()) {
            Some(t) => t,
            None => {
                self.pump(b)?;
                match b.timing.slot_free(pipe, b.queues[pipe as usize].len()) {
                    Some(t) => t,
                    None => return Err(self.deadlock(b, Some((e, pipe)))),
                }
            }
        };
        b.timing.issue(self.k.machine.scalar_issue, slot);
        let mut frame = Frame {
            offs: [0; 4],
            scalar: None,
            mask: (0, 0),
            slots: b.pool.pop().unwrap_or_default(),
            issued: 0,
            clock: [0; Pipe::COUNT],
        };
        self.frame_values(b, e, &mut frame);
        b.queues[pipe as usize].push_back(Pending {
            pc: b.pc as u32,
            frame,
        });
        self.pump(b)
    }

    /// Runs queued instructions on every pipe until none can run.
    fn pump(&mut self, b: &mut Block) -> Result<(), Error> {
        let k = self.k;
        loop {
            let mut progress = false;
            for pipe in &Pipe::ALL[1..] {
                let q = *pipe as usize;
                while let Some(head) = b.queues[q].front() {
                    let Op::Exec(e) = &k.code[head.pc as usize] else {
                        // Only instructions are queued.
                        break;
                    };
                    if let Instr::WaitFlag { src, dst, event } = e.instr {
                        if b.flags[flag_index(src, dst, event)].is_empty() {
                            break;
                        }
                    }
                    let Some(p) = b.queues[q].pop_front() else {
                        break;
                    };
                    let old = std::mem::replace(&mut b.f, p.frame);
                    b.pool.push(old.slots);
                    self.exec(b, e)?;
                    progress = true;
                }
            }
            if !progress {
                return Ok(());
            }
        }
    }

    /// Runs a copy of the current frame: `startup` cycles, then the bytes at the path's
    /// bandwidth, or at what the shared GM bus leaves of it. Returns (start, end).
    fn copy_time(&mut self, b: &mut Block, path: CopyPath, bytes: u64) -> (u64, u64) {
        let spec = self.k.machine.path(path);
        let (from, to) = path.ends();
        let pipe = path.pipe();
        let start = b.timing.start_time(pipe, b.f.issued, 0);
        let end = match &mut self.bus {
            Some(bus) if from == Mem::Gm || to == Mem::Gm => {
                bus.transfer(start + spec.startup, bytes, spec.bandwidth)
            }
            _ => start + spec.startup + bytes.div_ceil(spec.bandwidth),
        };
        b.timing.occupy(pipe, start, end);
        (start, end)
    }

    /// The timing, hazard check, buffer use and path bytes of a copy-like instruction of the
    /// current frame on `path` moving `bytes` through the operands' `bursts`.
    fn transfer(
        &mut self,
        b: &mut Block,
        e: &Exec,
        path: CopyPath,
        bytes: u64,
        bursts: &[Burst],
    ) -> Result<(), Error> {
        let pipe = path.pipe();
        let (s, t) = self.copy_time(b, path, bytes);
        let tick = b.begin(pipe);
        self.check_bursts(b, e, pipe, tick, bursts)?;
        self.touch(b, e, 0, s, t);
        self.touch(b, e, 1, s, t);
        self.stats.path_bytes[path as usize] += bytes;
        Ok(())
    }

    fn mem_mut(&mut self, core: usize, mem: Mem) -> &mut Vec<u8> {
        if mem == Mem::Gm {
            &mut self.gm
        } else {
            &mut self.local[core][mem as usize]
        }
    }

    fn mem_ref(&self, core: usize, mem: Mem) -> &[u8] {
        if mem == Mem::Gm {
            &self.gm
        } else {
            &self.local[core][mem as usize]
        }
    }

    /// Extent of a vector operand: from its base to one past the last active lane's last byte.
    fn vec_extent(mask: (u64, u64), lanes: usize, esize: usize, cfg: &VecCfg, i: usize) -> u64 {
        match exec::last_lane(mask, lanes) {
            None => 0,
            Some(l) => {
                exec::lane_addr(0, cfg.repeat as usize - 1, l, esize, cfg.blk[i], cfg.rep[i]) as u64
                    + esize as u64
            }
        }
    }

    /// Runs the current frame's instruction. By the table's timing class: an instruction of one
    /// scalar issue is costed here, a flag, barrier or `sync_all` goes to `sync`; every other
    /// instruction runs in the method of its unit.
    fn exec(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        match e.instr.timing_class() {
            TimingClass::Sync => return self.sync(b, e),
            TimingClass::Issue => {
                b.timing.scalar(self.k.machine.scalar_issue, 0);
                b.hazards.begin(Pipe::S);
            }
            TimingClass::ScalarMemory
            | TimingClass::Transfer
            | TimingClass::Cube
            | TimingClass::Vector
            | TimingClass::Free => {}
        }
        match &e.instr {
            Instr::SetMask { hi, lo } => b.mask = (*hi, *lo),
            Instr::SetMaskCount { .. } => b.mask = exec::mask_of_count(self.sint(b, e.scalars[0])),
            Instr::Mov { dst, .. } => self.write_reg(b, *dst, e.scalars[0]),
            Instr::SBin { .. } => self.sbin(b, e)?,
            Instr::Ld { .. } => self.ld(b, e)?,
            Instr::St { .. } => self.st(b, e)?,
            Instr::Count { .. } => self.count(b, e)?,
            // Run by `sync` above.
            Instr::SetFlag { .. }
            | Instr::WaitFlag { .. }
            | Instr::Barrier { .. }
            | Instr::SyncAll
            | Instr::Tally => {}
            Instr::Copy {
                n_burst,
                len,
                src_gap,
                dst_gap,
                ..
            } => {
                let gaps = (*src_gap as u64, *dst_gap as u64);
                self.copy(b, e, (*n_burst as u64, *len as u64), gaps)?;
            }
            Instr::CopyPad {
                n_burst,
                bytes,
                src_stride,
                dst_stride,
                len,
                ..
            } => {
                let strides = (*src_stride as u64, *dst_stride as u64);
                let (n, bytes, blocks) = (*n_burst as u64, *bytes as u64, *len as u64);
                self.copy_pad(b, e, (n, bytes, blocks), strides)?;
            }
            Instr::CopyUbToCc { .. } => self.copy_ub_to_cc(b, e)?,
            Instr::Load2d { .. } => self.load2d(b, e)?,
            Instr::Load3d { .. } => self.load3d(b, e)?,
            Instr::Img2col { .. } => self.img2col(b, e)?,
            Instr::Mmad { .. } => self.mmad(b, e)?,
            Instr::CopyCcToUb { .. } => self.copy_cc_to_ub(b, e)?,
            Instr::VBin { ty, cfg, .. }
            | Instr::VCmp { ty, cfg, .. }
            | Instr::VSel { ty, cfg, .. }
            | Instr::VScalar { ty, cfg, .. }
            | Instr::VUn { ty, cfg, .. }
            | Instr::VDup { ty, cfg, .. }
            | Instr::VRed { ty, cfg, .. } => {
                self.vector(b, e, *ty, cfg)?;
            }
            Instr::VBrcb { ty, cfg, .. } => self.broadcast(b, e, *ty, cfg)?,
            Instr::VConv { .. } => self.vconv(b, e)?,
        }
        Ok(())
    }

    fn write_reg(&self, b: &mut Block, dst: Reg, src: SVal) {
        match dst {
            Reg::S(r) => b.sregs[r as usize] = wrap32(self.sint(b, src)),
            Reg::F(r) => b.fregs[r as usize] = self.sval(b, src).0 as f32,
        }
    }

    /// Peak bytes per memory and core, from each touched buffer's first and last use.
    fn occupancy(&self, cores: usize) -> Vec<Occupancy> {
        let mut out = Vec::new();
        for core in 0..cores {
            for mem in Mem::ALL {
                if mem == Mem::Gm {
                    continue;
                }
                let mut events: Vec<(u64, i64)> = Vec::new();
                for (i, buf) in self.k.bufs.iter().enumerate() {
                    if buf.mem != mem {
                        continue;
                    }
                    if let Some((s, t)) = self.stats.touch[core][i] {
                        events.push((s, buf.size as i64));
                        events.push((t.max(s + 1), -(buf.size as i64)));
                    }
                }
                // Releases before acquisitions at the same cycle.
                events.sort_by_key(|&(t, d)| (t, d));
                let mut cur = 0i64;
                let mut peak = 0i64;
                let mut steps = Vec::new();
                for (t, d) in events {
                    cur += d;
                    peak = peak.max(cur);
                    match steps.last_mut() {
                        Some((lt, lv)) if *lt == t => *lv = cur as u64,
                        _ => steps.push((t, cur as u64)),
                    }
                }
                out.push(Occupancy {
                    core,
                    mem,
                    peak: peak as u64,
                    steps,
                });
            }
        }
        out
    }
}

/// An integer register's value: 32-bit two's complement, so arithmetic wraps as the Vector
/// unit's i32 lanes do.
fn wrap32(v: i64) -> i64 {
    v as i32 as i64
}
