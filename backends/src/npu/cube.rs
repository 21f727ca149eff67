//! The program of a matrix product with its element-wise epilogue: GM → L1 → L0A/L0B → Cube →
//! L0C → UB → Vector → GM, tiled, double-buffered and spread over the cores.
//!
//! Block `b` (= `block_idx`) computes row panel `b / ng` (`tm` rows) and column group
//! `b mod ng` (`ntb` tiles of `tn` columns). For each column tile `nt` and reduction step `kt`:
//!
//! | pipe | work | waits for | then sets |
//! | --- | --- | --- | --- |
//! | MTE2 | A's k-slice (unless resident and `nt > 0`) and B's tile into L1, one 32-byte block per row per 16 columns, which is fractal order | MTE1 → MTE2 1: the L1 slot is free | MTE2 → MTE1 0 |
//! | MTE1 | `load2d` A into L0A (zZ) and B into L0B (zN, `transpose`) | MTE2 → MTE1 0; M → MTE1 1: the L0 slot is free | MTE1 → MTE2 1, MTE1 → M 0 |
//! | M | `mmad` (`init` at `kt = 0`) | MTE1 → M 0; at `kt = 0` V → M 0: the L0C slot is free | M → MTE1 1; after the last step M → V 0 |
//!
//! and after the last step of `nt`: V waits M → V 0 and MTE3 → V 0 (the UB slot is free),
//! moves L0C to UB (`copy_cc_to_ub`), sets V → M 0, runs the epilogue and sets V → MTE3 0;
//! MTE3 waits for it, writes the live-out tiles to GM and sets MTE3 → V 0. Every "slot is free"
//! flag is set once per buffer before the loops (twice when double-buffered: ping-pong slots
//! chosen by the parity registers `s6` for steps and `s7` for column tiles) and waited for once
//! per buffer after them, so every wait has its set issued before it and none is left over.

use std::fmt::Write;

use polyhedral::program::{ArrayId, ArrayRole, ScalarType};
use polyhedral::Program;

use super::epilogue::{self, Epilogue, Op, Operand};
use super::plan::Plan;
use super::tiles::{self, Tiles, UbNeeds};
use super::{Error, NpuTarget, Options, FRACTAL, VECTOR_BYTES};

/// Element type names of the GM tensors.
fn gm_type(ty: ScalarType) -> &'static str {
    match ty {
        ScalarType::F16 => "f16",
        _ => "f32",
    }
}

/// Writes the whole program.
pub(crate) fn write(
    program: &Program,
    plan: &Plan,
    target: &NpuTarget,
    options: &Options,
) -> Result<String, Error> {
    let ep = epilogue::lower(program, plan)?;
    let needs = UbNeeds {
        tiles: ep.tiles as u64,
        columns: ep.columns.len() as u64,
        scalar_bytes: 32 * ep.scalars.len() as u64,
    };
    // The tiles are chosen for double buffering even when it is off, so that the two compare
    // on the same tiling; a single-buffered search is the fallback when no double-buffered
    // tiling fits.
    let sizes = (plan.m, plan.n, plan.k);
    let t = match tiles::choose(target, sizes, needs, true, options.max_tile) {
        Ok(t) if options.double_buffer => t,
        Ok(t) => Tiles { nbuf: 1, ..t },
        Err(_) => tiles::choose(target, sizes, needs, false, options.max_tile).map_err(|why| {
            Error::NoTiling {
                kernel: program.name.clone(),
                why,
            }
        })?,
    };
    let w = Emitter {
        program,
        plan,
        ep: &ep,
        t,
        out: String::new(),
        indent: 0,
    };
    w.program()
}

struct Emitter<'a> {
    program: &'a Program,
    plan: &'a Plan,
    ep: &'a Epilogue,
    t: Tiles,
    out: String,
    indent: usize,
}

const RESERVED: [&str; 8] = ["l1_a", "l1_b", "l0a", "l0b", "l0c", "ub_s", "ub_c", "ub_t"];

impl Emitter<'_> {
    fn line(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.out, "{}{}", "    ".repeat(self.indent), text.as_ref());
    }

    fn open(&mut self, text: impl AsRef<str>) {
        self.line(format!("{} {{", text.as_ref()));
        self.indent += 1;
    }

    fn close(&mut self) {
        self.indent -= 1;
        self.line("}");
    }

    fn name(&self, a: ArrayId) -> &str {
        &self.program.array(a).name
    }

    /// `reg*size` when double-buffered, nothing otherwise.
    fn slot(&self, reg: &str, size: u64) -> String {
        if self.t.nbuf == 2 {
            format!("{reg}*{size} + ")
        } else {
            String::new()
        }
    }

    fn program(mut self) -> Result<String, Error> {
        let Tiles {
            tm,
            tn,
            tk,
            ntb,
            ng,
            nbuf,
            ..
        } = self.t;
        let (m, n, k) = (self.plan.m, self.plan.n, self.plan.k);
        let mt = self.t.mt(m);
        for arr in &self.program.arrays {
            if RESERVED.iter().any(|r| arr.name.starts_with(r)) {
                return Err(Error::NotYet(format!(
                    "the array name `{}` collides with the program's buffer names",
                    arr.name
                )));
            }
        }
        let _ = writeln!(
            self.out,
            "// {}: {m}×{n}×{k} on the Cube, tiles {tm}×{tn}×{tk}, {} blocks ({mt} row panels × {ng} column groups of {ntb} tiles), {}, A's row panel {} L1",
            self.program.name,
            mt * ng,
            if nbuf == 2 { "double-buffered" } else { "single-buffered" },
            if self.t.a_resident { "resident in" } else { "streamed through" },
        );
        self.line("// GM: every array row-major as given; the layouts change on chip.");
        self.line(format!("kernel {} blockdim={}", self.program.name, mt * ng));
        for (i, arr) in self.program.arrays.iter().enumerate() {
            let id = ArrayId(i as u32);
            if arr.role == ArrayRole::Temporary {
                continue;
            }
            let held = self.plan.holding.get(&id);
            if held.is_none() {
                continue;
            }
            let shape = self.program.array_extents(id);
            let dims: Vec<String> = if shape.is_empty() {
                vec!["1".into()]
            } else {
                shape.iter().map(|d| d.to_string()).collect()
            };
            let role = match arr.role {
                ArrayRole::Input => "in",
                ArrayRole::Output => "out",
                _ => "inout",
            };
            self.line(format!(
                "param {} : {}[{}] {role}",
                arr.name,
                gm_type(arr.elem),
                dims.join(", ")
            ));
        }
        let a_l1 = if self.t.a_resident {
            tm * k * 2
        } else {
            tm * tk * 2 * nbuf
        };
        let c_tile = tm * tn * 4;
        self.line(format!("buffer l1_a : L1, {a_l1}"));
        self.line(format!("buffer l1_b : L1, {}", tk * tn * 2 * nbuf));
        self.line(format!("buffer l0a : L0A, {}", tm * tk * 2 * nbuf));
        self.line(format!("buffer l0b : L0B, {}", tk * tn * 2 * nbuf));
        self.line(format!("buffer l0c : L0C, {}", c_tile * nbuf));
        for i in 0..self.ep.tiles {
            self.line(format!("buffer ub_t{i} : UB, {}", c_tile * nbuf));
        }
        for i in 0..self.ep.columns.len() {
            self.line(format!("buffer ub_c{i} : UB, {}", ntb * tn * 4));
        }
        if !self.ep.scalars.is_empty() {
            self.line(format!("buffer ub_s : UB, {}", 32 * self.ep.scalars.len()));
        }
        self.line("");
        self.line("// Block coordinates: s0 row panel, s1 column group; byte offsets in GM.");
        self.line(format!("div s0, block_idx, {ng}"));
        self.line(format!("mul s1, s0, {ng}"));
        self.line("sub s1, block_idx, s1");
        self.line(format!("mul s2, s0, {}", tm * k * 2));
        self.line(format!("mul s3, s1, {}", ntb * tn * 2));
        self.line(format!("mul s4, s0, {}", tm * n * 4));
        self.line(format!("mul s5, s1, {}", ntb * tn * 4));
        self.line("add s4, s4, s5");
        self.line("mov s6, 0");
        self.line("mov s7, 0");
        if !self.ep.scalars.is_empty() {
            self.line("// Scalars into registers.");
            for (i, &(a, _)) in self.ep.scalars.iter().enumerate() {
                let name = self.name(a).to_string();
                self.line(format!("copy ub_s[{}], {name}[0], len=1", 32 * i));
            }
            self.line("set_flag MTE2, S, 0");
            self.line("wait_flag MTE2, S, 0");
            for (i, &(a, r)) in self.ep.scalars.iter().enumerate() {
                let ty = gm_type(self.program.array(a).elem);
                self.line(format!("ld.{ty} f{r}, ub_s[{}]", 32 * i));
            }
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
        if !self.ep.columns.is_empty() {
            self.line("// Per-column vectors of this column group into UB.");
            for (i, &a) in self.ep.columns.iter().enumerate() {
                let name = self.name(a).to_string();
                self.line(format!(
                    "copy ub_c{i}[0], {name}[s5], len={}",
                    ntb * tn * 4 / 32
                ));
            }
            self.line("set_flag MTE2, V, 1");
            self.line("wait_flag MTE2, V, 1");
        }
        self.line("// Every slot starts free.");
        for _ in 0..nbuf {
            self.line("set_flag MTE1, MTE2, 1");
            self.line("set_flag M, MTE1, 1");
            self.line("set_flag V, M, 0");
            self.line("set_flag MTE3, V, 0");
        }
        let kt_n = k / tk;
        self.open(format!("for nt in 0..{ntb}"));
        self.open(format!("for kt in 0..{kt_n}"));
        self.step(mt);
        self.close();
        self.line("set_flag M, V, 0");
        self.drain(mt);
        if nbuf == 2 {
            self.line("sub s7, 1, s7");
        }
        self.close();
        for _ in 0..nbuf {
            self.line("wait_flag MTE1, MTE2, 1");
            self.line("wait_flag M, MTE1, 1");
            self.line("wait_flag V, M, 0");
            self.line("wait_flag MTE3, V, 0");
        }
        Ok(self.out)
    }

    /// Rows of the last row panel, when it is short.
    fn tail(&self, mt: u64) -> Option<u64> {
        let rows = self.plan.m - (mt - 1) * self.t.tm;
        (rows != self.t.tm).then_some(rows)
    }

    /// Emits `body(rows)` for full panels and for the short last one.
    fn per_panel(&mut self, mt: u64, body: impl Fn(&mut Self, u64)) {
        match self.tail(mt) {
            None => body(self, self.t.tm),
            Some(rows) if mt == 1 => body(self, rows),
            Some(rows) => {
                self.open(format!("if s0 == {}", mt - 1));
                body(self, rows);
                self.indent -= 1;
                self.line("} else {");
                self.indent += 1;
                body(self, self.t.tm);
                self.close();
            }
        }
    }

    /// One reduction step of one column tile.
    fn step(&mut self, mt: u64) {
        let Tiles { tm, tn, tk, .. } = self.t;
        let (n, k) = (self.plan.n, self.plan.k);
        let (a, b) = (
            self.name(self.plan.a).to_string(),
            self.name(self.plan.b).to_string(),
        );
        let f = |x: u64| x / FRACTAL;
        let a_slot = tm * tk * 2;
        let b_slot = tk * tn * 2;
        let l1_a_base = if self.t.a_resident {
            format!("kt*{a_slot} + ")
        } else {
            self.slot("s6", a_slot)
        };
        // MTE2: operands into L1 in fractal order.
        self.line("wait_flag MTE1, MTE2, 1");
        let copy_a = |e: &mut Self, rows: u64| {
            e.open(format!("for j in 0..{}", f(tk)));
            e.line(format!(
                "copy l1_a[{l1_a_base}j*{}], {a}[s2 + kt*{} + j*32], n_burst={rows}, len=1, src_gap={}",
                tm * 32,
                tk * 2,
                f(k) - 1
            ));
            e.close();
        };
        if self.t.a_resident {
            self.open("if nt == 0");
            self.per_panel(mt, copy_a);
            self.close();
        } else {
            self.per_panel(mt, copy_a);
        }
        let b_base = self.slot("s6", b_slot);
        self.open(format!("for j in 0..{}", f(tn)));
        self.line(format!(
            "copy l1_b[{b_base}j*{}], {b}[s3 + nt*{} + kt*{} + j*32], n_burst={tk}, len=1, src_gap={}",
            tk * 32,
            tn * 2,
            tk * n * 2,
            f(n) - 1
        ));
        self.close();
        self.line("set_flag MTE2, MTE1, 0");
        // MTE1: fractals into L0A (zZ) and L0B (zN).
        self.line("wait_flag MTE2, MTE1, 0");
        self.line("wait_flag M, MTE1, 1");
        let l0a = self.slot("s6", a_slot);
        let l0b = self.slot("s6", b_slot);
        self.open(format!("for m1 in 0..{}", f(tm)));
        self.line(format!(
            "load2d l0a[{l0a}m1*{}], l1_a[{l1_a_base}m1*512], repeat={}, src_stride={}",
            f(tk) * 512,
            f(tk),
            f(tm)
        ));
        self.close();
        self.open(format!("for k1 in 0..{}", f(tk)));
        self.line(format!(
            "load2d l0b[{l0b}k1*{}], l1_b[{b_base}k1*512], repeat={}, src_stride={}, transpose",
            f(tn) * 512,
            f(tn),
            f(tk)
        ));
        self.close();
        self.line("set_flag MTE1, MTE2, 1");
        self.line("set_flag MTE1, M, 0");
        // M: the Cube.
        self.line("wait_flag MTE1, M, 0");
        let l0c = self.slot("s7", tm * tn * 4);
        let mmad = |mode: &str| {
            format!(
                "mmad.f32 l0c[{l0c}0], l0a[{l0a}0], l0b[{l0b}0], m={tm}, k={tk}, n={tn}, {mode}"
            )
        };
        self.open("if kt == 0");
        self.line("wait_flag V, M, 0");
        self.line(mmad("init"));
        self.indent -= 1;
        self.line("} else {");
        self.indent += 1;
        self.line(mmad("acc"));
        self.close();
        self.line("set_flag M, MTE1, 1");
        if self.t.nbuf == 2 {
            self.line("sub s6, 1, s6");
        }
    }

    /// The finished column tile: L0C → UB, the epilogue, UB → GM.
    fn drain(&mut self, mt: u64) {
        let Tiles { tm, tn, .. } = self.t;
        let c_tile = tm * tn * 4;
        let ub = self.slot("s7", c_tile);
        self.line("wait_flag M, V, 0");
        self.line("wait_flag MTE3, V, 0");
        let l0c = self.slot("s7", c_tile);
        self.line(format!(
            "copy_cc_to_ub ub_t0[{ub}0], l0c[{l0c}0], len={}",
            (tm / FRACTAL) * (tn / FRACTAL)
        ));
        self.line("set_flag V, M, 0");
        for op in &self.ep.ops.clone() {
            self.vector_op(op, &ub);
        }
        self.line("set_flag V, MTE3, 0");
        self.line("wait_flag V, MTE3, 0");
        let n = self.plan.n;
        for &(a, tile) in &self.ep.outputs.clone() {
            let name = self.name(a).to_string();
            let es = if self.program.array(a).elem == ScalarType::F16 {
                2
            } else {
                4
            };
            let ub = ub.clone();
            self.per_panel(mt, move |e, rows| {
                e.open(format!("for n1 in 0..{}", tn / FRACTAL));
                e.line(format!(
                    "copy {name}[s4 + nt*{} + n1*{}], ub_t{tile}[{ub}n1*{}], n_burst={rows}, len={}, dst_gap={}",
                    tn * es,
                    16 * es,
                    tm * 16 * es,
                    16 * es / 32,
                    (n - 16) * es / 32
                ));
                e.close();
            });
        }
        self.line("set_flag MTE3, V, 0");
    }

    /// One epilogue operation over the whole tile of the current slot.
    fn vector_op(&mut self, op: &Op, ub: &str) {
        let Tiles { tm, tn, .. } = self.t;
        let repeats = tm * tn * 4 / VECTOR_BYTES;
        let tile = |i: usize| format!("ub_t{i}[{ub}");
        // Whole-tile operations in chunks of at most 255 repeats.
        let whole = |e: &mut Self, text: &dyn Fn(&str) -> String| {
            let mut done = 0;
            while done < repeats {
                let r = (repeats - done).min(255);
                let off = format!("{}]", done * VECTOR_BYTES);
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
            } => whole(self, &|off| {
                format!(
                    "{op}.f32 {}{off}, {}{off}, {}",
                    tile(dst),
                    tile(src),
                    scalar.text()
                )
            }),
            Op::Dup { dst, scalar } => whole(self, &|off| {
                format!("vdup.f32 {}{off}, {}", tile(dst), scalar.text())
            }),
            Op::Unary { op, dst, src } => whole(self, &|off| {
                format!("{op}.f32 {}{off}, {}{off}", tile(dst), tile(src))
            }),
            Op::Binary {
                op,
                dst,
                a: Operand::Tile(x),
                b: Operand::Tile(y),
            } => whole(self, &|off| {
                format!(
                    "{op}.f32 {}{off}, {}{off}, {}{off}",
                    tile(dst),
                    tile(x),
                    tile(y)
                )
            }),
            Op::Binary { op, dst, a, b } => {
                // A column vector broadcast down the rows: per 16-column block, the 8 left and
                // the 8 right columns of every row (block stride 2 on the tile, 0 on the vector).
                let operand = |o: Operand, h: u64| match o {
                    Operand::Tile(i) => {
                        (format!("{}n1*{} + {}]", tile(i), tm * 64, h * 32), (2, 16))
                    }
                    Operand::Column(c) => (
                        format!("ub_c{c}[nt*{} + n1*64 + {}]", tn * 4, h * 32),
                        (0, 0),
                    ),
                };
                self.open(format!("for n1 in 0..{}", tn / FRACTAL));
                for h in 0..2 {
                    let (d, _) = operand(Operand::Tile(dst), h);
                    let (x, (bx, rx)) = operand(a, h);
                    let (y, (by, ry)) = operand(b, h);
                    self.line(format!(
                        "{op}.f32 {d}, {x}, {y}, repeat={}, blk=(2, {bx}, {by}), rep=(16, {rx}, {ry})",
                        tm / 8
                    ));
                }
                self.close();
            }
        }
    }
}
