//! `sweep:` and `experiments:` expansion into one tree per grid point.
//!
//! Grammar (seed 003):
//! - `key: [v1, v2]` — an independent axis; axes are crossed (Cartesian product, the last
//!   axis varying fastest). A scalar is a one-value axis.
//! - `name: [{..}, {..}]` — a dependent group: its entries are alternatives (a union, not a
//!   product); `{}` is a baseline that overrides nothing; a list inside an entry is a
//!   mini-grid within that entry. Groups are crossed with each other and with the axes.
//! - Keys are dotted paths. A path (or group name) whose first segment is an engine
//!   (`transformers.batch_size`, `vllm.engine.block_size`, `pytorch.compilation`) applies
//!   only to that engine's experiments; other paths apply to all.
//! - An `engine` axis (or an `engine:` list among the shared fields) lists the engines;
//!   engine-scoped axes also bring in their engine.
//! - `experiments:` entries are merged onto the shared fields and appended after the
//!   sweep's points. An entry naming its own engine drops the shared sections of other
//!   engines; ones written in the entry itself are kept (and rejected if they do not match).

use std::path::{Path, PathBuf};

use crate::aliases::{canonical_path, normalize_keys};
use crate::error::{ConfigError, Diagnostic, ErrorKind};
use crate::load::Loader;
use crate::model::Engine;
use crate::source::Span;
use crate::yaml::{Node, NodeKind, deep_merge};

/// Most configurations one plan may expand to: each costs about 1.4 KB and 5 us to plan,
/// so the largest plan stays near 350 MB and a second or two; at a minute per cell it is
/// already half a year of measuring.
pub const MAX_POINTS: u128 = 250_000;

/// Deepest dotted path a sweep key may have (configs are a few levels deep; the bound keeps
/// every recursive pass over the trees shallow).
const MAX_PATH_SEGMENTS: usize = 16;

/// Takes each point as it is built (typed, hashed and dropped there), so a plan never
/// holds every point's tree at once.
pub type OnPoint<'a> = dyn FnMut(Point, &crate::source::SourceMap) -> Result<(), ConfigError> + 'a;

/// One configuration before typing: its tree and a label naming what makes it different.
#[derive(Clone, Debug)]
pub struct Point {
    /// Merged tree.
    pub tree: Node,
    /// `dtype=float16, transformers.batch_size=4`, or an experiment's name.
    pub label: String,
}

#[derive(Clone)]
struct Assign {
    path: Vec<String>,
    written: String,
    value: Node,
}

struct Axis {
    written: String,
    path: Vec<String>,
    scope: Option<Engine>,
    values: Vec<Node>,
}

struct Group {
    name: String,
    scope: Option<Engine>,
    variants: Vec<Vec<Assign>>,
}

fn err(loader: &Loader<'_>, kind: ErrorKind, msg: String, span: Span) -> ConfigError {
    Diagnostic::new(kind, msg)
        .at(loader.sources.location(span))
        .into()
}

/// The engine a canonical path is scoped to.
fn scope_of(path: &[String]) -> Option<Engine> {
    if path.len() < 2 {
        return None;
    }
    let first = path.first()?;
    Engine::WITH_SECTIONS
        .iter()
        .copied()
        .find(|e| e.as_str() == first)
}

fn split_path(key: &str, span: Span, loader: &Loader<'_>) -> Result<Vec<String>, ConfigError> {
    let segs: Vec<&str> = key.split('.').collect();
    if segs.len() > MAX_PATH_SEGMENTS {
        return Err(err(
            loader,
            ErrorKind::Sweep,
            format!("`{key}` has more than {MAX_PATH_SEGMENTS} segments"),
            span,
        ));
    }
    if segs.iter().any(|s| s.trim().is_empty()) {
        return Err(err(
            loader,
            ErrorKind::Sweep,
            format!("`{key}` is not a valid dotted path"),
            span,
        ));
    }
    Ok(canonical_path(&segs))
}

fn render_value(v: &Node) -> String {
    match &v.kind {
        NodeKind::Null => "null".into(),
        NodeKind::Scalar(s) => s.text.to_string(),
        _ => v.to_json().to_string(),
    }
}

fn is_group(values: &[Node]) -> bool {
    values.iter().any(|v| v.as_map().is_some())
}

/// Expands a group entry's mini-grid (list-valued keys) into alternatives.
fn expand_entry(entry: &Node, loader: &Loader<'_>) -> Result<Vec<Vec<Assign>>, ConfigError> {
    let Some(map) = entry.as_map() else {
        return Err(err(
            loader,
            ErrorKind::Sweep,
            "a sweep group's entries must all be mappings".into(),
            entry.span,
        ));
    };
    let mut fixed: Vec<Assign> = Vec::new();
    let mut grid: Vec<(String, Vec<String>, Vec<Node>)> = Vec::new();
    for e in &map.entries {
        let path = split_path(&e.key, e.key_span, loader)?;
        match e.value.as_seq() {
            Some([]) => {
                return Err(err(
                    loader,
                    ErrorKind::Sweep,
                    format!("`{}` has an empty list of values", e.key),
                    e.value.span,
                ));
            }
            Some(items) => grid.push((e.key.to_string(), path, items.to_vec())),
            None => fixed.push(Assign {
                path,
                written: e.key.to_string(),
                value: e.value.clone(),
            }),
        }
    }
    let mut out: Vec<Vec<Assign>> = vec![Vec::new()];
    for (written, path, values) in &grid {
        let mut next = Vec::with_capacity(out.len() * values.len());
        for partial in &out {
            for v in values {
                let mut a: Vec<Assign> = partial.clone();
                a.push(Assign {
                    path: path.clone(),
                    written: written.clone(),
                    value: v.clone(),
                });
                next.push(a);
            }
        }
        out = next;
    }
    // Keys written in the entry keep their order: fixed ones first is fine because paths
    // within one entry never overlap (a mapping has unique keys).
    for variant in &mut out {
        let mut all = fixed.clone();
        all.append(variant);
        *variant = all;
    }
    Ok(out)
}

fn parse_engines(node: &Node, loader: &Loader<'_>) -> Result<Vec<Engine>, ConfigError> {
    let items: Vec<&Node> = match &node.kind {
        NodeKind::Seq(items) => items.iter().collect(),
        _ => vec![node],
    };
    let mut out = Vec::new();
    for item in items {
        let text = item.as_str().unwrap_or("");
        let engine = Engine::from_name(text).ok_or_else(|| {
            let mut d = Diagnostic::new(
                ErrorKind::Type,
                format!(
                    "unknown engine `{}`; expected one of {}",
                    render_value(item),
                    Engine::NAMES.join(", ")
                ),
            )
            .at(loader.sources.location(item.span));
            if let Some(c) = crate::error::did_you_mean(text, Engine::NAMES.iter().copied()) {
                d = d.with_help(format!("did you mean `{c}`?"));
            }
            ConfigError::from(d)
        })?;
        if !out.contains(&engine) {
            out.push(engine);
        }
    }
    Ok(out)
}

/// Sets `path` in `tree`, with a located error when a non-mapping is in the way.
fn assign(
    tree: &mut Node,
    path: &[String],
    written: &str,
    value: &Node,
    loader: &Loader<'_>,
) -> Result<(), ConfigError> {
    let keys: Vec<&str> = path.iter().map(String::as_str).collect();
    tree.set_path(&keys, value.clone()).map_err(|depth| {
        let prefix = keys.get(..depth).map(|k| k.join(".")).unwrap_or_default();
        err(
            loader,
            ErrorKind::Sweep,
            format!("cannot set `{written}`: `{prefix}` is not a mapping"),
            value.span,
        )
    })
}

fn strip_sections(tree: &mut Node, keep: Option<Engine>, written_in_entry: Option<&Node>) {
    let drop: Vec<&str> = Engine::WITH_SECTIONS
        .iter()
        .filter(|e| Some(**e) != keep)
        .map(|e| e.as_str())
        .filter(|k| {
            tree.as_map().is_some_and(|m| m.contains(k))
                && !written_in_entry
                    .and_then(Node::as_map)
                    .is_some_and(|m| m.contains(k))
        })
        .collect();
    if drop.is_empty() {
        return;
    }
    if let Some(m) = tree.as_map_mut() {
        for k in drop {
            m.remove(k);
        }
    }
}

/// Expands the sweep and explicit experiments of a study into points.
pub fn expand(
    fixed: &Node,
    sweep: Option<&Node>,
    experiments: Option<&Node>,
    loader: &mut Loader<'_>,
    study_dir: &Path,
    on_point: &mut OnPoint<'_>,
) -> Result<usize, ConfigError> {
    let explicit: &[Node] = match experiments.map(|e| &e.kind) {
        None | Some(NodeKind::Null) => &[],
        Some(NodeKind::Seq(items)) => items,
        Some(_) => {
            let span = experiments.map_or(fixed.span, |e| e.span);
            return Err(err(
                loader,
                ErrorKind::Sweep,
                "`experiments:` takes a list of experiment mappings".into(),
                span,
            ));
        }
    };
    let sweep_map = match sweep.map(|s| &s.kind) {
        None | Some(NodeKind::Null) => None,
        Some(NodeKind::Map(m)) => Some(m.clone()),
        Some(_) => {
            let span = sweep.map_or(fixed.span, |s| s.span);
            return Err(err(
                loader,
                ErrorKind::Sweep,
                "`sweep:` takes a mapping of axes (`key: [values]`) and groups".into(),
                span,
            ));
        }
    };
    let mut n_points = 0usize;
    let has_sweep = sweep_map.as_ref().is_some_and(|m| !m.entries.is_empty());
    if has_sweep || explicit.is_empty() {
        let empty = crate::yaml::Map::default();
        n_points = expand_sweep(
            fixed,
            sweep_map.as_deref().unwrap_or(&empty),
            loader,
            on_point,
        )?;
    }
    for (i, entry) in explicit.iter().enumerate() {
        let p = expand_explicit(fixed, entry, i, loader, study_dir)?;
        on_point(p, loader.sources)?;
        n_points += 1;
    }
    if n_points == 0 {
        return Err(err(
            loader,
            ErrorKind::Sweep,
            "the study defines no experiments".into(),
            fixed.span,
        ));
    }
    Ok(n_points)
}

fn expand_explicit(
    fixed: &Node,
    entry: &Node,
    index: usize,
    loader: &mut Loader<'_>,
    study_dir: &Path,
) -> Result<Point, ConfigError> {
    if entry.as_map().is_none() {
        return Err(err(
            loader,
            ErrorKind::Sweep,
            format!(
                "`experiments[{index}]` must be a mapping, found {}",
                entry.describe()
            ),
            entry.span,
        ));
    }
    let mut stack: Vec<PathBuf> = Vec::new();
    let mut entry = loader.resolve_extends(entry.clone(), study_dir, &mut stack)?;
    normalize_keys(&mut entry, loader.sources)?;
    let engine_node = entry
        .as_map()
        .and_then(|m| m.get("engine"))
        .or_else(|| fixed.as_map().and_then(|m| m.get("engine")));
    let engine = match engine_node {
        Some(n) if n.as_seq().is_some() => {
            return Err(err(
                loader,
                ErrorKind::Sweep,
                format!(
                    "`experiments[{index}]` inherits a list of engines; give the entry its own \
                     `engine:`"
                ),
                entry.span,
            ));
        }
        Some(n) => parse_engines(n, loader)?.first().copied(),
        None => None,
    };
    let mut base = fixed.clone();
    // Only an entry that names its own engine turns the shared sections of other engines
    // into defaults meant for other entries; an entry that inherits the engine keeps them,
    // so a forgotten `engine:` is reported instead of silently dropping settings.
    if entry.as_map().is_some_and(|m| m.contains("engine")) {
        strip_sections(&mut base, engine, Some(&entry));
    }
    let mut tree = deep_merge(&base, &entry);
    tree.span = entry.span;
    if let (Some(e), Some(m)) = (engine, tree.as_map_mut())
        && m.get("engine").is_some_and(|n| n.as_seq().is_none())
    {
        let span = m.get("engine").map_or(entry.span, |n| n.span);
        m.insert("engine", span, Node::plain(e.as_str(), span));
    }
    let label = entry
        .as_map()
        .and_then(|m| m.get("name"))
        .and_then(Node::as_str)
        .map_or_else(|| format!("experiments[{index}]"), str::to_string);
    Ok(Point { tree, label })
}

/// The axes, groups and engine list a `sweep:` block declares.
struct Declared {
    axes: Vec<Axis>,
    groups: Vec<Group>,
    engine_axis: Option<Vec<Engine>>,
}

/// Reads one entry of `sweep:` into `d`: the engine list, an axis, or a group.
fn declare(
    d: &mut Declared,
    e: &crate::yaml::Entry,
    loader: &mut Loader<'_>,
) -> Result<(), ConfigError> {
    let path = split_path(&e.key, e.key_span, loader)?;
    if path.len() == 1 && path.first().is_some_and(|p| p == "engine") {
        d.engine_axis = Some(parse_engines(&e.value, loader)?);
        return Ok(());
    }
    let scope = scope_of(&path);
    match &e.value.kind {
        NodeKind::Seq(items) if items.is_empty() => Err(err(
            loader,
            ErrorKind::Sweep,
            format!("sweep axis `{}` has no values", e.key),
            e.value.span,
        )),
        NodeKind::Seq(items) if is_group(items) => {
            if !items.iter().all(|i| i.as_map().is_some()) {
                return Err(err(
                    loader,
                    ErrorKind::Sweep,
                    format!(
                        "sweep entry `{}` mixes mappings and plain values; a group's entries \
                         are all mappings, an axis's values are all plain",
                        e.key
                    ),
                    e.value.span,
                ));
            }
            let mut variants = Vec::new();
            for item in items.iter() {
                variants.extend(expand_entry(item, loader)?);
            }
            d.groups.push(Group {
                name: e.key.to_string(),
                scope,
                variants,
            });
            Ok(())
        }
        NodeKind::Seq(items) => {
            d.axes.push(Axis {
                written: e.key.to_string(),
                path,
                scope,
                values: items.to_vec(),
            });
            Ok(())
        }
        NodeKind::Map(_) => Err(err(
            loader,
            ErrorKind::Sweep,
            format!(
                "sweep entry `{}` is a mapping; write an axis as `{}: [a, b]` or a group \
                 as a list of mappings",
                e.key, e.key
            ),
            e.value.span,
        )),
        _ => {
            d.axes.push(Axis {
                written: e.key.to_string(),
                path,
                scope,
                values: vec![e.value.clone()],
            });
            Ok(())
        }
    }
}

/// A group may not share its name with an axis (seed 003's collision rule), and one field
/// may not be swept twice under two spellings.
fn check_collisions(
    d: &Declared,
    sweep: &crate::yaml::Map,
    fixed: &Node,
    loader: &mut Loader<'_>,
) -> Result<(), ConfigError> {
    for (i, a) in d.axes.iter().enumerate() {
        let span = sweep.entry(&a.written).map_or(fixed.span, |x| x.key_span);
        if let Some(g) = d.groups.iter().find(|g| {
            g.name == a.written || split_path(&g.name, span, loader).ok().as_ref() == Some(&a.path)
        }) {
            let gspan = sweep.entry(&g.name).map_or(span, |x| x.key_span);
            return Err(Diagnostic::new(
                ErrorKind::Sweep,
                format!(
                    "sweep group `{}` has the same name as an independent axis",
                    g.name
                ),
            )
            .at(loader.sources.location(gspan))
            .with_help(
                "name groups abstractly, e.g. `transformers.compilation` rather than \
                 `transformers.torch_compile`",
            )
            .into());
        }
        if let Some(b) = d.axes.iter().skip(i + 1).find(|b| b.path == a.path) {
            let bspan = sweep.entry(&b.written).map_or(span, |x| x.key_span);
            return Err(err(
                loader,
                ErrorKind::Sweep,
                format!("`{}` and `{}` sweep the same field", a.written, b.written),
                bspan,
            ));
        }
    }
    Ok(())
}

/// The engines the points are for: the swept or fixed ones, then those that only scoped
/// axes or groups name; `[None]` when nothing names an engine.
fn engines_of(
    d: &Declared,
    fixed: &Node,
    loader: &mut Loader<'_>,
) -> Result<Vec<Option<Engine>>, ConfigError> {
    let fixed_engine = fixed.as_map().and_then(|m| m.get("engine"));
    let explicit_engines: Vec<Engine> = match (&d.engine_axis, fixed_engine) {
        (Some(list), _) => list.clone(),
        (None, Some(n)) if !n.is_null() => parse_engines(n, loader)?,
        _ => Vec::new(),
    };
    let mut scoped: Vec<Engine> = d
        .axes
        .iter()
        .filter_map(|a| a.scope)
        .chain(d.groups.iter().filter_map(|g| g.scope))
        .filter(|e| !explicit_engines.contains(e))
        .collect();
    scoped.sort_by_key(|e| e.as_str());
    scoped.dedup();
    let mut engines: Vec<Option<Engine>> = explicit_engines.iter().copied().map(Some).collect();
    engines.extend(scoped.into_iter().map(Some));
    if engines.is_empty() {
        engines.push(None);
    }
    Ok(engines)
}

/// The axes and groups that apply to engine `eff`.
fn applicable(d: &Declared, eff: Engine) -> (Vec<&Axis>, Vec<&Group>) {
    (
        d.axes
            .iter()
            .filter(|a| a.scope.is_none_or(|s| s == eff))
            .collect(),
        d.groups
            .iter()
            .filter(|g| g.scope.is_none_or(|s| s == eff))
            .collect(),
    )
}

/// How many points the sweep makes, refused past [`MAX_POINTS`] before anything is built.
fn check_size(
    d: &Declared,
    engines: &[Option<Engine>],
    fixed: &Node,
    loader: &mut Loader<'_>,
) -> Result<u128, ConfigError> {
    let mut total: u128 = 0;
    for e in engines {
        let (axes, groups) = applicable(d, e.unwrap_or(Engine::DEFAULT));
        let n = axes
            .iter()
            .map(|a| a.values.len() as u128)
            .chain(groups.iter().map(|g| g.variants.len() as u128))
            .fold(1u128, u128::saturating_mul);
        total = total.saturating_add(n);
    }
    if total > MAX_POINTS {
        let span = fixed
            .as_map()
            .and_then(|m| m.entry("sweep"))
            .map_or(fixed.span, |e| e.key_span);
        return Err(err(
            loader,
            ErrorKind::Sweep,
            format!("the sweep expands to {total} configurations; llem plans at most {MAX_POINTS}"),
            span,
        ));
    }
    Ok(total)
}

/// One point: `base` with the values of axis positions `axis_idx` and group variants
/// `group_idx` assigned, labelled by what varies.
fn point(
    base: &Node,
    engine_label: Option<Engine>,
    (axes, axis_idx): (&[&Axis], &[usize]),
    (groups, group_idx): (&[&Group], &[usize]),
    loader: &mut Loader<'_>,
) -> Result<Point, ConfigError> {
    let mut tree = base.clone();
    let mut label: Vec<String> = Vec::new();
    if let Some(e) = engine_label {
        label.push(format!("engine={e}"));
    }
    for (a, &i) in axes.iter().zip(axis_idx) {
        if let Some(v) = a.values.get(i) {
            assign(&mut tree, &a.path, &a.written, v, loader)?;
            label.push(format!("{}={}", a.written, render_value(v)));
        }
    }
    for (g, &i) in groups.iter().zip(group_idx) {
        let Some(variant) = g.variants.get(i) else {
            continue;
        };
        if variant.is_empty() {
            label.push(format!("{}={{}}", g.name));
        }
        for a in variant {
            assign(&mut tree, &a.path, &a.written, &a.value, loader)?;
            label.push(format!("{}={}", a.written, render_value(&a.value)));
        }
    }
    Ok(Point {
        tree,
        label: label.join(", "),
    })
}

fn expand_sweep(
    fixed: &Node,
    sweep: &crate::yaml::Map,
    loader: &mut Loader<'_>,
    on_point: &mut OnPoint<'_>,
) -> Result<usize, ConfigError> {
    let mut d = Declared {
        axes: Vec::new(),
        groups: Vec::new(),
        engine_axis: None,
    };
    for e in &sweep.entries {
        declare(&mut d, e, loader)?;
    }
    // Rate levels written in place (`traffic: {rate_qps: [1, 2, 4]}`) are an axis.
    let levels = take_rate_levels(fixed);
    let fixed = &levels.0;
    if let Some(entry) = levels.1 {
        if sweep.get(RATE_LEVELS).is_some() {
            return Err(err(
                loader,
                ErrorKind::Sweep,
                format!(
                    "rate levels are given twice: `traffic.rate_qps` lists them and `sweep:` has a `{RATE_LEVELS}` axis"
                ),
                entry.value.span,
            ));
        }
        declare(&mut d, &entry, loader)?;
    }
    check_collisions(&d, sweep, fixed, loader)?;
    let engines = engines_of(&d, fixed, loader)?;
    let set_engine = engines.iter().any(Option::is_some);
    let many_engines = engines.len() > 1;
    let total = check_size(&d, &engines, fixed, loader)?;
    let fixed_engine = fixed.as_map().and_then(|m| m.get("engine"));

    let mut n_points = 0usize;
    for engine in engines {
        let eff = engine.unwrap_or(Engine::DEFAULT);
        let mut base = fixed.clone();
        if set_engine {
            // Shared sections of other engines are defaults for those engines' points; with
            // a single engine a foreign section is a mistake, left for validation to report.
            if many_engines {
                strip_sections(&mut base, Some(eff), None);
            }
            let span = fixed_engine.map_or(fixed.span, |n| n.span);
            if let Some(m) = base.as_map_mut() {
                m.insert("engine", span, Node::plain(eff.as_str(), span));
            }
        }
        let (my_axes, my_groups) = applicable(&d, eff);
        let engine_label = many_engines.then_some(eff);
        let mut group_idx = vec![0usize; my_groups.len()];
        loop {
            let mut axis_idx = vec![0usize; my_axes.len()];
            loop {
                let p = point(
                    &base,
                    engine_label,
                    (&my_axes, &axis_idx),
                    (&my_groups, &group_idx),
                    loader,
                )?;
                on_point(p, loader.sources)?;
                n_points += 1;
                if !advance(&mut axis_idx, |k| {
                    my_axes.get(k).map_or(1, |a| a.values.len())
                }) {
                    break;
                }
            }
            if !advance(&mut group_idx, |k| {
                my_groups.get(k).map_or(1, |g| g.variants.len())
            }) {
                break;
            }
        }
    }
    debug_assert_eq!(n_points as u128, total);
    Ok(n_points)
}

/// The path of rate levels.
const RATE_LEVELS: &str = "traffic.rate_qps";

/// `fixed` without a list of rate levels in `traffic.rate_qps`, and that list as a sweep
/// entry (llem 0.7 takes rate levels in place; each level is one configuration).
fn take_rate_levels(fixed: &Node) -> (Node, Option<crate::yaml::Entry>) {
    let mut out = fixed.clone();
    let levels = out
        .as_map_mut()
        .and_then(|m| m.get_mut("traffic"))
        .and_then(Node::as_map_mut)
        .filter(|t| matches!(t.get("rate_qps").map(|n| &n.kind), Some(NodeKind::Seq(_))))
        .and_then(|t| t.remove("rate_qps"));
    match levels {
        Some(e) => (
            out,
            Some(crate::yaml::Entry {
                key: RATE_LEVELS.into(),
                key_span: e.key_span,
                value: e.value,
            }),
        ),
        None => (fixed.clone(), None),
    }
}

/// Odometer increment, last position fastest; false when it wraps around.
fn advance(idx: &mut [usize], len: impl Fn(usize) -> usize) -> bool {
    for k in (0..idx.len()).rev() {
        if let Some(slot) = idx.get_mut(k) {
            *slot += 1;
            if *slot < len(k) {
                return true;
            }
            *slot = 0;
        }
    }
    false
}
