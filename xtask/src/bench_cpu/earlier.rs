//! The rows of an earlier run, read back from docs/benchmarks.md's `bench cpu` section, so that a run
//! of a few kernels (`--kernels a,b --readme`) replaces only their rows and the table keeps the
//! others as they were measured. A kept row is printed as it was; its figures are read back
//! only for the summary under the table (compile times, kernels behind gcc or Polly).

use super::polybench::parse_dataset;
use super::table::{Checked, Compiled, Row, COMPILE_LATER};

/// How the heading names the rows measured after the others, before their list.
pub(crate) const LATER: &str = "Measured again in later runs of a few kernels, with the same \
    settings (the other rows come from one run of all): the rows of";

/// What an earlier run left in docs/benchmarks.md: its rows (other than `measured`'s), its gemm
/// GFLOP/s table when gemm is not among them, and the kernels its heading names as measured
/// later.
pub(crate) struct Earlier {
    pub(crate) rows: Vec<Row>,
    pub(crate) gemm: Option<String>,
    pub(crate) later: Vec<String>,
    /// The heading's sentence saying the compile column was measured again alone.
    pub(crate) compile_later: Option<String>,
}

/// Reads `section`, the text between docs/benchmarks.md's `bench cpu` markers.
pub(crate) fn read(section: &str, measured: &[String]) -> Result<Earlier, String> {
    let notes = |heading: &str| -> Vec<(String, String)> {
        let Some(start) = section.find(heading) else {
            return Vec::new();
        };
        section[start + heading.len()..]
            .lines()
            .skip_while(|l| l.trim().is_empty())
            .take_while(|l| l.starts_with("- "))
            .filter_map(|l| {
                let (kernel, why) = l[2..].split_once(": ")?;
                Some((kernel.to_string(), why.to_string()))
            })
            .collect()
    };
    let not_timed = notes("\nNot timed:\n");
    let trouble = notes("\nOther builds that could not be timed:\n");
    let reason = |kernel: &str, prefix: &str| -> String {
        not_timed
            .iter()
            .find(|(k, why)| k == kernel && why.starts_with(prefix))
            .map_or(String::new(), |(_, why)| why[prefix.len()..].to_string())
    };

    let mut rows = Vec::new();
    let lines = section
        .lines()
        .skip_while(|l| !l.starts_with("| kernel | dataset |"))
        .skip(2)
        .take_while(|l| l.starts_with("| "));
    for line in lines {
        let cells: Vec<&str> = line
            .trim_matches('|')
            .split(" | ")
            .map(|c| c.trim())
            .collect();
        let [kernel, dataset, compile, gcc, polyfuse, polly, polly_parallel, schedule] = cells[..]
        else {
            return Err(format!(
                "docs/benchmarks.md: a `bench cpu` row of an unknown form: {line}"
            ));
        };
        if measured.iter().any(|m| m == kernel) {
            continue;
        }
        let bad =
            || format!("docs/benchmarks.md: cannot read the `bench cpu` row of {kernel}: {line}");
        let dataset = match dataset {
            "—" => "—",
            d => parse_dataset(d).map_err(|_| bad())?,
        };
        let compiled = match compile {
            "refused" => Compiled::Refused(reason(kernel, "refused: ")),
            "failed" => Compiled::Failed(reason(kernel, "failed: ")),
            "—" => Compiled::NotRun,
            c if c.starts_with("> ") => {
                Compiled::TimedOut(c[2..].trim_end_matches(" s").parse().map_err(|_| bad())?)
            }
            c => Compiled::Yes {
                seconds: seconds(c).ok_or_else(bad)?,
                tiled: schedule.starts_with("tiled"),
                parallel: schedule.ends_with("parallel"),
            },
        };
        let mut row = Row::new(kernel, dataset, compiled);
        row.checked = match polyfuse {
            "wrong output" => Some(Checked::Differs),
            "broken output" => Some(Checked::Broken(reason(kernel, "its output: "))),
            _ if matches!(row.compiled, Compiled::Yes { .. }) && polyfuse != "—" => {
                Some(Checked::Same)
            }
            _ => None,
        };
        let baseline = seconds(gcc);
        row.times[0] = baseline;
        for (k, cell) in [(1, polyfuse), (2, polly), (3, polly_parallel)] {
            let cell = cell.trim_end_matches(" (†)");
            // The speedup as printed, so that the summary repeats the row's figures.
            row.times[k] = match cell.split_once(" · ") {
                Some((time, speedup)) => {
                    let speedup: f64 = speedup.trim_end_matches('×').parse().map_err(|_| bad())?;
                    baseline.map(|b| b / speedup).or(seconds(time))
                }
                None => seconds(cell),
            };
        }
        for (k, cell) in [(0, polly), (1, polly_parallel)] {
            row.polly_agrees[k] = (cell != "—").then_some(!cell.ends_with("(†)"));
        }
        row.trouble = trouble
            .iter()
            .filter(|(k, _)| k == kernel)
            .map(|(_, t)| t.clone())
            .collect();
        row.kept = Some(line.to_string());
        rows.push(row);
    }
    if rows.is_empty() && !section.contains("| kernel | dataset |") {
        return Err(
            "docs/benchmarks.md: the `bench cpu` section has no table to keep rows of".into(),
        );
    }
    let gemm = (!measured.iter().any(|m| m == "gemm"))
        .then(|| {
            section
                .find("\ngemm at ")
                .map(|at| section[at..].to_string())
        })
        .flatten();
    let later = section
        .find(LATER)
        .and_then(|at| section[at + LATER.len()..].split_once(".\n"))
        .map_or(Vec::new(), |(list, _)| {
            list.split(", ").map(|k| k.trim().to_string()).collect()
        });
    let compile_later = section
        .lines()
        .find(|l| l.starts_with(COMPILE_LATER))
        .map(str::to_string);
    Ok(Earlier {
        rows,
        gemm,
        later,
        compile_later,
    })
}

/// Seconds from a printed time (`7.19 s`, `71.0 ms`, `12 µs`); `None` for anything else.
fn seconds(cell: &str) -> Option<f64> {
    let (value, unit) = cell.split_once(' ')?;
    let value: f64 = value.parse().ok()?;
    Some(match unit {
        "s" => value,
        "ms" => value * 1e-3,
        "µs" => value * 1e-6,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::read;

    const SECTION: &str = "heading\n\n\
        Measured again in later runs of a few kernels, with the same settings (the other rows \
        come from one run of all): the rows of bicg, mvt.\n\n\
        | kernel | dataset | compile | gcc -O3 | polyfuse | Polly | Polly parallel | polyfuse's schedule |\n\
        | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n\
        | gemm | LARGE | 58.2 ms | 394.5 ms | 33.0 ms · 11.94× | 21.4 ms · 18.43× | 12.0 ms · 32.88× | tiled, parallel |\n\
        | bicg | EXTRALARGE | 20.4 ms | 13.9 ms | 11.3 ms · 1.23× | 9.6 ms · 1.44× (†) | 7.4 ms · 1.88× | tiled, parallel |\n\
        | deriche | LARGE | refused | 1.20 s | not compiled | — | — |  |\n\
        \nNot timed:\n\n- deriche: refused: line 3: not supported yet\n\
        \nCompile time: the others under 100 ms.\n\
        \ngemm at LARGE_DATASET in GFLOP/s:\n\n| build | GFLOP/s |\n";

    #[test]
    fn kept_rows_keep_their_lines_and_figures() {
        let earlier = read(SECTION, &["gemm".to_string()]).unwrap();
        assert!(earlier.gemm.is_none());
        assert_eq!(earlier.later, ["bicg", "mvt"]);
        assert_eq!(earlier.rows.len(), 2);
        let bicg = &earlier.rows[0];
        assert_eq!(bicg.kernel, "bicg");
        assert_eq!(bicg.dataset, "EXTRALARGE");
        assert!(bicg.kept.as_deref().unwrap().contains("7.4 ms · 1.88×"));
        let speedup = |k: usize| bicg.times[0].unwrap() / bicg.times[k].unwrap();
        assert!((speedup(1) - 1.23).abs() < 1e-9 && (speedup(3) - 1.88).abs() < 1e-9);
        assert_eq!(bicg.polly_agrees, [Some(false), Some(true)]);
        let deriche = &earlier.rows[1];
        assert!(
            matches!(&deriche.compiled, super::Compiled::Refused(why) if why == "line 3: not supported yet")
        );
        assert_eq!(deriche.times[1], None);
    }

    /// A table read back and written again is the same table, with the kept rows named.
    #[test]
    fn a_table_read_back_prints_the_same() {
        use crate::bench_cpu::table::{table, tests::setup, Checked, Compiled, Row};
        let mut timed = Row::new(
            "lu",
            "LARGE",
            Compiled::Yes {
                seconds: 0.2013,
                tiled: true,
                parallel: true,
            },
        );
        timed.checked = Some(Checked::Same);
        timed.times = [Some(7.19), Some(0.071), Some(1.78), None];
        timed.polly_agrees = [Some(false), None];
        timed.trouble.push("polly-parallel: does not build".into());
        let mut wrong = Row::new(
            "trisolv",
            "EXTRALARGE",
            Compiled::Yes {
                seconds: 0.06,
                tiled: false,
                parallel: false,
            },
        );
        wrong.checked = Some(Checked::Differs);
        let rows = vec![
            timed,
            wrong,
            Row::new("adi", "LARGE", Compiled::TimedOut(60)),
            Row::new("durbin", "MEDIUM", Compiled::Refused("line 4: why".into())),
        ];
        let first = table(&rows, &setup());
        let kept = read(&first, &[]).unwrap();
        assert_eq!(kept.rows.len(), 4);
        let again = table(&kept.rows, &setup());
        assert_eq!(first, again);
        let mut later = setup();
        later.later = vec!["lu".into()];
        let text = table(&kept.rows, &later);
        assert_eq!(read(&text, &[]).unwrap().later, ["lu"]);
    }

    #[test]
    fn the_gemm_table_is_kept_when_gemm_is_not_measured_again() {
        let earlier = read(SECTION, &["bicg".to_string()]).unwrap();
        assert_eq!(earlier.rows.len(), 2);
        assert!(earlier.gemm.unwrap().starts_with("\ngemm at LARGE_DATASET"));
    }

    /// The table of docs/benchmarks.md reads back whole, so that a run of a few kernels can keep it.
    #[test]
    fn the_readme_table_reads_back() {
        let section = crate::readme::section("cpu").unwrap();
        let lines = section
            .lines()
            .skip_while(|l| !l.starts_with("| kernel | dataset |"))
            .skip(2)
            .take_while(|l| l.starts_with("| "))
            .count();
        let earlier = read(&section, &[]).unwrap();
        assert!(lines >= 30, "{lines} rows");
        assert_eq!(earlier.rows.len(), lines);
        assert!(earlier.gemm.is_some());
    }
}
