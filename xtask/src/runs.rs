//! Running the polyfuse binary from a benchmark: its output, the fields of its `--json`
//! reports, and the median of repeated times.

use std::process::Command;

/// The standard output of a command that must succeed.
pub(crate) fn output(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The raw text of field `name` of a flat JSON document.
pub(crate) fn json_field(json: &str, name: &str) -> Option<String> {
    let rest = json.split(&format!("\"{name}\":")).nth(1)?.trim_start();
    let end = if let Some(quoted) = rest.strip_prefix('"') {
        quoted.find('"').map(|i| i + 2)?
    } else {
        rest.find(|c: char| c == ',' || c == '}' || c.is_whitespace())
            .unwrap_or(rest.len())
    };
    Some(rest[..end].to_string())
}

/// The kernel time of a `polyfuse run --json` report, after checking that the run matched the
/// interpreter; `what` names the run in errors.
pub(crate) fn checked_kernel_seconds(json: &str, what: &str) -> Result<f64, String> {
    if json_field(json, "matches_interp").as_deref() != Some("true") {
        return Err(format!("{what} does not match the interpreter"));
    }
    json_field(json, "kernel_seconds")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{what}: no kernel time in the JSON"))
}

/// The median of a non-empty list of times (the upper one of an even count).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
