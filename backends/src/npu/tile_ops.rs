//! The Vector unit's part of the Cube's programs: scalars into registers, per-column and
//! expanded per-row vectors into UB (and the arithmetic hoisted onto the row vectors), and the
//! prologue's and epilogue's operations on the result tiles in UB.
//!
//! A tile is `[tn/16][tm][16]` f32 (L0C's nZ order): a whole-tile operation runs over it in
//! repeats of 256 bytes; a per-row vector is held expanded to a whole tile, each row's value
//! in all 16 lanes of every chunk, so that an operation against it is one run of repeats over
//! the tile like any other; a per-column vector is broadcast down the rows with a block stride
//! of 0.

use super::copies::Off;
use super::cube::{gm_type, Emitter, Tail};
use super::epilogue::{Op, Operand};
use super::tiles::VectorOps;
use super::{FRACTAL, VECTOR_BYTES};

/// How [`Emitter::vector_op`] covers a tile with each of `ops`, counted for the tiling's
/// estimate.
pub(crate) fn vector_ops<'a>(ops: impl IntoIterator<Item = &'a Op>) -> VectorOps {
    let mut v = VectorOps::default();
    let slow = |op: &str| ["vexp", "vln", "vrec", "vrsqrt", "vsqrt", "vdiv"].contains(&op) as usize;
    for op in ops {
        match *op {
            Op::WithScalar { op, .. } | Op::Unary { op, .. } => v.whole[slow(op)] += 1,
            Op::Dup { .. } => v.whole[0] += 1,
            Op::Binary { op, a, b, .. } => {
                let column = |o: Operand| matches!(o, Operand::Column(_));
                if column(a) || column(b) {
                    v.by_column[slow(op)] += 1;
                } else {
                    v.whole[slow(op)] += 1;
                }
            }
        }
    }
    v
}

impl Emitter<'_> {
    /// Copies the scalar inputs into UB; [`Self::load_scalars`] loads them into registers.
    pub(crate) fn scalars(&mut self) {
        if self.ep.scalars.is_empty() {
            return;
        }
        self.line("// Scalars into UB.");
        for (i, &(a, _)) in self.ep.scalars.iter().enumerate() {
            let name = self.name(a);
            self.line(format!("copy ub_s[{}], {name}[0], len=1", 32 * i));
        }
        self.line("set_flag MTE2, S, 0");
        self.scalars_pending = true;
    }

    /// The scalars copied by [`Self::scalars`] into registers, and the scalar-unit arithmetic
    /// on them, unless done already. S waits here for their copies, so this comes as late as
    /// the first use allows: copies issued before it are queued on MTE2 behind the scalars'
    /// and run while S waits. Never inside a loop.
    pub(crate) fn load_scalars(&mut self) {
        if !self.scalars_pending {
            return;
        }
        self.scalars_pending = false;
        self.line("// Scalars into registers.");
        self.line("wait_flag MTE2, S, 0");
        for (i, &(a, r)) in self.ep.scalars.iter().enumerate() {
            let ty = gm_type(self.program.array(a).elem);
            self.line(format!("ld.{ty} f{r}, ub_s[{}]", 32 * i));
        }
        for op in &self.ep.scalar_ops {
            self.line(format!(
                "{} f{}, {}, {}",
                op.op,
                op.dst,
                op.a.text(),
                op.b.text()
            ));
        }
    }

    /// Per-column vectors of the column group and expanded per-row vectors of the row panel
    /// into UB, then the hoisted arithmetic on the row vectors.
    pub(crate) fn vectors(&mut self) {
        let lt = self.t.last();
        let st = self.plan.last();
        let group = self.t.ntb * lt.tn;
        let (m, n) = (st.m.extent(), st.n.extent());
        let (mt, ng) = (self.t.mt(m), self.t.ng);
        if self.ep.columns.is_empty() && self.ep.rows.is_empty() {
            return;
        }
        self.load_scalars();
        if !self.ep.columns.is_empty() {
            self.line("// Per-column vectors of this column group into UB.");
            let tail = Tail {
                conds: vec![format!("s1 == {}", ng - 1)],
                full: group,
                tail: n - (ng - 1) * group,
            };
            for (i, &a) in self.ep.columns.clone().iter().enumerate() {
                let name = self.name(a);
                let src = Off::at(0).plus("s1", group as i64 * 4);
                self.tails(&[&tail], &mut |e, v| {
                    e.copy_vector(&format!("ub_c{i}"), &name, &src, v[0]);
                });
            }
        }
        if !self.ep.rows.is_empty() {
            self.line("// Per-row vectors of this row panel, each row's value in all 16 lanes of every chunk.");
            let tail = Tail {
                conds: vec![format!("s0 == {}", mt - 1)],
                full: lt.tm,
                tail: m - (mt - 1) * lt.tm,
            };
            // Each vector into its own staging buffer, so the copies run back to back.
            for (i, &a) in self.ep.rows.clone().iter().enumerate() {
                let name = self.name(a);
                let src = Off::at(0).plus("s0", lt.tm as i64 * 4);
                self.tails(&[&tail], &mut |e, v| {
                    e.copy_vector(&format!("ub_rs{i}"), &name, &src, v[0]);
                });
            }
            self.line("set_flag MTE2, V, 1");
            self.line("wait_flag MTE2, V, 1");
            for i in 0..self.ep.rows.len() {
                // A broadcast fills one 32-byte block (8 lanes) per row value, blocks 2 apart:
                // two of them, one block apart, give every row of the first chunk its 16 lanes.
                for half in 0..2 {
                    self.line(format!(
                        "vbrcb.f32 ub_r{i}[{}], ub_rs{i}[0], repeat={}, blk=2, rep=16",
                        half * 32,
                        lt.tm / 8
                    ));
                }
            }
            for op in self.ep.row_ops.clone() {
                self.vector_op(&op, "ub_t", &Off::at(0));
            }
            // The first chunk of every row vector into the tile's other chunks.
            for i in 0..self.ep.row_vectors {
                for chunk in 1..lt.tn / FRACTAL {
                    self.line(format!(
                        "copy ub_r{i}[{}], ub_r{i}[0], len={}",
                        chunk * lt.tm * 64,
                        lt.tm * 2
                    ));
                }
            }
        }
        if !self.ep.columns.is_empty() {
            self.line("set_flag MTE2, V, 1");
            self.line("wait_flag MTE2, V, 1");
        }
    }

    /// One prologue or epilogue operation over the whole tile of the current slot (tiles
    /// named `prefix{i}`), or over whole row vectors.
    pub(crate) fn vector_op(&mut self, op: &Op, prefix: &str, slot: &Off) {
        let lt = self.t.last();
        let (tm, tn) = (lt.tm, lt.tn);
        // A row vector is held as a whole tile, so every operation without a column vector
        // runs over the tile's bytes; one on row vectors alone, over their first chunk (the
        // others are copies of it).
        let tile_repeats = tm * tn * 4 / VECTOR_BYTES;
        let chunk_repeats = tm * 16 * 4 / VECTOR_BYTES;
        let buf = |o: Operand, at: &Off| -> String {
            match o {
                Operand::Tile(i) => format!("{prefix}{i}[{}]", slot.clone().sum(at).text()),
                Operand::Row(i) => format!("ub_r{i}[{}]", at.text()),
                Operand::Column(i) => format!("ub_c{i}[{}]", at.text()),
            }
        };
        // Whole-buffer operations in chunks of at most 255 repeats.
        let whole = |e: &mut Self, dst: Operand, text: &dyn Fn(&Off) -> String| {
            let repeats = if matches!(dst, Operand::Row(_)) {
                chunk_repeats
            } else {
                tile_repeats
            };
            let mut done = 0;
            while done < repeats {
                let r = (repeats - done).min(255);
                let off = Off::at((done * VECTOR_BYTES) as i64);
                e.line(format!("{}, repeat={r}", text(&off)));
                done += r;
            }
        };
        match *op {
            Op::WithScalar {
                op,
                dst,
                src,
                scalar,
            } => whole(self, dst, &|off| {
                format!(
                    "{op}.f32 {}, {}, {}",
                    buf(dst, off),
                    buf(src, off),
                    scalar.text()
                )
            }),
            Op::Dup { dst, scalar } => whole(self, dst, &|off| {
                format!("vdup.f32 {}, {}", buf(dst, off), scalar.text())
            }),
            Op::Unary { op, dst, src } => whole(self, dst, &|off| {
                format!("{op}.f32 {}, {}", buf(dst, off), buf(src, off))
            }),
            Op::Binary { op, dst, a, b }
                if !matches!(a, Operand::Column(_)) && !matches!(b, Operand::Column(_)) =>
            {
                whole(self, dst, &|off| {
                    format!(
                        "{op}.f32 {}, {}, {}",
                        buf(dst, off),
                        buf(a, off),
                        buf(b, off)
                    )
                })
            }
            Op::Binary { op, dst, a, b } => {
                // A column vector broadcast down the rows: per 16-column block, the 8 left and
                // the 8 right columns of every row (block stride 2 on the tile, 0 on the vector).
                let n1 = self.var("n1");
                let several = self.t.ntb > 1;
                let col_at = |h: u64| {
                    let o = Off::at((h * 32) as i64).plus(&n1, 64);
                    if several {
                        o.plus("nt", (tn * 4) as i64)
                    } else {
                        o
                    }
                };
                let operand = |o: Operand, h: u64| match o {
                    Operand::Column(_) => (buf(o, &col_at(h)), (0, 0)),
                    _ => (
                        buf(o, &Off::at((h * 32) as i64).plus(&n1, (tm * 64) as i64)),
                        (2, 16),
                    ),
                };
                self.open(format!("for {n1} in 0..{}", tn / FRACTAL));
                for h in 0..2 {
                    let (d, _) = operand(dst, h);
                    let (x, (bx, rx)) = operand(a, h);
                    let (y, (by, ry)) = operand(b, h);
                    self.line(format!(
                        "{op}.f32 {d}, {x}, {y}, repeat={}, blk=(2, {bx}, {by}), rep=(16, {rx}, {ry})",
                        tm / 8
                    ));
                }
                self.close();
                self.free_var();
            }
        }
    }
}
