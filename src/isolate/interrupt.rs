//! The stop request (Ctrl-C, or SIGTERM or SIGHUP): set once, read by the rounds and the
//! workers' task loops.

/// Why a configuration did not run or compile in a run that was stopped (the CSV's `error`).
pub const STOPPED: &str = "interrupted (Ctrl-C or SIGTERM)";

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks the run to stop after the variant in flight (Ctrl-C, SIGTERM, SIGHUP). Workers run in
/// their own process group, so the terminal's SIGINT reaches only the parent, which ends them
/// itself.
pub fn request_stop() {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// True once [`request_stop`] was called.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}
