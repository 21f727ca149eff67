//! One stage as UB buffers, the copies that fill and drain them, and Vector operations over
//! the rows of a tile.
//!
//! Rows are relative to the tile `[t0, t1)`: a buffer holds rows `[t0 + lo, t1 + hi)` (of the
//! iteration space for computed values, of the array for loads), so every offset below is the
//! same for every tile and only the row count changes at the last, short tile. Layouts:
//! - **full**: the stage's columns, one row every `pitch` bytes (the row padded to 32 bytes);
//! - **block**: one 32-byte block per row holding the row's value in every lane, so that an
//!   instruction over the columns of many rows reads it with block stride 0 and repeat stride 1,
//!   and row shifts stay 32-byte aligned;
//! - **compact**: one element per row, as GM holds per-row vectors and reductions write them;
//! - **column**: the stage's columns once (per-column vectors);
//! - **splat**: one repeat of one scalar, for the operations that have no scalar form;
//! - **gather**: a transposed tile as MTE2 gathers it, per group of 8 rows the stage's
//!   columns, one 32-byte block each holding the group's rows (see [`super::transpose`]).
//!
//! Each statement writes a buffer of its own over its needed rows; subexpressions go to
//! temporaries, reused once dead. A reduction folds the columns chunk by chunk onto the
//! compacted accumulator (`vcadd … acc`, one row per repeat), which keeps the interpreter's
//! order of every sum, then broadcasts it back to blocks. Arithmetic rounds to f32 after every
//! operation as the interpreter does; `a - s` is `a + (-s)`, `s - a` is `(-a) + s` and a copy is
//! `a · 1`, all exact.

use std::collections::BTreeMap;

use polyhedral::program::{
    ArrayId, BinaryOp, Expr, ExprId, MathFn, ReductionOp, ScalarType, Statement, UnaryOp,
};
use polyhedral::Program;

use super::analysis::{At, Kind};
use super::scalars::Scalars;
use super::stages::{Source, Stage};
use crate::npu::epilogue::Scalar;
use crate::npu::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    Full,
    Block,
    Compact,
    Col,
    Splat,
    /// One bit per lane of a comparison over rows of the stage's full or block layout.
    Mask,
    Gather,
}

#[derive(Clone, Debug)]
pub(crate) struct Buffer {
    pub name: String,
    pub form: Form,
    /// Rows `[t0 + lo, t1 + hi)` (full, block and compact buffers).
    pub rows: (i64, i64),
    /// Whether a DMA pipe works on one tile's copy while V works on the next one's.
    pub double: bool,
}

/// A buffer from one of its rows on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Opnd {
    pub buf: usize,
    pub row: i64,
}

/// A Vector operation over the rows `[t0 + lo, t1 + hi)` of a statement (`rows`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum VOp {
    /// `vOP dst, a, b`
    Binary {
        op: &'static str,
        dst: Opnd,
        a: Opnd,
        b: Opnd,
        rows: (i64, i64),
    },
    /// `vadds`, `vmuls`, `vmaxs`
    WithScalar {
        op: &'static str,
        dst: Opnd,
        src: Opnd,
        scalar: Scalar,
        rows: (i64, i64),
    },
    /// `vexp`, `vln`, `vsqrt`, `vrsqrt`, `vabs`
    Unary {
        op: &'static str,
        dst: Opnd,
        src: Opnd,
        rows: (i64, i64),
    },
    Dup {
        dst: Opnd,
        scalar: Scalar,
        rows: (i64, i64),
    },
    /// Compact `dst` ← the first lane of every block of `src`.
    Compact {
        dst: Opnd,
        src: Opnd,
        rows: (i64, i64),
    },
    /// Compact `dst[r]` ⊕= every column of row `r` of full `src`, in column order.
    Reduce {
        op: &'static str,
        dst: Opnd,
        src: Opnd,
        rows: (i64, i64),
    },
    /// Full `dst` ← the rows of gathered `src`.
    Pack {
        dst: Opnd,
        src: Opnd,
        rows: (i64, i64),
    },
    /// Blocks `dst` ← compact `src`.
    Broadcast {
        dst: Opnd,
        src: Opnd,
        rows: (i64, i64),
    },
    /// Mask `dst` ← `a CMP b` lane by lane (`lt`, `le`, `gt`, `ge`, `eq`, `ne`).
    Compare {
        cmp: &'static str,
        dst: Opnd,
        a: Opnd,
        b: Opnd,
        rows: (i64, i64),
    },
    /// `dst` ← `a` where `mask` is set, else `b`.
    Select {
        dst: Opnd,
        a: Opnd,
        b: Opnd,
        mask: Opnd,
        rows: (i64, i64),
    },
}

impl VOp {
    /// Every operand, the destination first.
    pub(crate) fn operands(&self) -> Vec<Opnd> {
        match self {
            VOp::Binary { dst, a, b, .. } | VOp::Compare { dst, a, b, .. } => vec![*dst, *a, *b],
            VOp::Select {
                dst, a, b, mask, ..
            } => vec![*dst, *a, *b, *mask],
            VOp::WithScalar { dst, src, .. }
            | VOp::Unary { dst, src, .. }
            | VOp::Compact { dst, src, .. }
            | VOp::Reduce { dst, src, .. }
            | VOp::Broadcast { dst, src, .. }
            | VOp::Pack { dst, src, .. } => vec![*dst, *src],
            VOp::Dup { dst, .. } => vec![*dst],
        }
    }
}

/// A DMA between a GM array and a buffer, for the rows `[t0 + lo, t1 + hi)` of the array
/// (`rows`; per-column vectors have none) from column `col`.
#[derive(Clone, Debug)]
pub(crate) struct Transfer {
    pub array: ArrayId,
    pub buf: usize,
    /// The buffer's row the transfer starts at.
    pub buf_row: i64,
    pub rows: (i64, i64),
    pub col: i64,
}

/// A stage, lowered.
#[derive(Clone, Debug)]
pub(crate) struct Lowered {
    pub buffers: Vec<Buffer>,
    /// Once per block, before the tiles: per-column vectors.
    pub col_loads: Vec<Transfer>,
    /// Once per block, before the tiles, on V (splats).
    pub prologue: Vec<VOp>,
    /// Per tile, MTE2.
    pub loads: Vec<Transfer>,
    /// Per tile, V.
    pub ops: Vec<VOp>,
    /// Per tile, MTE3.
    pub stores: Vec<Transfer>,
}

impl Lowered {
    /// Index of the last operation that reads a buffer the tile's loads fill.
    pub(crate) fn last_load_read(&self) -> Option<usize> {
        let loaded: Vec<usize> = self.loads.iter().map(|l| l.buf).collect();
        self.ops
            .iter()
            .rposition(|op| op.operands()[1..].iter().any(|o| loaded.contains(&o.buf)))
    }

    /// Index of the first operation that writes a buffer the tile's stores drain.
    pub(crate) fn first_store_write(&self) -> Option<usize> {
        let stored: Vec<usize> = self.stores.iter().map(|s| s.buf).collect();
        self.ops
            .iter()
            .position(|op| stored.contains(&op.operands()[0].buf))
    }
}

/// A value while a body is lowered.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Val {
    /// A buffer's rows; `temp` when the value owns a temporary.
    Buf {
        at: Opnd,
        temp: bool,
    },
    Scalar(Scalar),
}

struct Lowering<'a> {
    program: &'a Program,
    stage: &'a Stage,
    scalars: &'a mut Scalars,
    out: Lowered,
    /// Free temporaries.
    free: Vec<usize>,
    /// Splat buffers by the scalar they hold.
    splats: Vec<(Scalar, usize)>,
    prefix: String,
    /// The statement being lowered.
    cur: usize,
    /// Each statement's own buffer.
    results: Vec<usize>,
    /// Which buffers are temporaries.
    temps: Vec<bool>,
    /// The current statement's subexpressions by structure: how often each occurs, and the
    /// values computed of those that occur again, with the uses left.
    shared: BTreeMap<String, usize>,
    computed: BTreeMap<String, (Val, usize)>,
}

/// Lowers stage `index`.
pub(crate) fn lower(
    program: &Program,
    stage: &Stage,
    index: usize,
    scalars: &mut Scalars,
    double: bool,
) -> Result<Lowered, Error> {
    let mut l = Lowering {
        program,
        stage,
        scalars,
        out: Lowered {
            buffers: Vec::new(),
            col_loads: Vec::new(),
            prologue: Vec::new(),
            loads: Vec::new(),
            ops: Vec::new(),
            stores: Vec::new(),
        },
        free: Vec::new(),
        splats: Vec::new(),
        prefix: format!("ub{index}_"),
        cur: 0,
        results: Vec::new(),
        temps: Vec::new(),
        shared: BTreeMap::new(),
        computed: BTreeMap::new(),
    };
    let results = l.results(double);
    l.results = results.clone();
    let reads = l.loads(double)?;
    for k in 0..stage.stmts.len() {
        l.cur = k;
        l.statement(k, results[k], &reads[k])?;
    }
    for &(array, k) in &stage.live {
        let s = &stage.stmts[k];
        let row = -stage.need[k].0;
        let (buf, buf_row) = match s.kind {
            Kind::Full => (results[k], row),
            Kind::Row | Kind::Reduce { .. } => {
                let name = format!("out_{}", program.array(array).name);
                let out = l.buffer(&name, Form::Compact, (0, 0), double);
                l.out.ops.push(VOp::Compact {
                    dst: Opnd { buf: out, row: 0 },
                    src: Opnd {
                        buf: results[k],
                        row,
                    },
                    rows: (0, 0),
                });
                (out, 0)
            }
        };
        let w = s.write.at;
        l.out.stores.push(Transfer {
            array,
            buf,
            buf_row,
            rows: (w.row(), w.row()),
            col: stage.cols.map_or(0, |c| c.0) + write_col(w),
        });
    }
    Ok(l.out)
}

fn write_col(at: At) -> i64 {
    match at {
        At::Tile { col, .. } | At::Col { col } | At::Transposed { col, .. } => col,
        At::Row { .. } | At::Scalar => 0,
    }
}

/// An array read at a column shift, and the span of rows the stage reads of it.
type ShiftedRows = ((ArrayId, i64), (i64, i64));

impl Lowering<'_> {
    /// A new buffer named after `what`; a name already taken (an array read both as per-row
    /// and as per-column vectors) gets a numbered suffix.
    /// A copy of the rows `rows` of `array` from column `col` on into `buf` from its first row.
    fn load_rows(&mut self, array: ArrayId, buf: usize, rows: (i64, i64), col: i64) {
        self.out.loads.push(Transfer {
            array,
            buf,
            buf_row: 0,
            rows,
            col,
        });
    }

    fn buffer(&mut self, what: &str, form: Form, rows: (i64, i64), double: bool) -> usize {
        let base = format!("{}{what}", self.prefix);
        let taken = |name: &str| self.out.buffers.iter().any(|b| b.name == name);
        let mut name = base.clone();
        let mut n = 2;
        while taken(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.temps.push(false);
        self.out.buffers.push(Buffer {
            name,
            form,
            rows,
            double,
        });
        self.out.buffers.len() - 1
    }

    /// Each statement's own buffer.
    fn results(&mut self, double: bool) -> Vec<usize> {
        let stage = self.stage;
        (0..stage.stmts.len())
            .map(|k| {
                let s = &stage.stmts[k];
                let live_full = s.kind == Kind::Full && stage.live.iter().any(|&(_, w)| w == k);
                let form = if s.kind == Kind::Full {
                    Form::Full
                } else {
                    Form::Block
                };
                let name = format!("{}_s{k}", self.program.array(s.write.array).name);
                self.buffer(&name, form, stage.need[k], double && live_full)
            })
            .collect()
    }

    /// The buffers of the reads from GM, with their transfers; per statement and read, the
    /// value a read names (`None` for reads from the tile).
    fn loads(&mut self, double: bool) -> Result<Vec<Vec<Option<Val>>>, Error> {
        let stage = self.stage;
        let program = self.program;
        // Hulls of the rows each (array, pattern) is read at.
        let mut tiles: Vec<ShiftedRows> = Vec::new();
        let mut rows: Vec<(ArrayId, (i64, i64))> = Vec::new();
        let mut cols: Vec<(ArrayId, i64)> = Vec::new();
        let mut transposed: Vec<ShiftedRows> = Vec::new();
        let hull = |x: (i64, i64), y: (i64, i64)| (x.0.min(y.0), x.1.max(y.1));
        for (k, s) in stage.stmts.iter().enumerate() {
            let (lo, hi) = stage.need[k];
            for (r, src) in s.reads.iter().zip(&stage.sources[k]) {
                if *src != Source::Gm {
                    continue;
                }
                let span = (lo + r.at.row(), hi + r.at.row());
                match r.at {
                    At::Tile { col, .. } => {
                        match tiles.iter_mut().find(|(key, _)| *key == (r.array, col)) {
                            Some((_, h)) => *h = hull(*h, span),
                            None => tiles.push(((r.array, col), span)),
                        }
                    }
                    At::Row { .. } => match rows.iter_mut().find(|(a, _)| *a == r.array) {
                        Some((_, h)) => *h = hull(*h, span),
                        None => rows.push((r.array, span)),
                    },
                    At::Col { col } => {
                        if !cols.contains(&(r.array, col)) {
                            cols.push((r.array, col));
                        }
                    }
                    At::Transposed { col, .. } => {
                        match transposed
                            .iter_mut()
                            .find(|(key, _)| *key == (r.array, col))
                        {
                            Some((_, h)) => *h = hull(*h, span),
                            None => transposed.push(((r.array, col), span)),
                        }
                    }
                    At::Scalar => {}
                }
            }
        }
        let c0 = stage.cols.map_or(0, |c| c.0);
        let shift_name = |col: i64| match col {
            0 => String::new(),
            c if c < 0 => format!("_m{}", -c),
            c => format!("_p{c}"),
        };
        let mut tile_bufs = Vec::new();
        for &((a, col), span) in &tiles {
            self.check_rows(a, span)?;
            self.check_cols(a, c0 + col)?;
            let name = format!("{}{}", program.array(a).name, shift_name(col));
            let buf = self.buffer(&name, Form::Full, span, double);
            self.load_rows(a, buf, span, c0 + col);
            tile_bufs.push(buf);
        }
        let mut transposed_bufs = Vec::new();
        for &((a, col), span) in &transposed {
            super::transpose::check(program, stage, a, col, span)?;
            let name = format!("{}_t{}", program.array(a).name, shift_name(col));
            let gathered = self.buffer(&format!("{name}_in"), Form::Gather, span, double);
            let buf = self.buffer(&name, Form::Full, span, false);
            self.load_rows(a, gathered, span, c0 + col);
            self.out.ops.push(VOp::Pack {
                dst: Opnd { buf, row: 0 },
                src: Opnd {
                    buf: gathered,
                    row: 0,
                },
                rows: span,
            });
            transposed_bufs.push(buf);
        }
        let mut row_bufs = Vec::new();
        for &(a, span) in &rows {
            self.check_rows(a, span)?;
            let name = program.array(a).name.clone();
            let compact = self.buffer(&format!("{name}_in"), Form::Compact, span, double);
            let blocks = self.buffer(&name, Form::Block, span, false);
            self.load_rows(a, compact, span, 0);
            self.out.ops.push(VOp::Broadcast {
                dst: Opnd {
                    buf: blocks,
                    row: 0,
                },
                src: Opnd {
                    buf: compact,
                    row: 0,
                },
                rows: span,
            });
            row_bufs.push(blocks);
        }
        let mut col_bufs = Vec::new();
        for &(a, col) in &cols {
            self.check_cols(a, c0 + col)?;
            let name = format!("{}{}", program.array(a).name, shift_name(col));
            let buf = self.buffer(&name, Form::Col, (0, 0), false);
            self.out.col_loads.push(Transfer {
                array: a,
                buf,
                buf_row: 0,
                rows: (0, 0),
                col: c0 + col,
            });
            col_bufs.push(buf);
        }
        let mut out = Vec::new();
        for (k, s) in stage.stmts.iter().enumerate() {
            let lo = stage.need[k].0;
            let mut vals = Vec::new();
            for (r, src) in s.reads.iter().zip(&stage.sources[k]) {
                if *src != Source::Gm {
                    vals.push(None);
                    continue;
                }
                let shifted = |list: &[ShiftedRows], key: (ArrayId, i64)| {
                    list.iter().position(|(k, _)| *k == key).unwrap_or(0)
                };
                let at = |buf: usize, span: (i64, i64)| Val::Buf {
                    at: Opnd {
                        buf,
                        row: lo + r.at.row() - span.0,
                    },
                    temp: false,
                };
                vals.push(Some(match r.at {
                    At::Tile { col, .. } => {
                        let i = shifted(&tiles, (r.array, col));
                        at(tile_bufs[i], tiles[i].1)
                    }
                    At::Transposed { col, .. } => {
                        let i = shifted(&transposed, (r.array, col));
                        at(transposed_bufs[i], transposed[i].1)
                    }
                    At::Row { .. } => {
                        let i = rows.iter().position(|(a, _)| *a == r.array).unwrap_or(0);
                        at(row_bufs[i], rows[i].1)
                    }
                    At::Col { col } => {
                        let i = cols.iter().position(|x| *x == (r.array, col)).unwrap_or(0);
                        Val::Buf {
                            at: Opnd {
                                buf: col_bufs[i],
                                row: 0,
                            },
                            temp: false,
                        }
                    }
                    At::Scalar => Val::Scalar(self.scalars.input(r.array)?),
                }));
            }
            out.push(vals);
        }
        Ok(out)
    }

    /// The rows a load reads lie inside the array for the first and the last tile.
    fn check_rows(&self, a: ArrayId, span: (i64, i64)) -> Result<(), Error> {
        let (lo, hi) = self.stage.rows;
        let extent = self.program.array_extents(a)[0];
        if lo + span.0 < 0 || hi + span.1 > extent {
            return Err(Error::NotYet(format!(
                "the tiles read rows {}..{} of `{}`, which has {extent}",
                lo + span.0,
                hi + span.1,
                self.program.array(a).name
            )));
        }
        Ok(())
    }

    /// The columns a load reads from `first` on lie inside the array.
    fn check_cols(&self, a: ArrayId, first: i64) -> Result<(), Error> {
        let width = self.stage.cols.map_or(0, |c| c.1 - c.0);
        let extent = *self.program.array_extents(a).last().unwrap_or(&0);
        if first < 0 || first + width > extent {
            return Err(Error::NotYet(format!(
                "the tiles read columns {first}..{} of `{}`, which has {extent}",
                first + width,
                self.program.array(a).name
            )));
        }
        Ok(())
    }

    fn statement(&mut self, k: usize, result: usize, reads: &[Option<Val>]) -> Result<(), Error> {
        let stage = self.stage;
        let s = &stage.stmts[k];
        let stmt = &self.program.statements[s.id.index()];
        let rows = stage.need[k];
        let dst = Opnd {
            buf: result,
            row: 0,
        };
        let reads: Vec<Val> = s
            .reads
            .iter()
            .zip(&stage.sources[k])
            .zip(reads)
            .map(|((r, src), v)| match (src, v) {
                (_, Some(v)) => *v,
                (Source::Tile(w), None) => {
                    let d = r.at.row() - stage.stmts[*w].write.at.row();
                    Val::Buf {
                        at: Opnd {
                            buf: self.result_of(*w),
                            row: rows.0 + d - stage.need[*w].0,
                        },
                        temp: false,
                    }
                }
                (Source::Gm, None) => Val::Scalar(Scalar::Const(0.0)),
            })
            .collect();
        match s.kind {
            Kind::Full | Kind::Row => {
                self.count_shared(stmt, stmt.body);
                let v = self.expr(stmt, &reads, stmt.body, Some(dst))?;
                self.settle(v, dst, rows);
            }
            Kind::Reduce {
                op,
                acc,
                contribution,
                negate,
            } => {
                self.count_shared(stmt, contribution);
                let mut c = self.expr(stmt, &reads, contribution, None)?;
                if !matches!(c, Val::Buf { at, .. } if self.form(at.buf) == Form::Full) {
                    let t = self.temp(Form::Full);
                    self.settle(c, t, rows);
                    c = self.owned(t);
                }
                if negate {
                    c = self.with_scalar("vmuls", c, Scalar::Const(-1.0), None)?;
                }
                let Val::Buf { at: src, .. } = c else {
                    unreachable!("the contribution was settled into a full buffer above");
                };
                let cmp = self.temp(Form::Compact);
                let init = match reads[acc] {
                    Val::Buf { at, .. } => at,
                    Val::Scalar(_) => unreachable!("an accumulator is a per-row vector"),
                };
                self.out.ops.push(VOp::Compact {
                    dst: cmp,
                    src: init,
                    rows,
                });
                let op = match op {
                    ReductionOp::Add => "vcadd",
                    ReductionOp::Max => "vcmax",
                    _ => "vcmin",
                };
                self.out.ops.push(VOp::Reduce {
                    op,
                    dst: cmp,
                    src,
                    rows,
                });
                self.out.ops.push(VOp::Broadcast {
                    dst,
                    src: cmp,
                    rows,
                });
                self.release(c);
                self.release(self.owned(cmp));
            }
        }
        Ok(())
    }

    /// The buffer statement `w` wrote.
    fn result_of(&self, w: usize) -> usize {
        self.results[w]
    }

    /// `at` as the value of an operation: owned when it is a temporary.
    fn owned(&self, at: Opnd) -> Val {
        Val::Buf {
            at,
            temp: self.temps[at.buf],
        }
    }

    fn form(&self, buf: usize) -> Form {
        self.out.buffers[buf].form
    }

    fn rows(&self) -> (i64, i64) {
        self.stage.need[self.cur]
    }

    /// A free temporary of `form` over the current statement's rows.
    fn temp(&mut self, form: Form) -> Opnd {
        let rows = self.rows();
        let pos = self.free.iter().position(|&b| {
            let buf = &self.out.buffers[b];
            buf.form == form && buf.rows == rows
        });
        let buf = match pos {
            Some(p) => self.free.swap_remove(p),
            None => {
                let n = self.temps.iter().filter(|&&t| t).count();
                let b = self.buffer(&format!("t{n}"), form, rows, false);
                self.temps[b] = true;
                b
            }
        };
        Opnd { buf, row: 0 }
    }

    fn release(&mut self, v: Val) {
        if let Val::Buf { at, temp: true } = v {
            if !self.free.contains(&at.buf) {
                self.free.push(at.buf);
            }
        }
    }

    /// Puts `v` into `dst` unless it is there already.
    fn settle(&mut self, v: Val, dst: Opnd, rows: (i64, i64)) {
        match v {
            Val::Buf { at, .. } if at == dst => {}
            Val::Buf { at, .. } => {
                self.out.ops.push(VOp::WithScalar {
                    op: "vmuls",
                    dst,
                    src: at,
                    scalar: Scalar::Const(1.0),
                    rows,
                });
                self.release(v);
            }
            Val::Scalar(c) => self.out.ops.push(VOp::Dup {
                dst,
                scalar: c,
                rows,
            }),
        }
    }

    /// Where an operation's result goes: `dst` at the root, else a temporary the operands own
    /// (when its layout fits), else a new one.
    /// The layout of an operation's result: full when an operand has columns.
    fn result_form(&self, operands: &[Val]) -> Form {
        if operands.iter().any(|v| {
            matches!(v, Val::Buf { at, .. } if matches!(self.form(at.buf), Form::Full | Form::Col))
        }) {
            Form::Full
        } else {
            Form::Block
        }
    }

    fn result(&mut self, operands: &[Val], dst: Option<Opnd>) -> Opnd {
        let form = self.result_form(operands);
        let reuse = operands.iter().find_map(|v| match v {
            Val::Buf { at, temp: true } if self.form(at.buf) == form && at.row == 0 => Some(*at),
            _ => None,
        });
        let out = match (dst, reuse) {
            (Some(d), _) => d,
            (None, Some(t)) => t,
            (None, None) => self.temp(form),
        };
        for v in operands {
            if !matches!(v, Val::Buf { at, .. } if *at == out) {
                self.release(*v);
            }
        }
        out
    }

    /// A key equal for structurally equal subexpressions (reads of the same element).
    fn key(&self, s: &Statement, e: ExprId) -> String {
        let stmt = &self.stage.stmts[self.cur];
        let children: Vec<String> = s.exprs[e]
            .operands()
            .into_iter()
            .map(|x| self.key(s, x))
            .collect();
        match &s.exprs[e] {
            Expr::Read(r) => format!("{:?}", stmt.reads[*r]),
            Expr::Literal(l) => format!("{:?}", l.value),
            other => {
                let head = format!("{other:?}");
                let op = head.split('(').next().unwrap_or("");
                let detail = match other {
                    Expr::Unary(u, _) => format!("{u:?}"),
                    Expr::Binary(b, _, _) => format!("{b:?}"),
                    Expr::Math(f, _) => f.name().to_string(),
                    Expr::Cast(t, _) => format!("{t:?}"),
                    _ => head.clone(),
                };
                format!("{op}{detail}({})", children.join(", "))
            }
        }
    }

    /// Counts the occurrences of every subexpression of `root`.
    fn count_shared(&mut self, s: &Statement, root: ExprId) {
        self.shared.clear();
        self.computed.clear();
        let mut stack = vec![root];
        while let Some(e) = stack.pop() {
            *self.shared.entry(self.key(s, e)).or_default() += 1;
            stack.extend(s.exprs[e].operands());
        }
    }

    /// The value of `e`, computed once however often it occurs: an occurrence before the last
    /// does not own the value, so no operation writes over it until the last one has read it.
    fn expr(
        &mut self,
        s: &Statement,
        reads: &[Val],
        e: ExprId,
        dst: Option<Opnd>,
    ) -> Result<Val, Error> {
        let key = self.key(s, e);
        if let Some((v, left)) = self.computed.get_mut(&key) {
            *left -= 1;
            let v = *v;
            if *left == 0 {
                self.computed.remove(&key);
                return Ok(v);
            }
            return Ok(shared_use(v));
        }
        let v = self.compute(s, reads, e, dst)?;
        let uses = self.shared.get(&key).copied().unwrap_or(1);
        if uses > 1 && matches!(v, Val::Buf { temp: true, .. }) {
            self.computed.insert(key, (v, uses - 1));
            return Ok(shared_use(v));
        }
        Ok(v)
    }

    fn compute(
        &mut self,
        s: &Statement,
        reads: &[Val],
        e: ExprId,
        dst: Option<Opnd>,
    ) -> Result<Val, Error> {
        let ty = self.program.expr_type(s, e);
        let not_yet = |what: String| {
            Error::NotYet(format!(
                "{what} in statement {} (`{}`)",
                s.name,
                self.program.display_body(s)
            ))
        };
        if !ty.is_float() {
            return match self.constant(s, e) {
                Some(v) => Ok(Val::Scalar(Scalar::Const(v))),
                None => Err(not_yet(format!("{ty} arithmetic"))),
            };
        }
        Ok(match &s.exprs[e] {
            Expr::Literal(l) => Val::Scalar(Scalar::Const(l.value as f32 as f64)),
            Expr::Read(r) => reads[*r],
            Expr::Cast(to, x) => {
                let from = self.program.expr_type(s, *x);
                if *to == ScalarType::F16 && from != ScalarType::F16 {
                    // The stage computes in its own type and would not round to f16.
                    return Err(not_yet(format!("a conversion from {from} to f16")));
                }
                if from.is_float() {
                    self.expr(s, reads, *x, dst)?
                } else {
                    match self.constant(s, *x) {
                        Some(v) => Val::Scalar(Scalar::Const(v as f32 as f64)),
                        None => return Err(not_yet(format!("a conversion from {from}"))),
                    }
                }
            }
            Expr::Unary(UnaryOp::Neg, x) => {
                let v = self.expr(s, reads, *x, None)?;
                self.with_scalar("vmuls", v, Scalar::Const(-1.0), dst)?
            }
            Expr::Binary(op, x, y) => {
                let a = self.expr(s, reads, *x, None)?;
                let b = self.expr(s, reads, *y, None)?;
                match self.binary(*op, a, b, dst)? {
                    Some(v) => v,
                    None => return Err(not_yet(format!("the operator `{}`", op.symbol()))),
                }
            }
            Expr::Math(f, args) if args.len() == 1 => {
                let op = match f {
                    MathFn::Exp => "vexp",
                    MathFn::Log => "vln",
                    MathFn::Sqrt => "vsqrt",
                    MathFn::Rsqrt => "vrsqrt",
                    MathFn::Abs => "vabs",
                    _ => {
                        return Err(not_yet(format!(
                            "`{}` (the Vector unit has exp, ln, sqrt, rsqrt and abs)",
                            f.name()
                        )))
                    }
                };
                let v = self.expr(s, reads, args[0], None)?;
                self.unary(op, *f, v, dst)
            }
            Expr::Select {
                cond,
                then,
                otherwise,
            } => {
                let cmp = match s.exprs[*cond] {
                    Expr::Binary(op, x, y) if self.program.expr_type(s, x).is_float() => {
                        comparison(op).map(|c| (c, x, y))
                    }
                    _ => None,
                };
                let Some((cmp, x, y)) = cmp else {
                    return Err(not_yet(
                        "a select on a condition other than one comparison of numbers".into(),
                    ));
                };
                let vals = [
                    self.expr(s, reads, x, None)?,
                    self.expr(s, reads, y, None)?,
                    self.expr(s, reads, *then, None)?,
                    self.expr(s, reads, *otherwise, None)?,
                ];
                self.select(cmp, vals, dst)
            }
            _ => {
                return Err(not_yet(
                    "logic, comparisons outside a select, calls and iterator values".to_string(),
                ))
            }
        })
    }

    /// The value of an integer expression made of literals and sizes.
    fn constant(&self, s: &Statement, e: ExprId) -> Option<f64> {
        match &s.exprs[e] {
            Expr::Literal(l) => Some(l.value),
            Expr::Param(p) => Some(self.program.param(*p).value as f64),
            _ => None,
        }
    }

    fn unary(&mut self, op: &'static str, f: MathFn, v: Val, dst: Option<Opnd>) -> Val {
        match v {
            Val::Scalar(Scalar::Const(c)) => {
                let x = c as f32 as f64;
                let r = match f {
                    MathFn::Exp => x.exp(),
                    MathFn::Log => x.ln(),
                    MathFn::Sqrt => x.sqrt(),
                    MathFn::Rsqrt => 1.0 / x.sqrt(),
                    _ => x.abs(),
                };
                Val::Scalar(Scalar::Const(r as f32 as f64))
            }
            Val::Scalar(c) => {
                // A register: the scalar unit has no such function; fill a vector with it.
                let t = self.temp(Form::Block);
                self.out.ops.push(VOp::Dup {
                    dst: t,
                    scalar: c,
                    rows: self.rows(),
                });
                let v = self.owned(t);
                self.unary(op, f, v, dst)
            }
            Val::Buf { at, .. } => {
                let d = self.result(&[v], dst);
                self.out.ops.push(VOp::Unary {
                    op,
                    dst: d,
                    src: at,
                    rows: self.rows(),
                });
                self.owned(d)
            }
        }
    }

    fn with_scalar(
        &mut self,
        op: &'static str,
        v: Val,
        c: Scalar,
        dst: Option<Opnd>,
    ) -> Result<Val, Error> {
        Ok(match v {
            Val::Buf { at, .. } => {
                let d = self.result(&[v], dst);
                self.out.ops.push(VOp::WithScalar {
                    op,
                    dst: d,
                    src: at,
                    scalar: c,
                    rows: self.rows(),
                });
                self.owned(d)
            }
            Val::Scalar(x) => {
                let name = match op {
                    "vadds" => "add",
                    "vmuls" => "mul",
                    _ => "max",
                };
                Val::Scalar(self.scalars.op(name, x, c)?)
            }
        })
    }

    /// `x CMP y ? a : b` from `[x, y, a, b]`: a mask from `vcmp`, then `vsel`, every operand
    /// in the result's layout (scalars as splats).
    fn select(&mut self, cmp: &'static str, vals: [Val; 4], dst: Option<Opnd>) -> Val {
        if let [Val::Scalar(Scalar::Const(x)), Val::Scalar(Scalar::Const(y)), a, b] = vals {
            let (x, y) = (x as f32, y as f32);
            let holds = match cmp {
                "lt" => x < y,
                "le" => x <= y,
                "gt" => x > y,
                "ge" => x >= y,
                "eq" => x == y,
                _ => x != y,
            };
            if matches!((a, b), (Val::Scalar(_), Val::Scalar(_))) {
                return if holds { a } else { b };
            }
        }
        let form = self.result_form(&vals);
        let rows = self.rows();
        let opnds: Vec<Opnd> = vals
            .iter()
            .map(|&v| match v {
                Val::Buf { at, .. } if self.form(at.buf) == form => at,
                Val::Scalar(c) => self.splat(c),
                other => {
                    // A per-row or per-column value in a full result: spread it first.
                    let t = self.temp(form);
                    self.settle(other, t, rows);
                    t
                }
            })
            .collect();
        let mask = self.temp(Form::Mask);
        self.out.ops.push(VOp::Compare {
            cmp,
            dst: mask,
            a: opnds[0],
            b: opnds[1],
            rows,
        });
        let owned: Vec<Val> = vals
            .iter()
            .zip(&opnds)
            .map(|(v, o)| match v {
                Val::Buf { at, .. } if at == o => *v,
                Val::Scalar(_) => *v,
                _ => self.owned(*o),
            })
            .collect();
        let d = self.result(&owned, dst);
        self.out.ops.push(VOp::Select {
            dst: d,
            a: opnds[2],
            b: opnds[3],
            mask,
            rows,
        });
        self.release(self.owned(mask));
        self.owned(d)
    }

    /// A buffer holding `c` in every lane of one repeat.
    fn splat(&mut self, c: Scalar) -> Opnd {
        let buf = match self.splats.iter().find(|(x, _)| *x == c) {
            Some(&(_, b)) => b,
            None => {
                let n = self.splats.len();
                let b = self.buffer(&format!("c{n}"), Form::Splat, (0, 0), false);
                self.out.prologue.push(VOp::Dup {
                    dst: Opnd { buf: b, row: 0 },
                    scalar: c,
                    rows: (0, 0),
                });
                self.splats.push((c, b));
                b
            }
        };
        Opnd { buf, row: 0 }
    }

    /// `a OP b`, or `None` for an operator the Vector unit lacks.
    fn binary(
        &mut self,
        op: BinaryOp,
        a: Val,
        b: Val,
        dst: Option<Opnd>,
    ) -> Result<Option<Val>, Error> {
        let (name, vop) = match op {
            BinaryOp::Add => ("add", "vadd"),
            BinaryOp::Sub => ("sub", "vsub"),
            BinaryOp::Mul => ("mul", "vmul"),
            BinaryOp::Div => ("div", "vdiv"),
            BinaryOp::Max => ("max", "vmax"),
            BinaryOp::Min => ("min", "vmin"),
            _ => return Ok(None),
        };
        Ok(Some(match (a, b) {
            (Val::Scalar(x), Val::Scalar(y)) => Val::Scalar(self.scalars.op(name, x, y)?),
            (t @ Val::Buf { .. }, Val::Scalar(c)) | (Val::Scalar(c), t @ Val::Buf { .. })
                if matches!(op, BinaryOp::Add | BinaryOp::Mul | BinaryOp::Max) =>
            {
                let sop = match op {
                    BinaryOp::Add => "vadds",
                    BinaryOp::Mul => "vmuls",
                    _ => "vmaxs",
                };
                self.with_scalar(sop, t, c, dst)?
            }
            (t @ Val::Buf { .. }, Val::Scalar(c)) if op == BinaryOp::Sub => {
                let neg = self.scalars.op("mul", c, Scalar::Const(-1.0))?;
                self.with_scalar("vadds", t, neg, dst)?
            }
            (Val::Scalar(c), t @ Val::Buf { .. }) if op == BinaryOp::Sub => {
                let negated = self.with_scalar("vmuls", t, Scalar::Const(-1.0), dst)?;
                self.with_scalar("vadds", negated, c, dst)?
            }
            (x, y) => {
                // Division and min with a scalar: a splat of it.
                let opnd = |l: &mut Self, v: Val| match v {
                    Val::Buf { at, .. } => at,
                    Val::Scalar(c) => l.splat(c),
                };
                let (oa, ob) = (opnd(self, x), opnd(self, y));
                let d = self.result(&[x, y], dst);
                self.out.ops.push(VOp::Binary {
                    op: vop,
                    dst: d,
                    a: oa,
                    b: ob,
                    rows: self.rows(),
                });
                self.owned(d)
            }
        }))
    }
}

/// A use of a value that later uses still need: it does not own the buffer.
fn shared_use(v: Val) -> Val {
    match v {
        Val::Buf { at, .. } => Val::Buf { at, temp: false },
        other => other,
    }
}

/// The `vcmp` suffix of a comparison.
fn comparison(op: BinaryOp) -> Option<&'static str> {
    Some(match op {
        BinaryOp::Lt => "lt",
        BinaryOp::Le => "le",
        BinaryOp::Gt => "gt",
        BinaryOp::Ge => "ge",
        BinaryOp::Eq => "eq",
        BinaryOp::Ne => "ne",
        _ => return None,
    })
}
