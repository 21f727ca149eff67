//! The CPUs the CPU target can optimize for, as data: each a name, the vector unit the middle
//! end plans register tiles for, the C compiler flags that make the compiler use that vector
//! unit, and the data caches the tile search sizes tiles for. The named models share one set
//! of caches ([`SERVER_CACHES`]); the TLB is the same for every model (see
//! [`super::description`]).
//!
//! A model is chosen by name (`--cpu`), never read from the build machine unless asked for
//! (`native`, [`CpuModel::host`]: the widest named model the machine runs, with the machine's
//! own caches where Linux describes them): generated code does not depend on where it was
//! generated.
//! Every model's code is portable C (GCC/Clang vector extensions): built for a machine
//! without the model's vector unit, the C compiler splits its vectors into narrower ones, so
//! the results are the same and only the speed differs.

/// One CPU the target can optimize for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuModel {
    /// The `--cpu` value, named after the x86-64 micro-architecture levels.
    pub name: &'static str,
    /// One line for `--help` and the benchmark's caption.
    pub about: &'static str,
    /// Bytes of one vector register.
    pub vector_bytes: u32,
    /// Architectural vector registers.
    pub vector_registers: u32,
    /// The vector registers a register tile may fill (accumulators, one vector of each
    /// column operand, one broadcast operand); the rest are left to the C compiler.
    pub tile_registers: u32,
    /// Cycles from a floating-point multiply-add to the next one that uses its result.
    pub fma_latency: u32,
    /// Floating-point multiply-adds started per cycle.
    pub fma_pipes: u32,
    /// The host CPU features (`/proc/cpuinfo` flags) the model's vectors need to run as
    /// such.
    pub features: &'static [&'static str],
    /// The data caches of one core, as the tile search sees them.
    pub caches: Caches,
}

/// One level of data cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLevel {
    /// Capacity in bytes.
    pub bytes: u64,
    /// Lines per set.
    pub ways: u32,
}

/// The data caches a core sees, its own first: 64-byte lines unless the machine says otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caches {
    /// Bytes of one line, at every level.
    pub line_bytes: u32,
    /// The first-level data cache.
    pub l1d: CacheLevel,
    /// The second level.
    pub l2: CacheLevel,
    /// The last level, shared by the threads.
    pub l3: CacheLevel,
}

/// The caches of the named models: a 32 KiB 8-way L1 data cache, a 1 MiB 16-way L2 and a
/// shared 32 MiB 16-way L3, typical of current x86 server cores.
pub const SERVER_CACHES: Caches = Caches {
    line_bytes: 64,
    l1d: CacheLevel {
        bytes: 32 << 10,
        ways: 8,
    },
    l2: CacheLevel {
        bytes: 1 << 20,
        ways: 16,
    },
    l3: CacheLevel {
        bytes: 32 << 20,
        ways: 16,
    },
};

/// AVX2: 256-bit vectors, 16 registers (the default).
pub const X86_64_V3: CpuModel = CpuModel {
    name: "x86-64-v3",
    about: "AVX2: 32-byte vectors, 16 vector registers",
    vector_bytes: 32,
    vector_registers: 16,
    tile_registers: 16,
    fma_latency: 4,
    fma_pipes: 2,
    features: &["avx2", "fma"],
    caches: SERVER_CACHES,
};

/// AVX-512: 512-bit vectors, 32 registers, of which a register tile fills at most 28.
///
/// The four left over are for the C compiler. GCC 12 with `-march=native` on an AMD Zen 4
/// core (its Zen tuning keeps integer values in free vector registers around loops) spilled
/// an accumulator and two column vectors of a `6 × 32` `f64` tile (29 registers) to the stack
/// at every step of the loop it runs: PolyBench's gemm ran 7% and 2mm 5% slower than with the
/// `5 × 32` tile (25 registers) it allocates wholly in registers. Built with
/// `-march=x86-64-v4` both tiles stay in registers and run alike, so the smaller one costs
/// nothing there.
pub const X86_64_V4: CpuModel = CpuModel {
    name: "x86-64-v4",
    about: "AVX-512: 64-byte vectors, 32 vector registers",
    vector_bytes: 64,
    vector_registers: 32,
    tile_registers: 28,
    fma_latency: 4,
    fma_pipes: 2,
    features: &["avx512f", "avx512bw", "avx512dq", "avx512vl"],
    caches: SERVER_CACHES,
};

/// The models, the default first.
pub const MODELS: [CpuModel; 2] = [X86_64_V3, X86_64_V4];

/// The `--cpu` value that picks the model of the machine polyfuse runs on.
pub const NATIVE: &str = "native";

impl Default for CpuModel {
    fn default() -> CpuModel {
        X86_64_V3
    }
}

impl CpuModel {
    /// The model called `name` ([`NATIVE`]: [`CpuModel::host`]).
    pub fn find(name: &str) -> Option<CpuModel> {
        if name == NATIVE {
            return Some(CpuModel::host());
        }
        MODELS.iter().copied().find(|m| m.name == name)
    }

    /// The names `--cpu` accepts, comma-separated, for messages.
    pub fn names() -> String {
        let mut names: Vec<&str> = MODELS.iter().map(|m| m.name).collect();
        names.push(NATIVE);
        names.join(", ")
    }

    /// Whether the machine polyfuse runs on has every feature the model's vectors need.
    pub fn runs_natively(&self) -> bool {
        self.runs_with(&host_flags())
    }

    /// Whether a CPU with the feature flags `flags` has every feature the model's vectors need.
    fn runs_with(&self, flags: &[String]) -> bool {
        self.features.iter().all(|f| flags.iter().any(|h| h == f))
    }

    /// The widest model the machine polyfuse runs on supports (the default when none does),
    /// with the machine's caches ([`host_caches`]).
    pub fn host() -> CpuModel {
        let flags = host_flags();
        let model = MODELS
            .iter()
            .rev()
            .copied()
            .find(|m| m.runs_with(&flags))
            .unwrap_or_default();
        CpuModel {
            caches: host_caches(SYSFS_CACHES, model.caches),
            ..model
        }
    }
}

/// Where Linux describes the first CPU's caches, one `index*` folder per cache.
const SYSFS_CACHES: &str = "/sys/devices/system/cpu/cpu0/cache";

/// The caches described under `folder` (as Linux's sysfs does: per cache its `level`, `type`,
/// `size`, `ways_of_associativity` and `coherency_line_size`), each level that is missing or
/// unreadable taken from `fallback`.
fn host_caches(folder: &str, fallback: Caches) -> Caches {
    let mut caches = fallback;
    let Ok(entries) = std::fs::read_dir(folder) else {
        return caches;
    };
    for entry in entries.flatten() {
        let read = |name: &str| {
            let text = std::fs::read_to_string(entry.path().join(name)).ok()?;
            Some(text.trim().to_string())
        };
        let number = |name: &str| read(name)?.parse::<u64>().ok();
        let (Some(level), Some(kind), Some(size), Some(ways)) = (
            number("level"),
            read("type"),
            read("size").as_deref().and_then(parse_size),
            number("ways_of_associativity"),
        ) else {
            continue;
        };
        if kind == "Instruction" || ways == 0 || size == 0 {
            continue;
        }
        let cache = CacheLevel {
            bytes: size,
            ways: ways as u32,
        };
        match level {
            1 => caches.l1d = cache,
            2 => caches.l2 = cache,
            3 => caches.l3 = cache,
            _ => continue,
        }
        if let Some(line) = number("coherency_line_size").filter(|l| l.is_power_of_two()) {
            caches.line_bytes = line as u32;
        }
    }
    caches
}

/// A sysfs cache size (`32K`, `1024K`, `32M`) in bytes.
fn parse_size(text: &str) -> Option<u64> {
    let (digits, scale) = match text.as_bytes().last()? {
        b'K' => (&text[..text.len() - 1], 1 << 10),
        b'M' => (&text[..text.len() - 1], 1 << 20),
        b'G' => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<u64>().ok().map(|n| n * scale)
}

/// The CPU feature flags of the host, from `/proc/cpuinfo` (none where it cannot be read).
fn host_flags() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    text.lines()
        .find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == "flags").then(|| value.split_whitespace().map(String::from).collect())
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_found_by_name() {
        assert_eq!(CpuModel::find("x86-64-v3"), Some(X86_64_V3));
        assert_eq!(CpuModel::find("x86-64-v4"), Some(X86_64_V4));
        assert_eq!(CpuModel::find("pentium"), None);
        let host = CpuModel::find(NATIVE).unwrap();
        let named = CpuModel {
            caches: SERVER_CACHES,
            ..host
        };
        assert!(MODELS.contains(&named));
        assert_eq!(CpuModel::names(), "x86-64-v3, x86-64-v4, native");
    }

    #[test]
    fn the_host_model_runs_natively() {
        let host = CpuModel::host();
        // The default is chosen even where /proc/cpuinfo lacks its features.
        assert!(host.runs_natively() || host == X86_64_V3);
    }

    #[test]
    fn host_caches_are_read_as_linux_describes_them() {
        let folder = std::env::temp_dir().join(format!("polyfuse-caches-{}", std::process::id()));
        let cache = |index: &str, level: &str, kind: &str, size: &str, ways: &str| {
            let dir = folder.join(index);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, value) in [
                ("level", level),
                ("type", kind),
                ("size", size),
                ("ways_of_associativity", ways),
                ("coherency_line_size", "64"),
            ] {
                std::fs::write(dir.join(name), format!("{value}\n")).unwrap();
            }
        };
        cache("index0", "1", "Data", "48K", "12");
        cache("index1", "1", "Instruction", "32K", "8");
        cache("index2", "2", "Unified", "512K", "8");
        let caches = host_caches(folder.to_str().unwrap(), SERVER_CACHES);
        std::fs::remove_dir_all(&folder).unwrap();
        assert_eq!(
            caches.l1d,
            CacheLevel {
                bytes: 48 << 10,
                ways: 12
            }
        );
        assert_eq!(
            caches.l2,
            CacheLevel {
                bytes: 512 << 10,
                ways: 8
            }
        );
        // No third level described: the named models' is kept.
        assert_eq!(caches.l3, SERVER_CACHES.l3);
        assert_eq!(host_caches("/nonexistent", SERVER_CACHES), SERVER_CACHES);
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("big"), None);
    }

    #[test]
    fn descriptions_take_the_models_vector_units() {
        for model in MODELS {
            let unit = super::super::description_for(&model).vector.unwrap();
            assert_eq!(unit.bytes, model.vector_bytes);
            assert_eq!(unit.registers, model.vector_registers);
            assert_eq!(unit.tile_registers, model.tile_registers);
            assert!(model.tile_registers <= model.vector_registers);
        }
        assert_eq!(
            super::super::description(),
            super::super::description_for(&X86_64_V3)
        );
    }
}
