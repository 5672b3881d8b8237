//! The machine, shared between a test binary's tests. Tests that must have it to themselves
//! (servers with timing bounds, studies, torch model loads) hold [`exclusive`]; other tests
//! that run a model hold [`shared`]. Two cores: llama.cpp's worker threads spin, and two such
//! tests at once slow each other down by an order of magnitude and stretch timed bounds. One
//! lock per test binary (each links this crate once).

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

static MACHINE: RwLock<()> = RwLock::new(());

/// The machine to this test alone.
pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(PoisonError::into_inner)
}

/// The machine shared with other tests that hold [`shared`], never with an [`exclusive`] one.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(PoisonError::into_inner)
}
