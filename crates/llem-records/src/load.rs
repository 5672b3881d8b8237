//! Loading whatever a directory holds: a llem study (or single cells), an ML.ENERGY raw tree
//! (config directory at `ROOT/configs/vllm`), an ML.ENERGY compiled directory
//! (`runs/llm.parquet`), or a tree holding several of these.

use std::path::{Path, PathBuf};

use super::diffusion::{self, DiffusionRun};
use super::raw_tree::{self, RawOptions};
use super::run::LlmRun;
use super::{LoadIssue, RecordsError, compiled, llem_cells};

/// What was found where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// `runs/llm.parquet` (and `runs/diffusion.parquet`).
    Compiled,
    /// An ML.ENERGY raw benchmark root (or a directory inside one).
    Raw,
    /// llem cells.
    Llem,
}

/// The result of [`load_any`].
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// LLM runs of every source, in collection order.
    pub runs: Vec<LlmRun>,
    /// Diffusion runs.
    pub diffusion: Vec<DiffusionRun>,
    /// Runs found but not loaded.
    pub issues: Vec<LoadIssue>,
    /// Each source directory and its kind.
    pub sources: Vec<(PathBuf, SourceKind)>,
}

fn is_raw_root(d: &Path) -> bool {
    let has_current = |dom: &str| {
        std::fs::read_dir(d.join(dom))
            .map(|it| it.flatten().any(|e| e.path().join("current").is_dir()))
            .unwrap_or(false)
    };
    has_current("llm") || has_current("diffusion")
}

/// Walks `dir` for compiled and raw roots (not descending into them).
fn find_roots(dir: &Path, out: &mut Vec<(PathBuf, SourceKind)>, depth: usize) {
    if compiled::llm_parquet(dir).is_file() || dir.join("runs").join("diffusion.parquet").is_file()
    {
        out.push((dir.to_path_buf(), SourceKind::Compiled));
        return;
    }
    if is_raw_root(dir) {
        out.push((dir.to_path_buf(), SourceKind::Raw));
        return;
    }
    // llem cells are found separately; a results tree is a handful of levels deep.
    if depth > 6 || dir.join(llem_results::layout::RESULT).is_file() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subdirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subdirs.sort();
    for s in subdirs {
        find_roots(&s, out, depth + 1);
    }
}

/// Loads every source under `dirs`. ML.ENERGY raw roots are loaded together (the stability
/// cascade crosses roots); llem cells together; compiled files as stored.
pub fn load_any(dirs: &[PathBuf]) -> Result<Loaded, RecordsError> {
    let mut out = Loaded::default();
    let mut raw_roots = Vec::new();
    let (mut cell_files, mut unfinished) = (Vec::new(), Vec::new());
    for d in dirs {
        if !d.is_dir() {
            return Err(RecordsError::NotFound(d.clone()));
        }
        let mut roots = Vec::new();
        find_roots(d, &mut roots, 0);
        for (r, k) in &roots {
            match k {
                // A compiled file that does not load is one bad file, reported like any
                // other, not the end of every other source's runs.
                SourceKind::Compiled => {
                    let p = compiled::llm_parquet(r);
                    if p.is_file() {
                        match compiled::read_parquet(&p, Some(r)) {
                            Ok((runs, issues)) => {
                                out.runs.extend(runs);
                                out.issues.extend(issues);
                            }
                            Err(e) => out.issues.push(LoadIssue::new(&p, e.to_string())),
                        }
                    }
                    let dp = r.join("runs").join("diffusion.parquet");
                    if dp.is_file() {
                        match diffusion::read_parquet(&dp, Some(r)) {
                            Ok(runs) => out.diffusion.extend(runs),
                            Err(e) => out.issues.push(LoadIssue::new(&dp, e.to_string())),
                        }
                    }
                }
                SourceKind::Raw => raw_roots.push(r.clone()),
                SourceKind::Llem => {}
            }
        }
        // The raw roots just found are read by their own loader: the walk for llem cells does
        // not enter them (a raw tree of 10 000 runs was walked three times). A compiled root
        // is walked: a llem study with an export in its `runs/` holds cells too.
        let skip: Vec<PathBuf> = roots
            .iter()
            .filter(|(_, k)| *k == SourceKind::Raw)
            .map(|(r, _)| r.clone())
            .collect();
        out.sources.extend(roots);
        // One walk for llem cells and, for a directory inside a raw tree, its results.
        let mut found = [Vec::new(), Vec::new(), Vec::new()];
        if !skip.iter().any(|r| r == d) {
            let [result, spec] = llem_cells::CELL_FILES;
            raw_tree::find_files_named(d, &[result, spec, "results.json"], &skip, &mut found);
        }
        let [results, specs, raw_results] = found;
        let (cells, waiting) = llem_cells::cells_of(results, specs);
        if !cells.is_empty() || !waiting.is_empty() {
            cell_files.extend(cells);
            unfinished.extend(waiting);
            out.sources.push((d.clone(), SourceKind::Llem));
        } else if out.sources.iter().all(|(s, _)| !s.starts_with(d)) {
            // A directory inside a raw tree (e.g. ROOT/llm/h100/current/run): sub-root rules.
            if !raw_results.is_empty() {
                raw_roots.push(d.clone());
                out.sources.push((d.clone(), SourceKind::Raw));
            }
        }
    }
    if !raw_roots.is_empty() {
        let l = raw_tree::load_raw(&raw_roots, &RawOptions::default())?;
        out.runs.extend(l.runs);
        out.issues.extend(l.issues);
        let (dr, di) = diffusion::load_raw(&raw_roots, None)?;
        out.diffusion.extend(dr);
        out.issues.extend(di);
    }
    if !cell_files.is_empty() || !unfinished.is_empty() {
        let (mut runs, issues) = llem_cells::load_found(&cell_files, &unfinished)?;
        super::labels::assign(&mut runs);
        out.runs.extend(runs);
        out.issues.extend(issues);
    }
    raw_tree::sort_runs(&mut out.runs);
    if out.sources.is_empty() {
        return Err(RecordsError::NothingFound(
            dirs.first().cloned().unwrap_or_default(),
        ));
    }
    Ok(out)
}

impl crate::Runs {
    /// Loads whatever `dir` holds (llem study/cells, ML.ENERGY raw tree or compiled
    /// directory, or a tree holding several of these).
    pub fn from_directory(dir: impl AsRef<Path>) -> Result<Self, RecordsError> {
        let l = load_any(&[dir.as_ref().to_path_buf()])?;
        Ok(Self::new(l.runs, l.issues))
    }
}
