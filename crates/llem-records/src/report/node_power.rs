//! The report's whole-node section: for runs measured with a node power sensor (a BMC or
//! the ACPI power meter), the node's energy per output token stacked as the parts the
//! components measured (GPU, CPU packages, DRAM) and the unattributed remainder (fans, NICs,
//! storage, the board, power-supply losses), with the bounds; a remainder below zero beyond
//! its bound is shown as such, not as a bar.

use std::fmt::Write;

use serde_json::Value;

use super::llem_result;
use super::svg::esc;
use crate::compare;

/// One run's stack, mJ per output token: GPU, CPU, DRAM, unattributed, node, node bound,
/// remainder bound, sensor.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Stack {
    label: String,
    parts: [f64; 4],
    node: f64,
    node_bound: Option<f64>,
    rest_bound: Option<f64>,
    sensor: String,
}

const PARTS: [(&str, &str); 4] = [
    ("GPU", "#4e79a7"),
    ("CPU", "#f28e2b"),
    ("DRAM", "#59a14f"),
    ("unattributed", "#bab0ac"),
];

/// The stack of one result, per output token; `None` without a node measurement or tokens.
pub(super) fn stack(label: &str, r: &Value) -> Option<Stack> {
    let b = r.get("energy_breakdown")?;
    let n = b.get("node").filter(|n| !n.is_null())?;
    let tokens = r
        .get("total_output_tokens")?
        .as_f64()
        .filter(|t| *t > 0.0)?;
    let per = |j: f64| j / tokens * 1000.0;
    let kind = |k: &str| {
        b.get(k)
            .and_then(|v| v.get("energy_j"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
    };
    let f = |k: &str| n.get(k).and_then(Value::as_f64);
    Some(Stack {
        label: label.to_string(),
        parts: [
            per(kind("gpu")),
            per(kind("cpu_package")),
            per(kind("dram")),
            per(f("unattributed_j")?),
        ],
        node: per(f("energy_j")?),
        node_bound: f("bound_j").map(per),
        rest_bound: f("unattributed_bound_j").map(per),
        sensor: n
            .get("sensor")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    })
}

fn num(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map_or_else(|| "—".to_string(), |x| format!("{x:.2}"))
}

/// Horizontal stacked bars, one per run, scaled to the largest node figure plus its bound.
fn chart(stacks: &[Stack]) -> String {
    let (left, width, row) = (220.0, 460.0, 26.0);
    let top = 30.0;
    let max = stacks
        .iter()
        .map(|s| s.node + s.node_bound.unwrap_or(0.0))
        .chain(
            stacks
                .iter()
                .map(|s| s.parts.iter().map(|p| p.max(0.0)).sum()),
        )
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let x = |v: f64| left + v / max * width;
    let height = top + row * stacks.len() as f64 + 30.0;
    let mut s = format!(
        "<svg id=\"node-energy-stack\" xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" \
         height=\"{height:.0}\" role=\"img\" aria-label=\"node energy per output token, stacked\">"
    );
    for (i, (name, colour)) in PARTS.iter().enumerate() {
        let lx = left + i as f64 * 115.0;
        let _ = write!(
            s,
            "<rect x=\"{lx:.0}\" y=\"6\" width=\"12\" height=\"12\" fill=\"{colour}\"/>\
             <text x=\"{:.0}\" y=\"16\" font-size=\"12\">{name}</text>",
            lx + 16.0
        );
    }
    for (i, st) in stacks.iter().enumerate() {
        let y = top + row * i as f64;
        let _ = write!(
            s,
            "<text x=\"{:.0}\" y=\"{:.0}\" font-size=\"12\" text-anchor=\"end\">{}</text>",
            left - 6.0,
            y + 14.0,
            esc(&st.label)
        );
        let mut at = 0.0;
        for (v, (name, colour)) in st.parts.iter().zip(PARTS) {
            // A remainder below zero has no bar: the table says it, with its bound.
            let v = v.max(0.0);
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"{y:.0}\" width=\"{:.1}\" height=\"18\" fill=\"{colour}\">\
                 <title>{name}: {v:.2} mJ/tok</title></rect>",
                x(at),
                x(at + v) - x(at)
            );
            at += v;
        }
        if let Some(b) = st.node_bound {
            let (a, c) = (x((st.node - b).max(0.0)), x(st.node + b));
            let ym = y + 9.0;
            let _ = write!(
                s,
                "<line x1=\"{a:.1}\" y1=\"{ym:.0}\" x2=\"{c:.1}\" y2=\"{ym:.0}\" stroke=\"#222\"/>\
                 <line x1=\"{a:.1}\" y1=\"{:.0}\" x2=\"{a:.1}\" y2=\"{:.0}\" stroke=\"#222\"/>\
                 <line x1=\"{c:.1}\" y1=\"{:.0}\" x2=\"{c:.1}\" y2=\"{:.0}\" stroke=\"#222\"/>",
                ym - 5.0,
                ym + 5.0,
                ym - 5.0,
                ym + 5.0
            );
        }
    }
    let _ = write!(
        s,
        "<text x=\"{left:.0}\" y=\"{:.0}\" font-size=\"12\">0</text>\
         <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"12\" text-anchor=\"end\">{max:.2} mJ per \
         output token</text></svg>",
        height - 8.0,
        left + width,
        height - 8.0
    );
    s
}

/// The section; nothing when no run measured node power.
pub(super) fn section(h: &mut String, runs: &crate::Runs) {
    let stacks: Vec<Stack> = runs
        .iter()
        .filter_map(|r| stack(&compare::label(r), &llem_result(r)?))
        .collect();
    if stacks.is_empty() {
        return;
    }
    let mut rows = String::new();
    for st in &stacks {
        let _ = write!(
            rows,
            "<tr><td class=\"t\">{}</td><td class=\"t\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{} ± {}</td><td>{} ± {}</td></tr>",
            esc(&st.label),
            esc(&st.sensor),
            num(Some(st.node)),
            num(Some(st.parts[0])),
            num(Some(st.parts[1])),
            num(Some(st.parts[2])),
            num(Some(st.parts[3])),
            num(st.rest_bound),
            num(Some(st.node)),
            num(st.node_bound),
        );
    }
    let _ = write!(
        h,
        "<section id=\"node-energy\"><h2>Whole node</h2><p>Energy per output token of the whole \
         node (a BMC over IPMI or Redfish, or the ACPI power meter), stacked as what the \
         component sensors measured (GPU, CPU packages, DRAM) and the unattributed remainder \
         the node draws beside them (fans, NICs, storage, the board, power-supply losses). The \
         whisker is the node figure's bound; the remainder's bound adds the node's and the \
         components'. A node reading updated about once a second is coarse for short windows.</p>\
         {}<table><tr><th class=\"t\">configuration</th><th class=\"t\">sensor</th>\
         <th>node mJ/tok</th><th>GPU</th><th>CPU</th><th>DRAM</th><th>unattributed ± bound</th>\
         <th>node ± bound</th></tr>{rows}</table></section>",
        chart(&stacks)
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_run_stacks_its_components_and_remainder_per_token() {
        let r = serde_json::json!({
            "total_output_tokens": 1000,
            "energy_breakdown": {
                "cpu_package": {"energy_j": 20.0}, "dram": {"energy_j": 2.0},
                "node": {"energy_j": 65.0, "unattributed_j": 43.0, "bound_j": 4.0,
                         "unattributed_bound_j": 4.5, "sensor": "ipmi"}
            }
        });
        let s = stack("bs=4", &r).unwrap();
        assert_eq!(s.parts, [0.0, 20.0, 2.0, 43.0]);
        assert_eq!(s.node, 65.0);
        assert_eq!(s.rest_bound, Some(4.5));
        let svg = chart(&[s]);
        assert!(svg.contains("unattributed: 43.00 mJ/tok"), "{svg}");
        assert!(stack("x", &serde_json::json!({"energy_breakdown": {}})).is_none());
    }
}
