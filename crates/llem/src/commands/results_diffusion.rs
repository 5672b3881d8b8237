//! The diffusion side of `llem results`: ML.ENERGY's text-to-image and text-to-video runs
//! listed beside the LLM runs, and queried and exported with `--diffusion`.

use llem_records::diffusion_runs::resolve_diffusion_field;
use llem_records::export::{DIFFUSION_HEADLINE, Record};
use llem_records::runs::Condition;
use llem_records::table::{cell, fit_table};
use llem_records::{DiffusionRuns, RecordsError};

use super::results::{emit, terminal_width};

/// The diffusion runs as a table fitted to the terminal.
pub fn print(runs: &DiffusionRuns) {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            DIFFUSION_HEADLINE
                .iter()
                .map(|f| cell(r.value(f)))
                .collect()
        })
        .collect();
    emit(&fit_table(DIFFUSION_HEADLINE, &rows, terminal_width()));
}

/// `llem results list`: the diffusion runs under their own header.
pub fn list(runs: &DiffusionRuns) {
    if runs.is_empty() {
        return;
    }
    emit(&format!(
        "diffusion runs (ML.ENERGY text-to-image / text-to-video): {}\n",
        runs.len()
    ));
    print(runs);
    emit("\n");
}

/// `llem results query --diffusion`: filter on diffusion fields, group, print or JSON.
pub fn query(
    runs: &DiffusionRuns,
    conditions: &[String],
    group_by: &[String],
    json: bool,
) -> Result<(), RecordsError> {
    let conds = conditions
        .iter()
        .map(|c| Condition::parse_with(c, resolve_diffusion_field))
        .collect::<Result<Vec<_>, _>>()?;
    let runs = runs.filter(|r| conds.iter().all(|c| c.matches_value(r.field(&c.field))));
    let names: Vec<&str> = group_by.iter().map(|s| s.trim()).collect();
    let groups = if names.is_empty() {
        vec![(Vec::new(), runs)]
    } else {
        runs.group_by(&names)?
            .into_iter()
            .map(|g| (g.key, g.runs))
            .collect()
    };
    if json {
        let mut all = Vec::new();
        for (_, g) in &groups {
            if let serde_json::Value::Array(a) = g.to_json() {
                all.extend(a);
            }
        }
        emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(&serde_json::Value::Array(all)).unwrap_or_default()
        ));
        return Ok(());
    }
    for (key, g) in &groups {
        if !names.is_empty() {
            let k: Vec<String> = names
                .iter()
                .zip(key)
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            emit(&format!("{} ({} runs)\n", k.join(", "), g.len()));
        }
        print(g);
    }
    Ok(())
}
