//! A study cell's side of live metrics: its sampler's running figures, read off the board
//! every interval and reported as `live` lines to the study's parent, which owns the
//! endpoint.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use llem_energy::{LiveBoard, LiveSnapshot};
use llem_study::{CellMessage, LiveFigure};

/// The `live` line of a snapshot.
pub fn message(s: &LiveSnapshot) -> CellMessage {
    CellMessage::Live {
        meter: s.meter,
        domains: s
            .domains
            .iter()
            .map(|d| LiveFigure {
                name: d.name.clone(),
                kind: d.kind.as_str().to_string(),
                energy_j: d.energy_j,
                power_w: d.power_w,
            })
            .collect(),
    }
}

/// Reports the board every interval until dropped, then once more (the final figures).
pub struct Relay {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    /// Starts reporting `board` through `emit` every `interval`.
    pub fn start(
        board: LiveBoard,
        interval: Duration,
        emit: impl Fn(&CellMessage) + Send + 'static,
    ) -> Relay {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("llem-live-relay".into())
            .spawn(move || {
                let mut last: Option<LiveSnapshot> = None;
                loop {
                    let done = flag.load(Ordering::Acquire);
                    if let Some(s) = board.snapshot()
                        && last.as_ref() != Some(&s)
                    {
                        emit(&message(&s));
                        last = Some(s);
                    }
                    if done {
                        break;
                    }
                    std::thread::park_timeout(interval);
                }
            })
            .ok();
        Relay { stop, thread }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
