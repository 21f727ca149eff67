//! The on-chip buffers of a Cube program: L1 slots for streamed, resident and windowed
//! operands and the panels stages hand on, the L0 buffers, and the UB tiles, vectors and
//! scalars of the epilogue, each declared once at the largest size a run needs.

use super::copies::piece;
use super::cube::{round16, window_slot, Emitter, Fill, Run};
use super::tiles::Role;

impl Emitter<'_> {
    /// Declares the program's on-chip buffers, each sized for the largest use any run makes
    /// of it (double buffering and the L1 ring counted).
    pub(crate) fn buffers(&mut self, runs: &[Run]) {
        let es = self.es;
        let nbuf = self.t.nbuf;
        let lt = self.t.last();
        let group = self.t.ntb * lt.tn;
        let kp_last = self.kp(self.plan.stages.len() - 1);
        let mut a_l1 = 0;
        let mut b_l1 = 0;
        let (mut l0a, mut l0b, mut l0c, mut drain) = (0, 0, 0, 0);
        let mut panels = Vec::new();
        for r in runs {
            let t = r.tiles;
            let ko: u64 = self.plan.stages[r.stage]
                .k_outer
                .iter()
                .map(|c| c.extent)
                .product();
            let kp_all = self.kp(r.stage) * ko;
            match r.a.fill {
                Fill::Stream => a_l1 = a_l1.max(t.tm * t.tk * es * self.t.nl1),
                Fill::Resident => a_l1 = a_l1.max(self.region_other(r, true) * kp_all * es),
                Fill::Panel if r.a.view.buf.starts_with("l1_s") => panels.push((
                    r.a.view.buf.clone(),
                    self.region_other(r, true) * kp_all * 4,
                )),
                Fill::Panel | Fill::Window(..) => {}
            }
            match r.b.fill {
                Fill::Stream => b_l1 = b_l1.max(t.tk * t.tn * es * self.t.nl1),
                Fill::Window(w, _) => {
                    b_l1 = b_l1.max(match w.slide {
                        Some((s, ob)) => s.bytes(ob, es),
                        None => window_slot(&self.plan.stages[r.stage], t, &w) * nbuf,
                    })
                }
                Fill::Panel if r.b.view.buf.starts_with("l1_s") => panels.push((
                    r.b.view.buf.clone(),
                    self.region_other(r, false) * kp_all * 4,
                )),
                _ => {}
            }
            if let Some(p) = &r.sink {
                let bytes = match r.role {
                    Role::FeedsA => lt.tm * kp_last * 4,
                    _ => kp_last * group * 4,
                };
                panels.push((p.clone(), bytes));
            }
            l0a = l0a.max(if r.a_l0 {
                t.tm * kp_all * es
            } else {
                t.tm * t.tk * es * nbuf
            });
            l0b = l0b.max(t.tk * t.tn * es * nbuf);
            l0c = l0c.max(t.tm * t.tn * 4 * nbuf);
            drain = drain.max(t.tm * t.tn * 4 * nbuf);
        }
        if a_l1 > 0 {
            self.line(format!("buffer l1_a : L1, {a_l1}"));
        }
        if b_l1 > 0 {
            self.line(format!("buffer l1_b : L1, {b_l1}"));
        }
        for (name, bytes) in panels {
            self.line(format!("buffer {name} : L1, {bytes}"));
        }
        self.line(format!("buffer l0a : L0A, {l0a}"));
        self.line(format!("buffer l0b : L0B, {l0b}"));
        self.line(format!("buffer l0c : L0C, {l0c}"));
        let tile = lt.tm * lt.tn * 4 * nbuf;
        self.line(format!("buffer ub_t0 : UB, {drain}"));
        for i in 1..self.ep.after.count {
            self.line(format!("buffer ub_t{i} : UB, {tile}"));
        }
        if let Some(b) = &self.ep.before {
            for i in 0..b.count {
                self.line(format!("buffer ub_i{i} : UB, {tile}"));
            }
        }
        for i in 0..self.ep.columns.len() {
            self.line(format!("buffer ub_c{i} : UB, {}", group * 4));
        }
        for i in 0..self.ep.row_vectors {
            self.line(format!("buffer ub_r{i} : UB, {}", lt.tm * lt.tn * 4));
        }
        for i in 0..self.ep.rows.len() {
            self.line(format!("buffer ub_rs{i} : UB, {}", round16(lt.tm) * 4));
        }
        if !self.ep.scalars.is_empty() {
            self.line(format!("buffer ub_s : UB, {}", 32 * self.ep.scalars.len()));
        }
        if runs
            .iter()
            .any(|r| r.a.view.buf.starts_with("l1_s") || r.b.view.buf.starts_with("l1_s"))
        {
            self.line(format!("buffer ub_v : UB, {}", 2 * self.piece_bytes(runs)));
        }
    }

    /// Bytes of one UB buffer a scaled operand streams through: whole chunks of its held rows.
    fn piece_bytes(&self, runs: &[Run]) -> u64 {
        runs.iter()
            .flat_map(|r| [&r.a, &r.b])
            .filter(|o| o.view.buf.starts_with("l1_s"))
            .map(|o| piece(o.view.held).1)
            .max()
            .unwrap_or(0)
    }
}
