//! The report's node section, shown when the runs were measured on more than one host (a
//! Slurm study): each configuration's mean energy per token and throughput on each node, so
//! a node that draws more for the same work stands out along its column.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::svg::esc;
use crate::compare::Configuration;
use crate::table::short_number;

/// One run as the section sees it: configuration label, host, mJ/tok, tok/s.
pub(super) type NodeRun<'a> = (&'a str, &'a str, f64, f64);

/// The hosts, in name order.
fn hosts<'a>(runs: &[NodeRun<'a>]) -> Vec<&'a str> {
    runs.iter()
        .map(|r| r.1)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The section's HTML, or nothing when the runs come from one host.
pub(super) fn html(labels: &[&str], runs: &[NodeRun<'_>]) -> String {
    let hosts = hosts(runs);
    if hosts.len() < 2 {
        return String::new();
    }
    let mut h = String::new();
    let _ = write!(
        h,
        "<section id=\"nodes\"><h2>By node</h2><p>The runs were measured on {} hosts. Each cell: \
         mean mJ/tok, mean tok/s and the number of runs of that configuration on that node.</p>\
         <table><tr><th class=\"t\">configuration</th>",
        hosts.len()
    );
    for n in &hosts {
        let _ = write!(h, "<th>{}</th>", esc(n));
    }
    h.push_str("</tr>");
    for label in labels {
        let _ = write!(h, "<tr><td class=\"t\">{}</td>", esc(label));
        for n in &hosts {
            let mine: Vec<&NodeRun<'_>> =
                runs.iter().filter(|r| r.0 == *label && r.1 == *n).collect();
            if mine.is_empty() {
                h.push_str("<td>-</td>");
                continue;
            }
            let k = mine.len() as f64;
            let mj = mine.iter().map(|r| r.2).sum::<f64>() / k;
            let tps = mine.iter().map(|r| r.3).sum::<f64>() / k;
            let _ = write!(
                h,
                "<td>{} mJ/tok, {} tok/s ({})</td>",
                short_number(mj),
                short_number(tps),
                mine.len()
            );
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></section>");
    h
}

/// The section for `configs`: runs without a host (other tools' records) are left out.
pub(super) fn section(h: &mut String, configs: &[Configuration]) {
    let labels: Vec<&str> = configs.iter().map(|c| c.label.as_str()).collect();
    let runs: Vec<NodeRun<'_>> = configs
        .iter()
        .flat_map(|c| {
            c.runs.iter().filter_map(|r| {
                Some((
                    c.label.as_str(),
                    r.extra.host.as_deref()?,
                    r.energy_per_token_joules * 1000.0,
                    r.output_throughput_tokens_per_sec,
                ))
            })
        })
        .collect();
    h.push_str(&html(&labels, &runs));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_column_per_node_and_nothing_for_a_single_host() {
        let runs = [
            ("b=1", "n1", 2.0, 10.0),
            ("b=1", "n1", 4.0, 30.0),
            ("b=1", "n2", 5.0, 8.0),
            ("b=2", "n2", 1.0, 40.0),
        ];
        let h = html(&["b=1", "b=2"], &runs);
        assert!(h.contains("<th>n1</th><th>n2</th>"), "{h}");
        assert!(
            h.contains(
                "<td>3.000 mJ/tok, 20.00 tok/s (2)</td><td>5.000 mJ/tok, 8.000 tok/s (1)</td>"
            ),
            "{h}"
        );
        assert!(h.contains("<td class=\"t\">b=2</td><td>-</td>"), "{h}");
        assert!(html(&["b=1"], &runs[..2]).is_empty());
    }
}
