//! Test support shared by the integration tests of this crate.
pub mod prompts;

/// Tests that must have the machine to themselves (servers with timing bounds, studies, torch
/// model loads) hold [`exclusive`]; other tests that run a model hold [`shared`]. Two cores:
/// llama.cpp's worker threads spin, and two such tests at once slow each other down by an
/// order of magnitude and stretch timed bounds.
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The machine to this test alone.
pub fn exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    MACHINE
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The machine shared with other tests that hold [`shared`], never with an [`exclusive`] one.
pub fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    MACHINE
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
