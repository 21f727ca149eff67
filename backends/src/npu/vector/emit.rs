//! The `.npuasm` program of a kernel on the Vector unit: GM tensors, UB buffers, the scalar
//! prologue, then the stages in order (sequential loops around theirs), separated by
//! `sync_all` (`pipe_barrier ALL` on one block) so that a stage reads what the one before
//! wrote to GM, from any block, and reuses its UB.
//!
//! A stage, per block (`block_idx`): its run of tiles `s1 = block_idx·K … s1 + K − 1` (those
//! below the tile count), the per-column vectors and splats first, then
//!
//! | pipe | work per tile | waits for | then sets |
//! | --- | --- | --- | --- |
//! | MTE2 | the next tile's rows from GM into the other copy of the load buffers (issued before this tile's vector work, so the copy overlaps it) | V → MTE2: that copy is free | MTE2 → V |
//! | V | the operations | MTE2 → V; before the first write of a buffer MTE3 drains, MTE3 → V: its copy is free | V → MTE2 after the last read of a load buffer; V → MTE3 at the end |
//! | MTE3 | the live arrays' rows to GM | V → MTE3 | MTE3 → V |
//!
//! Each "copy is free" flag is set once per copy before the tiles and waited for once per copy
//! after them, so every wait has its set issued before it (in program order or as a pre-set)
//! and none is left over. The parity register `s7` picks the copy of the current tile; `s0` is
//! the tile, `s2` the next one. The last tile, when shorter, has its own instructions.

use std::fmt::Write;

use polyhedral::program::ArrayRole;
use polyhedral::Program;

use super::code::{distribution, Slot, StageCode};
use super::scalars::Scalars;
use super::stages::Step;

struct Writer {
    out: String,
    indent: usize,
}

impl Writer {
    fn line(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.out, "{}{}", "    ".repeat(self.indent), text.as_ref());
    }

    fn lines(&mut self, lines: Vec<String>) {
        for l in lines {
            self.line(l);
        }
    }

    fn open(&mut self, text: impl AsRef<str>) {
        self.line(format!("{} {{", text.as_ref()));
        self.indent += 1;
    }

    fn close(&mut self) {
        self.indent -= 1;
        self.line("}");
    }

    fn otherwise(&mut self) {
        self.indent -= 1;
        self.line("} else {");
        self.indent += 1;
    }
}

/// The whole program.
pub(crate) fn program(
    program: &Program,
    steps: &[Step],
    planned: &[StageCode],
    scalars: &Scalars,
    blockdim: u64,
) -> String {
    let mut w = Writer {
        out: String::new(),
        indent: 0,
    };
    let _ = writeln!(
        w.out,
        "// {}: {} stage(s) on the Vector unit, {blockdim} block(s)",
        program.name,
        planned.len()
    );
    for (k, c) in planned.iter().enumerate() {
        let names: Vec<&str> = c
            .stage
            .stmts
            .iter()
            .map(|s| program.statements[s.id.index()].name.as_str())
            .collect();
        let rows = (c.stage.rows.1 - c.stage.rows.0) as u64;
        let (tiles, per_block, blocks) = distribution(rows, c.tr, c.target.cores());
        let _ = writeln!(
            w.out,
            "// stage {k}: {} over rows {}..{}{}: {tiles} tile(s) of {} row(s), {per_block} per block on {blocks} block(s)",
            names.join(", "),
            c.stage.rows.0,
            c.stage.rows.1,
            c.stage
                .cols
                .map(|(a, b)| format!(", columns {a}..{b}"))
                .unwrap_or_default(),
            c.tr
        );
    }
    w.line(format!("kernel {} blockdim={blockdim}", program.name));
    for (i, arr) in program.arrays.iter().enumerate() {
        let id = polyhedral::program::ArrayId(i as u32);
        let used = scalars.inputs.iter().any(|(a, _)| *a == id)
            || planned.iter().any(|c| {
                let l = c.low;
                l.loads
                    .iter()
                    .chain(&l.stores)
                    .chain(&l.col_loads)
                    .any(|t| t.array == id)
            });
        if !used {
            continue;
        }
        let dims = crate::npu::gm_shape(program, id);
        let role = match arr.role {
            ArrayRole::Input => "in",
            ArrayRole::InOut => "inout",
            ArrayRole::Output => crate::npu::output_role(program, id),
            // Temporaries that cross stages through GM.
            _ => "out",
        };
        w.line(format!("param {} : f32[{}] {role}", arr.name, dims));
    }
    if !scalars.inputs.is_empty() {
        w.line(format!(
            "buffer ub_s : UB, {} @ 0",
            32 * scalars.inputs.len()
        ));
    }
    for c in planned {
        c.declarations(&mut w.out);
    }
    w.line("");
    scalar_prologue(&mut w, program, scalars);
    let multi = blockdim > 1;
    let barrier = if multi {
        "sync_all"
    } else {
        "pipe_barrier ALL"
    };
    let mut pending = false;
    let mut next = 0;
    for step in steps {
        match step {
            Step::Stage(_) => {
                if pending {
                    w.line(barrier);
                }
                stage(&mut w, next, &planned[next]);
                next += 1;
                pending = true;
            }
            Step::Loop { trips, body } => {
                if pending {
                    w.line(barrier);
                }
                w.open(format!("for t in 0..{trips}"));
                for (i, _) in body.iter().enumerate() {
                    if i > 0 {
                        w.line(barrier);
                    }
                    stage(&mut w, next, &planned[next]);
                    next += 1;
                }
                w.line(barrier);
                w.close();
                pending = false;
            }
        }
    }
    w.out
}

/// Scalar inputs into registers, then the scalar arithmetic.
fn scalar_prologue(w: &mut Writer, program: &Program, scalars: &Scalars) {
    if !scalars.inputs.is_empty() {
        w.line("// Scalars into registers.");
        for (i, (a, _)) in scalars.inputs.iter().enumerate() {
            w.line(format!(
                "copy ub_s[{}], {}[0], len=1",
                32 * i,
                program.array(*a).name
            ));
        }
        w.line("set_flag MTE2, S, 0");
        w.line("wait_flag MTE2, S, 0");
        for (i, (_, r)) in scalars.inputs.iter().enumerate() {
            w.line(format!("ld.f32 f{r}, ub_s[{}]", 32 * i));
        }
    }
    for op in &scalars.ops {
        w.line(format!(
            "{} f{}, {}, {}",
            op.op,
            op.dst,
            op.a.text(),
            op.b.text()
        ));
    }
}

/// Emits `body(rows)` for the full tiles and for the last one when it is shorter.
fn per_tile(w: &mut Writer, c: &StageCode, reg: &str, body: &dyn Fn(&mut Writer, u64)) {
    let rows = (c.stage.rows.1 - c.stage.rows.0) as u64;
    let tiles = rows.div_ceil(c.tr);
    let tail = rows - (tiles - 1) * c.tr;
    if tail == c.tr {
        body(w, c.tr);
    } else if tiles == 1 {
        body(w, tail);
    } else {
        w.open(format!("if {reg} == {}", tiles - 1));
        body(w, tail);
        w.otherwise();
        body(w, c.tr);
        w.close();
    }
}

fn stage(w: &mut Writer, index: usize, c: &StageCode) {
    let low = c.low;
    let rows = (c.stage.rows.1 - c.stage.rows.0) as u64;
    let (tiles, per_block, _) = distribution(rows, c.tr, c.target.cores());
    let copies = if c.double { 2 } else { 1 };
    let has_loads = !low.loads.is_empty();
    w.line(format!("// Stage {index}."));
    if !low.col_loads.is_empty() {
        let mut lines = Vec::new();
        for t in &low.col_loads {
            c.transfer(t, c.tr, "s0", Slot::Cur, false, &mut lines);
        }
        w.lines(lines);
        w.line("set_flag MTE2, V, 1");
        w.line("wait_flag MTE2, V, 1");
    }
    let mut lines = Vec::new();
    for op in &low.prologue {
        c.vop(op, c.tr, &mut lines);
    }
    w.lines(lines);
    w.line(format!("mul s1, block_idx, {per_block}"));
    if c.double {
        w.line("mov s7, 0");
    }
    for _ in 0..copies {
        if has_loads {
            w.line("set_flag V, MTE2, 0");
        }
        w.line("set_flag MTE3, V, 0");
    }
    let loads = |w: &mut Writer, reg: &str, slot: Slot| {
        per_tile(w, c, reg, &|w, n| {
            let mut lines = vec!["wait_flag V, MTE2, 0".to_string()];
            for t in &low.loads {
                c.transfer(t, n, reg, slot, false, &mut lines);
            }
            lines.push("set_flag MTE2, V, 0".into());
            w.lines(lines);
        });
    };
    if has_loads {
        w.open(format!("if s1 < {tiles}"));
        w.line("mov s0, s1");
        loads(w, "s0", Slot::Cur);
        w.close();
    }
    let last_read = low.last_load_read();
    let first_write = low.first_store_write();
    w.open(format!("for k in 0..{per_block}"));
    w.line("add s0, s1, k");
    w.open(format!("if s0 < {tiles}"));
    if has_loads && per_block > 1 {
        w.line("add s2, s0, 1");
        w.open(format!("if k < {}", per_block - 1));
        w.open(format!("if s2 < {tiles}"));
        loads(w, "s2", Slot::Next);
        w.close();
        w.close();
    }
    per_tile(w, c, "s0", &|w, n| {
        let mut lines = Vec::new();
        if has_loads {
            lines.push("wait_flag MTE2, V, 0".to_string());
        }
        for (i, op) in low.ops.iter().enumerate() {
            if Some(i) == first_write {
                lines.push("wait_flag MTE3, V, 0".into());
            }
            c.vop(op, n, &mut lines);
            if has_loads && Some(i) == last_read {
                lines.push("set_flag V, MTE2, 0".into());
            }
        }
        if first_write.is_none() {
            lines.push("wait_flag MTE3, V, 0".into());
        }
        if has_loads && last_read.is_none() {
            lines.push("set_flag V, MTE2, 0".into());
        }
        lines.push("set_flag V, MTE3, 0".into());
        lines.push("wait_flag V, MTE3, 0".into());
        for t in &low.stores {
            c.transfer(t, n, "s0", Slot::Cur, true, &mut lines);
        }
        lines.push("set_flag MTE3, V, 0".into());
        w.lines(lines);
    });
    if c.double {
        w.line("sub s7, 1, s7");
    }
    w.close();
    w.close();
    for _ in 0..copies {
        if has_loads {
            w.line("wait_flag V, MTE2, 0");
        }
        w.line("wait_flag MTE3, V, 0");
    }
}
