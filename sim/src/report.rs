//! What a simulation reports: cycles, per-pipe utilization, cube utilization, per-memory peak
//! usage, bytes per path, GM traffic, output checksums; as text, as stable JSON and as an SVG
//! timeline.
//!
//! The JSON field order is the struct order below and maps are sorted, so equal runs give
//! byte-equal JSON.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::assemble::Kernel;
use crate::isa::{CopyPath, Mem, Pipe};
use crate::Tensor;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PipeStat {
    pub pipe: String,
    pub busy_cycles: u64,
    pub utilization: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MemStat {
    pub memory: String,
    pub capacity: u64,
    pub declared: u64,
    pub peak: u64,
    pub percent: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct OutputSummary {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    /// Sum of all elements (as f64).
    pub sum: f64,
    /// FNV-1a over the elements' little-endian bytes.
    pub checksum: String,
    pub samples: Vec<f64>,
}

/// The report of one simulation.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    pub kernel: String,
    pub machine: String,
    pub blocks: u32,
    pub cores_used: usize,
    pub cycles: u64,
    pub instructions: u64,
    /// Statement instances the program computed on the scalar unit (as its `tally`
    /// annotations count them).
    pub scalar_instances: u64,
    pub pipes: Vec<PipeStat>,
    pub cube_fractal_macs: u64,
    pub cube_utilization: f64,
    pub memories: Vec<MemStat>,
    pub path_bytes: BTreeMap<String, u64>,
    pub gm_read_bytes: u64,
    pub gm_written_bytes: u64,
    pub warnings: Vec<String>,
    pub outputs: Vec<OutputSummary>,
}

/// Peak and step curve of one memory's occupancy on one core.
#[derive(Clone, Debug)]
pub struct Occupancy {
    pub core: usize,
    pub mem: Mem,
    pub peak: u64,
    /// (cycle, bytes in use from this cycle on).
    pub steps: Vec<(u64, u64)>,
}

/// Busy intervals of core 0's pipes and its buffer occupancy.
#[derive(Clone, Debug)]
pub struct Timeline {
    pub pipes: Vec<Vec<(u64, u64)>>,
    pub occupancy: Vec<Occupancy>,
    pub end: u64,
}

fn round4(x: f64) -> f64 {
    (x * 10000.0).round() / 10000.0
}

/// Sum, checksum and first values of every output tensor.
fn summaries(outputs: &BTreeMap<String, Tensor>) -> Vec<OutputSummary> {
    outputs
        .iter()
        .map(|(name, t)| OutputSummary {
            name: name.clone(),
            dtype: t.dtype.name().to_string(),
            shape: t.shape.clone(),
            sum: t.data.iter().sum(),
            checksum: checksum(t),
            samples: t.data.iter().take(4).copied().collect(),
        })
        .collect()
}

fn checksum(t: &Tensor) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for v in &t.data {
        let bytes: Vec<u8> = match t.dtype {
            crate::isa::DType::F16 => half::f16::from_f64(*v).to_bits().to_le_bytes().to_vec(),
            crate::isa::DType::F32 => (*v as f32).to_le_bytes().to_vec(),
            crate::isa::DType::I32 => (*v as i32).to_le_bytes().to_vec(),
        };
        for b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    format!("{h:016x}")
}

impl Report {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build(
        k: &Kernel,
        cores_used: usize,
        cycles: u64,
        (instructions, scalar_instances): (u64, u64),
        busy: [u64; Pipe::COUNT],
        fractal_macs: u64,
        path_bytes: [u64; CopyPath::COUNT],
        (gm_read, gm_written): (u64, u64),
        occupancy: &[Occupancy],
        warnings: Vec<String>,
        outputs: &BTreeMap<String, Tensor>,
    ) -> Report {
        let denom = (cycles.max(1) * cores_used as u64) as f64;
        let pipes = Pipe::ALL
            .iter()
            .map(|p| PipeStat {
                pipe: p.name().to_string(),
                busy_cycles: busy[*p as usize],
                utilization: round4(busy[*p as usize] as f64 / denom),
            })
            .collect();
        let memories = Mem::ALL
            .iter()
            .filter(|m| **m != Mem::Gm)
            .map(|m| {
                let cap = k.machine.mem(*m).capacity;
                let peak = occupancy
                    .iter()
                    .filter(|o| o.mem == *m)
                    .map(|o| o.peak)
                    .max()
                    .unwrap_or(0);
                let declared = k.bufs.iter().filter(|b| b.mem == *m).map(|b| b.size).sum();
                MemStat {
                    memory: m.name().to_string(),
                    capacity: cap,
                    declared,
                    peak,
                    percent: round4(100.0 * peak as f64 / cap.max(1) as f64),
                }
            })
            .collect();
        let path_bytes = CopyPath::ALL
            .iter()
            .map(|p| (p.name(), path_bytes[*p as usize]))
            .collect();
        let outputs = summaries(outputs);
        Report {
            kernel: k.program.name.clone(),
            machine: k.machine.name.clone(),
            blocks: k.program.blockdim,
            cores_used,
            cycles,
            instructions,
            scalar_instances,
            pipes,
            cube_fractal_macs: fractal_macs,
            cube_utilization: round4(fractal_macs as f64 / denom),
            memories,
            path_bytes,
            gm_read_bytes: gm_read,
            gm_written_bytes: gm_written,
            warnings,
            outputs,
        }
    }

    /// The report of kernels launched one after another: cycles, instructions, busy cycles,
    /// fractal-MACs and bytes added, the largest core count and memory peaks, the final
    /// outputs.
    pub(crate) fn sequence(reports: &[Report], outputs: &BTreeMap<String, Tensor>) -> Report {
        let first = &reports[0];
        let cycles: u64 = reports.iter().map(|r| r.cycles).sum();
        let cores_used = reports.iter().map(|r| r.cores_used).max().unwrap_or(1);
        let denom = (cycles.max(1) * cores_used as u64) as f64;
        let pipes = first
            .pipes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let busy: u64 = reports.iter().map(|r| r.pipes[i].busy_cycles).sum();
                PipeStat {
                    pipe: p.pipe.clone(),
                    busy_cycles: busy,
                    utilization: round4(busy as f64 / denom),
                }
            })
            .collect();
        let memories = first
            .memories
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let peak = reports
                    .iter()
                    .map(|r| r.memories[i].peak)
                    .max()
                    .unwrap_or(0);
                MemStat {
                    memory: m.memory.clone(),
                    capacity: m.capacity,
                    declared: reports
                        .iter()
                        .map(|r| r.memories[i].declared)
                        .max()
                        .unwrap_or(0),
                    peak,
                    percent: round4(100.0 * peak as f64 / m.capacity.max(1) as f64),
                }
            })
            .collect();
        let mut path_bytes = BTreeMap::new();
        for r in reports {
            for (path, bytes) in &r.path_bytes {
                *path_bytes.entry(path.clone()).or_insert(0) += bytes;
            }
        }
        let macs: u64 = reports.iter().map(|r| r.cube_fractal_macs).sum();
        Report {
            kernel: reports
                .iter()
                .map(|r| r.kernel.as_str())
                .collect::<Vec<_>>()
                .join(" + "),
            machine: first.machine.clone(),
            blocks: reports.iter().map(|r| r.blocks).sum(),
            cores_used,
            cycles,
            instructions: reports.iter().map(|r| r.instructions).sum(),
            scalar_instances: reports.iter().map(|r| r.scalar_instances).sum(),
            pipes,
            cube_fractal_macs: macs,
            cube_utilization: round4(macs as f64 / denom),
            memories,
            path_bytes,
            gm_read_bytes: reports.iter().map(|r| r.gm_read_bytes).sum(),
            gm_written_bytes: reports.iter().map(|r| r.gm_written_bytes).sum(),
            warnings: reports.iter().flat_map(|r| r.warnings.clone()).collect(),
            outputs: summaries(outputs),
        }
    }

    /// Stable, pretty JSON.
    pub fn to_json(&self) -> String {
        // Serialising plain structs, strings and numbers cannot fail.
        serde_json::to_string_pretty(self).expect("report serialises")
    }

    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "kernel {} on {}: {} block(s) on {} core(s)",
            self.kernel, self.machine, self.blocks, self.cores_used
        );
        let _ = writeln!(
            s,
            "cycles: {}    instructions: {}",
            self.cycles, self.instructions
        );
        if self.scalar_instances > 0 {
            let _ = writeln!(
                s,
                "statement instances on the scalar unit: {}",
                self.scalar_instances
            );
        }
        let _ = writeln!(s, "\npipe    busy cycles  utilization");
        for p in &self.pipes {
            let _ = writeln!(
                s,
                "{:<6} {:>12}  {:>10.1}%",
                p.pipe,
                p.busy_cycles,
                p.utilization * 100.0
            );
        }
        let _ = writeln!(
            s,
            "cube: {} fractal-MACs, utilization {:.1}%",
            self.cube_fractal_macs,
            self.cube_utilization * 100.0
        );
        let _ = writeln!(s, "\nmemory      peak    capacity   peak%  declared");
        for m in &self.memories {
            let _ = writeln!(
                s,
                "{:<5} {:>10} {:>11} {:>6.1}% {:>9}",
                m.memory, m.peak, m.capacity, m.percent, m.declared
            );
        }
        let _ = writeln!(s, "\npath        bytes");
        for (p, b) in &self.path_bytes {
            if *b > 0 {
                let _ = writeln!(s, "{p:<8} {b:>10}");
            }
        }
        let _ = writeln!(
            s,
            "GM traffic: {} bytes read, {} bytes written",
            self.gm_read_bytes, self.gm_written_bytes
        );
        for w in &self.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        for o in &self.outputs {
            let samples: Vec<String> = o.samples.iter().map(|v| format!("{v}")).collect();
            let _ = writeln!(
                s,
                "\noutput {}: {}{:?} sum {} checksum {} first [{}]",
                o.name,
                o.dtype,
                o.shape,
                o.sum,
                o.checksum,
                samples.join(", ")
            );
        }
        s
    }
}

impl Timeline {
    /// An SVG Gantt chart: one row per pipe, then one occupancy curve per memory.
    pub fn to_svg(&self) -> String {
        let width = 1000.0;
        let left = 60.0;
        let row = 22.0;
        let end = self.end.max(1) as f64;
        let x = |t: u64| left + width * t as f64 / end;
        let mems: Vec<&Occupancy> = self.occupancy.iter().filter(|o| o.peak > 0).collect();
        let pipes_h = row * Pipe::COUNT as f64;
        let occ_h = 40.0;
        let height = 36.0 + pipes_h + (occ_h + 10.0) * mems.len() as f64 + 20.0;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="monospace" font-size="11">"#,
            left + width + 20.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{left}" y="14">core 0, {} cycles</text>"#,
            self.end
        );
        let colors = [
            "#888888", "#2b8cbe", "#e6550d", "#31a354", "#756bb1", "#d6616b",
        ];
        for (i, p) in Pipe::ALL.iter().enumerate() {
            let y = 20.0 + row * i as f64;
            let _ = writeln!(s, r#"<text x="4" y="{}">{}</text>"#, y + 15.0, p.name());
            let _ = writeln!(
                s,
                r##"<rect x="{left}" y="{y}" width="{width}" height="{}" fill="#f4f4f4"/>"##,
                row - 4.0
            );
            // Merge intervals closer than a tenth of a pixel to keep the file small.
            let mut merged: Vec<(u64, u64)> = Vec::new();
            let slack = (end / (width * 10.0)) as u64;
            let mut iv = self.pipes[i].clone();
            iv.sort_unstable();
            for (a, b) in iv {
                match merged.last_mut() {
                    Some(last) if a <= last.1 + slack => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            for (a, b) in merged {
                let _ = writeln!(
                    s,
                    r#"<rect x="{:.2}" y="{y}" width="{:.2}" height="{}" fill="{}"/>"#,
                    x(a),
                    (x(b) - x(a)).max(0.2),
                    row - 4.0,
                    colors[i]
                );
            }
        }
        // Ten ticks of the cycle axis under the pipes.
        for i in 0..=10u64 {
            let t = self.end * i / 10;
            let _ = writeln!(
                s,
                r##"<line x1="{0:.2}" y1="20" x2="{0:.2}" y2="{1}" stroke="#bbb" stroke-width="0.5"/><text x="{0:.2}" y="{2}" text-anchor="middle">{t}</text>"##,
                x(t),
                20.0 + pipes_h,
                30.0 + pipes_h
            );
        }
        let mut y = 36.0 + pipes_h;
        for o in mems {
            let _ = writeln!(
                s,
                r#"<text x="4" y="{}">{}</text>"#,
                y + occ_h / 2.0,
                o.mem.name()
            );
            let _ = writeln!(
                s,
                r##"<rect x="{left}" y="{y}" width="{width}" height="{occ_h}" fill="none" stroke="#ccc"/>"##
            );
            let mut pts = format!("{left},{}", y + occ_h);
            let mut last = 0u64;
            for &(t, v) in &o.steps {
                let yy = y + occ_h - occ_h * last as f64 / o.peak as f64;
                let _ = write!(pts, " {:.2},{yy:.2}", x(t));
                let yy = y + occ_h - occ_h * v as f64 / o.peak as f64;
                let _ = write!(pts, " {:.2},{yy:.2}", x(t));
                last = v;
            }
            let _ = writeln!(
                s,
                r##"<polyline points="{pts}" fill="none" stroke="#444"/>"##
            );
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}">peak {} B</text>"#,
                left + width - 120.0,
                y + 12.0,
                o.peak
            );
            y += occ_h + 10.0;
        }
        s.push_str("</svg>\n");
        s
    }
}
