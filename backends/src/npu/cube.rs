//! The program of a kernel's stages: GM → L1 → L0A/L0B → Cube → L0C → UB → Vector → GM,
//! tiled, double-buffered and spread over the cores.
//!
//! Block `b` (= `block_idx`) runs `ob` iterations of the last stage's independent loops, and in
//! each its row panel `s0` and column group `s1` ([`super::tiles`]). A block first computes, in
//! order, the panels its last stage reads from L1 — scaled operands (GM → UB → × factor → L1)
//! and the results of earlier stages — then the last stage's tiles. Each such run of a stage
//! loops over its tiles and, per tile, over the reduction's steps (the accumulating loops
//! outside the Cube's reduction outermost):
//!
//! | pipe | work | waits for | then sets |
//! | --- | --- | --- | --- |
//! | MTE2 | the step's streamed operand tiles into L1 in fractal order (a resident A only at the first column tile; a convolution's input rows, at the first column tile when the reduction is one step) | MTE1 → MTE2 1: the L1 slot is free | MTE2 → MTE1 0 |
//! | MTE1 | `load2d` A into L0A (zZ) and B into L0B (zN), or `load3d` a convolution's im2col rows into L0B | MTE2 → MTE1 0; M → MTE1 1: the L0 slot is free | MTE1 → MTE2 1, MTE1 → M 0 |
//! | M | `mmad` (`init` at the tile's first step unless L0C holds the accumulator's start) | MTE1 → M 0; at the first step V → M 0 | M → MTE1 1; after the last step M → V 0 |
//!
//! After the last step V waits M → V 0 and MTE3 → V 0 (the UB slot is free), moves L0C to UB
//! (`copy_cc_to_ub`), sets V → M 0 (the L0C slot is free), runs the epilogue and sets V → MTE3
//! 0; MTE3 waits for it, writes the live-out tiles to GM (or the result into its L1 panel) and
//! sets MTE3 → V 0. An accumulator that starts from GM is loaded per tile by MTE2 into UB
//! (V → MTE2 2 / MTE2 → V 2), transformed by the prologue and moved into the L0C slot by V
//! (`copy_ub_to_cc`), which then sets V → M 0 instead of the drain. Every "slot is free" flag
//! is set once per buffer before a run (twice when double-buffered: ping-pong slots chosen by
//! the parity registers `s6` for steps, `s7` for tiles and `s31` for independent iterations,
//! whose input rows a convolution's column tiles share) and waited for once per buffer after
//! it, so every wait has its set issued before it and none is left over. A panel is written by
//! MTE3, which sets MTE3 → MTE1 2 after it for the run that reads it; that run sets MTE1 → MTE3
//! 3 after its last `load2d`, which the next writer of a panel waits for (set once per panel
//! before the block's loop and waited for once after it).

use std::fmt::Write;

use polyhedral::program::{ArrayId, ArrayRole, ScalarType};
use polyhedral::Program;

use super::copies::Off;
use super::epilogue::{self, Epilogue};
use super::plan::{Addressing, Dim, Holding, Init, Inner, Plan, Source, Stage};
use super::tiles::{self, Role, Shape, StageShape, StageTiles, Steps, Tiles, UbNeeds};
use super::{conv_rows, tune, Error, NpuTarget, Options, FRACTAL};

/// The kernel's name as the assembler reads it: letters, digits and `_`, not starting with a
/// digit (C files name kernels after themselves: `2mm`).
pub(crate) fn kernel_name(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{name}")
    } else {
        name
    }
}

/// Element type names of the GM tensors.
pub(crate) fn gm_type(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::F16 => "f16",
        _ => "f32",
    }
}

pub(crate) fn round16(x: u64) -> u64 {
    x.div_ceil(FRACTAL) * FRACTAL
}

/// Writes the whole program: a chain of stages in one kernel that keeps the intermediates on
/// chip, or one kernel per stage with the intermediates in GM when that is estimated faster
/// (the on-chip chain computes them again in every block that reads them).
pub(crate) fn write(
    program: &Program,
    plan: &Plan,
    target: &NpuTarget,
    options: &Options,
) -> Result<String, Error> {
    let name = kernel_name(&program.name);
    if plan.stages.len() == 1 {
        return kernel(program, plan, target, options, &name).map(|(k, _)| k);
    }
    let launches = || -> Result<(String, u64), Error> {
        let mut text = String::new();
        let mut total = 0;
        for p in plan.launches(program) {
            let stmt = &program.statements[p.last().stmt.index()].name;
            let (k, e) = kernel(program, &p, target, options, &format!("{name}_{stmt}"))?;
            if !text.is_empty() {
                text.push('\n');
            }
            text += &k;
            total += e;
        }
        Ok((text, total))
    };
    match options.launches {
        Some(true) => launches().map(|(k, _)| k),
        Some(false) => kernel(program, plan, target, options, &name).map(|(k, _)| k),
        None => match (kernel(program, plan, target, options, &name), launches()) {
            (Ok((chip, e1)), Ok((gm, e2))) => Ok(if e2 < e1 { gm } else { chip }),
            (Ok((chip, _)), Err(_)) => Ok(chip),
            (Err(_), Ok((gm, _))) => Ok(gm),
            (Err(e), Err(_)) => Err(e),
        },
    }
}

/// One kernel of a plan, named `name`, and its estimated cycles.
fn kernel(
    program: &Program,
    plan: &Plan,
    target: &NpuTarget,
    options: &Options,
    name: &str,
) -> Result<(String, u64), Error> {
    let ep = epilogue::lower(program, plan)?;
    let shape = shape(plan, &ep);
    // The tiles are chosen for double buffering even when it is off, so that the two compare
    // on the same tiling; a single-buffered search is the fallback when no double-buffered
    // tiling fits.
    let write = |t: &Tiles| -> Result<String, Error> {
        let mut e = Emitter {
            program,
            plan,
            ep: &ep,
            shape: &shape,
            t: t.clone(),
            es: plan.operands.size(),
            name: name.to_string(),
            out: String::new(),
            indent: 0,
            vars: Vec::new(),
            scalars_pending: false,
            prefilled: Vec::new(),
            prefill_waited: false,
            vectors_late: false,
        };
        e.program()?;
        Ok(e.out)
    };
    // The estimate that compares this kernel with other ways to run the program is the best
    // one, whichever tiling the simulator prefers.
    let (t, estimate) = match tiles::ranked(target, &shape, true, options.max_tile) {
        Ok(ranked) => {
            let estimate = ranked[0].estimate;
            let t = tune::fastest(ranked, &shape, target, |t| write(t).ok());
            let t = if options.double_buffer {
                t
            } else {
                Tiles {
                    nbuf: 1,
                    nl1: 1,
                    ..t
                }
            };
            (t, estimate)
        }
        Err(_) => {
            let t = tiles::choose(target, &shape, false, options.max_tile).map_err(|why| {
                Error::NoTiling {
                    kernel: program.name.clone(),
                    why,
                }
            })?;
            let estimate = t.estimate;
            (t, estimate)
        }
    };
    Ok((write(&t)?, estimate))
}

/// The kernel as the tiling sees it.
fn shape(plan: &Plan, ep: &Epilogue) -> Shape {
    let last = plan.stages.len() - 1;
    let mut roles = vec![Role::Last; plan.stages.len()];
    for (op, role) in [
        (&plan.last().a, Role::FeedsA),
        (&plan.last().b, Role::FeedsB),
    ] {
        if let Source::Stage(p) = op.source {
            roles[p] = role;
        }
    }
    let stages = plan
        .stages
        .iter()
        .enumerate()
        .map(|(i, st)| {
            let gathered = |src: &Source| matches!(src, Source::Gm { gathered: true, .. });
            let steps =
                if (gathered(&st.a.source) || gathered(&st.b.source)) && st.k.comps.len() > 1 {
                    Steps::Groups {
                        group: st.k.comps[1..].iter().map(|c| c.extent).product(),
                        outer: st.k.comps[0].extent,
                    }
                } else {
                    Steps::Any
                };
            StageShape {
                m: st.m.extent(),
                n: st.n.extent(),
                k: st.k.extent(),
                ko: st.k_outer.iter().map(|c| c.extent).product(),
                steps,
                role: if i == last { Role::Last } else { roles[i] },
                a_in_l1: matches!(st.a.source, Source::Stage(_)),
                b_in_l1: matches!(st.b.source, Source::Stage(_)),
                a_scaled: st.a.scale.is_some(),
                b_scaled: st.b.scale.is_some(),
                gather: [(true, &st.a.source), (false, &st.b.source)]
                    .into_iter()
                    .find(|(_, src)| gathered(src))
                    .map(|(a, _)| (a, st.k.comps.iter().map(|c| c.extent).max().unwrap_or(1))),
                window: window(st, plan.operands.size()).map(|w| (w.kh * w.kw, w.cs)),
                slide: window(st, plan.operands.size())
                    .filter(|_| i == last)
                    .and_then(|w| conv_rows::of(st, &w)),
            }
        })
        .collect();
    let st = plan.last();
    let a_invariant = match &st.a.source {
        Source::Gm { at, .. } => st.outer.iter().all(|c| at.strides[c.iter] == 0),
        Source::Stage(_) => false,
    };
    Shape {
        es: plan.operands.size(),
        stages,
        outer: st.outer.iter().map(|c| c.extent).product(),
        a_invariant,
        ub: UbNeeds {
            tiles: ep.after.count as u64,
            init_tiles: ep.before.as_ref().map_or(0, |b| b.count as u64),
            columns: ep.columns.len() as u64,
            rows: ep.row_vectors as u64,
            scalar_bytes: 32 * ep.scalars.len() as u64 + if ep.rows.is_empty() { 0 } else { 1024 },
            ops: super::tile_ops::vector_ops(
                ep.after
                    .ops
                    .iter()
                    .chain(ep.before.iter().flat_map(|b| &b.ops)),
            ),
        },
        square: st.band.is_some(),
    }
}

/// A sliding-window B operand that `load3d` gathers: its reduction is channels (element
/// stride `sc` in GM) × `kh` rows (`w` apart) × `kw` taps (consecutive), its columns
/// consecutive. A step's channels are copied whole, each `l` elements from its first tap, into
/// `cs` elements of L1 (zeros after them, room for the padded columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) sc: i64,
    pub(crate) w: u64,
    pub(crate) kh: u64,
    pub(crate) kw: u64,
    pub(crate) l: u64,
    pub(crate) cs: u64,
    /// Bytes of an element.
    pub(crate) es: u64,
    /// The slide and the block's iterations when one copy serves all of them
    /// ([`super::conv_rows`]): then `w` is the rows' pitch in L1.
    pub(crate) slide: Option<(conv_rows::Slide, u64)>,
}

/// Bytes of L1 a window's step takes: its channels, `cs` elements each.
pub(crate) fn window_slot(st: &Stage, t: StageTiles, w: &Window) -> u64 {
    t.tk.min(st.k.extent()).div_ceil(w.kh * w.kw) * w.cs * w.es
}

/// The window of a stage's gathered B, when `load3d` can build it from elements of `es` bytes.
fn window(st: &Stage, es: u64) -> Option<Window> {
    let Source::Gm {
        at, gathered: true, ..
    } = &st.b.source
    else {
        return None;
    };
    let comps = &st.k.comps;
    let stride = |i: usize| at.strides[comps[i].iter];
    let (sc, kh, w, kw) = match comps.len() {
        3 if stride(2) == 1 && stride(1) > 0 => (
            stride(0),
            comps[1].extent,
            stride(1) as u64,
            comps[2].extent,
        ),
        2 if stride(1) == 1 => (stride(0), 1, 1, comps[1].extent),
        1 if stride(0) == 1 => (0, 1, 1, comps[0].extent),
        _ => return None,
    };
    let (n, np) = (st.n.extent(), st.n.padded());
    let l = (kh - 1) * w + kw - 1 + n;
    let cs = (l + np - n).div_ceil(32 / es) * (32 / es);
    (sc >= 0).then_some(Window {
        sc,
        w,
        kh,
        kw,
        l,
        cs,
        es,
        slide: None,
    })
}

/// A value that is `full` except where every condition holds (a tile at the end of a range).
#[derive(Clone, Debug)]
pub(crate) struct Tail {
    pub(crate) conds: Vec<String>,
    pub(crate) full: u64,
    pub(crate) tail: u64,
}

impl Tail {
    /// `full`, or `tail` where every condition holds; with no condition, always `tail`.
    pub(crate) fn new(conds: Vec<String>, full: u64, tail: u64) -> Tail {
        if conds.is_empty() {
            Tail::none(tail)
        } else {
            Tail { conds, full, tail }
        }
    }

    pub(crate) fn none(full: u64) -> Tail {
        Tail {
            conds: Vec::new(),
            full,
            tail: full,
        }
    }

    pub(crate) fn active(&self) -> bool {
        !self.conds.is_empty() && self.tail != self.full
    }
}

/// Where a run reads an operand from in L1: `[chunks][held][16]` in `buf`.
#[derive(Clone, Debug)]
pub(crate) struct View {
    pub(crate) buf: String,
    /// The buffer's start for this step's slot (chunk 0, row 0 of what is held).
    pub(crate) slot: Off,
    pub(crate) held: u64,
    pub(crate) inner: Inner,
    /// The step tile's first row and first element along the inner dimension in what is
    /// held (a multiple of 16).
    pub(crate) row0: Off,
    pub(crate) inner0: Off,
}

impl View {
    /// Byte offset of the step tile's first fractal.
    pub(crate) fn at(&self, es: u64) -> Off {
        self.slot
            .clone()
            .sum(&scale_off(&self.inner0, (self.held * es) as i64))
            .sum(&scale_off(&self.row0, 16 * es as i64))
    }
}

/// How an operand reaches its L1 view.
#[derive(Clone, Debug)]
pub(crate) enum Fill {
    /// Copied from GM every step (into a ping-pong slot).
    Stream,
    /// Copied from GM at the block's first column tile (and first independent iteration when
    /// it is the same in all of them).
    Resident,
    /// Already in L1 (a stage's result or a scaled operand's panel).
    Panel,
    /// A step's channels of a sliding-window B copied from GM, gathered by `load3d`; with
    /// `true`, the reduction is one step and its channels are copied once for all the column
    /// tiles of an independent iteration (into ping-pong slots chosen by `s31`).
    Window(Window, bool),
}

/// One operand of a run.
#[derive(Clone, Debug)]
pub(crate) struct RunOperand {
    pub(crate) view: View,
    pub(crate) fill: Fill,
    /// The GM tensor's addressing and inner dimension, when it comes from GM.
    pub(crate) gm: Option<(Addressing, Inner, bool)>,
}

/// One stage computed by the block.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub(crate) stage: usize,
    pub(crate) role: Role,
    pub(crate) tiles: StageTiles,
    /// Tiles of the region: rows, columns.
    pub(crate) row_tiles: u64,
    pub(crate) col_tiles: u64,
    pub(crate) rows: Tail,
    pub(crate) cols: Tail,
    pub(crate) k: Tail,
    pub(crate) a: RunOperand,
    pub(crate) b: RunOperand,
    /// The L1 panel the result goes to, for a stage that feeds the last one.
    pub(crate) sink: Option<String>,
    /// Panels this run reads.
    pub(crate) reads: usize,
    /// Whether A stays in L0A across the column tiles, each step's fractals at `k_off · tm`
    /// elements (loaded at the first column tile).
    pub(crate) a_l0: bool,
    /// The step's offset along the whole reduction, in elements.
    pub(crate) k_off: Off,
}

pub(crate) struct Emitter<'a> {
    pub(crate) program: &'a Program,
    pub(crate) plan: &'a Plan,
    pub(crate) ep: &'a Epilogue,
    pub(crate) shape: &'a Shape,
    pub(crate) t: Tiles,
    pub(crate) es: u64,
    /// The kernel's name in the program text.
    name: String,
    pub(crate) out: String,
    pub(crate) indent: usize,
    /// Loop counters in scope.
    pub(crate) vars: Vec<String>,
    /// Whether the scalars' copies are issued and their loads into registers are not yet
    /// ([`Emitter::load_scalars`]).
    pub(crate) scalars_pending: bool,
    /// Buffers whose zero rows past the reduction are written once ([`super::prefill`]).
    pub(crate) prefilled: Vec<String>,
    /// Whether MTE1 has waited for those rows ([`Emitter::wait_zero_rows`]).
    pub(crate) prefill_waited: bool,
    /// Whether the epilogue's vectors are copied at the first step, after the operands it
    /// copies ([`Emitter::step`]), rather than before the block's loop.
    pub(crate) vectors_late: bool,
}

const RESERVED: [&str; 5] = ["l1_", "l0a", "l0b", "l0c", "ub_"];

impl Emitter<'_> {
    pub(crate) fn line(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.out, "{}{}", "    ".repeat(self.indent), text.as_ref());
    }

    pub(crate) fn open(&mut self, text: impl AsRef<str>) {
        self.line(format!("{} {{", text.as_ref()));
        self.indent += 1;
    }

    pub(crate) fn close(&mut self) {
        self.indent -= 1;
        self.line("}");
    }

    /// A loop counter name not in scope.
    pub(crate) fn var(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut i = 1;
        while self.vars.contains(&name) {
            name = format!("{base}{i}");
            i += 1;
        }
        self.vars.push(name.clone());
        name
    }

    pub(crate) fn free_var(&mut self) {
        self.vars.pop();
    }

    pub(crate) fn name(&self, a: ArrayId) -> String {
        self.program.array(a).name.clone()
    }

    pub(crate) fn elem(&self, a: ArrayId) -> u64 {
        match self.program.array(a).elem {
            ScalarType::F16 => 2,
            _ => 4,
        }
    }

    /// A stage's reduction rounded up to whole steps.
    pub(crate) fn kp(&self, stage: usize) -> u64 {
        tiles::round_to(self.plan.stages[stage].k.extent(), self.t.stages[stage].tk)
    }

    /// `reg*size` when double-buffered, nothing otherwise.
    pub(crate) fn slot(&self, reg: &str, size: u64) -> Off {
        if self.t.nbuf == 2 {
            Off::at(0).plus(reg, size as i64)
        } else {
            Off::at(0)
        }
    }

    /// Emits `body` once per combination of full and tail values, under the conditions that
    /// select them.
    pub(crate) fn tails(&mut self, tails: &[&Tail], body: &mut dyn FnMut(&mut Self, &[u64])) {
        fn go<'e>(
            e: &mut Emitter<'e>,
            tails: &[&Tail],
            chosen: &mut Vec<u64>,
            body: &mut dyn FnMut(&mut Emitter<'e>, &[u64]),
        ) {
            let Some((first, rest)) = tails.split_first() else {
                body(e, chosen);
                return;
            };
            if !first.active() {
                chosen.push(first.full);
                go(e, rest, chosen, body);
                chosen.pop();
                return;
            }
            // Nested ifs for a conjunction; the full value in every else.
            for c in &first.conds {
                e.open(format!("if {c}"));
            }
            chosen.push(first.tail);
            go(e, rest, chosen, body);
            chosen.pop();
            for _ in &first.conds {
                e.indent -= 1;
                e.line("} else {");
                e.indent += 1;
                chosen.push(first.full);
                go(e, rest, chosen, body);
                chosen.pop();
                e.close();
            }
        }
        go(self, tails, &mut Vec::new(), body);
    }

    fn program(&mut self) -> Result<(), Error> {
        for arr in &self.program.arrays {
            if RESERVED.iter().any(|r| arr.name.starts_with(r)) {
                return Err(Error::NotYet(format!(
                    "the array name `{}` collides with the program's buffer names",
                    arr.name
                )));
            }
        }
        let st = self.plan.last();
        let lt = self.t.last();
        let (m, n) = (st.m.extent(), st.n.extent());
        let mt = self.t.mt(m);
        let (ng, ntb, ob, nbuf) = (self.t.ng, self.t.ntb, self.t.ob, self.t.nbuf);
        let outer_blocks = self.shape.outer / ob;
        let blocks = outer_blocks * mt * ng;
        let _ = writeln!(
            self.out,
            "// {}: {}{m}×{n}×{} on the Cube ({}), tiles {}×{}×{}, {blocks} blocks ({outer_blocks} × {ob} independent iterations, {mt} row panels × {ng} column groups of {ntb} tiles), {}{}",
            self.program.name,
            if self.plan.stages.len() > 1 {
                format!("{} stages, the last ", self.plan.stages.len())
            } else {
                String::new()
            },
            st.k.extent() * st.k_outer.iter().map(|c| c.extent).product::<u64>(),
            if self.es == 2 { "f16 operands" } else { "f32 operands" },
            lt.tm,
            lt.tn,
            lt.tk,
            if nbuf == 2 { "double-buffered" } else { "single-buffered" },
            if self.t.a_resident { ", A's row panel resident in L1" } else { "" },
        );
        self.line("// GM: every array row-major as given; the layouts change on chip.");
        self.line(format!("kernel {} blockdim={blocks}", self.name));
        self.params();
        let runs = self.runs();
        self.buffers(&runs);
        self.line("");
        self.line("// Block coordinates: s2 independent chunk, s0 row panel, s1 column group.");
        self.line(format!("div s2, block_idx, {}", mt * ng));
        self.line(format!("mul s3, s2, {}", mt * ng));
        self.line("sub s3, block_idx, s3");
        self.line(format!("div s0, s3, {ng}"));
        self.line(format!("mul s1, s0, {ng}"));
        self.line("sub s1, s3, s1");
        self.line("mov s6, 0");
        self.line("mov s7, 0");
        if self.t.nl1 > nbuf {
            self.line("mov s29, 0");
        }
        let once = runs
            .iter()
            .any(|r| matches!(r.b.fill, Fill::Window(_, true)));
        if once && nbuf == 2 {
            self.line("mov s31, 0");
        }
        self.scalars();
        // A convolution whose rows go first copies its vectors after its first window and
        // weights: the first tile's Cube work waits for those, only its drain for these.
        self.vectors_late = ob > 1 && runs.len() == 1 && conv_rows::rows_first(&runs[0]);
        if !self.vectors_late {
            self.vectors();
        }
        self.prefill_zero_rows(&runs);
        let panels = runs.iter().map(|r| r.reads).sum::<usize>();
        for _ in 0..panels {
            self.line("set_flag MTE1, MTE3, 3");
        }
        let looped = ob > 1;
        let alone = runs.len() == 1
            && self.plan.last().a.scale.is_none()
            && self.plan.last().b.scale.is_none();
        if looped && alone {
            self.presets(&runs[0]);
        }
        if looped {
            // A convolution whose vectors come late loads its scalars there, once the first
            // window's copies are issued.
            if !self.vectors_late {
                self.load_scalars();
            }
            let o = self.var("o");
            self.open(format!("for {o} in 0..{ob}"));
        }
        self.outer_values();
        for r in &runs {
            self.run(r, !(looped && alone));
        }
        if once && nbuf == 2 && looped {
            self.line("sub s31, 1, s31");
        }
        if looped {
            self.close();
            self.free_var();
        }
        if looped && alone {
            self.postwaits(&runs[0]);
        }
        self.load_scalars();
        for _ in 0..panels {
            self.line("wait_flag MTE1, MTE3, 3");
        }
        Ok(())
    }

    fn params(&mut self) {
        for (i, arr) in self.program.arrays.iter().enumerate() {
            let id = ArrayId(i as u32);
            let in_gm = arr.role != ArrayRole::Temporary || self.plan.gm.contains(&id);
            if !in_gm || !self.plan.holding.contains_key(&id) {
                continue;
            }
            let dims = crate::npu::gm_shape(self.program, id);
            let role = match arr.role {
                ArrayRole::Input => "in",
                ArrayRole::Output => super::output_role(self.program, id),
                // A stage's result between two kernels: the first writes it, the next reads it.
                ArrayRole::Temporary if self.plan.holding[&id] == Holding::Tile => "out",
                ArrayRole::Temporary => "in",
                _ => "inout",
            };
            self.line(format!(
                "param {} : {}[{}] {role}",
                arr.name,
                gm_type(arr.elem),
                dims
            ));
        }
    }

    /// The stages the block computes, in order, with their operands' views.
    fn runs(&self) -> Vec<Run> {
        let plan = self.plan;
        let last = plan.stages.len() - 1;
        let lt = self.t.last();
        let st_last = plan.last();
        let kp_last = self.kp(last);
        let group = self.t.ntb * lt.tn;
        let (m, n) = (st_last.m.extent(), st_last.n.extent());
        let mt = self.t.mt(m);
        let ng = self.t.ng;
        let nbuf = self.t.nbuf;
        let es = self.es;
        let mut runs = Vec::new();
        for (i, st) in plan.stages.iter().enumerate() {
            let t = self.t.stages[i];
            let role = self.shape.stages[i].role;
            let (rows, cols) = match role {
                Role::Last => (lt.tm, group),
                Role::FeedsA => (lt.tm, kp_last),
                Role::FeedsB => (kp_last, group),
            };
            let (row_tiles, col_tiles) = (rows.div_ceil(t.tm), cols / t.tn);
            let cond = |var: &str, n: u64| -> Vec<String> {
                if n > 1 {
                    vec![format!("{var} == {}", n - 1)]
                } else {
                    Vec::new()
                }
            };
            let row_tail = match role {
                Role::Last | Role::FeedsA => Tail::new(cond("s0", mt), lt.tm, m - (mt - 1) * lt.tm),
                Role::FeedsB => Tail::new(
                    cond("mt", row_tiles),
                    t.tm,
                    st_last.k.extent() - (row_tiles - 1) * t.tm,
                ),
            };
            let col_tail = match role {
                Role::Last | Role::FeedsB => {
                    let mut conds = cond("s1", ng);
                    conds.extend(cond("nt", col_tiles));
                    Tail::new(conds, t.tn, n - (ng - 1) * group - (col_tiles - 1) * t.tn)
                }
                Role::FeedsA => Tail::new(
                    cond("nt", col_tiles),
                    t.tn,
                    st_last.k.extent() - (col_tiles - 1) * t.tn,
                ),
            };
            let kt_n = self.kp(i) / t.tk;
            let k_tail = Tail::new(cond("kt", kt_n), t.tk, st.k.extent() - (kt_n - 1) * t.tk);
            let ko = st.k_outer.iter().map(|c| c.extent).product::<u64>();
            let kp_all = self.kp(i) * ko;
            // The step's offset along the whole reduction (elements): ko loops, then kt.
            let mut k_off = Off::at(0).plus("kt", t.tk as i64);
            let mut inner_k = self.kp(i) as i64;
            for (j, c) in st.k_outer.iter().enumerate().rev() {
                k_off = k_off.plus(&format!("ko{j}"), inner_k);
                inner_k *= c.extent as i64;
            }
            let row_off = if row_tiles > 1 {
                Off::at(0).plus("mt", t.tm as i64)
            } else {
                Off::at(0)
            };
            let col_off = if col_tiles > 1 {
                Off::at(0).plus("nt", t.tn as i64)
            } else {
                Off::at(0)
            };
            let view_of = |a_role: bool, src: &Source, scaled: bool| -> RunOperand {
                let (buf, fill, inner, gm) = match src {
                    Source::Stage(p) => (
                        format!("l1_p{p}"),
                        Fill::Panel,
                        if a_role { Inner::K } else { Inner::Other },
                        None,
                    ),
                    Source::Gm {
                        at,
                        inner,
                        gathered,
                    } => {
                        let gm = Some((at.clone(), *inner, *gathered));
                        if scaled {
                            (
                                format!("l1_s{i}{}", if a_role { "a" } else { "b" }),
                                Fill::Panel,
                                *inner,
                                gm,
                            )
                        } else if a_role && i == last && self.t.a_resident {
                            ("l1_a".into(), Fill::Resident, *inner, gm)
                        } else if let (false, Some(w)) = (a_role, window(st, es)) {
                            let slide = conv_rows::of(st, &w).filter(|s| {
                                i == last && conv_rows::applies(s, self.t.ob, kt_n, row_tiles)
                            });
                            let w = slide.map_or(w, |s| conv_rows::widen(w, &s, self.t.ob));
                            let once =
                                slide.is_some() || (kt_n == 1 && col_tiles > 1 && row_tiles == 1);
                            ("l1_b".into(), Fill::Window(w, once), *inner, gm)
                        } else {
                            (
                                if a_role { "l1_a" } else { "l1_b" }.into(),
                                Fill::Stream,
                                *inner,
                                gm,
                            )
                        }
                    }
                };
                let streamed = matches!(fill, Fill::Stream | Fill::Window(..));
                // What the buffer holds: the step tile (streamed) or the run's whole region.
                let (held, row0, inner0) = match (a_role, inner, streamed) {
                    (true, Inner::K, true) => (t.tm, Off::at(0), Off::at(0)),
                    (true, Inner::Other, true) => (t.tk, Off::at(0), Off::at(0)),
                    (false, Inner::Other, true) => (t.tk, Off::at(0), Off::at(0)),
                    (false, Inner::K, true) => (t.tn, Off::at(0), Off::at(0)),
                    (true, Inner::K, false) => (rows, row_off.clone(), k_off.clone()),
                    (true, Inner::Other, false) => (kp_all, k_off.clone(), row_off.clone()),
                    (false, Inner::Other, false) => (kp_all, k_off.clone(), col_off.clone()),
                    (false, Inner::K, false) => (cols, col_off.clone(), k_off.clone()),
                };
                // Stage results are f32 panels laid out by their own tiles.
                let (held, row0, inner0) = match src {
                    Source::Stage(_) if a_role => (lt.tm, Off::at(0), k_off.clone()),
                    Source::Stage(_) => (kp_last, k_off.clone(), col_off.clone()),
                    _ => (held, row0, inner0),
                };
                let slot_size = match fill {
                    Fill::Window(w, _) => window_slot(st, t, &w),
                    _ if a_role => t.tm * t.tk * es,
                    _ => t.tk * t.tn * es,
                };
                let parity = match fill {
                    Fill::Window(_, true) => "s31",
                    Fill::Stream if self.t.nl1 > nbuf => "s29",
                    _ => "s6",
                };
                let sliding = matches!(fill, Fill::Window(w, _) if w.slide.is_some());
                let slot = if streamed && nbuf == 2 && !sliding {
                    Off::at(0).plus(parity, slot_size as i64)
                } else {
                    Off::at(0)
                };
                RunOperand {
                    view: View {
                        buf,
                        slot,
                        held,
                        inner,
                        row0,
                        inner0,
                    },
                    fill,
                    gm,
                }
            };
            let a = view_of(true, &st.a.source, st.a.scale.is_some());
            let b = view_of(false, &st.b.source, st.b.scale.is_some());
            let reads = [&a, &b]
                .iter()
                .filter(|o| matches!(o.fill, Fill::Panel))
                .count();
            let sink = (i != last).then(|| format!("l1_p{i}"));
            runs.push(Run {
                stage: i,
                role,
                tiles: t,
                row_tiles,
                col_tiles,
                rows: row_tail,
                cols: col_tail,
                k: k_tail,
                a,
                b,
                sink,
                reads,
                a_l0: self.t.a_l0[i],
                k_off: k_off.clone(),
            });
        }
        // Producers first: stages that feed the last one, in order, then the last.
        runs
    }

    /// The extent of a run's region along an operand's non-reduction dimension: its rows for
    /// A, its columns for B.
    pub(crate) fn region_other(&self, r: &Run, a_role: bool) -> u64 {
        let lt = self.t.last();
        let kp_last = self.kp(self.plan.stages.len() - 1);
        match (r.role, a_role) {
            (Role::Last | Role::FeedsA, true) => lt.tm,
            (Role::FeedsB, true) | (Role::FeedsA, false) => kp_last,
            (Role::Last | Role::FeedsB, false) => self.t.ntb * lt.tn,
        }
    }

    /// The values of the independent loops' iterators for this iteration, in registers
    /// `s9`, `s10`, …
    fn outer_values(&mut self) {
        let outer = self.plan.last().outer.clone();
        if outer.is_empty() {
            return;
        }
        let ob = self.t.ob;
        self.line("// This iteration of the independent loops: s9… their iterators.");
        self.line(format!("mul s5, s2, {ob}"));
        if ob > 1 {
            self.line("add s5, s5, o");
        }
        for (i, c) in outer.iter().enumerate().rev() {
            let r = 9 + i;
            if i == 0 {
                self.line(format!("mov s{r}, s5"));
            } else {
                self.line(format!("div s8, s5, {}", c.extent));
                self.line(format!("mul s3, s8, {}", c.extent));
                self.line(format!("sub s{r}, s5, s3"));
                self.line("mov s5, s8");
            }
        }
    }

    /// GM byte offset of an array's element for the block's position: the independent
    /// iterators, the row panel and the column group.
    pub(crate) fn gm_base(
        &self,
        at: &Addressing,
        es: u64,
        rows: Option<&Dim>,
        cols: Option<&Dim>,
    ) -> Off {
        let st = self.plan.last();
        let lt = self.t.last();
        let es = es as i64;
        let mut off = Off::at(at.offset * es);
        for (i, c) in st.outer.iter().enumerate() {
            off = off.plus(&format!("s{}", 9 + i), at.strides[c.iter] * es);
        }
        if let Some(d) = rows {
            let s = at.dim_stride(d).unwrap_or(0);
            off = off.plus("s0", s * lt.tm as i64 * es);
        }
        if let Some(d) = cols {
            let s = at.dim_stride(d).unwrap_or(0);
            off = off.plus("s1", s * (self.t.ntb * lt.tn) as i64 * es);
        }
        off
    }

    fn presets(&mut self, r: &Run) {
        let init = r.role == Role::Last && matches!(self.plan.last().init, Init::Gm(_));
        // A convolution's rows that go first wait for no slot (see `step`): no ring either.
        let ring = if conv_rows::rows_first(r) {
            0
        } else {
            self.t.nl1
        };
        for _ in self.t.nbuf..ring {
            self.line("set_flag MTE1, MTE2, 1");
        }
        for _ in 0..self.t.nbuf {
            if !conv_rows::rows_first(r) {
                self.line("set_flag MTE1, MTE2, 1");
            }
            self.line("set_flag M, MTE1, 1");
            if !init {
                self.line("set_flag V, M, 0");
            } else {
                self.line("set_flag V, MTE2, 2");
            }
            self.line("set_flag MTE3, V, 0");
        }
        self.wait_zero_rows();
    }

    fn postwaits(&mut self, r: &Run) {
        let init = r.role == Role::Last && matches!(self.plan.last().init, Init::Gm(_));
        // A convolution's rows that go first wait for no slot (see `step`): no ring either.
        let ring = if conv_rows::rows_first(r) {
            0
        } else {
            self.t.nl1
        };
        for _ in self.t.nbuf..ring {
            self.line("wait_flag MTE1, MTE2, 1");
        }
        for _ in 0..self.t.nbuf {
            if !conv_rows::rows_first(r) {
                self.line("wait_flag MTE1, MTE2, 1");
            }
            self.line("wait_flag M, MTE1, 1");
            if !init {
                self.line("wait_flag V, M, 0");
            } else {
                self.line("wait_flag V, MTE2, 2");
            }
            self.line("wait_flag MTE3, V, 0");
        }
    }

    /// One stage over the block's region.
    fn run(&mut self, r: &Run, sync: bool) {
        let stage = &self.plan.stages[r.stage];
        self.line(format!(
            "// {} ({}): tiles {}×{}×{}",
            self.program.statements[stage.stmt.index()].name,
            match r.role {
                Role::Last => "the result",
                Role::FeedsA => "into L1 as the last stage's A",
                Role::FeedsB => "into L1 as the last stage's B",
            },
            r.tiles.tm,
            r.tiles.tn,
            r.tiles.tk
        ));
        // The slots are free from the start: the run's first tiles stream in while its scaled
        // operands are still on their way to L1.
        if sync {
            self.presets(r);
        }
        for (op, a_role) in [(&stage.a, true), (&stage.b, false)] {
            if let Some(f) = op.scale {
                let o = if a_role { &r.a } else { &r.b };
                self.prescale(r, o, a_role, f);
            }
        }
        if !self.vectors_late {
            self.load_scalars();
        }
        for _ in 0..r.reads {
            self.line("wait_flag MTE3, MTE1, 2");
        }
        if r.sink.is_some() {
            self.line("wait_flag MTE1, MTE3, 3");
        }
        if r.row_tiles > 1 {
            self.vars.push("mt".into());
            self.open(format!("for mt in 0..{}", r.row_tiles));
        }
        if r.col_tiles > 1 {
            self.vars.push("nt".into());
            self.open(format!("for nt in 0..{}", r.col_tiles));
        }
        self.tile(r);
        if r.col_tiles > 1 {
            self.close();
            self.free_var();
        }
        if r.row_tiles > 1 {
            self.close();
            self.free_var();
        }
        // The UB pieces of the scaled operands are free again: waited for only now, so that
        // MTE2 streams the run's tiles without waiting for the last piece to reach L1.
        for op in [&stage.a, &stage.b] {
            if op.scale.is_some() {
                for _ in 0..2 {
                    self.line("wait_flag MTE3, MTE2, 3");
                }
            }
        }
        for _ in 0..r.reads {
            self.line("set_flag MTE1, MTE3, 3");
        }
        if r.sink.is_some() {
            self.line("set_flag MTE3, MTE1, 2");
        }
        if sync {
            self.postwaits(r);
        }
    }

    /// One tile: the accumulator's start, the steps, the drain.
    fn tile(&mut self, r: &Run) {
        let st = &self.plan.stages[r.stage];
        if self.init_placement(r) == Some(false) {
            self.init_tile(r);
        }
        self.line("mov s4, 0");
        let k_outer = st.k_outer.clone();
        for (j, c) in k_outer.iter().enumerate() {
            self.vars.push(format!("ko{j}"));
            self.open(format!("for ko{j} in 0..{}", c.extent));
        }
        let kt_n = self.kp(r.stage) / r.tiles.tk;
        self.vars.push("kt".into());
        self.open(format!("for kt in 0..{kt_n}"));
        self.step(r);
        self.close();
        self.free_var();
        for _ in &k_outer {
            self.close();
            self.free_var();
        }
        self.line("set_flag M, V, 0");
        self.drain(r);
        if self.t.nbuf == 2 {
            self.line("sub s7, 1, s7");
        }
    }

    /// Opens the conditions of an A that stays in L0A being loaded: the block's first column
    /// tile (of its first independent iteration); returns how many were opened.
    fn open_first_use(&mut self) -> usize {
        let mut opened = 0;
        if self.t.ob > 1 {
            self.open("if o == 0");
            opened += 1;
        }
        self.open("if nt == 0");
        opened + 1
    }

    /// One reduction step of one tile.
    fn step(&mut self, r: &Run) {
        // A convolution's rows go first when its weights are resident: MTE1 gathers the first
        // tile's window while the weights are still on their way (`conv_rows`).
        let rows_first = conv_rows::rows_first(r);
        // MTE2: the streamed operands, a resident one at its first use; rows that go first
        // reuse no slot, so MTE2 copies them ahead without waiting for MTE1.
        if !rows_first {
            self.line("wait_flag MTE1, MTE2, 1");
        }
        if rows_first {
            self.rows_first_copies(r);
        } else {
            self.copy_operand(r, true, None);
            self.copy_operand(r, false, None);
            self.line("set_flag MTE2, MTE1, 0");
            self.init_after_operands(r);
        }
        // MTE1: fractals into L0A (zZ) and L0B (zN).
        if rows_first {
            self.rows_first_loads(r);
        } else {
            self.line("wait_flag MTE2, MTE1, 0");
            self.line("wait_flag M, MTE1, 1");
            self.load_a(r);
            self.load_b(r);
            self.line("set_flag MTE1, MTE2, 1");
            self.line("set_flag MTE1, M, 0");
        }
        // M: the Cube.
        self.line("wait_flag MTE1, M, 0");
        let (t, es) = (r.tiles, self.es);
        let (l0a, l0b) = self.l0_slots(r);
        let l0c = self.slot("s7", t.tm * t.tn * 4);
        let src_f32 = if es == 4 { ", src_f32" } else { "" };
        let (tm, tn, tk) = (t.tm, t.tn, t.tk);
        let mmad = |mode: &str| {
            format!(
                "mmad.f32 l0c[{}], l0a[{}], l0b[{}], m={tm}, k={tk}, n={tn}, {mode}{src_f32}",
                l0c.text(),
                l0a.text(),
                l0b.text()
            )
        };
        let first = if r.role == Role::Last && matches!(self.plan.last().init, Init::Gm(_)) {
            "acc"
        } else {
            "init"
        };
        let parts = self.weight_parts(r);
        self.open("if s4 == 0");
        self.line("wait_flag V, M, 0");
        match &parts {
            Some(p) => self.mmad_parts(r, p, first),
            None => self.line(mmad(first)),
        }
        self.indent -= 1;
        self.line("} else {");
        self.indent += 1;
        match &parts {
            Some(p) => self.mmad_parts(r, p, "acc"),
            None => self.line(mmad("acc")),
        }
        self.close();
        self.line("set_flag M, MTE1, 1");
        self.line("add s4, s4, 1");
        if self.t.nbuf == 2 {
            self.line("sub s6, 1, s6");
        }
        if self.t.nl1 > self.t.nbuf {
            // The next L1 slot of the streamed operands, round the ring.
            self.line("add s29, s29, 1");
            self.open(format!("if s29 == {}", self.t.nl1));
            self.line("mov s29, 0");
            self.close();
        }
    }

    /// `load2d` of `rows` rows of fractals from L1 into consecutive fractals of an L0 buffer:
    /// row after row (`row_step` bytes apart in L1), each `per_row` fractals `stride` fractals
    /// apart, in a loop over the rows (counter `var`); one load when a row is one fractal, as
    /// the rows' fractals then follow each other in L0.
    pub(crate) fn load_rows(
        &mut self,
        (l0, dst): (&str, &Off),
        (buf, src): (&str, &Off),
        (rows, row_step, var): (u64, u64, &str),
        (per_row, stride): (u64, u64),
        flags: &str,
    ) {
        let fr = 256 * self.es;
        if per_row == 1 {
            self.line(format!(
                "load2d {l0}[{}], {buf}[{}], repeat={rows}, src_stride={}{flags}",
                dst.text(),
                src.text(),
                row_step / fr,
            ));
            return;
        }
        let v = self.var(var);
        self.open(format!("for {v} in 0..{rows}"));
        self.line(format!(
            "load2d {l0}[{}], {buf}[{}], repeat={per_row}, src_stride={stride}{flags}",
            dst.clone().plus(&v, (per_row * fr) as i64).text(),
            src.clone().plus(&v, row_step as i64).text(),
        ));
        self.close();
        self.free_var();
    }

    /// Opens the conditions under which a resident operand is copied: the block's first
    /// column tile (and first independent iteration); returns how many were opened.
    pub(crate) fn open_resident(&mut self, r: &Run) -> usize {
        let mut opened = 0;
        if self.t.ob > 1 {
            self.open("if o == 0");
            opened += 1;
        }
        if r.col_tiles > 1 {
            self.open("if nt == 0");
            opened += 1;
        }
        opened
    }

    /// A step's operand (A or B) from GM into L1 on MTE2, where the step copies it; a
    /// resident operand under [`Self::open_resident`]'s conditions, followed there by
    /// `signal`.
    pub(crate) fn copy_operand(&mut self, r: &Run, a_role: bool, signal: Option<&str>) {
        let o = if a_role { &r.a } else { &r.b };
        let tails: Vec<&Tail> = if a_role {
            vec![&r.rows, &r.k]
        } else {
            vec![&r.k, &r.cols]
        };
        let copy = |e: &mut Self| {
            e.tails(&tails, &mut |e, v| {
                let (rows_v, cols_v, k_v) = if a_role {
                    (v[0], 0, v[1])
                } else {
                    (0, v[1], v[0])
                };
                let region = e.operand_region(r, a_role, o, (rows_v, cols_v, k_v));
                e.copy_in(&region);
            });
        };
        match o.fill {
            Fill::Stream if a_role && r.a_l0 => {
                let opened = self.open_first_use();
                copy(self);
                for _ in 0..opened {
                    self.close();
                }
            }
            Fill::Stream => copy(self),
            Fill::Resident => {
                let opened = self.open_resident(r);
                copy(self);
                if let Some(line) = signal {
                    self.line(line);
                }
                for _ in 0..opened {
                    self.close();
                }
            }
            Fill::Window(w, false) => self.window_in(r, o, &w),
            Fill::Window(w, true) => {
                if w.slide.is_some() {
                    if r.col_tiles > 1 {
                        self.open("if nt == 0");
                    }
                    self.window_rows_in(r, o, &w, conv_rows::rows_first(r));
                    if r.col_tiles > 1 {
                        self.close();
                    }
                } else {
                    self.open("if nt == 0");
                    self.window_in(r, o, &w);
                    self.close();
                }
            }
            Fill::Panel => {}
        }
    }

    /// The step's slots in L0A and L0B.
    pub(crate) fn l0_slots(&self, r: &Run) -> (Off, Off) {
        let (t, es) = (r.tiles, self.es);
        let l0a = if r.a_l0 {
            scale_off(&r.k_off, (t.tm * es) as i64)
        } else {
            self.slot("s6", t.tm * t.tk * es)
        };
        (l0a, self.slot("s6", t.tk * t.tn * es))
    }

    /// MTE1: the step's A fractals into L0A (zZ), per row of fractals its k fractals.
    pub(crate) fn load_a(&mut self, r: &Run) {
        let opened = if r.a_l0 { self.open_first_use() } else { 0 };
        self.load_a_here(r);
        for _ in 0..opened {
            self.close();
        }
    }

    /// [`Self::load_a`] without the conditions of an A that stays in L0A.
    pub(crate) fn load_a_here(&mut self, r: &Run) {
        let (t, es) = (r.tiles, self.es);
        let f = |x: u64| x / FRACTAL;
        let fr = 256 * es;
        let f32 = if es == 4 { ", f32" } else { "" };
        let (l0a, _) = self.l0_slots(r);
        let va = r.a.view.clone();
        let base = va.at(es);
        let (m1_step, k1_stride, tr) = match va.inner {
            Inner::K => (fr, va.held / FRACTAL, ""),
            Inner::Other => (va.held * 16 * es, 1, ", transpose"),
        };
        self.load_rows(
            ("l0a", &l0a),
            (&va.buf, &base),
            (f(t.tm), m1_step, "m1"),
            (f(t.tk), k1_stride),
            &format!("{tr}{f32}"),
        );
    }

    /// MTE1: the step's B into L0B (zN): per row of fractals its n fractals, or the im2col
    /// rows of a window.
    pub(crate) fn load_b(&mut self, r: &Run) {
        let (_, l0b) = self.l0_slots(r);
        self.load_b_at(r, &l0b, 0);
    }

    /// [`Self::load_b`] into `l0b`, of the tile `cols` columns past the step's.
    pub(crate) fn load_b_at(&mut self, r: &Run, l0b: &Off, cols: u64) {
        let (t, es) = (r.tiles, self.es);
        let f = |x: u64| x / FRACTAL;
        let fr = 256 * es;
        let f32 = if es == 4 { ", f32" } else { "" };
        let vb = r.b.view.clone();
        if let Fill::Window(w, _) = r.b.fill {
            let st = &self.plan.stages[r.stage];
            let channels = t.tk.min(st.k.extent()).div_ceil(w.kh * w.kw);
            // The tile's first column, from the block's column group.
            let mut n0 =
                Off::at((cols * es) as i64).plus("s1", (self.t.ntb * self.t.last().tn * es) as i64);
            if r.col_tiles > 1 {
                n0 = n0.plus("nt", (t.tn * es) as i64);
            }
            if w.slide.is_some() {
                n0 = n0.plus("o", (w.w * es) as i64);
            }
            self.line(format!(
                "load3d l0b[{}], {}[{}], c={channels}, cs={}, w={}, kh={}, kw={}, k={}, n={}{f32}",
                l0b.text(),
                vb.buf,
                vb.slot.clone().sum(&n0).text(),
                w.cs,
                w.w,
                w.kh,
                w.kw,
                t.tk,
                t.tn,
            ));
        } else {
            let base = vb.at(es);
            let (k1_step, n1_stride, tr) = match vb.inner {
                Inner::Other => (fr, vb.held / FRACTAL, ", transpose"),
                Inner::K => (vb.held * 16 * es, 1, ""),
            };
            self.load_rows(
                ("l0b", l0b),
                (&vb.buf, &base),
                (f(t.tk), k1_step, "k1"),
                (f(t.tn), n1_stride),
                &format!("{tr}{f32}"),
            );
        }
    }

    /// The finished tile: L0C → UB, the epilogue, UB → GM (or into its L1 panel).
    fn drain(&mut self, r: &Run) {
        let t = r.tiles;
        let tile = t.tm * t.tn * 4;
        let ub = self.slot("s7", tile);
        let init = r.role == Role::Last && matches!(self.plan.last().init, Init::Gm(_));
        self.line("wait_flag M, V, 0");
        self.line("wait_flag MTE3, V, 0");
        let l0c = self.slot("s7", tile);
        self.line(format!(
            "copy_cc_to_ub ub_t0[{}], l0c[{}], len={}",
            ub.text(),
            l0c.text(),
            (t.tm / FRACTAL) * (t.tn / FRACTAL)
        ));
        if !init {
            self.line("set_flag V, M, 0");
        }
        if r.role == Role::Last {
            for op in self.ep.after.ops.clone() {
                self.vector_op(&op, "ub_t", &ub);
            }
        }
        self.line("set_flag V, MTE3, 0");
        self.line("wait_flag V, MTE3, 0");
        match &r.sink {
            Some(panel) => self.write_panel(r, panel, &ub),
            None => self.write_out(r, &ub),
        }
        self.line("set_flag MTE3, V, 0");
    }
}

/// `k · off`.
fn scale_off(off: &Off, k: i64) -> Off {
    Off {
        c: off.c * k,
        terms: off.terms.iter().map(|(n, c)| (n.clone(), c * k)).collect(),
    }
}
