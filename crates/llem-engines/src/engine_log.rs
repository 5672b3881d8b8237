//! The last warnings and errors an in-process engine logged, kept so a failure can say why.
//!
//! llama.cpp explains a failed load only in its log ("tensor data is not within the file
//! bounds"); its API returns a bare null. The binary's log subscriber feeds engine warnings
//! here whatever the verbosity, and the engine quotes them in its error.

use std::collections::VecDeque;
use std::sync::Mutex;

/// How many lines are kept.
const KEPT: usize = 6;

static RECENT: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());

/// Records one warning or error line of an engine's log.
pub fn note(line: String) {
    if let Ok(mut r) = RECENT.lock() {
        if r.len() == KEPT {
            r.pop_front();
        }
        r.push_back(line);
    }
}

/// The lines recorded since the last call, oldest first (and forgets them).
pub fn take_recent() -> Vec<String> {
    RECENT
        .lock()
        .map(|mut r| r.drain(..).collect())
        .unwrap_or_default()
}

/// Forgets what was recorded (before an operation whose failure will quote the log).
pub fn clear() {
    if let Ok(mut r) = RECENT.lock() {
        r.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_and_forgets_them_once_taken() {
        clear();
        for i in 0..10 {
            note(format!("line {i}"));
        }
        let got = take_recent();
        assert_eq!(got.len(), KEPT);
        assert_eq!(got.first().map(String::as_str), Some("line 4"));
        assert!(take_recent().is_empty());
    }
}
