//! Writing to a closed pipe (`polyfuse run K | head -1`) ends the process quietly, as it does
//! any Unix filter: the Rust runtime ignores `SIGPIPE`, which turns the write into an error that
//! `print!` reports as a panic; restoring the default action lets the signal end the process
//! with its usual status instead.

/// Restores the default action of `SIGPIPE`. Called first thing in `main`.
pub(crate) fn restore_default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: `signal` with `SIG_DFL` installs no handler and touches no Rust state; the
    // process has no other threads yet.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
