//! Contractions on the Cube: the subtree below a matrix mark, one tile of the result kept in
//! L0C while the k tiles stream through L1 and L0A / L0B.
//!
//! The matrix pass leaves, below the mark, a loop over the k tiles above the point loops of
//! one tile of m and n; the loops outside it (the tiles of m and n, the batch) run as any
//! loops do. For one tile of the result:
//!
//! 1. its current values go from GM to a scratch area at the start of UB in L0C's nZ order
//!    (per column of fractals, one burst per row) and from there into L0C, unless the mark
//!    says the tile starts from zero: then the first `mmad` initialises it, and the statement
//!    that zeroes it, first below the mark, is not lowered;
//! 2. per k tile, each operand's tile goes from GM to L1 in columns of fractals and from L1
//!    to its L0 with `load2d`, transposed where the array's rows run along k. An operand that
//!    holds a row's k values densely (the tile layout's k iterators, one element apart from
//!    the last) takes one burst per row of m or n, padded with zeros to the fractal's width;
//!    one whose rows of m or n are one element apart takes one burst per value of k: a run of
//!    bursts a constant stride apart where its k iterators are dense at some stride, else one
//!    run per value of the k iterators after the first, every `inner`-th row of L1 (a
//!    convolution's window rows and columns, each a shift of the input's rows). Rows of k past
//!    the end are zeroed in L1, so the products of the padding are zeros; `mmad` accumulates
//!    onto the tile in L0C;
//! 3. the tile goes back through the scratch area to GM, one burst per row and column of
//!    fractals, only the rows and columns the tile has.
//!
//! Every element's k run in the tile layout's order from its value before the statement (the
//! matrix pass says when that is the interpreter's). Copy counts are immediates: a tile whose
//! rows or columns are fewer than the mark's (the last one, or one cut by a domain that does
//! not start on a tile) is a variant of its own, chosen by comparing the count at run time.
//! Where the AST below the mark is not the pass's loop nest (a condition separating parts of
//! it), the subtree is lowered as any other.
//!
//! Pipes are ordered by flags. Where two slots of each operand tile fit L1, L0A and L0B, the k
//! tiles go round a ring of two: MTE2 copies tile k + 1 into one slot of L1 while MTE1 loads
//! tile k from the other and the Cube multiplies the one before; a `FREE` flag per slot handed
//! back (MTE1 to MTE2 for L1, M to MTE1 for L0) and a `READY` flag per step forward keep every
//! buffer's writer behind its readers. A tile takes all slots free at its start and hands them
//! all back at its end. Tiles of one mark that follow each other (the loops around the mark
//! hold nothing else) are not separated by a barrier: the next tile's Cube waits until the
//! vector pipe has taken the previous result out of L0C, its vector pipe until MTE3 has taken
//! it out of UB, and where it reads its own start from GM, MTE2 waits until MTE3 has written
//! what came before; any other predecessor is waited for with `pipe_barrier ALL`.

use std::collections::BTreeMap;

use polyhedral::ast::{Ast, AstExpr};
use polyhedral::passes::matrix::{iterator_strides, outer_iterators, qualifies};
use polyhedral::program::{Access, ArrayId, ScalarType, StmtId};
use polyhedral::schedule::mark::MatrixMark;
use sim::isa::{Addr, Affine, CmpOp, DType, Instr, Mem, Pipe, Reg, SOp, Scalar, MAX_REPEAT};
use sim::Span;

use super::emit::{add_term, Emitter, Int};
use crate::loops::{evaluate, expr_vars};
use crate::npu::{Error, BLOCK_BYTES, FRACTAL};

/// The event of flags that say a pipe's results are ready for the next.
const READY: u8 = 0;
/// The event of flags that say a slot of the ring is free again.
const FREE: u8 = 1;

/// Most variants of a tile's row or column count.
const MAX_VARIANTS: usize = 4;
/// Most assignments of the outer loops tried to find a tile's counts.
const MAX_ASSIGNMENTS: i64 = 1 << 16;

/// The bytes of the Cube's buffers a kernel's matrix tiles need.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct CubeBytes {
    pub(super) l1: u64,
    pub(super) l0a: u64,
    pub(super) l0b: u64,
    pub(super) l0c: u64,
}

/// A loop of the nest below the mark.
struct Loop<'a> {
    var: &'a str,
    lower: &'a AstExpr,
    upper: &'a AstExpr,
}

/// One operand of the product as the copies see it: its access, the iterator of its L0
/// fractals' rows (m for A, n for B), and its bytes per element.
struct Operand<'a> {
    access: &'a Access,
    row: usize,
    l0: Mem,
    /// Byte offset of its tile in L1.
    l1: u64,
}

/// The contraction below one mark, as the lowering needs it.
struct Tile<'a> {
    c: &'a Access,
    a: Operand<'a>,
    b: Operand<'a>,
    /// The statement's iterators: m, n, k.
    m: usize,
    n: usize,
    k: usize,
    /// The statement's arguments outside the point loops (the batch), and the point loops'
    /// lowest values as expressions of the loops outside the mark.
    args: Vec<AstExpr>,
    /// Bytes of an operand element (2 for f16, 4 for f32).
    es: i64,
    /// The k values every element runs over (of the first k iterator).
    k_range: (i64, i64),
    /// The other k iterators, in the order of a tile's layout, each with its lowest value
    /// and count: a tile runs them whole for every value of the first.
    inner: Vec<(usize, i64, i64)>,
    mark: &'a MatrixMark,
    /// The ring of operand slots in L1, L0A and L0B: one slot's bytes in each, and the
    /// register holding the slot the next k tile uses (none with one slot).
    slot: CubeBytes,
    ring: Option<u8>,
}

impl Tile<'_> {
    fn slots(&self) -> usize {
        if self.ring.is_some() {
            2
        } else {
            1
        }
    }
}

impl Emitter<'_> {
    /// Lowers the subtree `body` below matrix mark `mark` on the Cube; `false` (nothing
    /// written) where it is not the loop nest the matrix pass leaves.
    pub(super) fn matrix(&mut self, mark: &MatrixMark, body: &Ast) -> Result<bool, Error> {
        let (init, body) = match (mark.zeroed, body) {
            (false, _) => (None, body),
            (true, Ast::Block(items)) if items.len() == 2 => match nest(&items[0]) {
                Some((_, init, _)) => (Some(init), &items[1]),
                None => return Ok(false),
            },
            _ => return Ok(false),
        };
        let Some((loops, stmt, args)) = nest(body) else {
            return Ok(false);
        };
        let program = self.program;
        let Some(c) = qualifies(program, stmt) else {
            return Ok(false);
        };
        let s = &program.statements[stmt.index()];
        // The statement that zeroes the tile writes the result and reads nothing.
        if init.is_some_and(|i| {
            let s0 = &program.statements[i.index()];
            s0.write.array != s.write.array || !s0.reads.is_empty()
        }) {
            return Ok(false);
        }
        let (m, n, k) = (c.m[0], c.n[0], c.k[0]);
        let point = |it: usize| -> Option<&Loop> {
            let AstExpr::Var(v) = &args[it] else {
                return None;
            };
            loops.iter().find(|l| l.var == v.as_str())
        };
        let (Some(lm), Some(ln), Some(lk)) = (point(m), point(n), point(k)) else {
            return Ok(false);
        };
        // The other k iterators run whole in every tile: constant bounds.
        let none = BTreeMap::new();
        let mut inner = Vec::new();
        for &it in &c.k[1..] {
            let Some(l) = point(it) else {
                return Ok(false);
            };
            let lo = evaluate(l.lower, Some(&self.params), &none);
            let hi = evaluate(l.upper, Some(&self.params), &none);
            let (Some(lo), Some(hi)) = (lo, hi) else {
                return Ok(false);
            };
            inner.push((it, lo, hi - lo + 1));
        }
        if inner.iter().map(|i| i.2).product::<i64>() != mark.inner {
            return Ok(false);
        }
        let inner_vars: Vec<&str> = c.k[1..]
            .iter()
            .filter_map(|&it| point(it).map(|l| l.var))
            .collect();
        let inner_loops: Vec<&str> = loops.iter().map(|l| l.var).collect();
        let uses_inner = |e: &AstExpr| {
            let mut vars = Default::default();
            expr_vars(e, &mut vars);
            vars.iter().any(|v| inner_loops.contains(&v.as_str()))
        };
        // The m and n loops and the iterators outside the tiles depend on the loops outside
        // the mark only.
        if [lm.lower, lm.upper, ln.lower, ln.upper]
            .into_iter()
            .any(uses_inner)
            || outer_iterators(&c).iter().any(|&b| uses_inner(&args[b]))
        {
            return Ok(false);
        }
        let tiles: Vec<&Loop> = loops
            .iter()
            .filter(|l| ![lm.var, ln.var, lk.var].contains(&l.var) && !inner_vars.contains(&l.var))
            .collect();
        let Some(k_range) = self.k_range(&tiles, lk) else {
            return Ok(false);
        };
        let (Some(rows), Some(cols)) = (self.counts(lm), self.counts(ln)) else {
            return Ok(false);
        };
        let elem = program.array(s.reads[c.a].array).elem;
        let es = elem.size_in_bytes() as i64;
        let f = FRACTAL as i64;
        let fr = f * f * es;
        let (m1, n1, k1) = (
            fractals(mark.m) as u64,
            fractals(mark.n) as u64,
            fractals(mark.k * mark.inner) as u64,
        );
        if rows.iter().any(|&r| r > mark.m) || cols.iter().any(|&r| r > mark.n) {
            return Ok(false);
        }
        let bytes = CubeBytes {
            l1: (m1 * k1 + k1 * n1) * fr as u64,
            l0a: m1 * k1 * fr as u64,
            l0b: k1 * n1 * fr as u64,
            l0c: m1 * n1 * 1024,
        };
        let target = self.target;
        let fits = bytes.l1 <= target.capacity(Mem::L1)
            && bytes.l0a <= target.capacity(Mem::L0a)
            && bytes.l0b <= target.capacity(Mem::L0b)
            && bytes.l0c <= target.capacity(Mem::L0c)
            && bytes.l0c <= target.capacity(Mem::Ub);
        if !fits {
            return Ok(false);
        }
        // Two slots of each operand buffer where they fit: the next k tile's copies run while
        // the Cube multiplies the current one.
        let slots = if 2 * bytes.l1 <= target.capacity(Mem::L1)
            && 2 * bytes.l0a <= target.capacity(Mem::L0a)
            && 2 * bytes.l0b <= target.capacity(Mem::L0b)
        {
            2
        } else {
            1
        };
        self.cube.l1 = self.cube.l1.max(slots * bytes.l1);
        self.cube.l0a = self.cube.l0a.max(slots * bytes.l0a);
        self.cube.l0b = self.cube.l0b.max(slots * bytes.l0b);
        let ring = if slots == 2 {
            let r = self.sreg()?;
            self.push(Instr::Mov {
                dst: Reg::S(r),
                src: Scalar::Int(0),
            });
            Some(r)
        } else {
            None
        };
        self.cube.l0c = self.cube.l0c.max(bytes.l0c);
        self.ub_size = self.ub_size.max(bytes.l0c);
        let mut args = args.to_vec();
        args[m] = lm.lower.clone();
        args[n] = ln.lower.clone();
        args[k] = AstExpr::Int(k_range.0);
        for &(it, lo, _) in &inner {
            args[it] = AstExpr::Int(lo);
        }
        let tile = Tile {
            c: &s.write,
            a: Operand {
                access: &s.reads[c.a],
                row: m,
                l0: Mem::L0a,
                l1: 0,
            },
            b: Operand {
                access: &s.reads[c.b],
                row: n,
                l0: Mem::L0b,
                l1: m1 * k1 * fr as u64,
            },
            m,
            n,
            k,
            args,
            es,
            k_range,
            inner,
            mark,
            slot: bytes,
            ring,
        };
        // What ran before (regions, other contractions) is done; after a tile of the same
        // mark, flags order what the two share (`cube_tile`).
        if !self.tiles_ordered {
            self.push(Instr::Barrier { pipe: None });
        }
        let count = |e: &mut Self, l: &Loop| -> Result<Int, Error> {
            let span = AstExpr::Add(
                Box::new(l.upper.clone()),
                Box::new(AstExpr::Add(
                    Box::new(AstExpr::Mul(-1, Box::new(l.lower.clone()))),
                    Box::new(AstExpr::Int(1)),
                )),
            );
            e.int(&span)
        };
        let rc = count(self, lm)?;
        let cc = count(self, ln)?;
        self.variants(&rc, &rows, &mut |e, r| {
            e.variants(&cc, &cols, &mut |e, cl| e.cube_tile(&tile, r, cl))
        })?;
        self.release(rc);
        self.release(cc);
        if let Some(r) = ring {
            self.free_s(r);
        }
        Ok(true)
    }

    /// The k values the nest runs every element over, when they are one interval walked in
    /// order by the tile loops `tiles` (constant bounds) and the k loop.
    fn k_range(&self, tiles: &[&Loop], lk: &Loop) -> Option<(i64, i64)> {
        let none = BTreeMap::new();
        let vars: Vec<(String, (i64, i64))> = tiles
            .iter()
            .map(|l| {
                let lo = evaluate(l.lower, Some(&self.params), &none)?;
                let hi = evaluate(l.upper, Some(&self.params), &none)?;
                Some((l.var.to_string(), (lo, hi)))
            })
            .collect::<Option<_>>()?;
        let mut pieces = Vec::new();
        for_each_assignment(&vars, &mut |fixed| {
            let lo = evaluate(lk.lower, Some(&self.params), fixed)?;
            let hi = evaluate(lk.upper, Some(&self.params), fixed)?;
            if lo <= hi {
                pieces.push((lo, hi));
            }
            Some(())
        })?;
        let first = *pieces.first()?;
        let mut end = first.0 - 1;
        for &(lo, hi) in &pieces {
            if lo != end + 1 {
                return None;
            }
            end = hi;
        }
        Some((first.0, end))
    }

    /// The counts of loop `l`'s iterations over the values of the loops outside the mark, at
    /// most [`MAX_VARIANTS`] of them, largest first.
    fn counts(&self, l: &Loop) -> Option<Vec<i64>> {
        let mut names = std::collections::BTreeSet::new();
        expr_vars(l.lower, &mut names);
        expr_vars(l.upper, &mut names);
        let vars: Vec<(String, (i64, i64))> = names
            .into_iter()
            .map(|v| Some((v.clone(), *self.ranges.get(&v)?)))
            .collect::<Option<_>>()?;
        let mut counts = Vec::new();
        for_each_assignment(&vars, &mut |fixed| {
            let lo = evaluate(l.lower, Some(&self.params), fixed)?;
            let hi = evaluate(l.upper, Some(&self.params), fixed)?;
            if hi >= lo && !counts.contains(&(hi - lo + 1)) {
                counts.push(hi - lo + 1);
            }
            Some(())
        })?;
        counts.sort_by(|a, b| b.cmp(a));
        (!counts.is_empty() && counts.len() <= MAX_VARIANTS).then_some(counts)
    }

    /// `f(v)` for the value `v` of `count` among `values`: a branch per value but the last.
    fn variants(
        &mut self,
        count: &Int,
        values: &[i64],
        f: &mut dyn FnMut(&mut Self, i64) -> Result<(), Error>,
    ) -> Result<(), Error> {
        match values {
            [] => Ok(()),
            [v] => f(self, *v),
            [v, rest @ ..] => {
                let then = self.nested(|e| f(e, *v))?;
                let otherwise = self.nested(|e| e.variants(count, rest, f))?;
                self.branch_else(count.scalar(), CmpOp::Eq, Scalar::Int(*v), then, otherwise);
                Ok(())
            }
        }
    }

    /// One tile of `rows × cols` elements of the result (module docs).
    fn cube_tile(&mut self, t: &Tile, rows: i64, cols: i64) -> Result<(), Error> {
        let f = FRACTAL as i64;
        let (m1, n1) = (fractals(rows), fractals(cols));
        let mut temps = Vec::new();
        let c_base = self.gm_base(t, t.c, &mut temps)?;
        let c_name = self.program.array(t.c.array).name.clone();
        let (c_rows, c_cols) = (self.stride(t.c, t.m), self.stride(t.c, t.n));
        debug_assert_eq!(c_cols, 4);
        // The result's tile, column of fractals by column of fractals, into L0C's order
        // (unless it starts from zero).
        let fractal_row = f * 4;
        // The previous tile's results have left the scratch area and GM has them (this tile
        // may read them); its L0C has left for UB.
        if t.mark.zeroed {
            self.after(Pipe::V, Pipe::M);
        } else {
            self.after(Pipe::Mte3, Pipe::Mte2);
        }
        for ni in (0..n1).filter(|_| !t.mark.zeroed) {
            let mut gm = c_base.clone();
            gm.constant += ni * f * 4;
            self.push(Instr::CopyPad {
                dst: self.ub_at(Affine::constant(ni * m1 * f * fractal_row)),
                src: gm_addr(&c_name, gm),
                n_burst: rows as u32,
                bytes: ((cols - ni * f).min(f) * 4) as u32,
                src_stride: c_rows as u32,
                dst_stride: fractal_row as u32,
                len: (fractal_row as u64 / BLOCK_BYTES) as u32,
            });
        }
        if !t.mark.zeroed {
            self.after(Pipe::Mte2, Pipe::V);
            self.push(Instr::CopyUbToCc {
                dst: self.cube_at(Mem::L0c, 0),
                src: self.ub_at(Affine::constant(0)),
                n_burst: 1,
                len: (m1 * n1) as u32,
                src_gap: 0,
                dst_gap: 0,
            });
            self.after(Pipe::V, Pipe::M);
        }
        // Every slot of the ring starts free.
        for _ in 0..t.slots() {
            self.signal(Pipe::Mte1, Pipe::Mte2, FREE);
            self.signal(Pipe::M, Pipe::Mte1, FREE);
        }
        let (k0, k_end) = t.k_range;
        let extent = k_end - k0 + 1;
        let step = t.mark.k;
        let (full, tail) = (extent / step, extent % step);
        let dims = (rows, cols);
        // The first step starts a zeroed tile; the rest accumulate onto it.
        let mut first = t.mark.zeroed;
        let mut done = 0;
        if full > 0 && first {
            self.k_step(t, dims, step, (None, 0), true)?;
            first = false;
            done = 1;
        }
        if full > done {
            self.counted(full - done, |e, kk| {
                e.k_step(t, dims, step, (Some(kk), done * step), false)
            })?;
        }
        if tail > 0 {
            self.k_step(t, dims, tail, (None, full * step), first)?;
        }
        for _ in 0..t.slots() {
            self.wait(Pipe::Mte1, Pipe::Mte2, FREE);
            self.wait(Pipe::M, Pipe::Mte1, FREE);
        }
        self.after(Pipe::M, Pipe::V);
        self.after(Pipe::Mte3, Pipe::V);
        self.push(Instr::CopyCcToUb {
            dst: self.ub_at(Affine::constant(0)),
            src: self.cube_at(Mem::L0c, 0),
            n_burst: 1,
            len: (m1 * n1) as u32,
            src_gap: 0,
            dst_gap: 0,
            f16: false,
            relu: false,
            src_f16: false,
        });
        self.after(Pipe::V, Pipe::Mte3);
        for ni in 0..n1 {
            let mut gm = c_base.clone();
            gm.constant += ni * f * 4;
            let bytes = (cols - ni * f).min(f) * 4;
            self.push(Instr::CopyPad {
                dst: gm_addr(&c_name, gm),
                src: self.ub_at(Affine::constant(ni * m1 * f * fractal_row)),
                n_burst: rows as u32,
                bytes: bytes as u32,
                src_stride: fractal_row as u32,
                dst_stride: c_rows as u32,
                len: (bytes as u64).div_ceil(BLOCK_BYTES) as u32,
            });
        }
        temps.into_iter().for_each(|r| self.free_s(r));
        Ok(())
    }

    /// One k tile of `kc` values starting `offset` past the range's first (a counter of whole
    /// tiles and a constant): both operands into L1 and their L0, then the product (onto zeros
    /// when `init`).
    fn k_step(
        &mut self,
        t: &Tile,
        (rows, cols): (i64, i64),
        kc: i64,
        offset: (Option<&str>, i64),
        init: bool,
    ) -> Result<(), Error> {
        let f = FRACTAL as i64;
        let k1 = fractals(kc * t.mark.inner);
        let mut temps = Vec::new();
        // MTE2: the operands into a free slot of L1.
        self.wait(Pipe::Mte1, Pipe::Mte2, FREE);
        for (op, valid) in [(&t.a, rows), (&t.b, cols)] {
            self.operand_to_l1(t, op, valid, kc, offset, &mut temps)?;
        }
        // MTE1: from there into a free slot of L0A and L0B, freeing the L1 slot.
        self.after(Pipe::Mte2, Pipe::Mte1);
        self.wait(Pipe::M, Pipe::Mte1, FREE);
        for (op, valid) in [(&t.a, rows), (&t.b, cols)] {
            self.operand_to_l0(t, op, fractals(valid), k1);
        }
        self.signal(Pipe::Mte1, Pipe::Mte2, FREE);
        // M: the product, freeing the L0 slots.
        self.after(Pipe::Mte1, Pipe::M);
        self.push(Instr::Mmad {
            out: DType::F32,
            c: self.cube_at(Mem::L0c, 0),
            a: self.slot_at(t, Mem::L0a, 0),
            b: self.slot_at(t, Mem::L0b, 0),
            m: (fractals(rows) * f) as u32,
            k: (k1 * f) as u32,
            n: (fractals(cols) * f) as u32,
            init,
            src_f32: t.es == 4,
        });
        self.signal(Pipe::M, Pipe::Mte1, FREE);
        if let Some(r) = t.ring {
            self.push(Instr::SBin {
                op: SOp::Sub,
                dst: Reg::S(r),
                a: Scalar::Int(1),
                b: Scalar::Reg(Reg::S(r)),
            });
        }
        temps.into_iter().for_each(|r| self.free_s(r));
        Ok(())
    }

    /// An operand's tile of `valid` rows (m or n) by `kc` values of the first k iterator (and
    /// every value of the others) from GM into L1, in columns of fractals along the array's
    /// rows.
    fn operand_to_l1(
        &mut self,
        t: &Tile,
        op: &Operand,
        valid: i64,
        kc: i64,
        (counter, constant): (Option<&str>, i64),
        temps: &mut Vec<u8>,
    ) -> Result<(), Error> {
        let f = FRACTAL as i64;
        let es = t.es;
        let fr = f * f * es;
        let fractal_row = f * es;
        let name = self.program.array(op.access.array).name.clone();
        let mut base = self.gm_base(t, op.access, temps)?;
        let k_stride = self.stride(op.access, t.k);
        let row_stride = self.stride(op.access, op.row);
        base.constant += constant * k_stride;
        if let Some(kk) = counter {
            add_term(&mut base, kk.to_string(), t.mark.k * k_stride);
        }
        let k_rows = kc * t.mark.inner;
        let (r1, k1) = (fractals(valid), fractals(k_rows));
        let len = (fractal_row as u64 / BLOCK_BYTES) as u32;
        if self.along_k(t, op.access) {
            // Each row of the operand's own iterator holds its k values in one run.
            for col in 0..k1 {
                let mut src = base.clone();
                src.constant += col * f * es;
                self.push(Instr::CopyPad {
                    dst: self.slot_at(t, Mem::L1, op.l1 as i64 + col * r1 * fr),
                    src: gm_addr(&name, src),
                    n_burst: valid as u32,
                    bytes: ((k_rows - col * f).min(f) * es) as u32,
                    src_stride: row_stride as u32,
                    dst_stride: fractal_row as u32,
                    len,
                });
            }
            return Ok(());
        }
        // One burst per value of k along the operand's rows: runs of bursts a constant
        // stride apart (all of them where the k iterators are one dense run, else one per
        // value of the other k iterators, every `inner`-th row).
        let runs = self.k_runs(t, op.access, kc);
        for col in 0..r1 {
            let dst = op.l1 as i64 + col * k1 * fr;
            for &(offset, row, bursts, stride) in &runs {
                let mut src = base.clone();
                src.constant += col * f * es + offset;
                let step = if runs.len() == 1 { 1 } else { t.mark.inner };
                self.push(Instr::CopyPad {
                    dst: self.slot_at(t, Mem::L1, dst + row * fractal_row),
                    src: gm_addr(&name, src),
                    n_burst: bursts as u32,
                    bytes: ((valid - col * f).min(f) * es) as u32,
                    src_stride: stride as u32,
                    dst_stride: (step * fractal_row) as u32,
                    len,
                });
            }
            // Rows of k past the end are zeros.
            let pad = k1 * f - k_rows;
            if pad > 0 {
                self.push(Instr::CopyPad {
                    dst: self.slot_at(t, Mem::L1, dst + k_rows * fractal_row),
                    src: gm_addr(&name, base.clone()),
                    n_burst: pad as u32,
                    bytes: 0,
                    src_stride: 0,
                    dst_stride: fractal_row as u32,
                    len,
                });
            }
        }
        Ok(())
    }

    /// Whether `access` holds each tile's k values, in the tile's order, as one run of
    /// elements per row: the k iterators dense from the last, one element apart.
    fn along_k(&self, t: &Tile, access: &Access) -> bool {
        let mut want = t.es;
        for &(it, _, count) in t.inner.iter().rev() {
            if self.stride(access, it) != want {
                return false;
            }
            want *= count;
        }
        self.stride(access, t.k) == want
    }

    /// The runs of bursts that copy `kc` values of the first k iterator of an operand read
    /// along its rows: (GM byte offset, first L1 row, bursts, GM bytes between bursts). One
    /// run where the k iterators are dense (each a constant stride times the next's count),
    /// else one per value of the others.
    fn k_runs(&self, t: &Tile, access: &Access, kc: i64) -> Vec<(i64, i64, i64, i64)> {
        let Some(&(last, _, _)) = t.inner.last() else {
            return vec![(0, 0, kc, self.stride(access, t.k))];
        };
        let unit = self.stride(access, last);
        let mut want = unit;
        let dense = t.inner.iter().rev().all(|&(it, _, count)| {
            let fine = self.stride(access, it) == want;
            want *= count;
            fine
        }) && self.stride(access, t.k) == want;
        if dense {
            return vec![(0, 0, kc * t.mark.inner, unit)];
        }
        let mut runs = vec![(0, 0, kc, self.stride(access, t.k))];
        for &(it, _, count) in t.inner.iter().rev() {
            let stride = self.stride(access, it);
            let width = runs.len() as i64;
            runs = (0..count)
                .flat_map(|v| {
                    runs.iter()
                        .map(move |&(off, row, n, s)| (off + v * stride, row + v * width, n, s))
                })
                .collect();
        }
        runs
    }

    /// An operand's fractals from L1 into its L0 in the order `mmad` reads: L0A row-fractal
    /// major, L0B k-fractal major, each fractal's rows along m or n.
    fn operand_to_l0(&mut self, t: &Tile, op: &Operand, r1: i64, k1: i64) {
        let f = FRACTAL as i64;
        let fr = f * f * t.es;
        let natural = self.along_k(t, op.access);
        // L1 holds columns of fractals: along k when natural (fractal (r, k) at k·r1 + r),
        // along the rows otherwise (at r·k1 + k).
        let row_major = op.l0 == Mem::L0a;
        let one_pass = natural != row_major;
        if one_pass {
            // L1's order is L0's: one load of every fractal.
            self.load2d(t, op, 0, op.l1 as i64, r1 * k1, 1, !natural, fr);
            return;
        }
        let (outer, inner, stride) = if row_major {
            (r1, k1, r1)
        } else {
            (k1, r1, k1)
        };
        for o in 0..outer {
            self.load2d(
                t,
                op,
                o * inner * fr,
                op.l1 as i64 + o * fr,
                inner,
                stride,
                !natural,
                fr,
            );
        }
    }

    /// `load2d` of `count` fractals (in runs of at most [`MAX_REPEAT`]).
    #[allow(clippy::too_many_arguments)]
    fn load2d(
        &mut self,
        t: &Tile,
        op: &Operand,
        dst: i64,
        src: i64,
        count: i64,
        stride: i64,
        transpose: bool,
        fr: i64,
    ) {
        let mut done = 0;
        while done < count {
            let n = (count - done).min(i64::from(MAX_REPEAT));
            self.push(Instr::Load2d {
                dst: self.slot_at(t, op.l0, dst + done * fr),
                src: self.slot_at(t, Mem::L1, src + done * stride * fr),
                repeat: n as u32,
                src_stride: stride as u32,
                transpose,
                f32: fr == 1024,
            });
            done += n;
        }
    }

    /// The GM byte offset of `access` at the tile's first element.
    fn gm_base(&mut self, t: &Tile, access: &Access, temps: &mut Vec<u8>) -> Result<Affine, Error> {
        let strides = self.strides(access.array);
        let mut offset = Affine::constant(0);
        for (d, sub) in access.subscripts.iter().enumerate() {
            let e = AstExpr::from_affine(sub, &|it| t.args[it].clone());
            self.add_scaled(&mut offset, &e, strides[d], temps)?;
        }
        Ok(offset)
    }

    /// Bytes between consecutive indices of each dimension of an array in GM (f64 is
    /// computed, and held, in f32).
    fn strides(&self, array: ArrayId) -> Vec<i64> {
        let es = match self.program.array(array).elem {
            ScalarType::F16 => 2,
            _ => 4,
        };
        let extents = self.program.array_extents(array);
        let mut strides = vec![es; extents.len()];
        for d in (0..extents.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * extents[d + 1];
        }
        strides
    }

    /// Bytes between consecutive values of iterator `it` in `access`.
    fn stride(&self, access: &Access, it: usize) -> i64 {
        let es = match self.program.array(access.array).elem {
            ScalarType::F16 => 2,
            _ => 4,
        };
        iterator_strides(self.program, access, it + 1)[it] * es
    }

    /// `offset` into the current slot of the ring in L1, L0A or L0B.
    fn slot_at(&self, t: &Tile, mem: Mem, offset: i64) -> Addr {
        let mut addr = self.cube_at(mem, offset);
        if let Some(r) = t.ring {
            let bytes = match mem {
                Mem::L1 => t.slot.l1,
                Mem::L0a => t.slot.l0a,
                _ => t.slot.l0b,
            };
            add_term(&mut addr.offset, format!("s{r}"), bytes as i64);
        }
        addr
    }

    /// Pipe `dst` waits until `src` has done what was issued to it so far.
    fn after(&mut self, src: Pipe, dst: Pipe) {
        self.signal(src, dst, READY);
        self.wait(src, dst, READY);
    }

    fn signal(&mut self, src: Pipe, dst: Pipe, event: u8) {
        self.push(Instr::SetFlag { src, dst, event });
    }

    fn wait(&mut self, src: Pipe, dst: Pipe, event: u8) {
        self.push(Instr::WaitFlag { src, dst, event });
    }

    /// An address in one of the Cube's buffers.
    fn cube_at(&self, mem: Mem, offset: i64) -> Addr {
        Addr {
            buffer: self.buffer_name(mem),
            offset: Affine::constant(offset),
            span: Span::default(),
        }
    }
}

/// Calls `f` on every assignment of values to `vars` within their ranges, the last
/// variable fastest; `None` when there are more than [`MAX_ASSIGNMENTS`] or `f` fails.
fn for_each_assignment(
    vars: &[(String, (i64, i64))],
    f: &mut dyn FnMut(&BTreeMap<String, i64>) -> Option<()>,
) -> Option<()> {
    let total = vars
        .iter()
        .try_fold(1i64, |t, (_, (a, b))| t.checked_mul((b - a + 1).max(0)))?;
    if total > MAX_ASSIGNMENTS {
        return None;
    }
    let mut fixed = BTreeMap::new();
    for at in 0..total {
        let mut rest = at;
        for (v, (a, b)) in vars.iter().rev() {
            let w = b - a + 1;
            fixed.insert(v.clone(), a + rest % w);
            rest /= w;
        }
        f(&fixed)?;
    }
    Some(())
}

/// An address in a GM tensor.
fn gm_addr(name: &str, offset: Affine) -> Addr {
    Addr {
        buffer: name.to_string(),
        offset,
        span: Span::default(),
    }
}

/// The loops of `ast` down to its one statement instance, when it is a chain of loops.
fn nest(ast: &Ast) -> Option<(Vec<Loop<'_>>, StmtId, &[AstExpr])> {
    let mut loops = Vec::new();
    let mut at = ast;
    loop {
        match at {
            Ast::Block(items) if items.len() == 1 => at = &items[0],
            Ast::For {
                var,
                lower,
                upper,
                step: 1,
                body,
                ..
            } => {
                loops.push(Loop { var, lower, upper });
                at = body;
            }
            Ast::User { stmt, args } => return Some((loops, *stmt, args)),
            _ => return None,
        }
    }
}

/// The fractals `x` elements take along one side: `⌈x / 16⌉`.
fn fractals(x: i64) -> i64 {
    (x + FRACTAL as i64 - 1) / FRACTAL as i64
}
