//! ML.ENERGY diffusion runs through `llem results` and `llem report`: listed, queried with the
//! seed's DiffusionRuns fields, exported, charted; and counted wherever a view leaves them out.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// A raw ML.ENERGY tree: FLUX.1-dev at batch 1 and 4 (text-to-image), Wan at batch 1
/// (text-to-video), each with its model config.
fn tree(root: &Path) {
    let runs = [
        (
            "text-to-image",
            "black-forest-labs/FLUX.1-dev",
            "FLUX.1 dev",
            "batch-1+size-1024x1024+steps-28",
            200.0,
            2.0,
        ),
        (
            "text-to-image",
            "black-forest-labs/FLUX.1-dev",
            "FLUX.1 dev",
            "batch-4+size-1024x1024+steps-28",
            600.0,
            4.0,
        ),
        (
            "text-to-video",
            "Wan-AI/Wan2.1-T2V-14B",
            "Wan 2.1",
            "batch-1+size-480x832+steps-50",
            9000.0,
            60.0,
        ),
    ];
    for (task, model, nick, name, joules, secs) in runs {
        let dir = root
            .join("diffusion/h100/current/run/diffusion")
            .join(task)
            .join(model)
            .join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("results.json"),
            format!(
                r#"{{"iteration_energy_measurements": [{{"gpu_energy": {{"0": {joules}}}, "time": {secs}}}]}}"#
            ),
        )
        .unwrap();
        let cfg = root.join("configs/xdit").join(task).join(model);
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(
            cfg.join("model_info.json"),
            format!(r#"{{"total_parameters_billion": 12, "nickname": "{nick}"}}"#),
        )
        .unwrap();
    }
}

fn llem(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_llem"))
        .env("COLUMNS", "200")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn diffusion_runs_are_listed_queried_exported_and_charted() {
    let _machine = crate::common::shared();
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("bench");
    tree(&root);
    let r = root.to_str().unwrap();

    let o = llem(d.path(), &["results", "list", r]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("diffusion runs (ML.ENERGY text-to-image / text-to-video): 3"),
        "{out}"
    );
    assert!(
        out.contains("FLUX.1 dev") && out.contains("Wan 2.1"),
        "{out}"
    );

    // The seed's filters and groupings, by field name or alias.
    let o = llem(
        d.path(),
        &[
            "results",
            "query",
            r,
            "--diffusion",
            "--where",
            "task=text-to-image",
            "--where",
            "batch_size>=2",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v[0]["batch_size"], 4);
    // 600 J over a batch of 4: 150 J per image; 4 images in 4 s.
    assert_eq!(v[0]["energy_per_generation_joules"], 150.0);
    assert_eq!(v[0]["throughput_generations_per_sec"], 1.0);
    let o = llem(
        d.path(),
        &["results", "query", r, "--diffusion", "--group-by", "task"],
    );
    let out = text(&o.stdout);
    assert!(
        out.contains("task=text-to-image (2 runs)") && out.contains("task=text-to-video (1 runs)"),
        "{out}"
    );
    let o = llem(
        d.path(),
        &["results", "query", r, "--diffusion", "--where", "nickame=x"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("did you mean \"nickname\"?"),
        "{}",
        text(&o.stderr)
    );

    // Exported in every format.
    let o = llem(
        d.path(),
        &["results", "export", r, "--diffusion", "--format", "csv"],
    );
    let csv = text(&o.stdout);
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv.starts_with("domain,task,model_id,nickname,"), "{csv}");
    let pq = d.path().join("d.parquet");
    let o = llem(
        d.path(),
        &[
            "results",
            "export",
            r,
            "--diffusion",
            "--format",
            "parquet",
            "-o",
            pq.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let back = llem_records::diffusion::read_parquet(&pq, None).unwrap();
    assert_eq!(back.len(), 3);

    // An LLM view of the directory says what it leaves out.
    let o = llem(d.path(), &["results", "query", r]);
    assert!(
        text(&o.stderr).contains("3 diffusion run(s) under"),
        "{}",
        text(&o.stderr)
    );

    // The report charts them, one chart per task.
    let html = d.path().join("r.html");
    let o = llem(d.path(), &["report", r, "-o", html.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("3 diffusion runs"),
        "{}",
        text(&o.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<section id=\"diffusion\">"));
    assert!(
        page.contains("id=\"diffusion-text-to-image\"")
            && page.contains("id=\"diffusion-text-to-video\"")
    );
}
