//! The CPUs the CPU target can optimize for, as data: each a name, the vector unit the middle
//! end plans register tiles for, and the C compiler flags that make the compiler use that
//! vector unit. The caches and the TLB are the same for every model (see
//! [`super::description`]).
//!
//! A model is chosen by name (`--cpu`), never read from the build machine unless asked for
//! (`native`, [`CpuModel::host`]): generated code does not depend on where it was generated.
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
    /// Cycles from a floating-point multiply-add to the next one that uses its result.
    pub fma_latency: u32,
    /// Floating-point multiply-adds started per cycle.
    pub fma_pipes: u32,
    /// The host CPU features (`/proc/cpuinfo` flags) the model's vectors need to run as
    /// such.
    pub features: &'static [&'static str],
}

/// AVX2: 256-bit vectors, 16 registers (the default).
pub const X86_64_V3: CpuModel = CpuModel {
    name: "x86-64-v3",
    about: "AVX2: 32-byte vectors, 16 vector registers",
    vector_bytes: 32,
    vector_registers: 16,
    fma_latency: 4,
    fma_pipes: 2,
    features: &["avx2", "fma"],
};

/// AVX-512: 512-bit vectors, 32 registers.
pub const X86_64_V4: CpuModel = CpuModel {
    name: "x86-64-v4",
    about: "AVX-512: 64-byte vectors, 32 vector registers",
    vector_bytes: 64,
    vector_registers: 32,
    fma_latency: 4,
    fma_pipes: 2,
    features: &["avx512f", "avx512bw", "avx512dq", "avx512vl"],
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

    /// The widest model the machine polyfuse runs on supports (the default when none does).
    pub fn host() -> CpuModel {
        let flags = host_flags();
        MODELS
            .iter()
            .rev()
            .copied()
            .find(|m| m.runs_with(&flags))
            .unwrap_or_default()
    }
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
        assert!(MODELS.contains(&CpuModel::find(NATIVE).unwrap()));
        assert_eq!(CpuModel::names(), "x86-64-v3, x86-64-v4, native");
    }

    #[test]
    fn the_host_model_runs_natively() {
        let host = CpuModel::host();
        // The default is chosen even where /proc/cpuinfo lacks its features.
        assert!(host.runs_natively() || host == X86_64_V3);
    }

    #[test]
    fn descriptions_take_the_models_vector_units() {
        for model in MODELS {
            let unit = super::super::description_for(&model).vector.unwrap();
            assert_eq!(unit.bytes, model.vector_bytes);
            assert_eq!(unit.registers, model.vector_registers);
        }
        assert_eq!(
            super::super::description(),
            super::super::description_for(&X86_64_V3)
        );
    }
}
