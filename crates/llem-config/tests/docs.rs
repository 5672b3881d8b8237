//! docs/config-reference.md is generated from the schema; this test keeps it current.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::Path;

#[test]
fn config_reference_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config-reference.md");
    let generated = llem_config::reference::markdown();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        panic!(
            "{} is out of date with the config types; regenerate it with\n  UPDATE_DOCS=1 cargo test -p llem-config --test integration docs::",
            path.display()
        );
    }
}

#[test]
fn reference_covers_every_section_and_field() {
    let md = llem_config::reference::markdown();
    for needle in [
        "### `top level`",
        "### `dataset`",
        "### `decoder`",
        "### `warmup`",
        "### `baseline`",
        "### `measurement`",
        "### `traffic`",
        "### `llamacpp`",
        "### `vllm.engine`",
        "### `vllm.engine.attention`",
        "### `tensorrt.quant (also `quant_config`)`",
        "### `sglang`",
        "### `tgi`",
        "### `study_execution`",
        "| `cv_threshold` | number | `0.05` | 0.01 – 0.5 |",
        "| `gpu_memory_utilization` | number or null | null | > 0, ≤ 1 |",
        "| `deterministic` | `temperature: 0.0`, `do_sample: false` |",
    ] {
        assert!(md.contains(needle), "missing {needle}");
    }
}
