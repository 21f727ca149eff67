//! The compiled interpreter: runs a program's original loop nest over its compiled statements.
//!
//! Loop bounds are evaluated once per loop entry, as the union of the bounds of the statements
//! below. An instance runs exactly when it is a point of its statement's domain, so the set and
//! order of instances are those of the tree walker. In an innermost loop, a statement's accesses
//! are checked at the two ends of its range once (subscripts are affine in the loop's iterator,
//! so the ends decide); when all are inside, its instances load and store through precomputed
//! offsets with no check, and otherwise every access is checked as it is made, which reports the
//! same first error the walker reports. A statement with quasi-affine subscripts (division
//! variables) always takes the checked path.
//!
//! With more than one thread, a loop that dependence analysis proves parallel (no flow, anti or
//! output dependence carried by it) has its iterations split into contiguous chunks run by
//! rayon; no two iterations then touch an element one of them writes, so the results are those
//! of the sequential run bit for bit, and an error is the one of the earliest failing chunk,
//! which is the sequential run's first error.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use rayon::prelude::*;

use super::batch::{self, BatchState, LoopEntry, LANES};
use super::code::{self, Env, Fault};
use super::plan::{execute_checked, Bound, Compiled, Frames, RawMemory};
use super::{round, InterpError, Memory, RunStats, MAX_INSTANCES};
use crate::deps::{compute_dependences, Level};
use crate::program::{build_nest, NestNode, Program, StmtId};

/// How to run a program.
#[derive(Clone, Copy, Default)]
pub struct RunOptions<'a> {
    /// Threads for parallel loops; 0 or 1 runs everything on the calling thread.
    pub threads: usize,
    /// Called now and then with the fraction of the outermost loops done so far.
    pub progress: Option<&'a (dyn Fn(f64) + Sync)>,
}

/// Runs `program` on `memory` in the original order, on the calling thread.
pub fn run(program: &Program, memory: &mut Memory) -> Result<RunStats, InterpError> {
    run_with(program, memory, &RunOptions::default())
}

/// Runs `program` on `memory` in the original order, loops proved parallel on
/// `options.threads` threads.
pub fn run_with(
    program: &Program,
    memory: &mut Memory,
    options: &RunOptions,
) -> Result<RunStats, InterpError> {
    let nest = build_nest(program)?;
    let parallel = if options.threads > 1 {
        parallel_loops(program, &nest)
    } else {
        Vec::new()
    };
    let mut next_id = 0;
    let items = plan_items(&nest, &parallel, &mut next_id);
    let compiled = Compiled::new(program);
    let guards = leaf_guards(program, &compiled, &items);
    let shared = Shared {
        program,
        memory: RawMemory::new(program, memory)?,
        compiled,
        guards,
        threads: options.threads,
        progress: options.progress,
        spent: AtomicU64::new(0),
    };
    let mut machine = Machine::new(&shared);
    if options.threads > 1 {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.threads)
            .build()
            .map_err(|e| InterpError::BadMemory(format!("no thread pool: {e}")))?;
        pool.install(|| machine.run_top(&items))?;
    } else {
        machine.run_top(&items)?;
    }
    Ok(RunStats {
        instances: machine.instances,
    })
}

/// Per loop of the nest (numbered in preorder), whether no legality dependence is carried by it.
fn parallel_loops(program: &Program, nest: &[NestNode]) -> Vec<bool> {
    // The loops enclosing each statement, outermost first, by preorder number.
    fn walk(nodes: &[NestNode], path: &mut Vec<usize>, next: &mut usize, out: &mut [Vec<usize>]) {
        for n in nodes {
            match n {
                NestNode::Stmt(s) => out[s.index()] = path.clone(),
                NestNode::Loop { body, .. } => {
                    path.push(*next);
                    *next += 1;
                    walk(body, path, next, out);
                    path.pop();
                }
            }
        }
    }
    let mut paths = vec![Vec::new(); program.statements.len()];
    let mut count = 0;
    walk(nest, &mut Vec::new(), &mut count, &mut paths);
    let Ok(deps) = compute_dependences(program) else {
        return vec![false; count];
    };
    let mut parallel = vec![true; count];
    for dep in deps.legality() {
        if let Level::Loop(d) = dep.level {
            parallel[paths[dep.source.index()][d]] = false;
        }
    }
    parallel
}

/// Per statement and depth: the statement's constraints whose innermost iterator is outside
/// that depth, less those whose innermost iterator is a loop holding this statement alone (its
/// bounds are the statement's own there, so it enforces them).
fn leaf_guards(program: &Program, compiled: &Compiled, items: &[Item]) -> Vec<Vec<Vec<Bound>>> {
    fn mark(items: &[Item], exclusive: &mut [Vec<bool>]) {
        for item in items {
            if let Item::Loop(lp) = item {
                if let [s] = lp.stmts[..] {
                    exclusive[s.index()][lp.depth] = true;
                }
                mark(&lp.body, exclusive);
            }
        }
    }
    let mut exclusive: Vec<Vec<bool>> = program
        .statements
        .iter()
        .map(|s| vec![false; s.depth()])
        .collect();
    mark(items, &mut exclusive);
    compiled
        .plans
        .iter()
        .zip(&exclusive)
        .map(|(plan, exclusive)| {
            plan.outer
                .iter()
                .map(|bounds| {
                    bounds
                        .iter()
                        .filter(|b| match b.expr.coeffs.iter().rposition(|&c| c != 0) {
                            Some(level) => !exclusive[level],
                            None => true,
                        })
                        .cloned()
                        .collect()
                })
                .collect()
        })
        .collect()
}

enum Item {
    Stmt(StmtId),
    Loop(LoopPlan),
}

struct LoopPlan {
    depth: usize,
    body: Vec<Item>,
    /// Every statement below, in textual order.
    stmts: Vec<StmtId>,
    /// Whether the body is statements only (this is their innermost loop).
    leaf: bool,
    parallel: bool,
}

fn plan_items(nodes: &[NestNode], parallel: &[bool], next: &mut usize) -> Vec<Item> {
    nodes
        .iter()
        .map(|n| match n {
            NestNode::Stmt(s) => Item::Stmt(*s),
            NestNode::Loop { depth, body } => {
                let id = *next;
                *next += 1;
                let mut stmts = Vec::new();
                crate::program::collect_stmts(body, &mut stmts);
                Item::Loop(LoopPlan {
                    depth: *depth,
                    leaf: body.iter().all(|b| matches!(b, NestNode::Stmt(_))),
                    body: plan_items(body, parallel, next),
                    stmts,
                    parallel: parallel.get(id).copied().unwrap_or(false),
                })
            }
        })
        .collect()
}

/// The fewest iterations (less one) an innermost loop runs batched.
const BATCH_MIN: i64 = 15;

struct Shared<'p, 'm> {
    program: &'p Program,
    /// Per statement and depth, the constraints on iterators outside the loop at that depth
    /// that a run of that loop must check: those the enclosing loops do not already enforce.
    guards: Vec<Vec<Vec<Bound>>>,
    memory: RawMemory<'m>,
    compiled: Compiled,
    threads: usize,
    progress: Option<&'p (dyn Fn(f64) + Sync)>,
    /// Statement instances begun so far, by every thread (an innermost loop counts every
    /// statement of it at every iteration, before its guards).
    spent: AtomicU64,
}

impl Shared<'_, '_> {
    /// Counts `n` more instances against [`MAX_INSTANCES`].
    fn spend(&self, n: u64) -> Result<(), InterpError> {
        let total = self.spent.fetch_add(n, Ordering::Relaxed).saturating_add(n);
        if total > MAX_INSTANCES {
            return Err(InterpError::InstanceBudget {
                limit: MAX_INSTANCES,
            });
        }
        Ok(())
    }
}

/// How a statement runs in the innermost loop it is in, for the current loop entry.
#[derive(Clone, Debug, Default)]
struct LeafState {
    /// The statement's own range of the loop's iterator (empty when it does not run).
    lo: i64,
    hi: i64,
    /// Every access proved inside its array over the range.
    fast: bool,
    /// Per access (write first): offset at iterator zero, and its step per iteration.
    offsets: Vec<(i64, i64)>,
    /// Arrays of the accesses, write first.
    arrays: Vec<usize>,
    /// Registers for batched runs, when the body is pure.
    batch: Option<BatchState>,
}

/// One thread's state.
struct Machine<'s, 'p, 'm> {
    shared: &'s Shared<'p, 'm>,
    iters: Vec<i64>,
    frames: Frames,
    leaf: Vec<LeafState>,
    instances: u64,
    /// Inside a chunk of a parallel loop: inner loops run sequentially.
    forked: bool,
}

impl<'s, 'p, 'm> Machine<'s, 'p, 'm> {
    fn new(shared: &'s Shared<'p, 'm>) -> Self {
        let program = shared.program;
        let depth = program
            .statements
            .iter()
            .map(|s| s.depth())
            .max()
            .unwrap_or(0);
        Machine {
            shared,
            iters: vec![0; depth],
            frames: Frames::new(&shared.compiled),
            leaf: shared
                .compiled
                .plans
                .iter()
                .map(|p| LeafState {
                    offsets: vec![(0, 0); p.accesses.len()],
                    arrays: p.accesses.iter().map(|a| a.array).collect(),
                    batch: batch::is_pure(&p.code).then(|| BatchState::new(&p.code)),
                    ..LeafState::default()
                })
                .collect(),
            instances: 0,
            forked: false,
        }
    }

    fn fork(&self) -> Self {
        Machine {
            shared: self.shared,
            iters: self.iters.clone(),
            frames: self.frames.clone(),
            leaf: self.leaf.clone(),
            instances: 0,
            forked: true,
        }
    }

    /// Runs the top-level items, reporting progress after each iteration of an outermost loop.
    fn run_top(&mut self, items: &[Item]) -> Result<(), InterpError> {
        let n = items.len() as f64;
        for (k, item) in items.iter().enumerate() {
            match item {
                Item::Stmt(s) => self.run_stmt(*s)?,
                Item::Loop(lp) => {
                    let progress = self.shared.progress;
                    let report = |done: f64| {
                        if let Some(p) = progress {
                            p((k as f64 + done) / n);
                        }
                    };
                    self.run_loop(lp, &report)?;
                }
            }
        }
        Ok(())
    }

    fn run_items(&mut self, items: &[Item]) -> Result<(), InterpError> {
        for item in items {
            match item {
                Item::Stmt(s) => self.run_stmt(*s)?,
                Item::Loop(lp) => self.run_loop(lp, &|_| {})?,
            }
        }
        Ok(())
    }

    /// Runs a statement that is not in an innermost loop: every constraint is checked.
    fn run_stmt(&mut self, s: StmtId) -> Result<(), InterpError> {
        let shared = self.shared;
        let plan = &shared.compiled.plans[s.index()];
        if plan.domain.iter().all(|b| b.holds(&self.iters)) {
            shared.spend(1)?;
            execute_checked(
                shared.program,
                &shared.compiled,
                &mut self.frames,
                &shared.memory,
                s,
                &self.iters,
            )?;
            self.instances += 1;
        }
        Ok(())
    }

    fn loop_bounds(&self, lp: &LoopPlan) -> Result<(i64, i64), InterpError> {
        let shared = self.shared;
        let mut lo = i64::MAX;
        let mut hi = i64::MIN;
        for &s in &lp.stmts {
            let (l, h) = shared.compiled.plans[s.index()].bounds_at(
                &shared.program.statements[s.index()],
                &self.iters,
                lp.depth,
            )?;
            lo = lo.min(l);
            hi = hi.max(h);
        }
        Ok((lo, hi))
    }

    fn run_loop(
        &mut self,
        lp: &LoopPlan,
        report: &(dyn Fn(f64) + Sync),
    ) -> Result<(), InterpError> {
        let (lo, hi) = self.loop_bounds(lp)?;
        if lo > hi {
            return Ok(());
        }
        let d = lp.depth;
        if lp.parallel && !self.forked && self.shared.threads > 1 && hi > lo {
            return self.run_parallel(lp, lo, hi, report);
        }
        if lp.leaf {
            self.run_leaf(lp, lo, hi, false)?;
            report(1.0);
            return Ok(());
        }
        let span = (hi - lo + 1) as f64;
        for i in lo..=hi {
            self.iters[d] = i;
            self.run_items(&lp.body)?;
            report((i - lo + 1) as f64 / span);
        }
        Ok(())
    }

    /// Runs the iterations `lo..=hi` of a parallel loop in chunks on the thread pool.
    fn run_parallel(
        &mut self,
        lp: &LoopPlan,
        lo: i64,
        hi: i64,
        report: &(dyn Fn(f64) + Sync),
    ) -> Result<(), InterpError> {
        let n = hi - lo + 1;
        let pieces = (self.shared.threads as i64 * 8).min(n);
        let chunks: Vec<(i64, i64)> = (0..pieces)
            .map(|c| (lo + n * c / pieces, lo + n * (c + 1) / pieces - 1))
            .collect();
        let done = AtomicUsize::new(0);
        let this = &*self;
        let results: Vec<Result<u64, InterpError>> = chunks
            .par_iter()
            .map(|&(a, b)| {
                let mut m = this.fork();
                if lp.leaf {
                    m.run_leaf(lp, a, b, true)?;
                } else {
                    for i in a..=b {
                        m.iters[lp.depth] = i;
                        m.run_items(&lp.body)?;
                    }
                }
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                report(finished as f64 / pieces as f64);
                Ok(m.instances)
            })
            .collect();
        for r in results {
            self.instances += r?;
        }
        report(1.0);
        Ok(())
    }

    /// Runs an innermost loop over `lo..=hi`.
    /// `chunk`: `lo..=hi` is a part of the loop's range (a parallel chunk), not all of it.
    fn run_leaf(
        &mut self,
        lp: &LoopPlan,
        lo: i64,
        hi: i64,
        chunk: bool,
    ) -> Result<(), InterpError> {
        let d = lp.depth;
        let iterations = (hi - lo) as u64 + 1;
        self.shared
            .spend(iterations.saturating_mul(lp.stmts.len() as u64))?;
        for &s in &lp.stmts {
            // A loop over one statement runs exactly its range.
            let own = (lp.stmts.len() == 1 && !chunk).then_some((lo, hi));
            self.prepare_leaf(s, d, lo, hi, own)?;
        }
        if let [s] = lp.stmts[..] {
            let (a, b, fast) = {
                let st = &self.leaf[s.index()];
                (st.lo, st.hi, st.fast)
            };
            // Below a few iterations, setting up a batch costs more than it saves.
            if fast && b - a >= BATCH_MIN && self.leaf[s.index()].batch.is_some() {
                self.run_batched(s, d, a, b);
                return Ok(());
            }
            for i in a..=b {
                self.iters[d] = i;
                if fast {
                    self.execute_fast(s, d)?;
                } else {
                    self.run_checked(s)?;
                }
            }
            return Ok(());
        }
        for i in lo..=hi {
            self.iters[d] = i;
            for &s in &lp.stmts {
                let st = &self.leaf[s.index()];
                if i < st.lo || i > st.hi {
                    continue;
                }
                if st.fast {
                    self.execute_fast(s, d)?;
                } else {
                    self.run_checked(s)?;
                }
            }
        }
        Ok(())
    }

    fn run_checked(&mut self, s: StmtId) -> Result<(), InterpError> {
        let shared = self.shared;
        execute_checked(
            shared.program,
            &shared.compiled,
            &mut self.frames,
            &shared.memory,
            s,
            &self.iters,
        )?;
        self.instances += 1;
        Ok(())
    }

    /// Runs the instances `lo..=hi` of a pure statement alone in its innermost loop, every
    /// access proved in bounds, a block of iterations at a time.
    fn run_batched(&mut self, s: StmtId, d: usize, lo: i64, hi: i64) {
        let shared = self.shared;
        let plan = &shared.compiled.plans[s.index()];
        let state = &mut self.leaf[s.index()];
        let Some(regs) = state.batch.as_mut() else {
            return;
        };
        let entry = LoopEntry {
            iters: &self.iters,
            depth: d,
            arrays: &state.arrays,
            offsets: &state.offsets,
            elem: plan.elem,
        };
        batch::prepare(regs, &plan.code, &entry, lo, hi);
        let mut start = lo;
        while start <= hi {
            let end = hi.min(start + LANES as i64 - 1);
            batch::run_block(regs, &plan.code, &entry, &shared.memory, start, end);
            start = end + 1;
        }
        self.instances += (hi - lo + 1) as u64;
    }

    /// Decides how statement `s` runs in the innermost loop at `d` over `lo..=hi`.
    /// `own` is the statement's own range at `d` when the caller has it.
    fn prepare_leaf(
        &mut self,
        s: StmtId,
        d: usize,
        lo: i64,
        hi: i64,
        own: Option<(i64, i64)>,
    ) -> Result<(), InterpError> {
        let shared = self.shared;
        let plan = &shared.compiled.plans[s.index()];
        let stmt = &shared.program.statements[s.index()];
        let state = &mut self.leaf[s.index()];
        // Constraints on outer iterators only: they hold for the whole loop or for none of it.
        if !shared.guards[s.index()][d]
            .iter()
            .all(|b| b.holds(&self.iters))
        {
            state.lo = 1;
            state.hi = 0;
            return Ok(());
        }
        let (l, h) = match own {
            Some(range) => range,
            None => plan.bounds_at(stmt, &self.iters, d)?,
        };
        state.lo = l.max(lo);
        state.hi = h.min(hi);
        if state.lo > state.hi {
            return Ok(());
        }
        let (a, b) = (state.lo, state.hi);
        state.fast = plan.always_in_bounds
            || plan
                .accesses
                .iter()
                .all(|acc| acc.in_bounds(&self.iters, d, a, b));
        for (slot, acc) in state.offsets.iter_mut().zip(&plan.accesses) {
            *slot = (acc.offset.eval_outer(&self.iters, d), acc.offset.coeff(d));
        }
        Ok(())
    }

    /// Executes the instance of `s` at the current iterators, its accesses proved in bounds.
    #[inline]
    fn execute_fast(&mut self, s: StmtId, d: usize) -> Result<(), InterpError> {
        let shared = self.shared;
        let plan = &shared.compiled.plans[s.index()];
        let state = &self.leaf[s.index()];
        let i = self.iters[d];
        let mut env = FastEnv {
            iters: &self.iters,
            offsets: &state.offsets,
            arrays: &plan.accesses,
            memory: &shared.memory,
            i,
        };
        let value = code::execute(
            &plan.code,
            None,
            &mut self.frames.statements[s.index()],
            &mut env,
            &shared.compiled.functions,
            &mut self.frames.functions,
        )
        .map_err(|f| f.into_error(shared.program, &shared.program.statements[s.index()]))?;
        let (base, step) = state.offsets[0];
        // SAFETY: `prepare_leaf` proved the write inside its array for the whole range; in a
        // parallel loop no other iteration touches the element.
        unsafe {
            shared.memory.write(
                plan.accesses[0].array,
                (base + step * i) as usize,
                round(plan.elem, value),
            )
        };
        self.instances += 1;
        Ok(())
    }
}

/// Loads of an instance whose accesses were proved in bounds for the whole innermost loop.
struct FastEnv<'a> {
    iters: &'a [i64],
    offsets: &'a [(i64, i64)],
    arrays: &'a [super::plan::AccessPlan],
    memory: &'a RawMemory<'a>,
    i: i64,
}

impl Env for FastEnv<'_> {
    #[inline]
    fn iter(&self, depth: usize) -> i64 {
        self.iters[depth]
    }

    #[inline]
    fn load(&mut self, read: usize) -> Result<f64, Fault> {
        let (base, step) = self.offsets[read + 1];
        // SAFETY: `prepare_leaf` proved every access inside its array for the whole range.
        Ok(unsafe {
            self.memory
                .read(self.arrays[read + 1].array, (base + step * self.i) as usize)
        })
    }
}
