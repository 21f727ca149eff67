//! `bench cpu --compile-times --readme`: the compile column of docs/benchmarks.md's table measured
//! again alone, with the other figures of each row kept as they were measured.

use super::table::{compile_later, compile_summary, Compiled, Row, COMPILE_LATER, COMPILE_SUMMARY};

/// `section` (docs/benchmarks.md's `bench cpu` section, whose rows [`super::earlier::read`] gave as
/// `rows`) with the compile cells of the `measured` rows, the summary's compile line and the
/// heading's sentence on the compile column (`runs` compiles of each kernel, under a limit
/// of `limit` seconds) rewritten.
pub(crate) fn refresh(
    section: &str,
    mut rows: Vec<Row>,
    measured: Vec<Row>,
    runs: usize,
    limit: u64,
) -> Result<String, String> {
    let mut text = section.to_string();
    for new in measured {
        let Some(row) = rows.iter_mut().find(|r| r.kernel == new.kernel) else {
            return Err(format!(
                "docs/benchmarks.md: no row of {} to update; measure it with `bench cpu --kernels {} --readme`",
                new.kernel, new.kernel
            ));
        };
        if !matches!(row.compiled, Compiled::Yes { .. })
            || !matches!(new.compiled, Compiled::Yes { .. })
        {
            return Err(format!(
                "{}: compiled {} before and {} now; measure it again whole with `bench cpu --kernels {} --readme`",
                new.kernel,
                row.compile_cell(),
                new.compile_cell(),
                new.kernel
            ));
        }
        let old = row.kept.clone().unwrap_or_default();
        let mut cells: Vec<&str> = old.trim_matches('|').split(" | ").map(str::trim).collect();
        let (compile, schedule) = (new.compile_cell(), new.schedule_cell());
        cells[2] = &compile;
        cells[7] = schedule;
        let line = format!("| {} |", cells.join(" | "));
        text = text.replacen(&old, &line, 1);
        row.compiled = new.compiled;
        row.kept = Some(line);
    }
    let summary = text
        .find(COMPILE_SUMMARY)
        .ok_or("docs/benchmarks.md: the `bench cpu` section has no compile-time line")?;
    let end = text[summary + 1..]
        .find('\n')
        .map_or(text.len(), |e| summary + 1 + e + 1);
    text.replace_range(summary..end, &compile_summary(&rows, limit));
    let sentence = compile_later(runs);
    match text.lines().find(|l| l.starts_with(COMPILE_LATER)) {
        Some(old) => text = text.replacen(&old.to_string(), &sentence, 1),
        None => {
            let at = text
                .find("| kernel | dataset |")
                .ok_or("docs/benchmarks.md: the `bench cpu` section has no table")?;
            text.insert_str(at, &format!("{sentence}\n\n"));
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::refresh;
    use crate::bench_cpu::table::{table, tests::setup, Checked, Compiled, Row};

    fn row(kernel: &str, seconds: f64) -> Row {
        let mut r = Row::new(
            kernel,
            "LARGE",
            Compiled::Yes {
                seconds,
                tiled: true,
                parallel: true,
            },
        );
        r.checked = Some(Checked::Same);
        r.times = [Some(2.0), Some(0.5), Some(1.0), Some(0.8)];
        r
    }

    fn rows_of(section: &str) -> Vec<Row> {
        crate::bench_cpu::earlier::read(section, &[]).unwrap().rows
    }

    /// Only the compile cells, the compile line and the heading change; a second refresh
    /// replaces the heading's sentence rather than adding another.
    #[test]
    fn compile_cells_are_rewritten_and_the_rest_kept() {
        let section = table(&[row("lu", 0.25), row("gemm", 0.04)], &setup());
        assert!(section.contains("100 ms to 1 s: lu (250.0 ms)"));
        let mut faster = row("lu", 0.09);
        faster.times = [None; 4];
        let text = refresh(&section, rows_of(&section), vec![faster], 5, 60).unwrap();
        assert!(text.contains("| lu | LARGE | 90.0 ms | 2.00 s | 500.0 ms · 4.00× |"));
        assert!(text.contains("| gemm | LARGE | 40.0 ms |"));
        assert!(text.contains("Compile time: every kernel under 100 ms.\n"));
        assert!(!text.contains("250.0 ms"));
        assert!(text.contains("(the median of 5 compiles of each kernel)"));
        let again = refresh(&text, rows_of(&text), vec![row("gemm", 0.05)], 3, 60).unwrap();
        assert_eq!(
            again
                .matches("a later run of `bench cpu --compile-times`")
                .count(),
            1
        );
        assert!(again.contains("(the median of 3 compiles of each kernel)"));
        assert!(again.contains("| gemm | LARGE | 50.0 ms |"));
        // A later run of a few kernels keeps the sentence.
        let kept = crate::bench_cpu::earlier::read(&again, &[]).unwrap();
        assert!(kept.compile_later.is_some());
    }

    #[test]
    fn a_kernel_without_a_row_is_an_error() {
        let section = table(&[row("lu", 0.25)], &setup());
        let err = refresh(&section, rows_of(&section), vec![row("gemm", 0.04)], 3, 60).unwrap_err();
        assert!(err.contains("bench cpu --kernels gemm --readme"), "{err}");
    }
}
