//! Runs one `.npuasm` file as `polyfuse sim` would: `simrun FILE [--inputs DIR] [--json]
//! [--timeline OUT.svg]`. With `--throughput N` it instead simulates the file N times and prints
//! simulated instructions per second (the figure `cargo xtask bench` records).

use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut file = None;
    let mut inputs = None;
    let mut json = false;
    let mut timeline = None;
    let mut throughput = None;
    let mut machine = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--inputs" => inputs = it.next().map(PathBuf::from),
            "--json" => json = true,
            "--machine" => machine = it.next().map(PathBuf::from),
            "--timeline" => timeline = it.next().map(PathBuf::from),
            "--throughput" => throughput = it.next().and_then(|n| n.parse::<u32>().ok()),
            _ => file = Some(PathBuf::from(a)),
        }
    }
    let Some(file) = file else {
        eprintln!("usage: simrun FILE.npuasm [--inputs DIR] [--json] [--timeline OUT.svg] [--machine FILE] [--throughput N]");
        std::process::exit(2);
    };
    if let Some(n) = throughput {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let kernel = match sim::load(&file.display().to_string(), &text, &sim::Machine::default()) {
            Ok(k) => k,
            Err(e) => {
                eprint!("{}", e.render(false));
                std::process::exit(1);
            }
        };
        let inputs = sim::random_inputs(kernel.program(), sim::DEFAULT_SEED);
        let start = Instant::now();
        let mut instructions = 0u64;
        for _ in 0..n.max(1) {
            match sim::simulate(&kernel, &inputs, &sim::SimOptions::default()) {
                Ok(o) => instructions += o.report.instructions,
                Err(e) => {
                    eprint!("{}", e.render(false));
                    std::process::exit(1);
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{instructions} instructions in {secs:.3} s: {:.2} M simulated instructions/s",
            instructions as f64 / secs / 1e6
        );
        return;
    }
    match sim::run_command_on(
        machine.as_deref(),
        &file,
        inputs.as_deref(),
        json,
        timeline.as_deref(),
        &sim::SimOptions::default(),
    ) {
        Ok(out) => print!("{out}"),
        Err(e) => {
            eprint!("{}", e.message);
            std::process::exit(1);
        }
    }
}
