//! The simulator driver: runs every block of a kernel, executing each instruction's numerics in
//! program order while the timing model and the hazard checker follow along.
//!
//! Program order is the order the scalar pipe issues in; a race-free program computes the same
//! values in any schedule the pipes allow, so executing in program order is exact for every
//! program that passes the hazard check, and a program that does not pass it is rejected.
//! Blocks on one core run one after another; cores run side by side and share GM bandwidth
//! (each core's GM paths get at most `gm.bandwidth / active cores` bytes per cycle).

use std::collections::{BTreeMap, VecDeque};

use crate::assemble::{Exec, Kernel, Lin, Op, SVal, Var};
use crate::diagnostic::{Diagnostic, Error};
use crate::exec;
use crate::hazards::{Access, Clock, Hazards};
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
}

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions {
            timeline: false,
            max_instructions: 1 << 32,
        }
    }
}

struct FlagToken {
    time: u64,
    clock: Clock,
}

struct Stats {
    instructions: u64,
    busy: [u64; Pipe::COUNT],
    fractal_macs: u64,
    path_bytes: [u64; CopyPath::COUNT],
    gm_read: u64,
    gm_written: u64,
    /// Per core, per buffer: first touch start and last touch end.
    touch: Vec<Vec<Option<(u64, u64)>>>,
    warnings: Vec<String>,
}

struct Machine<'k> {
    k: &'k Kernel,
    gm: Vec<u8>,
    local: Vec<[Vec<u8>; Mem::COUNT]>,
    stats: Stats,
    gm_share: u64,
    /// Reused staging buffer for copies between two memories.
    scratch: Vec<u8>,
    max_instructions: u64,
}

/// Per-block state.
struct Block {
    core: usize,
    slots: Vec<i64>,
    sregs: [i64; REGS as usize],
    fregs: [f32; REGS as usize],
    mask: (u64, u64),
    timing: Timing,
    hazards: Hazards,
    flags: Vec<VecDeque<FlagToken>>,
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
            busy: [0; Pipe::COUNT],
            fractal_macs: 0,
            path_bytes: [0; CopyPath::COUNT],
            gm_read: 0,
            gm_written: 0,
            touch: vec![vec![None; k.bufs.len()]; cores_used],
            warnings: Vec::new(),
        },
        gm_share: (machine.gm_bandwidth / cores_used as u64).max(1),
        scratch: Vec::new(),
        max_instructions: options.max_instructions,
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
    let mut timeline: Option<Timeline> = None;
    for b in 0..k.program.blockdim as usize {
        let core = b % cores_used;
        let record = options.timeline && core == 0;
        let mut block = Block {
            core,
            slots: vec![0; k.slots],
            sregs: [0; REGS as usize],
            fregs: [0.0; REGS as usize],
            mask: (u64::MAX, u64::MAX),
            timing: Timing::new(core_time[core], record),
            hazards: Hazards::new(),
            flags: (0..Pipe::COUNT * Pipe::COUNT * 8)
                .map(|_| VecDeque::new())
                .collect(),
        };
        block.slots[0] = b as i64;
        m.run_block(&mut block)?;
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
        m.stats.instructions,
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

    fn context(&self, b: &Block, site: u32) -> String {
        let mut parts = Vec::new();
        if self.k.program.blockdim > 1 {
            parts.push(format!("block_idx={}", b.slots[0]));
        }
        for (name, slot) in &self.k.sites[site as usize].scope {
            parts.push(format!("{name}={}", b.slots[*slot as usize]));
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

    fn run_block(&mut self, b: &mut Block) -> Result<(), Error> {
        let k = self.k;
        let issue = k.machine.scalar_issue;
        let mut pc = 0usize;
        while pc < k.code.len() {
            match &k.code[pc] {
                Op::Exec(e) => {
                    self.stats.instructions += 1;
                    if self.max_instructions != 0 && self.stats.instructions > self.max_instructions
                    {
                        let site = &self.k.sites[e.site as usize];
                        return Err(self.error(
                            Diagnostic::new(
                                site.span,
                                format!(
                                    "stopped after {} instructions at `{}`{}",
                                    self.max_instructions,
                                    site.text,
                                    self.context(b, e.site)
                                ),
                            )
                            .with_hint("the program runs longer than the simulation allows; check its loop bounds"),
                        ));
                    }
                    self.exec(b, e)?;
                    pc += 1;
                }
                Op::LoopInit {
                    slot,
                    start,
                    end,
                    exit,
                } => {
                    b.timing.scalar(issue, 0);
                    b.slots[*slot as usize] = *start;
                    pc = if start < end { pc + 1 } else { *exit as usize };
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
                    pc = if v < *end { *body as usize } else { pc + 1 };
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
                    pc = if exec::compare(*op, x, y) {
                        pc + 1
                    } else {
                        *otherwise as usize
                    };
                }
                Op::Jump(t) => pc = *t as usize,
            }
        }
        Ok(())
    }

    /// Resolves operand `i` to an absolute byte address, checking it lies in its buffer with
    /// `len` bytes and is aligned to `align`.
    fn resolve(
        &self,
        b: &Block,
        e: &Exec,
        i: usize,
        len: u64,
        align: u64,
        verb: &str,
    ) -> Result<(Mem, u64), Error> {
        let op = &e.ops[i];
        let buf = &self.k.bufs[op.buf as usize];
        let site = &self.k.sites[e.site as usize];
        let addr_span = e.spans[i];
        let off = self.eval(b, &op.off);
        if off < 0 || off as u64 + len > buf.size {
            return Err(self.error(
                Diagnostic::new(
                    addr_span,
                    format!(
                        "`{}` {verb} bytes {}..{} of `{}` ({} bytes in {}){}",
                        site.text,
                        off,
                        off + len as i64,
                        buf.name,
                        buf.size,
                        buf.mem.name(),
                        self.context(b, e.site)
                    ),
                )
                .with_label("outside the buffer")
                .with_secondary(buf.span, "declared here")
                .with_hint(
                    "shrink the transfer, the repeat count or the offset, or enlarge the buffer",
                ),
            ));
        }
        let addr = buf.base + off as u64;
        if !addr.is_multiple_of(align) {
            return Err(self.error(
                Diagnostic::new(
                    addr_span,
                    format!(
                        "misaligned operand: `{}` {verb} {} byte {addr} (`{}` + {off}), which is not a multiple of {align}{}",
                        site.text,
                        buf.mem.name(),
                        buf.name,
                        self.context(b, e.site)
                    ),
                )
                .with_label(format!("must be {align}-byte aligned"))
                .with_hint(format!("{} operands of this instruction start on {align}-byte boundaries", buf.mem.name())),
            ));
        }
        Ok((buf.mem, addr))
    }

    fn touch(&mut self, b: &Block, e: &Exec, i: usize, start: u64, end: u64) {
        let buf = e.ops[i].buf as usize;
        let slot = &mut self.stats.touch[b.core][buf];
        *slot = Some(match *slot {
            None => (start, end),
            Some((s, t)) => (s.min(start), t.max(end)),
        });
    }

    fn check(
        &self,
        b: &mut Block,
        e: &Exec,
        pipe: Pipe,
        tick: u32,
        accesses: &[(usize, u64, u64, bool)],
    ) -> Result<(), Error> {
        for &(i, lo, hi, write) in accesses {
            let a = Access {
                lo,
                hi,
                pipe,
                tick,
                write,
                site: e.site,
            };
            if let Some(race) = b.hazards.access(self.k.bufs[e.ops[i].buf as usize].mem, a) {
                let mem = race.mem;
                let s1 = &self.k.sites[race.first.site as usize];
                let s2 = &self.k.sites[race.second.site as usize];
                let (lo, hi) = (race.first.lo.max(lo), race.first.hi.min(hi));
                let owner = self
                    .k
                    .bufs
                    .iter()
                    .filter(|x| x.mem == mem && x.base <= lo && lo < x.base + x.size)
                    .map(|x| format!(" (`{}` + {}..{})", x.name, lo - x.base, hi - x.base))
                    .next()
                    .unwrap_or_default();
                let verb = |w: bool| if w { "writes" } else { "reads" };
                return Err(self.error(
                    Diagnostic::new(
                        s2.span,
                        format!(
                            "race on {} bytes {lo}..{hi}{owner}: `{}` (line {}, pipe {}) {} them and `{}` (line {}, pipe {}) {} them with no flag or barrier ordering the two{}",
                            mem.name(),
                            s1.text,
                            s1.line,
                            race.first.pipe.name(),
                            verb(race.first.write),
                            s2.text,
                            s2.line,
                            race.second.pipe.name(),
                            verb(race.second.write),
                            self.context(b, e.site)
                        ),
                    )
                    .with_label(format!("pipe {} {} here", race.second.pipe.name(), verb(race.second.write)))
                    .with_secondary(s1.span, format!("pipe {} {} here", race.first.pipe.name(), verb(race.first.write)))
                    .with_hint(format!(
                        "after the first put `set_flag {}, {}, EVENT` and before the second `wait_flag {}, {}, EVENT`",
                        race.first.pipe.name(),
                        race.second.pipe.name(),
                        race.first.pipe.name(),
                        race.second.pipe.name()
                    )),
                ));
            }
        }
        Ok(())
    }

    fn copy_cost(&self, path: CopyPath, bytes: u64) -> u64 {
        let spec = self.k.machine.path(path);
        let (from, to) = path.ends();
        let bw = if from == Mem::Gm || to == Mem::Gm {
            spec.bandwidth.min(self.gm_share)
        } else {
            spec.bandwidth
        };
        spec.startup + bytes.div_ceil(bw)
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

    #[allow(clippy::too_many_lines)]
    fn exec(&mut self, b: &mut Block, e: &Exec) -> Result<(), Error> {
        let mc = &self.k.machine;
        let issue = mc.scalar_issue;
        let sync = mc.sync_cost;
        let core = b.core;
        match &e.instr {
            Instr::SetMask { hi, lo } => {
                b.timing.scalar(issue, 0);
                b.hazards.begin(Pipe::S);
                b.mask = (*hi, *lo);
            }
            Instr::Mov { dst, .. } => {
                b.timing.scalar(issue, 0);
                b.hazards.begin(Pipe::S);
                self.write_reg(b, *dst, e.scalars[0]);
            }
            Instr::SBin { op, dst, .. } => {
                b.timing.scalar(issue, 0);
                b.hazards.begin(Pipe::S);
                match dst {
                    Reg::S(r) => {
                        let (x, y) = (self.sint(b, e.scalars[0]), self.sint(b, e.scalars[1]));
                        let v = match op {
                            SOp::Add => x.wrapping_add(y),
                            SOp::Sub => x.wrapping_sub(y),
                            SOp::Mul => x.wrapping_mul(y),
                            SOp::Div => x.checked_div(y).ok_or_else(|| {
                                let site = &self.k.sites[e.site as usize];
                                self.error(
                                    Diagnostic::new(
                                        site.span,
                                        format!(
                                            "`{}` divides by zero{}",
                                            site.text,
                                            self.context(b, e.site)
                                        ),
                                    )
                                    .with_hint("guard the division with `if`"),
                                )
                            })?,
                            SOp::Min => x.min(y),
                            SOp::Max => x.max(y),
                        };
                        b.sregs[*r as usize] = v;
                    }
                    Reg::F(r) => {
                        let x = self.sval(b, e.scalars[0]).0 as f32;
                        let y = self.sval(b, e.scalars[1]).0 as f32;
                        b.fregs[*r as usize] = match op {
                            SOp::Add => x + y,
                            SOp::Sub => x - y,
                            SOp::Mul => x * y,
                            SOp::Div => x / y,
                            SOp::Min => x.min(y),
                            SOp::Max => x.max(y),
                        };
                    }
                }
            }
            Instr::Ld { ty, dst, .. } => {
                let es = ty.size();
                let (mem, addr) = self.resolve(b, e, 0, es, es, "reads")?;
                let (s, t) = b.timing.scalar(mc.scalar_mem, 0);
                let tick = b.hazards.begin(Pipe::S);
                self.check(b, e, Pipe::S, tick, &[(0, addr, addr + es, false)])?;
                self.touch(b, e, 0, s, t);
                let v = exec::load(self.mem_ref(core, mem), addr as usize, *ty);
                match dst {
                    Reg::S(r) => b.sregs[*r as usize] = v as i64,
                    Reg::F(r) => b.fregs[*r as usize] = v as f32,
                }
            }
            Instr::St { ty, .. } => {
                let es = ty.size();
                let (mem, addr) = self.resolve(b, e, 0, es, es, "writes")?;
                let (s, t) = b.timing.scalar(mc.scalar_mem, 0);
                let tick = b.hazards.begin(Pipe::S);
                self.check(b, e, Pipe::S, tick, &[(0, addr, addr + es, true)])?;
                self.touch(b, e, 0, s, t);
                let v = self.sval(b, e.scalars[0]).0;
                exec::store(self.mem_mut(core, mem), addr as usize, *ty, v);
            }
            Instr::Count { dst, bits, .. } => {
                let len = (*bits as u64).div_ceil(8);
                let (mem, addr) = self.resolve(b, e, 0, len, 1, "reads")?;
                let (s, t) = b.timing.scalar(mc.scalar_mem, 0);
                let tick = b.hazards.begin(Pipe::S);
                self.check(b, e, Pipe::S, tick, &[(0, addr, addr + len, false)])?;
                self.touch(b, e, 0, s, t);
                let m = self.mem_ref(core, mem);
                let mut n = 0i64;
                for bit in 0..*bits as usize {
                    n += (m[addr as usize + bit / 8] >> (bit % 8) & 1) as i64;
                }
                match dst {
                    Reg::S(r) => b.sregs[*r as usize] = n,
                    Reg::F(r) => b.fregs[*r as usize] = n as f32,
                }
            }
            Instr::SetFlag { src, dst, event } => {
                let (_, end) = if *src == Pipe::S {
                    b.timing.scalar(sync, 0)
                } else {
                    b.timing.dispatch(*src, issue, sync, 0)
                };
                b.hazards.begin(*src);
                let clock = b.hazards.snapshot(*src);
                b.flags[flag_index(*src, *dst, *event)].push_back(FlagToken { time: end, clock });
            }
            Instr::WaitFlag { src, dst, event } => {
                let Some(token) = b.flags[flag_index(*src, *dst, *event)].pop_front() else {
                    let site = &self.k.sites[e.site as usize];
                    let pending: Vec<String> = (0..8u8)
                        .filter(|ev| !b.flags[flag_index(*src, *dst, *ev)].is_empty())
                        .map(|ev| format!("event {ev}"))
                        .collect();
                    let hint = if pending.is_empty() {
                        format!(
                            "set the flag on pipe {} before this wait (for ping-pong loops, set it once before the loop)",
                            src.name()
                        )
                    } else {
                        format!(
                            "{}->{} {} is set and not waited for: did you mean that id?",
                            src.name(),
                            dst.name(),
                            pending.join(", ")
                        )
                    };
                    return Err(self.error(
                        Diagnostic::new(
                            site.span,
                            format!(
                                "deadlock: `{}` (line {}) waits on pipe {} for event {} from pipe {}, which no earlier `set_flag {}, {}, {}` sets; pipe {} would stall forever{}",
                                site.text,
                                site.line,
                                dst.name(),
                                event,
                                src.name(),
                                src.name(),
                                dst.name(),
                                event,
                                dst.name(),
                                self.context(b, e.site)
                            ),
                        )
                        .with_label("waits forever")
                        .with_hint(hint),
                    ));
                };
                if *dst == Pipe::S {
                    b.timing.scalar(sync, token.time);
                } else {
                    b.timing.dispatch(*dst, issue, sync, token.time);
                }
                b.hazards.begin(*dst);
                b.hazards.acquire(*dst, &token.clock);
            }
            Instr::Barrier { pipe } => {
                b.timing.barrier(*pipe, sync);
                match pipe {
                    Some(p) => b.hazards.barrier(*p),
                    None => Pipe::ALL.iter().for_each(|p| b.hazards.barrier(*p)),
                }
                b.hazards.begin(Pipe::S);
            }
            Instr::Copy {
                n_burst,
                len,
                src_gap,
                dst_gap,
                ..
            } => {
                let (nb, ln) = (*n_burst as u64, *len as u64 * 32);
                let src_ext = if nb == 0 {
                    0
                } else {
                    (nb - 1) * (ln + *src_gap as u64 * 32) + ln
                };
                let dst_ext = if nb == 0 {
                    0
                } else {
                    (nb - 1) * (ln + *dst_gap as u64 * 32) + ln
                };
                let dst_mem = self.k.bufs[e.ops[0].buf as usize].mem;
                let src_mem = self.k.bufs[e.ops[1].buf as usize].mem;
                let (_, dst) = self.resolve(b, e, 0, dst_ext, mc.mem(dst_mem).align, "writes")?;
                let (_, src) = self.resolve(b, e, 1, src_ext, mc.mem(src_mem).align, "reads")?;
                // The assembler accepted only paths that exist.
                let path = CopyPath::between(src_mem, dst_mem).unwrap_or(CopyPath::UbUb);
                let bytes = nb * ln;
                let cost = self.copy_cost(path, bytes);
                let pipe = path.pipe();
                let (s, t) = b.timing.dispatch(pipe, issue, cost, 0);
                let tick = b.hazards.begin(pipe);
                self.check(
                    b,
                    e,
                    pipe,
                    tick,
                    &[
                        (1, src, src + src_ext, false),
                        (0, dst, dst + dst_ext, true),
                    ],
                )?;
                self.touch(b, e, 0, s, t);
                self.touch(b, e, 1, s, t);
                self.stats.path_bytes[path as usize] += bytes;
                if src_mem == Mem::Gm {
                    self.stats.gm_read += bytes;
                }
                if dst_mem == Mem::Gm {
                    self.stats.gm_written += bytes;
                }
                let mut tmp = std::mem::take(&mut self.scratch);
                tmp.resize(ln as usize, 0);
                for i in 0..nb {
                    let so = (src + i * (ln + *src_gap as u64 * 32)) as usize;
                    let d = (dst + i * (ln + *dst_gap as u64 * 32)) as usize;
                    tmp.copy_from_slice(&self.mem_ref(core, src_mem)[so..so + ln as usize]);
                    self.mem_mut(core, dst_mem)[d..d + ln as usize].copy_from_slice(&tmp);
                }
                self.scratch = tmp;
            }
            Instr::Load2d {
                repeat,
                src_stride,
                transpose,
                ..
            } => {
                let (r, st) = (*repeat as u64, *src_stride as u64);
                let dst_mem = self.k.bufs[e.ops[0].buf as usize].mem;
                let src_ext = if r == 0 { 0 } else { (r - 1) * st * 512 + 512 };
                let (_, dst) = self.resolve(b, e, 0, r * 512, mc.mem(dst_mem).align, "writes")?;
                let (_, src) = self.resolve(b, e, 1, src_ext, mc.mem(Mem::L1).align, "reads")?;
                let path = if dst_mem == Mem::L0a {
                    CopyPath::L1L0a
                } else {
                    CopyPath::L1L0b
                };
                let cost = self.copy_cost(path, r * 512);
                let (s, t) = b.timing.dispatch(Pipe::Mte1, issue, cost, 0);
                let tick = b.hazards.begin(Pipe::Mte1);
                self.check(
                    b,
                    e,
                    Pipe::Mte1,
                    tick,
                    &[
                        (1, src, src + src_ext, false),
                        (0, dst, dst + r * 512, true),
                    ],
                )?;
                self.touch(b, e, 0, s, t);
                self.touch(b, e, 1, s, t);
                self.stats.path_bytes[path as usize] += r * 512;
                let mut frac = [0u8; 512];
                for i in 0..r {
                    let so = (src + i * st * 512) as usize;
                    let l1 = &self.local[core][Mem::L1 as usize];
                    if *transpose {
                        for row in 0..16 {
                            for col in 0..16 {
                                let from = so + (col * 16 + row) * 2;
                                frac[(row * 16 + col) * 2..(row * 16 + col) * 2 + 2]
                                    .copy_from_slice(&l1[from..from + 2]);
                            }
                        }
                    } else {
                        frac.copy_from_slice(&l1[so..so + 512]);
                    }
                    let d = (dst + i * 512) as usize;
                    self.local[core][dst_mem as usize][d..d + 512].copy_from_slice(&frac);
                }
            }
            Instr::Mmad {
                out, m, k, n, init, ..
            } => {
                let (m1, k1, n1) = (
                    (*m as u64).div_ceil(16),
                    (*k as u64).div_ceil(16),
                    (*n as u64).div_ceil(16),
                );
                let c_bytes = m1 * n1 * 256 * out.size();
                let (_, c) = self.resolve(b, e, 0, c_bytes, mc.mem(Mem::L0c).align, "writes")?;
                let (_, a) =
                    self.resolve(b, e, 1, m1 * k1 * 512, mc.mem(Mem::L0a).align, "reads")?;
                let (_, bb) =
                    self.resolve(b, e, 2, k1 * n1 * 512, mc.mem(Mem::L0b).align, "reads")?;
                let fr = m1 * k1 * n1;
                let cost = mc.cube_startup + mc.cube_per_fractal * fr;
                let (s, t) = b.timing.dispatch(Pipe::M, issue, cost, 0);
                let tick = b.hazards.begin(Pipe::M);
                let mut acc = vec![
                    (1, a, a + m1 * k1 * 512, false),
                    (2, bb, bb + k1 * n1 * 512, false),
                ];
                if !*init {
                    acc.push((0, c, c + c_bytes, false));
                }
                acc.push((0, c, c + c_bytes, true));
                self.check(b, e, Pipe::M, tick, &acc)?;
                for i in 0..3 {
                    self.touch(b, e, i, s, t);
                }
                self.stats.fractal_macs += fr;
                let [_, _, l0a, l0b, l0c, _] = &mut self.local[core];
                exec::mmad(
                    l0a,
                    a as usize,
                    l0b,
                    bb as usize,
                    l0c,
                    c as usize,
                    (m1 as usize, k1 as usize, n1 as usize),
                    *out,
                    *init,
                );
            }
            Instr::CopyCcToUb {
                n_burst,
                len,
                src_gap,
                dst_gap,
                f16,
                relu,
                src_f16,
                ..
            } => {
                let sty = if *src_f16 { DType::F16 } else { DType::F32 };
                let dty = if *f16 || *src_f16 {
                    DType::F16
                } else {
                    DType::F32
                };
                let (sf, df) = (256 * sty.size(), 256 * dty.size());
                let (nb, ln) = (*n_burst as u64, *len as u64);
                let src_ext = if nb == 0 {
                    0
                } else {
                    ((nb - 1) * (ln + *src_gap as u64) + ln) * sf
                };
                let dst_ext = if nb == 0 {
                    0
                } else {
                    ((nb - 1) * (ln + *dst_gap as u64) + ln) * df
                };
                let (_, dst) = self.resolve(b, e, 0, dst_ext, mc.mem(Mem::Ub).align, "writes")?;
                let (_, src) =
                    self.resolve(b, e, 1, src_ext, sf.min(mc.mem(Mem::L0c).align), "reads")?;
                let bytes = nb * ln * sf;
                let cost = self.copy_cost(CopyPath::L0cUb, bytes);
                let (s, t) = b.timing.dispatch(Pipe::V, issue, cost, 0);
                let tick = b.hazards.begin(Pipe::V);
                self.check(
                    b,
                    e,
                    Pipe::V,
                    tick,
                    &[
                        (1, src, src + src_ext, false),
                        (0, dst, dst + dst_ext, true),
                    ],
                )?;
                self.touch(b, e, 0, s, t);
                self.touch(b, e, 1, s, t);
                self.stats.path_bytes[CopyPath::L0cUb as usize] += bytes;
                let [_, _, _, _, l0c, ub] = &mut self.local[core];
                for i in 0..nb {
                    for f in 0..ln {
                        let so = src + ((i * (ln + *src_gap as u64)) + f) * sf;
                        let d = dst + ((i * (ln + *dst_gap as u64)) + f) * df;
                        for x in 0..256u64 {
                            let mut v = exec::load(l0c, (so + x * sty.size()) as usize, sty);
                            if *relu && v < 0.0 {
                                v = 0.0;
                            }
                            exec::store(ub, (d + x * dty.size()) as usize, dty, v);
                        }
                    }
                }
            }
            Instr::VBin { ty, cfg, .. }
            | Instr::VCmp { ty, cfg, .. }
            | Instr::VSel { ty, cfg, .. }
            | Instr::VScalar { ty, cfg, .. }
            | Instr::VUn { ty, cfg, .. }
            | Instr::VDup { ty, cfg, .. }
            | Instr::VRed { ty, cfg, .. } => {
                self.vector(b, e, *ty, cfg)?;
            }
            Instr::VConv { from, to, cfg, .. } => {
                let lanes = 256 / from.size().max(to.size()) as usize;
                let mask = b.mask;
                let ub_align = mc.mem(Mem::Ub).align;
                let de = Self::vec_extent(mask, lanes, to.size() as usize, cfg, 0);
                let se = Self::vec_extent(mask, lanes, from.size() as usize, cfg, 1);
                let (_, dst) = self.resolve(b, e, 0, de, ub_align, "writes")?;
                let (_, src) = self.resolve(b, e, 1, se, ub_align, "reads")?;
                let cost = mc.vector_startup + mc.vector_per_repeat * cfg.repeat as u64;
                let (s, t) = b.timing.dispatch(Pipe::V, issue, cost, 0);
                let tick = b.hazards.begin(Pipe::V);
                self.check(
                    b,
                    e,
                    Pipe::V,
                    tick,
                    &[(1, src, src + se, false), (0, dst, dst + de, true)],
                )?;
                self.touch(b, e, 0, s, t);
                self.touch(b, e, 1, s, t);
                let ub = &mut self.local[core][Mem::Ub as usize];
                let mut vals = Vec::with_capacity(lanes);
                for r in 0..cfg.repeat as usize {
                    vals.clear();
                    for l in 0..lanes {
                        if exec::lane_on(mask, l) {
                            let sa = exec::lane_addr(
                                src as usize,
                                r,
                                l,
                                from.size() as usize,
                                cfg.blk[1],
                                cfg.rep[1],
                            );
                            vals.push((l, exec::load(ub, sa, *from)));
                        }
                    }
                    for &(l, v) in &vals {
                        let da = exec::lane_addr(
                            dst as usize,
                            r,
                            l,
                            to.size() as usize,
                            cfg.blk[0],
                            cfg.rep[0],
                        );
                        exec::store(ub, da, *to, v);
                    }
                }
            }
        }
        Ok(())
    }

    fn write_reg(&self, b: &mut Block, dst: Reg, src: SVal) {
        match dst {
            Reg::S(r) => b.sregs[r as usize] = self.sint(b, src),
            Reg::F(r) => b.fregs[r as usize] = self.sval(b, src).0 as f32,
        }
    }

    /// All same-typed vector instructions: binary, scalar, unary, dup, compare, select, reduce.
    fn vector(&mut self, b: &mut Block, e: &Exec, ty: DType, cfg: &VecCfg) -> Result<(), Error> {
        let mc = &self.k.machine;
        let core = b.core;
        let es = ty.size() as usize;
        let lanes = 256 / es;
        let mask = b.mask;
        let ub_align = mc.mem(Mem::Ub).align;
        let repeat = cfg.repeat as usize;
        let slow = matches!(
            e.instr,
            Instr::VUn {
                op: VUnOp::Exp | VUnOp::Ln | VUnOp::Rec | VUnOp::Rsqrt | VUnOp::Sqrt,
                ..
            } | Instr::VBin {
                op: VBinOp::Div,
                ..
            }
        );
        let per = if slow {
            mc.vector_per_repeat_slow
        } else {
            mc.vector_per_repeat
        };
        let cost = mc.vector_startup + per * cfg.repeat as u64;
        // Operand extents and addresses.
        let n_ops = e.ops.len();
        let mut addrs = [0usize; 4];
        let mut accesses = [(0usize, 0u64, 0u64, false); 4];
        for i in 0..e.ops.len() {
            let (ext, align, write) = match (&e.instr, i) {
                (Instr::VCmp { .. }, 0) => ((repeat * lanes).div_ceil(8) as u64, ub_align, true),
                (Instr::VSel { .. }, 3) => ((repeat * lanes).div_ceil(8) as u64, ub_align, false),
                (Instr::VRed { .. }, 0) => (
                    if exec::last_lane(mask, lanes).is_some() {
                        ((repeat - 1) * cfg.rep[0] as usize * es + es) as u64
                    } else {
                        0
                    },
                    es as u64,
                    true,
                ),
                (Instr::VCmp { .. }, i) => (
                    Self::vec_extent(mask, lanes, es, cfg, i - 1),
                    ub_align,
                    false,
                ),
                (_, i) => (Self::vec_extent(mask, lanes, es, cfg, i), ub_align, i == 0),
            };
            let (_, a) =
                self.resolve(b, e, i, ext, align, if write { "writes" } else { "reads" })?;
            addrs[i] = a as usize;
            accesses[i] = (i, a, a + ext, write);
        }
        let accesses = &mut accesses[..n_ops];
        // Reads before the write, so an in-place operation is not reported against itself.
        accesses.rotate_left(1);
        let (s, t) = b.timing.dispatch(Pipe::V, mc.scalar_issue, cost, 0);
        let tick = b.hazards.begin(Pipe::V);
        self.check(b, e, Pipe::V, tick, accesses)?;
        for i in 0..n_ops {
            self.touch(b, e, i, s, t);
        }
        let scalar = e
            .scalars
            .first()
            .map(|&sv| exec::round_to(self.sval(b, sv).0, ty));
        let ub = &mut self.local[core][Mem::Ub as usize];
        if exec::contiguous_full(&e.instr, ty, mask, cfg)
            && exec::fast_vector(&e.instr, ty, ub, &addrs[..n_ops], cfg, scalar)
        {
            return Ok(());
        }
        // A compare's strides describe its two sources only; its destination is a bit string.
        let shift = usize::from(matches!(e.instr, Instr::VCmp { .. }));
        let at = |i: usize, r: usize, l: usize| {
            exec::lane_addr(addrs[i], r, l, es, cfg.blk[i - shift], cfg.rep[i - shift])
        };
        match &e.instr {
            Instr::VCmp { op, .. } => {
                // Inactive lanes write 0 bits; each repeat's bits follow the previous repeat's.
                for r in 0..repeat {
                    for l in 0..lanes {
                        let bit = r * lanes + l;
                        let on = exec::lane_on(mask, l)
                            && exec::compare(
                                *op,
                                exec::load(ub, at(1, r, l), ty),
                                exec::load(ub, at(2, r, l), ty),
                            );
                        let byte = &mut ub[addrs[0] + bit / 8];
                        if on {
                            *byte |= 1 << (bit % 8);
                        } else {
                            *byte &= !(1 << (bit % 8));
                        }
                    }
                }
            }
            Instr::VRed { op, .. } => {
                for r in 0..repeat {
                    let mut acc: Option<f64> = None;
                    let mut sum = 0f64;
                    for l in 0..lanes {
                        if !exec::lane_on(mask, l) {
                            continue;
                        }
                        let v = exec::load(ub, at(1, r, l), ty);
                        match op {
                            // Sums accumulate in f32 (exactly for i32 in i64) and round once.
                            VRedOp::Cadd => {
                                sum = if ty == DType::I32 {
                                    sum + v
                                } else {
                                    (sum as f32 + v as f32) as f64
                                }
                            }
                            VRedOp::Cmax => acc = Some(acc.map_or(v, |a| a.max(v))),
                            VRedOp::Cmin => acc = Some(acc.map_or(v, |a| a.min(v))),
                        }
                    }
                    if exec::last_lane(mask, lanes).is_none() {
                        continue;
                    }
                    let result = match op {
                        VRedOp::Cadd if ty == DType::I32 => (sum as i64 as i32) as f64,
                        VRedOp::Cadd => sum,
                        _ => acc.unwrap_or(0.0),
                    };
                    exec::store(ub, addrs[0] + r * cfg.rep[0] as usize * es, ty, result);
                }
            }
            instr => {
                let mut out = [0f64; 128];
                for r in 0..repeat {
                    for (l, slot) in out.iter_mut().enumerate().take(lanes) {
                        if !exec::lane_on(mask, l) {
                            continue;
                        }
                        *slot = match instr {
                            Instr::VBin { op, .. } => exec::binary(
                                *op,
                                ty,
                                exec::load(ub, at(1, r, l), ty),
                                exec::load(ub, at(2, r, l), ty),
                            ),
                            Instr::VScalar { op, .. } => {
                                let x = exec::load(ub, at(1, r, l), ty);
                                let y = scalar.unwrap_or(0.0);
                                let bop = match op {
                                    VScalarOp::Adds => VBinOp::Add,
                                    VScalarOp::Muls => VBinOp::Mul,
                                    VScalarOp::Maxs => VBinOp::Max,
                                };
                                exec::binary(bop, ty, x, y)
                            }
                            Instr::VUn { op, .. } => {
                                exec::unary(*op, ty, exec::load(ub, at(1, r, l), ty))
                            }
                            Instr::VDup { .. } => scalar.unwrap_or(0.0),
                            Instr::VSel { .. } => {
                                let bit = r * lanes + l;
                                let on = ub[addrs[3] + bit / 8] >> (bit % 8) & 1 == 1;
                                exec::load(ub, at(if on { 1 } else { 2 }, r, l), ty)
                            }
                            _ => 0.0,
                        };
                    }
                    for (l, &v) in out.iter().enumerate().take(lanes) {
                        if exec::lane_on(mask, l) {
                            exec::store(ub, at(0, r, l), ty, v);
                        }
                    }
                }
            }
        }
        Ok(())
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
