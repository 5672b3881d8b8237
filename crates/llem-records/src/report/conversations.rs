//! The report's conversations section: for each run whose traffic was multi-turn
//! conversations, the energy per conversation and, per turn position, the prompt's growth,
//! what the prefix cache served and the energy (from `result.json` `conversations`).

use std::fmt::Write;

use serde_json::Value;

use super::svg::esc;
use super::{MAX_TIMELINES, llem_result};
use crate::compare;

/// `x` with `digits` decimals, or an em dash when absent.
fn num(x: Option<f64>, digits: usize) -> String {
    x.filter(|v| v.is_finite())
        .map_or_else(|| "—".to_string(), |v| format!("{v:.digits$}"))
}

/// One run's table from its `conversations` object.
pub(super) fn table(label: &str, c: &Value) -> String {
    let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let mut h = String::new();
    let per = c.get("energy_per_session_j");
    let _ = write!(
        h,
        "<h3>{}</h3><p>{} conversations, {} turns; energy per conversation {} J mean (p50 {}, \
         p99 {}); later turns' prompt tokens from the prefix cache: {}</p>",
        esc(label),
        f(c, "sessions").unwrap_or(0.0),
        f(c, "turns").unwrap_or(0.0),
        num(per.and_then(|d| f(d, "mean")), 2),
        num(per.and_then(|d| f(d, "p50")), 2),
        num(per.and_then(|d| f(d, "p99")), 2),
        f(c, "later_turn_cache_hit_rate").map_or_else(
            || "not reported".to_string(),
            |x| format!("{:.0} %", x * 100.0)
        ),
    );
    h.push_str(
        "<table><tr><th>turn</th><th>requests</th><th>mean prompt tokens</th>\
         <th>mean from cache</th><th>mean energy (J)</th></tr>",
    );
    for t in c
        .get("by_turn")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            num(f(t, "turn").map(|x| x + 1.0), 0),
            num(f(t, "requests"), 0),
            num(f(t, "mean_input_tokens"), 1),
            num(f(t, "mean_cached_input_tokens"), 1),
            num(f(t, "mean_energy_j"), 3),
        );
    }
    h.push_str("</table>");
    h
}

/// The section; nothing when no run sent conversations.
pub(super) fn section(h: &mut String, runs: &crate::Runs) {
    let mut body = String::new();
    let mut shown = 0usize;
    for r in runs.iter() {
        if shown == MAX_TIMELINES {
            break;
        }
        let Some(c) = llem_result(r).and_then(|v| v.get("conversations").cloned()) else {
            continue;
        };
        if c.is_null() {
            continue;
        }
        body.push_str(&table(&compare::label(r), &c));
        shown += 1;
    }
    if body.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<section id=\"conversations\"><h2>Conversations</h2><p>Runs whose traffic was \
         multi-turn conversations: each turn's prompt is the conversation so far with the \
         server's replies, so it grows turn by turn. A conversation's energy is the sum of its \
         requests' attributed energies.</p>{body}</section>"
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_row_per_turn_and_says_what_is_missing() {
        let c = serde_json::json!({
            "sessions": 2, "turns": 3,
            "energy_per_session_j": {"mean": 4.5, "p50": 4.5, "p90": 5.0, "p99": 5.0, "n": 2},
            "later_turn_cache_hit_rate": 0.75,
            "by_turn": [
                {"turn": 0, "requests": 2, "mean_input_tokens": 50.0,
                 "mean_cached_input_tokens": 0.0, "mean_energy_j": 2.0},
                {"turn": 1, "requests": 1, "mean_input_tokens": 120.0,
                 "mean_cached_input_tokens": null, "mean_energy_j": 2.5}
            ],
            "by_session": []
        });
        let h = table("run <a>", &c);
        assert!(h.contains("run &lt;a&gt;"));
        assert!(h.contains("4.50 J mean") && h.contains("75 %"));
        assert_eq!(h.matches("<tr>").count(), 3);
        assert!(h.contains("<td>2</td><td>1</td><td>120.0</td><td>—</td><td>2.500</td>"));
    }
}
