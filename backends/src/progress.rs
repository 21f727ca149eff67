//! A progress line for long interpreter runs: drawn on standard error once a run has taken more
//! than a second, only when standard output and standard error are terminals (and the caller
//! asked for one: the command line does not with `--json`), and erased when the run ends.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a run goes before the line appears, and how often it is redrawn.
const DELAY: Duration = Duration::from_secs(1);
const REDRAW: Duration = Duration::from_millis(100);

pub(crate) struct Progress {
    label: String,
    start: Instant,
    /// When the line was last drawn; `None` until it first is.
    drawn: Mutex<Option<Instant>>,
}

impl Progress {
    /// A progress line for `label`, or `None` where none should be shown.
    pub(crate) fn for_terminal(label: &str) -> Option<Progress> {
        if !std::io::stdout().is_terminal() || !std::io::stderr().is_terminal() {
            return None;
        }
        Some(Progress {
            label: label.to_string(),
            start: Instant::now(),
            drawn: Mutex::new(None),
        })
    }

    /// Records that `fraction` of the work is done; redraws the line when it is due.
    pub(crate) fn update(&self, fraction: f64) {
        let now = Instant::now();
        let elapsed = now - self.start;
        if elapsed < DELAY {
            return;
        }
        let Ok(mut drawn) = self.drawn.lock() else {
            return;
        };
        if drawn.is_some_and(|t| now - t < REDRAW) {
            return;
        }
        *drawn = Some(now);
        let percent = (fraction.clamp(0.0, 1.0) * 100.0).floor();
        let width = 30;
        let filled = (fraction.clamp(0.0, 1.0) * width as f64) as usize;
        let bar: String = (0..width)
            .map(|k| if k < filled { '=' } else { ' ' })
            .collect();
        // A failed write to the terminal only loses the progress line.
        let _ = write!(
            std::io::stderr(),
            "\r{} [{bar}] {percent:>3}% {:.1} s",
            self.label,
            elapsed.as_secs_f64()
        );
    }

    /// Erases the line, if it was drawn.
    pub(crate) fn finish(&self) {
        if matches!(self.drawn.lock().as_deref(), Ok(Some(_))) {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}
