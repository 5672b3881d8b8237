//! Progress display: one indicatif line per phase, with live tokens/s and watts while the
//! workload runs; plain lines when stderr is not a terminal.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{HumanDuration, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use llem_app::{Event, Phase, Progress};

/// Renders harness events on stderr.
pub struct Bars {
    bar: Option<ProgressBar>,
    phase: Option<Phase>,
    total: Option<u64>,
    tty: bool,
}

impl Bars {
    /// A renderer for stderr.
    pub fn new() -> Bars {
        Bars {
            bar: None,
            phase: None,
            total: None,
            tty: std::io::stderr().is_terminal(),
        }
    }

    fn style(total: Option<u64>) -> ProgressStyle {
        let t = if total.is_some() {
            "{spinner:.cyan} {prefix:>13.bold} [{bar:30.cyan/blue}] {pos}/{len} {elapsed:>4}{phase_eta} {msg}"
        } else {
            "{spinner:.cyan} {prefix:>13.bold} {elapsed:>4} {msg}"
        };
        ProgressStyle::with_template(t)
            .unwrap_or_else(|_| ProgressStyle::default_spinner())
            .progress_chars("=> ")
            // indicatif's own estimate follows the last few steps: with a request finishing
            // now and then it swung from seconds to days. The phase's mean rate does not.
            .with_key(
                "phase_eta",
                |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let left = llem_app::status::phase_eta(
                        s.pos(),
                        s.len().unwrap_or(0),
                        s.elapsed().as_secs_f64(),
                    );
                    if let Some(left) = left.and_then(|s| Duration::try_from_secs_f64(s).ok()) {
                        let _ = write!(w, " (eta {})", HumanDuration(left));
                    }
                },
            )
    }
}

impl Progress for Bars {
    fn event(&mut self, e: Event) {
        match e {
            // Per-request figures are for live metrics; the bar counts requests already.
            Event::Request { .. } => {}
            Event::Start {
                phase,
                total,
                detail,
            } => {
                self.phase = Some(phase);
                self.total = total;
                if !self.tty {
                    eprintln!("llem: {} {detail}", phase.as_str());
                    return;
                }
                let bar = match total {
                    Some(n) => ProgressBar::new(n),
                    None => ProgressBar::new_spinner(),
                };
                bar.set_draw_target(ProgressDrawTarget::stderr());
                bar.set_style(Bars::style(total));
                bar.set_prefix(phase.as_str());
                bar.set_message(detail);
                bar.enable_steady_tick(Duration::from_millis(120));
                self.bar = Some(bar);
            }
            Event::Advance {
                done,
                tokens,
                elapsed_s,
                power_w,
            } => {
                let Some(bar) = &self.bar else { return };
                bar.set_position(done);
                if self.phase == Some(Phase::Measure) {
                    let tps = if elapsed_s > 0.0 {
                        tokens as f64 / elapsed_s
                    } else {
                        0.0
                    };
                    let watts = power_w.map_or_else(|| "- W".to_string(), |w| format!("{w:.1} W"));
                    bar.set_message(format!("{tokens} tok  {tps:.1} tok/s  {watts}"));
                }
            }
            Event::Finish { phase, summary } => {
                if let Some(bar) = self.bar.take() {
                    bar.set_style(
                        ProgressStyle::with_template("  {prefix:>13.green} {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    bar.finish_with_message(summary);
                } else {
                    eprintln!("llem: {} done: {summary}", phase.as_str());
                }
                self.phase = None;
            }
            Event::Note(n) => match &self.bar {
                Some(b) => b.println(format!("llem: {n}")),
                None => eprintln!("llem: {n}"),
            },
            // In-process runs stop their server themselves (drop, or the signal handler's
            // cancel); only a cell's supervisor needs to know.
            Event::ServerStarted { .. } => {}
        }
    }
}
