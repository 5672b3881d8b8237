//! What `llem results query` and `compare` select: runs matching `--where` conditions, grouped
//! by fields; a configuration picked by label or hash; a field's groups to compare.

use std::path::Path;

use super::RecordsError;
use super::runs::{Condition, Group, Runs, resolve_field};

/// A query, parsed before any run is loaded: conditions that must all hold, the fields to
/// group by (aliases resolved), and whether only stable runs count.
#[derive(Clone, Debug)]
pub struct Query {
    /// Conditions every selected run meets.
    pub conditions: Vec<Condition>,
    /// Record fields the runs are grouped by, in order.
    pub fields: Vec<String>,
    /// Stable runs only.
    pub stable: bool,
}

impl Query {
    /// Parses `--where` conditions and `--group-by` fields.
    pub fn parse(
        conditions: &[String],
        group_by: &[String],
        stable: bool,
    ) -> Result<Query, RecordsError> {
        let conditions = conditions
            .iter()
            .map(|c| Condition::parse(c))
            .collect::<Result<Vec<_>, _>>()?;
        let fields = group_by
            .iter()
            .map(|f| resolve_field(f.trim()).map(String::from))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Query {
            conditions,
            fields,
            stable,
        })
    }

    /// The fields, as the group keys name them.
    pub fn field_names(&self) -> Vec<&str> {
        self.fields.iter().map(String::as_str).collect()
    }

    /// The runs of `all` the query selects, in groups (one group with an empty key when it
    /// groups by nothing). A field no run has is an error, not an empty answer.
    pub fn run(&self, all: &Runs) -> Result<Vec<Group>, RecordsError> {
        all.check_paths(
            self.conditions
                .iter()
                .map(|c| c.field.as_str())
                .chain(self.fields.iter().map(String::as_str)),
        )?;
        let mut runs = all.filter(|r| self.conditions.iter().all(|c| c.matches(r)));
        if self.stable {
            runs = runs.stable();
        }
        if self.fields.is_empty() {
            return Ok(vec![Group {
                key: Vec::new(),
                runs,
            }]);
        }
        runs.group_by(&self.field_names())
    }
}

/// The runs of one configuration: labelled `pick`, or whose configuration hash starts with
/// it. None is an error that lists the labels there are.
pub fn configuration(runs: &Runs, pick: &str) -> Result<Runs, RecordsError> {
    let chosen = runs.filter(|r| {
        r.extra.label.as_deref() == Some(pick)
            || r.extra
                .config_hash
                .as_deref()
                .is_some_and(|h| h.starts_with(pick))
    });
    if chosen.is_empty() {
        let mut known: Vec<String> = runs.iter().filter_map(|r| r.extra.label.clone()).collect();
        known.dedup();
        return Err(RecordsError::Usage(format!(
            "--pick {pick:?} matches no run's label or configuration hash; labels: {}",
            known.join(" | ")
        )));
    }
    Ok(chosen)
}

/// The runs (loaded from `source`) grouped by `field` (an alias resolved) for a comparison:
/// the field's name and at least two groups.
pub fn groups_to_compare(
    runs: &Runs,
    field: &str,
    source: &Path,
) -> Result<(String, Vec<Group>), RecordsError> {
    let field = resolve_field(field)?;
    let groups = runs.group_by(&[field])?;
    if groups.len() < 2 {
        return Err(RecordsError::Usage(format!(
            "{field} has {} value(s) among the runs under {}: nothing to compare",
            groups.len(),
            source.display()
        )));
    }
    Ok((field.to_string(), groups))
}
