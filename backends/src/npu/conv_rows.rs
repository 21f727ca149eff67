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
//! blocks: `load3d` reads channel `ci`, row `i` at `ci · pitch + i · channels · pitch` from
//! iteration `o`'s first row, `o · channels · pitch` in, and the row an iteration copies lies
//! past every byte the iterations before it read.

use super::copies::window_copy;

use super::copies::Off;
use super::cube::{Emitter, Fill, Run, RunOperand, Window};
use super::plan::{Source, Stage};

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
    /// L1 elements per row: `row` rounded to whole 32-byte blocks.
    pub fn pitch(&self, es: u64) -> u64 {
        let unit = 32 / es;
        self.row.div_ceil(unit) * unit
    }

    /// L1 bytes of a block of `ob` iterations' rows.
    pub fn bytes(&self, ob: u64, es: u64) -> u64 {
        (ob + self.kh - 1) * self.channels * self.pitch(es) * es
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
        w: s.channels * s.pitch(w.es),
        cs: s.pitch(w.es),
        slide: Some((*s, ob)),
        ..w
    }
}

/// The `MTE2 → MTE1` event that says a convolution's resident weights are in L1, when its
/// rows go first ([`rows_first`]).
pub(crate) const WEIGHTS_EVENT: u8 = 1;

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
