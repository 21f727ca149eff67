//! A convolution's input rows kept in L1 across a block's consecutive output rows.
//!
//! A sliding-window B whose window advances by one of its rows (`w` elements) from one
//! iteration of the last stage's innermost independent loop to the next (a convolution's
//! output rows: `I(c, y + ky, x + kx)` advances by one input row per `y`) is copied once per
//! block: the `ob` iterations a block runs are consecutive (`ob` divides that loop's extent),
//! so together they read `ob + kh - 1` rows per channel. Each input row then crosses GM once
//! per block (plus the `kh - 1` halo rows the next block reads again) instead of once per
//! output row that reads it: the first iteration copies its window's rows, each later one
//! only its last row, after the others (no row is overwritten while the block runs). In L1
//! the rows are outermost and each channel's part of a row takes a pitch of whole 32-byte
//! blocks: `load3d` reads channel `ci`, row `i` at `ci · pitch + i · stride` from iteration
//! `o`'s first row, `o · stride` in (a row's channels and a gap its padded columns read
//! into), and the row an iteration copies lies past every byte the iterations before it read.

use super::copies::window_copy;

use super::copies::{Off, Region};
use super::cube::{Emitter, Fill, Run, RunOperand, Window};
use super::plan::Inner;
use super::plan::{Source, Stage};
use super::FRACTAL;

/// How a stage's window slides over its innermost independent loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slide {
    /// GM elements between consecutive rows, and between consecutive iterations' windows.
    pub step: u64,
    /// Iterations of the innermost independent loop.
    pub extent: u64,
    /// Rows of a window.
    pub kh: u64,
    /// Elements of a row the window reads from GM.
    pub copy: u64,
    /// Elements of a row `load3d` reads, padded columns included.
    pub row: u64,
    /// Channels of the window (the reduction is one step).
    pub channels: u64,
}

impl Slide {
    /// L1 elements per channel of a row: the elements copied, rounded to whole 32-byte
    /// blocks. `load3d` reads `row` elements from a channel's start; what it reads past the
    /// pitch (the next channel's first elements, or the row's [`Self::gap`]) only the padded
    /// columns take, which are never written out, so it need not be a copy's zeros.
    pub fn pitch(&self, es: u64) -> u64 {
        let unit = 32 / es;
        self.copy.div_ceil(unit) * unit
    }

    /// L1 elements after a row's last channel that `load3d` reads past its pitch: never
    /// written, so no copy of a later row races with those reads.
    pub fn gap(&self, es: u64) -> u64 {
        let unit = 32 / es;
        self.row.saturating_sub(self.pitch(es)).div_ceil(unit) * unit
    }

    /// L1 elements between consecutive rows.
    pub fn stride(&self, es: u64) -> u64 {
        self.channels * self.pitch(es) + self.gap(es)
    }

    /// L1 bytes of a block of `ob` iterations' rows.
    pub fn bytes(&self, ob: u64, es: u64) -> u64 {
        (ob + self.kh - 1) * self.stride(es) * es
    }

    /// GM elements per channel a block of `ob` iterations reads.
    pub fn gm_elements(&self, ob: u64) -> u64 {
        (ob + self.kh - 1) * self.copy
    }
}

/// The slide of a stage's window, when each iteration's window starts one row after the
/// previous one's and a row's reads stay within the row.
pub(crate) fn of(st: &Stage, w: &Window) -> Option<Slide> {
    let Source::Gm { at, .. } = &st.b.source else {
        return None;
    };
    let c = st.outer.last()?;
    let step = u64::try_from(at.strides[c.iter]).ok()?;
    let copy = w.kw - 1 + st.n.extent();
    (w.kh > 1 && step == w.w && copy <= w.w && c.extent > 1).then_some(Slide {
        step,
        extent: c.extent,
        kh: w.kh,
        copy,
        row: w.kw - 1 + st.n.padded(),
        channels: st.k.extent().div_ceil(w.kh * w.kw),
    })
}

/// Whether a block of `ob` iterations keeps its window across them: the reduction is one
/// step, the block has one row tile and its iterations do not cross the loop's end.
pub fn applies(s: &Slide, ob: u64, steps: u64, row_tiles: u64) -> bool {
    ob > 1 && steps == 1 && row_tiles == 1 && s.extent.is_multiple_of(ob)
}

/// The window of a whole block of `ob` iterations.
pub(crate) fn widen(w: Window, s: &Slide, ob: u64) -> Window {
    Window {
        w: s.stride(w.es),
        cs: s.pitch(w.es),
        slide: Some((*s, ob)),
        ..w
    }
}

/// The `MTE2 → MTE1` event that says a convolution's resident weights are in L1, when its
/// rows go first ([`rows_first`]).
pub(crate) const WEIGHTS_EVENT: u8 = 1;

/// The `MTE1 → M` event that says a part of the weights is in L0A ([`Emitter::weight_parts`]).
const PART_EVENT: u8 = 2;

/// The most parts the weights are copied in.
const PARTS: u64 = 3;

/// Fractal columns `c0..c0 + n` of a region copied whole along its inner dimension.
fn chunks(r: &Region, c0: u64, n: u64) -> Region {
    let es = r.es as i64;
    let chunk = FRACTAL as i64 * es;
    let lo = c0 * FRACTAL;
    Region {
        src: r.src.clone().add(c0 as i64 * chunk),
        at: r.at.clone().add(c0 as i64 * r.held as i64 * chunk),
        inner: n * FRACTAL,
        valid_inner: r.valid_inner.saturating_sub(lo).min(n * FRACTAL),
        ..r.clone()
    }
}

/// MTE2's signal that an iteration's rows are in L1, when the rows go first: once for the
/// first window, then once per row copied ahead.
const ROWS_SET: &str = "set_flag MTE2, MTE1, 0";

/// Whether a step copies its sliding window's rows before its resident A (the weights) and
/// signals them apart: the first tile's `load3d`, the longest load of the step, then overlaps
/// the weights' copy instead of waiting for it. Then each iteration's rows are signalled
/// once, for all its column tiles, and the row the next iteration adds is copied ahead.
pub(crate) fn rows_first(r: &Run) -> bool {
    matches!(r.a.fill, Fill::Resident)
        && matches!(r.b.fill, Fill::Window(w, true) if w.slide.is_some())
}

impl Emitter<'_> {
    /// MTE2's part of a step whose rows go first: the window's rows, the weights (in
    /// [`Self::weight_parts`], each signalled, after the vectors the epilogue needs, which
    /// then are on chip by the time the first tile is drained; else whole, then the vectors),
    /// and the row the next iteration adds.
    pub(crate) fn rows_first_copies(&mut self, r: &Run) {
        self.copy_operand(r, false, None);
        let signal = format!("set_flag MTE2, MTE1, {WEIGHTS_EVENT}");
        let parts = self.weight_parts(r);
        if parts.is_none() {
            self.copy_operand(r, true, Some(&signal));
        }
        if self.vectors_late {
            self.vectors_late = false;
            let opened = self.open_resident(r);
            self.load_scalars();
            self.vectors();
            for _ in 0..opened {
                self.close();
            }
        }
        if let Some(parts) = parts {
            let opened = self.open_resident(r);
            let tails = [&r.rows, &r.k];
            self.tails(&tails, &mut |e, v| {
                let region = e.operand_region(r, true, &r.a, (v[0], 0, v[1]));
                for &(c0, n) in &parts {
                    e.copy_in(&chunks(&region, c0, n));
                    e.line(&signal);
                }
            });
            for _ in 0..opened {
                self.close();
            }
        }
        self.window_rows_ahead(r);
    }

    /// Whether the block's first step loads its first two tiles' B ([`Self::rows_first_loads`]).
    fn two_first(&self, r: &Run) -> bool {
        rows_first(r) && r.col_tiles > 1 && r.a_l0 && self.t.nbuf == 2
    }

    /// The parts, as (first fractal column, fractal columns), in which the weights of a step
    /// whose block loads two tiles first are copied, loaded into L0A and multiplied: the
    /// first tile's products start on the first part while the others are still copied,
    /// so its drain waits for the last part's copy, load and product only. The products
    /// add up in increasing `k` as one would. `None` where A is not copied whole along its
    /// contiguous reduction dimension.
    pub(crate) fn weight_parts(&self, r: &Run) -> Option<Vec<(u64, u64)>> {
        let gm_k = matches!(r.a.gm, Some((_, Inner::K, false)));
        let chunks = r.tiles.tk / FRACTAL;
        let one_step =
            self.kp(r.stage) == r.tiles.tk && self.plan.stages[r.stage].k_outer.is_empty();
        if !(self.two_first(r) && gm_k && r.a.view.inner == Inner::K && one_step && chunks > 1) {
            return None;
        }
        let n = chunks.min(PARTS);
        let (base, extra) = (chunks / n, chunks % n);
        let mut parts = Vec::new();
        let mut c0 = 0;
        for i in 0..n {
            let len = base + u64::from(i < extra);
            parts.push((c0, len));
            c0 += len;
        }
        Some(parts)
    }

    /// MTE1: fractal columns `c0..c0 + n` of the weights into their part of L0A, `[M1][n]`
    /// after the parts before it.
    fn load_a_part(&mut self, r: &Run, c0: u64, n: u64) {
        let (t, es) = (r.tiles, self.es);
        let fr = 256 * es;
        let f32 = if es == 4 { ", f32" } else { "" };
        let (l0a, _) = self.l0_slots(r);
        let va = r.a.view.clone();
        let m1 = t.tm / FRACTAL;
        self.load_rows(
            ("l0a", &l0a.add((c0 * m1 * fr) as i64)),
            (
                &va.buf,
                &va.at(es).add((c0 * va.held * FRACTAL * es) as i64),
            ),
            (m1, fr, "m1"),
            (n, va.held / FRACTAL),
            f32,
        );
    }

    /// M: a tile's product as one `mmad` per part of the weights, the first with `first`
    /// (`init` or `acc`), the others accumulating; at the block's first step each waits for
    /// its part in L0A.
    pub(crate) fn mmad_parts(&mut self, r: &Run, parts: &[(u64, u64)], first: &str) {
        let (t, es) = (r.tiles, self.es);
        let fr = (256 * es) as i64;
        let (l0a, l0b) = self.l0_slots(r);
        let l0c = self.slot("s7", t.tm * t.tn * 4);
        let src_f32 = if es == 4 { ", src_f32" } else { "" };
        let (m1, n1) = ((t.tm / FRACTAL) as i64, (t.tn / FRACTAL) as i64);
        for (i, &(c0, n)) in parts.iter().enumerate() {
            self.open("if o == 0");
            self.open("if nt == 0");
            self.line(format!("wait_flag MTE1, M, {PART_EVENT}"));
            self.close();
            self.close();
            self.line(format!(
                "mmad.f32 l0c[{}], l0a[{}], l0b[{}], m={}, k={}, n={}, {}{src_f32}",
                l0c.text(),
                l0a.clone().add(c0 as i64 * m1 * fr).text(),
                l0b.clone().add(c0 as i64 * n1 * fr).text(),
                t.tm,
                n * FRACTAL,
                t.tn,
                if i == 0 { first } else { "acc" },
            ));
        }
    }

    /// MTE1's part of a step whose rows go first ([`rows_first`]): the window's `load3d`,
    /// then, at the block's first step, the weights into L0A once they are in L1. When the
    /// block's first two tiles are column tiles of one window and L0B has two slots, its
    /// first step gathers both tiles' im2col rows before it waits for the weights: MTE1's
    /// longest loads overlap the weights' copy, and the second step has no load of its own.
    pub(crate) fn rows_first_loads(&mut self, r: &Run) {
        let weights = format!("wait_flag MTE2, MTE1, {WEIGHTS_EVENT}");
        if !self.two_first(r) {
            self.window_rows_wait(r);
            self.line("wait_flag M, MTE1, 1");
            self.load_b(r);
            let opened = self.open_resident(r);
            self.line(&weights);
            for _ in 0..opened {
                self.close();
            }
            self.load_a(r);
            self.line("set_flag MTE1, M, 0");
            return;
        }
        let (_, l0b) = self.l0_slots(r);
        let size = (r.tiles.tk * r.tiles.tn * self.es) as i64;
        // The slot the next step uses: the other one of the pair `s6` alternates over.
        let other = Off::at(size).plus("s6", -size);
        // A later step's own tile; its window's rows are waited for at its first column tile.
        let later = |e: &mut Self, first_column: bool| {
            if first_column {
                e.window_rows_wait(r);
            }
            e.line("wait_flag M, MTE1, 1");
            e.load_b(r);
            e.line("set_flag MTE1, M, 0");
        };
        self.open("if o == 0");
        self.open("if nt == 0");
        self.line("wait_flag MTE2, MTE1, 0");
        self.line("wait_flag M, MTE1, 1");
        self.load_b_at(r, &l0b, 0);
        self.line("wait_flag M, MTE1, 1");
        self.load_b_at(r, &other, r.tiles.tn);
        self.line("set_flag MTE1, M, 0");
        self.line("set_flag MTE1, M, 0");
        match self.weight_parts(r) {
            Some(parts) => {
                for &(c0, n) in &parts {
                    self.line(&weights);
                    self.load_a_part(r, c0, n);
                    self.line(format!("set_flag MTE1, M, {PART_EVENT}"));
                }
            }
            None => {
                self.line(&weights);
                self.load_a_here(r);
            }
        }
        self.close();
        if r.col_tiles > 2 {
            self.open("if nt > 1");
            later(self, false);
            self.close();
        }
        self.indent -= 1;
        self.line("} else {");
        self.indent += 1;
        later(self, true);
        self.close();
    }

    /// A sliding window's rows for iteration `o` of the block, every channel of the step at
    /// once: its last row (the others are in L1 from the iterations before), and at the first
    /// iteration the rows before it. GM's base is iteration `o`'s first row. With `ahead`,
    /// the iterations after the first find their last row copied already
    /// ([`Self::window_rows_ahead`]), so only the first copies, its whole window.
    pub(crate) fn window_rows_in(&mut self, r: &Run, o: &RunOperand, w: &Window, ahead: bool) {
        let Some(rows) = self.row_copies(r, o, w) else {
            return;
        };
        let halo = rows.kh - 1;
        self.open("if o == 0");
        let row = self.var("r");
        self.open(format!(
            "for {row} in 0..{}",
            if ahead { rows.kh } else { halo }
        ));
        let first = rows.copy(Off::at(0).plus(&row, 1), Off::at(0).plus(&row, 1));
        self.line(first);
        self.close();
        self.free_var();
        if ahead {
            self.line(ROWS_SET);
        }
        self.close();
        if !ahead {
            let last = rows.copy(Off::at(0).plus("o", 1).add(halo), Off::at(halo));
            self.line(last);
        }
    }

    /// The last row of iteration `o + 1`'s window, copied during iteration `o`: MTE2 then
    /// never waits for the scalar unit to reach the next iteration (whose issue the Vector
    /// unit's queue holds back) before it copies the row the next iteration's first tile
    /// needs.
    pub(crate) fn window_rows_ahead(&mut self, r: &Run) {
        let Fill::Window(w, true) = r.b.fill else {
            return;
        };
        let Some(rows) = self.row_copies(r, &r.b, &w) else {
            return;
        };
        if r.col_tiles > 1 {
            self.open("if nt == 0");
        }
        self.open(format!("if o < {}", self.t.ob - 1));
        let next = rows.copy(Off::at(0).plus("o", 1).add(rows.kh), Off::at(rows.kh));
        self.line(next);
        self.line(ROWS_SET);
        self.close();
        if r.col_tiles > 1 {
            self.close();
        }
    }

    /// MTE1's wait for an iteration's rows, at its first column tile: the `o`-th wait
    /// consumes the first window's signal (`o = 0`) or the signal of the row copied ahead
    /// for iteration `o`.
    pub(crate) fn window_rows_wait(&mut self, r: &Run) {
        if r.col_tiles > 1 {
            self.open("if nt == 0");
        }
        self.line("wait_flag MTE2, MTE1, 0");
        if r.col_tiles > 1 {
            self.close();
        }
    }

    /// How the rows of a sliding window are copied.
    fn row_copies(&self, r: &Run, o: &RunOperand, w: &Window) -> Option<RowCopies> {
        let (Some((at, _, _)), Some((s, _))) = (o.gm.clone(), w.slide) else {
            return None;
        };
        let st = &self.plan.stages[r.stage];
        let es = w.es as i64;
        Some(RowCopies {
            buf: o.view.buf.clone(),
            slot: o.view.slot.clone(),
            array: self.name(at.array),
            src: self.gm_base(&at, w.es, None, None),
            channels: r.tiles.tk.min(st.k.extent()).div_ceil(w.kh * w.kw),
            pitch: w.w as i64 * es,
            step: s.step as i64 * es,
            bytes: s.copy as i64 * es,
            kh: s.kh as i64,
            window: *w,
        })
    }
}

/// Where a sliding window's rows are copied from and to.
struct RowCopies {
    buf: String,
    slot: Off,
    array: String,
    src: Off,
    channels: u64,
    /// L1 bytes between rows, GM bytes between rows, bytes a row copies.
    pitch: i64,
    step: i64,
    bytes: i64,
    kh: i64,
    window: Window,
}

impl RowCopies {
    /// The copy of a row: `l1` rows from the block's first row in L1, `gm` rows from
    /// iteration `o`'s first row in GM.
    fn copy(&self, l1: Off, gm: Off) -> String {
        let rows = |base: &Off, at: &Off, k: i64| {
            at.terms
                .iter()
                .fold(base.clone().add(at.c * k), |o, (n, c)| o.plus(n, c * k))
        };
        window_copy(
            &self.buf,
            &rows(&self.slot, &l1, self.pitch),
            &self.array,
            &rows(&self.src, &gm, self.step),
            self.channels,
            self.bytes,
            &self.window,
        )
    }
}
