//! The machine description: memories with capacities and alignments, copy paths with bandwidths
//! and startup costs, unit costs, core count and the shared GM bandwidth.
//!
//! Every number the simulator uses comes from here; the default is the 910-like core in
//! `machines/davinci910.machine`, embedded in the binary. The text format is one `key = value`
//! per line with `#` comments; every key must be given exactly once so that a description is
//! never silently half-default.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::diagnostic::{Diagnostic, Error, Span};
use crate::isa::{CopyPath, Mem};

/// The text of the default machine description.
pub const DEFAULT_MACHINE: &str = include_str!("../machines/davinci910.machine");

/// A memory's size and the alignment its operands must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemSpec {
    pub capacity: u64,
    pub align: u64,
}

/// A copy path's cost: `startup + ceil(bytes / bandwidth)` cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PathSpec {
    pub bandwidth: u64,
    pub startup: u64,
}

/// A whole machine description.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Machine {
    pub name: String,
    pub cores: u32,
    pub gm_bandwidth: u64,
    pub mems: [MemSpec; Mem::COUNT],
    pub paths: [PathSpec; CopyPath::COUNT],
    pub cube_startup: u64,
    pub cube_per_fractal: u64,
    /// Cycles of one fractal-MAC with f32 operands.
    pub cube_per_fractal_f32: u64,
    pub vector_startup: u64,
    pub vector_per_repeat: u64,
    pub vector_per_repeat_slow: u64,
    pub scalar_issue: u64,
    pub scalar_mem: u64,
    pub sync_cost: u64,
    /// Instructions each pipe's queue holds between issue and start.
    pub queue_depth: u64,
}

impl Default for Machine {
    fn default() -> Machine {
        // The embedded description is checked by a unit test, so parsing it cannot fail.
        Machine::parse("davinci910.machine", DEFAULT_MACHINE).expect("default machine parses")
    }
}

/// The most bytes of on-chip memory (every memory but GM, times the cores) a machine may have:
/// the simulator allocates all of it.
const MAX_ON_CHIP_BYTES: u64 = 1 << 30;
/// The most cores a machine may have.
const MAX_CORES: u64 = 1 << 16;
/// The largest capacity of a memory, in bytes.
const MAX_CAPACITY: u64 = 1 << 48;
/// The largest cost (cycles), bandwidth (bytes per cycle), alignment or queue depth.
const MAX_COST: u64 = 1 << 20;

impl Machine {
    pub fn mem(&self, mem: Mem) -> MemSpec {
        self.mems[mem as usize]
    }

    pub fn path(&self, path: CopyPath) -> PathSpec {
        self.paths[path as usize]
    }

    /// Parses a machine description; `name` is the file name shown in diagnostics.
    pub fn parse(name: &str, text: &str) -> Result<Machine, Error> {
        let err = |span: Span, msg: String, hint: &str| {
            Error::new(name, text, Diagnostic::new(span, msg).with_hint(hint))
        };
        let mut values: BTreeMap<String, (String, Span)> = BTreeMap::new();
        let mut offset = 0usize;
        for line in text.split_inclusive('\n') {
            let start = offset;
            offset += line.len();
            let content = line.split('#').next().unwrap_or("").trim_end();
            if content.trim().is_empty() {
                continue;
            }
            let lead = content.len() - content.trim_start().len();
            let span = Span::new(start + lead, start + content.len());
            let Some((key, value)) = content.split_once('=') else {
                return Err(err(
                    span,
                    "expected `key = value`".into(),
                    "e.g. `cores = 32`",
                ));
            };
            let key = key.trim().to_string();
            if values
                .insert(key.clone(), (value.trim().to_string(), span))
                .is_some()
            {
                return Err(err(
                    span,
                    format!("`{key}` is given twice"),
                    "keep one definition",
                ));
            }
        }
        let whole = Span::new(0, 0);
        let take = |values: &mut BTreeMap<String, (String, Span)>,
                    key: &str|
         -> Result<(String, Span), Error> {
            values.remove(key).ok_or_else(|| {
                err(
                    whole,
                    format!("missing key `{key}`"),
                    "every key of the default description must be present",
                )
            })
        };
        let name_value = take(&mut values, "name")?.0;
        let mut number = |key: &str| -> Result<u64, Error> {
            let (v, span) = take(&mut values, key)?;
            let n = v.parse::<u64>().map_err(|_| {
                err(
                    span,
                    format!("`{key}` must be a non-negative integer, found `{v}`"),
                    "write a plain decimal number",
                )
            })?;
            // Timing sums costs over billions of instructions in 64 bits, and buffers are
            // addressed in 64 bits: every number has a ceiling far above any real machine's.
            let max = match key {
                "cores" => MAX_CORES,
                k if k.ends_with(".capacity") => MAX_CAPACITY,
                _ => MAX_COST,
            };
            if n > max {
                return Err(err(
                    span,
                    format!("`{key}` is {n}, more than the simulator takes ({max})"),
                    "sizes, costs and bandwidths of a real core are far smaller",
                ));
            }
            Ok(n)
        };
        let cores = number("cores")?;
        let gm_bandwidth = number("gm.bandwidth")?;
        let mut mems = [MemSpec {
            capacity: 0,
            align: 1,
        }; Mem::COUNT];
        for mem in Mem::ALL {
            mems[mem as usize] = MemSpec {
                capacity: number(&format!("mem.{}.capacity", mem.name()))?,
                align: number(&format!("mem.{}.align", mem.name()))?,
            };
        }
        let mut paths = [PathSpec {
            bandwidth: 1,
            startup: 0,
        }; CopyPath::COUNT];
        for path in CopyPath::ALL {
            let (from, to) = path.ends();
            let key = format!("path.{}_{}", from.name(), to.name());
            paths[path as usize] = PathSpec {
                bandwidth: number(&format!("{key}.bandwidth"))?,
                startup: number(&format!("{key}.startup"))?,
            };
        }
        let machine = Machine {
            name: name_value,
            cores: cores.min(u32::MAX as u64) as u32,
            gm_bandwidth,
            mems,
            paths,
            cube_startup: number("cube.startup")?,
            cube_per_fractal: number("cube.per_fractal")?,
            cube_per_fractal_f32: number("cube.per_fractal_f32")?,
            vector_startup: number("vector.startup")?,
            vector_per_repeat: number("vector.per_repeat")?,
            vector_per_repeat_slow: number("vector.per_repeat_slow")?,
            scalar_issue: number("scalar.issue")?,
            scalar_mem: number("scalar.mem")?,
            sync_cost: number("sync.cost")?,
            queue_depth: number("queue.depth")?,
        };
        if let Some((key, (_, span))) = values.into_iter().next() {
            return Err(err(
                span,
                format!("unknown key `{key}`"),
                "see machines/davinci910.machine for the keys",
            ));
        }
        if machine.cores == 0 || machine.gm_bandwidth == 0 || machine.queue_depth == 0 {
            return Err(err(
                whole,
                "`cores`, `gm.bandwidth` and `queue.depth` must be positive".into(),
                "a machine needs at least one core",
            ));
        }
        for mem in Mem::ALL {
            let spec = machine.mem(mem);
            if spec.align == 0 || !spec.align.is_power_of_two() {
                return Err(err(
                    whole,
                    format!("`mem.{}.align` must be a power of two", mem.name()),
                    "alignments are 1, 2, 4, … bytes",
                ));
            }
        }
        // The simulator allocates every on-chip memory of every core a program runs on.
        let on_chip = Mem::ALL
            .iter()
            .filter(|&&m| m != Mem::Gm)
            .try_fold(0u64, |acc, &m| acc.checked_add(machine.mem(m).capacity))
            .and_then(|bytes| bytes.checked_mul(u64::from(machine.cores)));
        if on_chip.is_none_or(|bytes| bytes > MAX_ON_CHIP_BYTES) {
            return Err(err(
                whole,
                format!(
                    "the on-chip memories of {} cores take more than the {MAX_ON_CHIP_BYTES} bytes \
                     the simulator can hold",
                    machine.cores
                ),
                "lower `cores` or the `mem.*.capacity` values of L1, L0A, L0B, L0C and UB",
            ));
        }
        if machine.paths.iter().any(|p| p.bandwidth == 0) {
            return Err(err(
                whole,
                "every path bandwidth must be positive".into(),
                "bandwidths are bytes per cycle",
            ));
        }
        Ok(machine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_description_parses_with_the_documented_numbers() {
        let m = Machine::default();
        assert_eq!(m.mem(Mem::L0a).capacity, 64 * 1024);
        assert_eq!(m.mem(Mem::L0c).align, 1024);
        assert_eq!(m.path(CopyPath::GmL1).bandwidth, 80);
        assert_eq!(m.path(CopyPath::UbUb).bandwidth, 512);
        assert_eq!(m.cube_startup, 6);
    }

    #[test]
    fn unknown_and_missing_keys_are_errors() {
        let text = format!("{DEFAULT_MACHINE}\nfoo = 1\n");
        let e = Machine::parse("m", &text).unwrap_err();
        assert!(e.to_string().contains("unknown key `foo`"), "{e}");
        let text = DEFAULT_MACHINE.replace("cube.startup = 6", "");
        let e = Machine::parse("m", &text).unwrap_err();
        assert!(e.to_string().contains("missing key `cube.startup`"), "{e}");
        let text = DEFAULT_MACHINE.replace("cube.startup = 6", "cube.startup = six");
        let e = Machine::parse("m", &text).unwrap_err();
        assert!(e.to_string().contains("non-negative integer"), "{e}");
    }
}
