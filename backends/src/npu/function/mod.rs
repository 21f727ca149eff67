//! Kernels whose statement calls a scalar function, on the Vector unit: the statement body is
//! vectorised over its innermost iterator ([`polyhedral::vectorize`]) and its masked form runs
//! on the lanes of a tile ([`masked`]).
//!
//! Layout: the statement's iteration space is rows (the outer iterators, flattened) of `W`
//! points (the innermost); a tile is `R` consecutive rows, each `P` lanes apart in UB (`W`
//! rounded up to whole 32-byte blocks), and every instruction covers the whole tile. What the
//! body reads comes in per tile (an array indexed like the result: `R` bursts of a row), once
//! per kernel (a per-column vector, copied to every row of the tile; a scalar, broadcast), or
//! per tile as a per-row vector broadcast along its row (`vbrcb`, then block stride 0). The
//! entry mask holds the lanes that are points of the tile (`W` lanes of each row, the rows the
//! tile has), so the padding never keeps a loop running. Tiles are spread over the cores, a run
//! of consecutive tiles per block.
//!
//! Pipes per tile: MTE2 loads (after V has released the previous tile's inputs), V computes
//! (after MTE3 has stored the previous result), S counts masks for the loop exits and skipped
//! regions (after a V → S flag), MTE3 stores a copy of the result that no later tile writes
//! before the store is done. So the programs are free of races by construction.

pub(crate) mod masked;

pub(crate) use masked::TANH_SERIES;

use std::borrow::Cow;

use polyhedral::interp;
use polyhedral::program::{ArrayId, ArrayRole, ScalarType, Statement, StmtId, Var};
use polyhedral::vectorize::exec::{run_lanes_across_rows, LaneStats};
use polyhedral::vectorize::ssa::Op;
use polyhedral::vectorize::{calls_function, VectorProgram};
use polyhedral::Program;

use super::{Error, NpuTarget, Options, VECTOR_BYTES};
use masked::{emit, Buf, Geometry, Kind, Line, Lowering, Ty};

/// The program the lowering takes for `program`: its `f64` narrowed to `f32` where `options`
/// allow it (the machine has no `f64`), as the runner narrows it before comparing.
pub(crate) fn narrowed<'p>(program: &'p Program, options: &Options) -> Cow<'p, Program> {
    if options.f64_as_f32 {
        Cow::Owned(crate::narrow::narrow_f64(program))
    } else {
        Cow::Borrowed(program)
    }
}

/// Lanes of one f32 / i32 vector repeat.
const LANES: u64 = VECTOR_BYTES / 4;
/// Most repeats of one vector instruction.
const MAX_REPEATS: u64 = 255;

/// Whether `program` is a kernel with a scalar function call, which this module lowers (or
/// refuses).
pub(crate) fn applies(program: &Program) -> bool {
    (0..program.statements.len()).any(|k| calls_function(program, StmtId(k as u32)))
}

/// How the body reads one of its reads across a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    /// Indexed like the result: one burst per row, every tile.
    Rows,
    /// By the innermost iterator alone: once, then copied into every row.
    Column,
    /// By the outer iterator of a two-deep statement: per tile, broadcast along each row.
    PerRow,
    /// The same element for every point: once, broadcast.
    Scalar(i64),
}

/// The kernel's shape as the lowering needs it.
struct Shape<'p> {
    stmt: &'p Statement,
    /// Points per row (the innermost extent) and rows (the product of the outer extents).
    width: u64,
    rows: u64,
    loads: Vec<Load>,
}

fn not_yet(program: &Program, why: impl std::fmt::Display) -> Error {
    Error::NotYet(format!(
        "`{}` on the Vector unit with a scalar function: {why}",
        program.name
    ))
}

/// Whether `e` is exactly iterator `d`.
fn is_iter(e: &polyhedral::program::AffineExpr, d: usize) -> bool {
    e.constant == 0 && e.terms() == [(Var::Iter(d), 1)]
}

fn shape(program: &Program) -> Result<Shape<'_>, Error> {
    if program.statements.len() != 1 {
        return Err(not_yet(program, "more than one statement"));
    }
    let stmt = &program.statements[0];
    let depth = stmt.depth();
    if depth == 0 || stmt.reduction.is_some() {
        return Err(not_yet(program, "a statement that is not element-wise"));
    }
    // Lanes are f16, f32 or i32 (f64 ones narrowed to f32 by the options beforehand).
    if let Some(a) = std::iter::once(&stmt.write)
        .chain(&stmt.reads)
        .map(|a| program.array(a.array))
        .find(|a| Ty::of(a.elem).is_none())
    {
        return Err(not_yet(
            program,
            format!(
                "`{}` is {} (lanes are f16, f32 or i32; f64 with `--npu-f32`)",
                a.name, a.elem
            ),
        ));
    }
    let out = program.array(stmt.write.array);
    let ext = program.array_extents(stmt.write.array);
    if Ty::of(out.elem).is_none()
        || ext.len() != depth
        || !stmt
            .write
            .subscripts
            .iter()
            .enumerate()
            .all(|(d, s)| is_iter(s, d))
    {
        return Err(not_yet(
            program,
            "a result that is not an f16, f32 or i32 array indexed by the iterators in order",
        ));
    }
    let params = program.param_values();
    // The box of the result's extents lies in the domain iff its corners do.
    let corners = (0..1u64 << depth).all(|bits| {
        let p: Vec<i64> = (0..depth)
            .map(|d| if bits >> d & 1 == 1 { ext[d] - 1 } else { 0 })
            .collect();
        stmt.domain.iter().all(|c| c.holds(&p, &params))
    });
    if !corners || ext.iter().any(|e| *e <= 0) {
        return Err(not_yet(
            program,
            "a domain that is not the result's whole box",
        ));
    }
    let width = ext[depth - 1] as u64;
    let rows = ext[..depth - 1].iter().product::<i64>() as u64;
    let mut loads = Vec::new();
    for a in &stmt.reads {
        let arr = program.array(a.array);
        let aext = program.array_extents(a.array);
        if a.array == stmt.write.array || Ty::of(arr.elem).is_none() {
            return Err(not_yet(program, format!("the read of `{}`", arr.name)));
        }
        let load = if aext == ext && a.subscripts.iter().enumerate().all(|(d, s)| is_iter(s, d)) {
            Load::Rows
        } else if a.subscripts.len() == 1 && is_iter(&a.subscripts[0], depth - 1) {
            Load::Column
        } else if depth == 2 && a.subscripts.len() == 1 && is_iter(&a.subscripts[0], 0) {
            Load::PerRow
        } else if a
            .subscripts
            .iter()
            .all(|s| s.terms().iter().all(|(v, _)| !matches!(v, Var::Iter(_))))
        {
            let mut off = 0i64;
            for (s, e) in a.subscripts.iter().zip(&aext) {
                off = off * e + s.eval(&[], &params);
            }
            Load::Scalar(off)
        } else {
            return Err(not_yet(
                program,
                format!(
                    "the read of `{}` (only reads indexed like the result, by the innermost or \
                     the outer iterator alone, or by constants)",
                    arr.name
                ),
            ));
        };
        loads.push(load);
    }
    Ok(Shape {
        stmt,
        width,
        rows,
        loads,
    })
}

/// The tile: rows per tile and the instruction geometry.
#[derive(Clone, Copy, Debug)]
struct Tile {
    rows: u64,
    pitch: u64,
    geo: Geometry,
}

impl Tile {
    fn of(rows: u64, pitch: u64) -> Tile {
        let repeats = (rows * pitch).div_ceil(LANES);
        Tile {
            rows,
            pitch,
            geo: Geometry {
                repeats,
                mask_repeats: repeats.div_ceil(32),
            },
        }
    }

    /// Bytes of a lane buffer: the tile's repeats and one more, which the row copies that
    /// start in the last row may run into.
    fn lane_bytes(&self) -> u64 {
        (self.geo.repeats + 1) * VECTOR_BYTES
    }

    fn mask_bytes(&self) -> u64 {
        self.geo.mask_repeats * VECTOR_BYTES
    }

    /// Bytes of the staging buffers of the loads that are not whole tiles.
    fn staging_bytes(&self, loads: &[Load]) -> u64 {
        let row_repeats = self.pitch.div_ceil(LANES);
        loads
            .iter()
            .map(|l| match l {
                Load::Rows => 0,
                Load::Column => row_repeats * VECTOR_BYTES,
                Load::PerRow => self.rows.div_ceil(8) * (32 + VECTOR_BYTES),
                Load::Scalar(_) => 32 + VECTOR_BYTES,
            })
            .sum()
    }
}

/// The tiles of `program` and the vector variant of its statement.
struct Plan<'p> {
    shape: Shape<'p>,
    vp: VectorProgram,
    variant: usize,
}

fn plan(program: &Program) -> Result<Plan<'_>, Error> {
    let shape = shape(program)?;
    let depth = shape.stmt.depth();
    let mut vp = VectorProgram::new(program);
    let variant = vp.statement_variant(program, StmtId(0), depth - 1);
    let ssa = &vp.variants[variant].ssa;
    if ssa.value(ssa.result()).ty != program.array(shape.stmt.write.array).elem {
        return Err(not_yet(program, "a result whose type is not the array's"));
    }
    Ok(Plan { shape, vp, variant })
}

/// The `.npuasm` program of `program`.
pub(crate) fn compile(program: &Program, target: &NpuTarget) -> Result<String, Error> {
    let plan = plan(program)?;
    let (low, code) = lower(program, &plan)?;
    let tile = choose_tile(program, &plan.shape, &low, target)?;
    Ok(Writer {
        program,
        shape: &plan.shape,
        tile,
        low: &low,
        body: &code.body,
        reads: &code.reads,
        masks: code.masks,
        stored: code.stored,
        cores: target.cores(),
    }
    .write())
}

/// The lowered body and the buffers around it.
struct Code {
    body: Vec<Line>,
    reads: Vec<Buf>,
    masks: Masks,
    stored: Buf,
}

fn lower<'v>(program: &Program, plan: &'v Plan) -> Result<(Lowering<'v>, Code), Error> {
    let shape = &plan.shape;
    let out_elem = program.array(shape.stmt.write.array).elem;
    // Lower the body once; the buffers' sizes come after, from the tile.
    let mut low = Lowering::new(&plan.vp);
    let entry = low.alloc(Kind::Mask);
    let reads: Vec<Buf> = shape
        .stmt
        .reads
        .iter()
        .map(|a| {
            let ty = Ty::of(program.array(a.array).elem).unwrap_or(Ty::F32);
            low.alloc(Kind::Lanes(ty))
        })
        .collect();
    let mut body = Vec::new();
    let leaf = |op: &Op| match op {
        Op::Read(r) => Ok(reads[*r]),
        _ => Err(not_yet(program, "iterator values in the statement")),
    };
    let result = low.variant(plan.variant, entry, &leaf, &mut body)?;
    let out_ty = Ty::of(out_elem).unwrap_or(Ty::F32);
    let stored = low.alloc(Kind::Lanes(out_ty));
    body.push(Line::Bin {
        op: "vor",
        ty: out_ty,
        dst: stored,
        a: result,
        b: result,
    });
    let zero = low.constant(Ty::F32, 0.0);
    let masks = Masks {
        entry,
        valid: low.alloc(Kind::Lanes(Ty::F32)),
        full: low.alloc(Kind::Mask),
        last: low.alloc(Kind::Mask),
        zero,
    };
    for arr in &program.arrays {
        let buffer_like = ["fv", "fs", "fb"].iter().any(|p| {
            arr.name
                .strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
        if buffer_like {
            return Err(not_yet(
                program,
                format!(
                    "the array name `{}` collides with the buffer names",
                    arr.name
                ),
            ));
        }
    }
    Ok((
        low,
        Code {
            body,
            reads,
            masks,
            stored,
        },
    ))
}

/// As many rows per tile as UB holds, but no more than spread the rows over the cores.
fn choose_tile(
    program: &Program,
    shape: &Shape,
    low: &Lowering,
    target: &NpuTarget,
) -> Result<Tile, Error> {
    // Rows start on 32-byte blocks in every buffer: 8 lanes of f32 / i32, 16 of f16.
    let half = std::iter::once(&shape.stmt.write)
        .chain(&shape.stmt.reads)
        .any(|a| program.array(a.array).elem == ScalarType::F16);
    let block = if half { 16 } else { 8 };
    let pitch = shape.width.div_ceil(block) * block;
    if pitch.div_ceil(LANES) > MAX_REPEATS {
        return Err(not_yet(
            program,
            format!(
                "rows of {} points (at most {})",
                shape.width,
                MAX_REPEATS * LANES
            ),
        ));
    }
    let n_lanes = low.kinds.iter().filter(|k| **k != Kind::Mask).count() as u64;
    let n_masks = low.kinds.len() as u64 - n_lanes;
    let fits = |t: &Tile| {
        n_lanes * t.lane_bytes() + n_masks * t.mask_bytes() + t.staging_bytes(&shape.loads)
            <= target.capacity(sim::isa::Mem::Ub)
    };
    // As many rows as fit, but no more than spread the rows over the cores.
    let spread = shape.rows.div_ceil(target.cores()).max(1);
    let mut rows = (MAX_REPEATS * LANES / pitch).min(spread).max(1);
    while rows > 1 && !fits(&Tile::of(rows, pitch)) {
        rows -= 1;
    }
    let tile = Tile::of(rows, pitch);
    if !fits(&tile) {
        return Err(Error::NoTiling {
            kernel: program.name.clone(),
            why: format!(
                "one row of {} lanes in {} buffers does not fit UB",
                pitch,
                low.kinds.len()
            ),
        });
    }
    Ok(tile)
}

/// The buffers of the entry masks.
struct Masks {
    entry: Buf,
    /// The lanes of a full tile, of the last tile.
    full: Buf,
    last: Buf,
    /// 1.0 in the lanes of a tile's points (f32), compared with `zero` into the masks.
    valid: Buf,
    zero: Buf,
}

struct Writer<'a> {
    program: &'a Program,
    shape: &'a Shape<'a>,
    tile: Tile,
    low: &'a Lowering<'a>,
    body: &'a [Line],
    reads: &'a [Buf],
    masks: Masks,
    stored: Buf,
    cores: u64,
}

/// Repeats of an instruction on `ty` over the lanes of `repeats` f32 / i32 repeats: an f16
/// repeat holds 128 lanes.
fn repeats_of(repeats: u64, ty: Ty) -> u64 {
    match ty {
        Ty::F16 => repeats.div_ceil(2),
        Ty::F32 | Ty::I32 => repeats,
    }
}

fn name(b: Buf) -> String {
    format!("fv{}", b.0)
}

impl Writer<'_> {
    fn read_array(&self, r: usize) -> (ArrayId, &str, Ty) {
        let a = self.shape.stmt.reads[r].array;
        let arr = self.program.array(a);
        (a, &arr.name, Ty::of(arr.elem).unwrap_or(Ty::F32))
    }

    fn write(&self) -> String {
        let program = self.program;
        let t = self.tile;
        let geo = t.geo;
        let (w, p) = (self.shape.width, t.pitch);
        let tiles = self.shape.rows.div_ceil(t.rows);
        let last_rows = self.shape.rows - (tiles - 1) * t.rows;
        let per_block = tiles.div_ceil(tiles.min(self.cores).max(1));
        let blockdim = tiles.div_ceil(per_block);
        let mut out: Vec<String> = Vec::new();
        out.push(format!(
            "// `{}` vectorised over `{}`: tiles of {} rows × {} lanes ({} repeats), {} tiles, {} per block",
            self.shape.stmt.name,
            self.shape.stmt.iterators.last().map_or("", |s| s.as_str()),
            t.rows,
            p,
            geo.repeats,
            tiles,
            per_block
        ));
        out.push(format!("kernel {} blockdim={blockdim}", program.name));
        let mut declared = Vec::new();
        let out_arr = self.shape.stmt.write.array;
        for (k, arr) in program.arrays.iter().enumerate() {
            let id = ArrayId(k as u32);
            let read = self.shape.stmt.reads.iter().any(|a| a.array == id);
            if !read && id != out_arr {
                continue;
            }
            let dims = crate::npu::gm_shape(program, id);
            let role = match (id == out_arr, arr.role) {
                (true, ArrayRole::InOut) => "inout",
                (true, ArrayRole::Output) => crate::npu::output_role(program, id),
                (true, _) => "out",
                _ => "in",
            };
            let ty = Ty::of(arr.elem).unwrap_or(Ty::F32);
            out.push(format!(
                "param {} : {}[{}] {role}",
                arr.name,
                ty.name(),
                dims
            ));
            declared.push(id);
        }
        for (k, kind) in self.low.kinds.iter().enumerate() {
            let bytes = match kind {
                Kind::Mask => t.mask_bytes(),
                Kind::Lanes(_) => t.lane_bytes(),
            };
            out.push(format!("buffer {} : UB, {bytes}", name(Buf(k))));
        }
        let row_repeats = p.div_ceil(LANES);
        for (r, l) in self.shape.loads.iter().enumerate() {
            match l {
                Load::Rows => {}
                Load::Column => {
                    out.push(format!("buffer fs{r} : UB, {}", row_repeats * VECTOR_BYTES))
                }
                Load::PerRow => {
                    out.push(format!("buffer fs{r} : UB, {}", t.rows.div_ceil(8) * 32));
                    out.push(format!(
                        "buffer fb{r} : UB, {}",
                        t.rows.div_ceil(8) * VECTOR_BYTES
                    ));
                }
                Load::Scalar(_) => {
                    out.push(format!("buffer fs{r} : UB, 32"));
                    out.push(format!("buffer fb{r} : UB, {VECTOR_BYTES}"));
                }
            }
        }

        // Once per block: the loads that are the same for every tile, the constants, the
        // entry masks.
        let once: Vec<usize> = (0..self.reads.len())
            .filter(|r| matches!(self.shape.loads[*r], Load::Column | Load::Scalar(_)))
            .collect();
        for &r in &once {
            let (_, arr, ty) = self.read_array(r);
            let eb = ty.bytes();
            let (off, bytes) = match self.shape.loads[r] {
                Load::Scalar(off) => (off * eb as i64, eb),
                _ => (0, w * eb),
            };
            out.push(format!(
                "copy_pad fs{r}[0], {arr}[{off}], n_burst=1, bytes={bytes}, src_stride={bytes}, dst_stride={}",
                bytes.div_ceil(32) * 32
            ));
        }
        if !once.is_empty() {
            out.push("set_flag MTE2, V, 5".into());
            out.push("wait_flag MTE2, V, 5".into());
        }
        for &r in &once {
            let (_, _, ty) = self.read_array(r);
            let dst = name(self.reads[r]);
            match self.shape.loads[r] {
                Load::Scalar(_) => {
                    out.push(format!("vbrcb.{} fb{r}[0], fs{r}[0], repeat=1", ty.name()));
                    out.push(format!(
                        "vor.{t} {dst}[0], fb{r}[0], fb{r}[0], repeat={}, blk=(1, 0, 0), rep=(8, 0, 0)",
                        repeats_of(geo.repeats, ty),
                        t = ty.name()
                    ));
                }
                _ => {
                    for row in 0..t.rows {
                        out.push(format!(
                            "vor.{t} {dst}[{}], fs{r}[0], fs{r}[0], repeat={}",
                            row * p * ty.bytes(),
                            repeats_of(row_repeats, ty),
                            t = ty.name()
                        ));
                    }
                }
            }
        }
        emit(&self.low.setup, geo, &name, 0, &mut out);
        self.entry_masks(&mut out, last_rows);
        out.push("set_flag V, MTE2, 0".into());
        out.push("set_flag MTE3, V, 2".into());
        out.push(format!("mul s1, block_idx, {per_block}"));
        out.push(format!("for k in 0..{per_block} {{"));
        out.push("    add s0, s1, k".into());
        if last_rows == t.rows {
            out.push(format!("    if s0 < {tiles} {{"));
            self.tile(&mut out, t.rows, self.masks.full, 2);
            out.push("    }".into());
        } else {
            out.push(format!("    if s0 < {} {{", tiles - 1));
            self.tile(&mut out, t.rows, self.masks.full, 2);
            out.push("    } else {".into());
            out.push(format!("        if s0 == {} {{", tiles - 1));
            self.tile(&mut out, last_rows, self.masks.last, 3);
            out.push("        }".into());
            out.push("    }".into());
        }
        out.push("}".into());
        out.push("wait_flag V, MTE2, 0".into());
        out.push("wait_flag MTE3, V, 2".into());
        let mut text = out.join("\n");
        text.push('\n');
        text
    }

    /// The masks of the lanes of a full tile's points and of the last tile's.
    fn entry_masks(&self, out: &mut Vec<String>, last_rows: u64) {
        let t = self.tile;
        let (w, p) = (self.shape.width, t.pitch);
        let valid = name(self.masks.valid);
        let zero = name(self.masks.zero);
        let r = t.geo.repeats;
        out.push(format!("vdup.f32 {valid}[0], 0.0, repeat={r}"));
        let (whole, tail) = (w / LANES, w % LANES);
        for row in 0..t.rows {
            if whole > 0 {
                out.push(format!(
                    "vdup.f32 {valid}[{}], 1.0, repeat={whole}",
                    row * p * 4
                ));
            }
        }
        if tail > 0 {
            out.push(format!("set_vector_mask 0x0, {:#x}", (1u64 << tail) - 1));
            for row in 0..t.rows {
                out.push(format!(
                    "vdup.f32 {valid}[{}], 1.0",
                    (row * p + whole * LANES) * 4
                ));
            }
            out.push("set_vector_mask 0xffffffffffffffff, 0xffffffffffffffff".into());
        }
        out.push(format!(
            "vcmp.gt.f32 {}[0], {valid}[0], {zero}[0], repeat={r}",
            name(self.masks.full)
        ));
        if last_rows < t.rows {
            let from = last_rows * p;
            out.push(format!(
                "vdup.f32 {valid}[{}], 0.0, repeat={}",
                from * 4,
                (r * LANES - from).div_ceil(LANES)
            ));
            out.push(format!(
                "vcmp.gt.f32 {}[0], {valid}[0], {zero}[0], repeat={r}",
                name(self.masks.last)
            ));
        }
    }

    /// One tile of `rows` rows, tile index in `s0`, entry mask `mask`.
    fn tile(&self, out: &mut Vec<String>, rows: u64, mask: Buf, indent: usize) {
        let t = self.tile;
        let geo = t.geo;
        let (w, p) = (self.shape.width, t.pitch);
        let pad = "    ".repeat(indent);
        let mut lines: Vec<String> = Vec::new();
        // The tile's first element in a 4-byte array (s2, s3 per row) and a 2-byte one (s4, s5).
        lines.push(format!("mul s2, s0, {}", t.rows * w * 4));
        lines.push(format!("mul s3, s0, {}", t.rows * 4));
        let half = std::iter::once(&self.shape.stmt.write)
            .chain(&self.shape.stmt.reads)
            .any(|a| self.program.array(a.array).elem == ScalarType::F16);
        if half {
            lines.push(format!("mul s4, s0, {}", t.rows * w * 2));
            lines.push(format!("mul s5, s0, {}", t.rows * 2));
        }
        lines.push("wait_flag V, MTE2, 0".into());
        for (r, l) in self.shape.loads.iter().enumerate() {
            let (_, arr, ty) = self.read_array(r);
            let eb = ty.bytes();
            let (at, at_row) = if eb == 2 { ("s4", "s5") } else { ("s2", "s3") };
            match l {
                Load::Rows => lines.push(format!(
                    "copy_pad {}[0], {arr}[{at}], n_burst={rows}, bytes={}, src_stride={}, dst_stride={}",
                    name(self.reads[r]),
                    w * eb,
                    w * eb,
                    p * eb
                )),
                Load::PerRow => lines.push(format!(
                    "copy_pad fs{r}[0], {arr}[{at_row}], n_burst=1, bytes={}, src_stride={}, dst_stride={}",
                    rows * eb,
                    rows * eb,
                    (rows * eb).div_ceil(32) * 32
                )),
                _ => {}
            }
        }
        lines.push("set_flag MTE2, V, 1".into());
        lines.push("wait_flag MTE2, V, 1".into());
        lines.push("wait_flag MTE3, V, 2".into());
        let row_repeats = p.div_ceil(LANES);
        for (r, l) in self.shape.loads.iter().enumerate() {
            if *l != Load::PerRow {
                continue;
            }
            let (_, _, ty) = self.read_array(r);
            let dst = name(self.reads[r]);
            lines.push(format!(
                "vbrcb.{} fb{r}[0], fs{r}[0], repeat={}",
                ty.name(),
                rows.div_ceil(8)
            ));
            for row in 0..rows {
                lines.push(format!(
                    "vor.{t} {dst}[{}], fb{r}[{}], fb{r}[{}], repeat={}, blk=(1, 0, 0), rep=(8, 0, 0)",
                    row * p * ty.bytes(),
                    row * 32,
                    row * 32,
                    repeats_of(row_repeats, ty),
                    t = ty.name()
                ));
            }
        }
        lines.push(format!(
            "vor.i32 {e}[0], {m}[0], {m}[0], repeat={}",
            geo.mask_repeats,
            e = name(self.masks.entry),
            m = name(mask)
        ));
        emit(self.body, geo, &name, 0, &mut lines);
        lines.push("set_flag V, MTE2, 0".into());
        lines.push("set_flag V, MTE3, 3".into());
        lines.push("wait_flag V, MTE3, 3".into());
        let result = self.program.array(self.shape.stmt.write.array);
        let eb = Ty::of(result.elem).map_or(4, Ty::bytes);
        lines.push(format!(
            "copy_pad {}[{}], {}[0], n_burst={rows}, bytes={}, src_stride={}, dst_stride={}",
            result.name,
            if eb == 2 { "s4" } else { "s2" },
            name(self.stored),
            w * eb,
            p * eb,
            w * eb
        ));
        lines.push("set_flag MTE3, V, 2".into());
        out.extend(lines.into_iter().map(|l| format!("{pad}{l}")));
    }
}

/// What the masked form does on the accelerator's tiles for the interpreter's random inputs
/// of `seed`: the branches on superword condition tested and the blocks they skipped, the
/// iterations of divergent loops and the lanes active in them. Counted by running the masked
/// form lane by lane ([`polyhedral::vectorize::exec`]) on the lanes of each tile as the
/// program lays them out, with the same entry masks, so the counts are the program's. Also
/// the lanes of a tile.
pub fn lane_stats(
    program: &Program,
    target: &NpuTarget,
    seed: u64,
) -> Result<(LaneStats, u64), Error> {
    let plan = plan(program)?;
    let (low, _) = lower(program, &plan)?;
    let tile = choose_tile(program, &plan.shape, &low, target)?;
    let shape = &plan.shape;
    let stmt = shape.stmt;
    let depth = stmt.depth();
    let params = program.param_values();
    let ext = program.array_extents(stmt.write.array);
    let inputs = interp::random_inputs(program, seed);
    let (w, p) = (shape.width as usize, tile.pitch as usize);
    let lanes = tile.geo.lanes() as usize;
    let mut stats = LaneStats::default();
    let mut first = 0u64;
    while first < shape.rows {
        let rows = tile.rows.min(shape.rows - first) as usize;
        // The iterators of the point in each lane, if it holds one.
        let points: Vec<Option<Vec<i64>>> = (0..lanes)
            .map(|l| {
                let (row, col) = (l / p, l % p);
                if row >= rows || col >= w {
                    return None;
                }
                let mut rest = first as i64 + row as i64;
                let mut it = vec![0i64; depth];
                it[depth - 1] = col as i64;
                for d in (0..depth - 1).rev() {
                    it[d] = rest % ext[d];
                    rest /= ext[d];
                }
                Some(it)
            })
            .collect();
        let mask: Vec<bool> = points.iter().map(Option::is_some).collect();
        let leaf = |op: &Op| -> Vec<f64> {
            points
                .iter()
                .map(|pt| match (op, pt) {
                    (Op::Read(r), Some(it)) => {
                        let a = &stmt.reads[*r];
                        let aext = program.array_extents(a.array);
                        let mut off = 0i64;
                        for (s, e) in a.subscripts.iter().zip(&aext) {
                            off = off * e + s.eval(it, &params);
                        }
                        inputs.array(a.array)[off as usize]
                    }
                    _ => 0.0,
                })
                .collect()
        };
        run_lanes_across_rows(&plan.vp, plan.variant, &mask, &leaf, &mut stats)
            .map_err(|e| not_yet(program, e))?;
        first += tile.rows;
    }
    Ok((stats, lanes as u64))
}
