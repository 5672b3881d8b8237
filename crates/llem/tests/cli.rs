//! The `llem` binary end to end: real process, real files, clean environment.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path().join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, text).unwrap();
        p
    }

    fn llem(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_llem"));
        cmd.env_clear().env("HOME", self.path()).args(args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.current_dir(repo_root()).output().unwrap()
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn version() {
    let o = Home::new().llem(&["--version"], &[]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with(&format!("llem {}", env!("CARGO_PKG_VERSION"))));
}

#[test]
fn dry_run_prints_the_plan() {
    let o = Home::new().llem(&["run", "examples/seed/dtype-sweep.yaml", "--dry-run"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("2 configurations x 3 cycles = 6 runs, order shuffle"),
        "{out}"
    );
    assert!(
        out.contains("dtype=float16") && out.contains("dtype=bfloat16"),
        "{out}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.trim_start().starts_with("00"))
            .count(),
        6,
        "{out}"
    );
}

#[test]
fn dry_run_json_has_the_documented_shape() {
    let o = Home::new().llem(
        &[
            "run",
            "examples/seed/compare-engines.yaml",
            "--dry-run",
            "--json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["study_name"], "compare-engines");
    assert_eq!(v["unique_configurations"], 2);
    assert_eq!(v["n_cycles"], 3);
    assert_eq!(v["total_runs"], 6);
    assert_eq!(v["experiment_order"], "interleave");
    assert_eq!(v["study_design_hash"].as_str().unwrap().len(), 16);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6);
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r["index"], i + 1);
        assert_eq!(r["config_hash"].as_str().unwrap().len(), 16);
        assert_eq!(r["model"], "gpt2");
        assert!(r.get("config").is_none(), "{r}");
        let c = &v["configurations"][r["config_index"].as_u64().unwrap() as usize];
        assert_eq!(c["config_hash"], r["config_hash"]);
        assert_eq!(c["config"]["model"], "gpt2");
        assert_eq!(c["config"]["engine"], r["engine"]);
    }
    assert_eq!(runs[0]["engine"], "transformers");
    assert_eq!(runs[1]["engine"], "vllm");
    assert_eq!(runs[2]["cycle"], 1);
    assert!(v["skipped"].as_array().unwrap().is_empty());
    assert_eq!(v["configurations"].as_array().unwrap().len(), 2);

    // --per-run-config repeats each configuration in its runs (and needs --dry-run --json).
    let o = Home::new().llem(
        &[
            "run",
            "examples/seed/compare-engines.yaml",
            "--dry-run",
            "--json",
            "--per-run-config",
        ],
        &[],
    );
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    for r in v["runs"].as_array().unwrap() {
        let c = &v["configurations"][r["config_index"].as_u64().unwrap() as usize]["config"];
        assert_eq!(&r["config"], c);
    }
    let o = Home::new().llem(
        &[
            "run",
            "examples/seed/compare-engines.yaml",
            "--per-run-config",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn single_experiment_json_has_one_run() {
    let o = Home::new().llem(
        &["run", "examples/quickstart.yaml", "--dry-run", "--json"],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["kind"], "experiment");
    assert_eq!(v["total_runs"], 1);
    assert_eq!(v["configurations"][0]["config"]["engine"], "llamacpp");
    assert_eq!(
        v["configurations"][0]["config"]["runners"]["llamacpp"],
        "embedded"
    );
}

/// The AI Energy Score preset plans the score's protocol: 10 runs of 1,000 of the task's
/// queries, batch 1, 10 tokens each, FP16, over the whole inference (every phase summed).
#[test]
fn the_ai_energy_score_preset_plans_its_protocol() {
    let o = Home::new().llem(
        &[
            "run",
            "examples/ai-energy-score.yaml",
            "--dry-run",
            "--json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["total_runs"], 10);
    let c = &v["configurations"][0]["config"];
    assert_eq!(c["dataset"]["source"], "aienergyscore");
    assert_eq!(c["dataset"]["n_prompts"], 1000);
    assert_eq!(c["transformers"]["batch_size"], 1);
    assert_eq!(c["max_output_tokens"], 10);
    assert_eq!(c["decoder"]["min_new_tokens"], 10);
    assert_eq!(c["dtype"], "float16");
    assert_eq!(c["measurement"]["methodology"], "total");
}

#[test]
fn skipped_points_are_listed_in_json() {
    let h = Home::new();
    let f = h.write("s.yaml", "model: m\nengine: vllm\nsweep:\n  dtype: [float32, float16]\n  vllm.engine.quantization: [fp8]\n");
    let o = h.llem(&["run", f.to_str().unwrap(), "--dry-run", "--json"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let skipped = v["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["config"]["dtype"], "float32");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("needs dtype float16 or bfloat16")
    );
}

#[test]
fn config_errors_exit_2_with_location() {
    let h = Home::new();
    let f = h.write("bad.yaml", "model: gpt2\ndecoder:\n  temprature: 0.5\n");
    let o = h.llem(&["run", f.to_str().unwrap(), "--dry-run"], &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("unknown key `temprature` in `decoder`"),
        "{err}"
    );
    assert!(err.contains("bad.yaml:3:3"), "{err}");
    assert!(err.contains("did you mean `temperature`?"), "{err}");

    let o = h.llem(&["run", f.to_str().unwrap(), "--dry-run", "--json"], &[]);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["errors"][0]["kind"], "unknown_key");
    assert_eq!(v["errors"][0]["line"], 3);
    assert_eq!(v["errors"][0]["column"], 3);

    let o = h.llem(&["run", "no/such/file.yaml", "--dry-run"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("file not found"));

    let o = h.llem(&["run", "--dry-run", "--order", "shufle", "-m", "x"], &[]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "usage errors are configuration errors too"
    );
    assert!(
        stderr(&o).contains("did you mean `shuffle`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_study_whose_model_is_missing_is_refused_before_any_cell_runs() {
    let h = Home::new();
    let out = h.path().join("results");
    let o = h.llem(
        &["run", "examples/sweep.yaml", "-o", out.to_str().unwrap()],
        &[(
            "LLEM_ASSETS",
            h.path().join("empty-assets").to_str().unwrap(),
        )],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("cannot run; nothing was started"), "{err}");
    assert!(
        err.contains("SmolLM2-135M-Instruct.Q4_1.gguf` not found"),
        "{err}"
    );
    // One line for the one problem, not one per configuration.
    assert_eq!(err.matches("not found").count(), 1, "{err}");
    assert!(
        !out.exists(),
        "no study directory for a study that never started"
    );
    assert!(stdout(&o).is_empty());
}

#[test]
fn model_flag_needs_no_yaml() {
    let o = Home::new().llem(
        &[
            "run",
            "-m",
            "models/tiny.gguf",
            "-n",
            "5",
            "--dry-run",
            "--json",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["total_runs"], 1);
    assert_eq!(
        v["configurations"][0]["config"]["model"],
        "models/tiny.gguf"
    );
    assert_eq!(v["configurations"][0]["config"]["dataset"]["n_prompts"], 5);
}

#[test]
fn cycles_and_order_flags_override_the_yaml() {
    let o = Home::new().llem(
        &[
            "run",
            "examples/seed/dtype-sweep.yaml",
            "--dry-run",
            "--json",
            "--cycles",
            "2",
            "--order",
            "sequential",
        ],
        &[],
    );
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["total_runs"], 4);
    let order: Vec<u64> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["config_index"].as_u64().unwrap())
        .collect();
    assert_eq!(order, [0, 0, 1, 1]);
}

#[test]
fn user_config_and_environment_reach_the_plan() {
    let h = Home::new();
    h.write(
        ".config/llenergymeasure/config.yaml",
        "runners:\n  transformers: docker\n",
    );
    let o = h.llem(
        &["run", "examples/seed/minimal.yaml", "--dry-run", "--json"],
        &[],
    );
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v["configurations"][0]["config"]["runners"]["transformers"],
        "docker"
    );

    let xdg = h.path().join("xdg");
    h.write(
        "xdg/llenergymeasure/config.yaml",
        "runners:\n  transformers: local\n",
    );
    let o = h.llem(
        &["run", "examples/seed/minimal.yaml", "--dry-run", "--json"],
        &[
            ("XDG_CONFIG_HOME", xdg.to_str().unwrap()),
            ("LLEM_IMAGE_TRANSFORMERS", "my/image:1"),
        ],
    );
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v["configurations"][0]["config"]["runners"]["transformers"],
        "local"
    );
    assert_eq!(
        v["configurations"][0]["config"]["images"]["transformers"],
        "my/image:1"
    );
}

#[test]
fn config_reports_the_environment() {
    let h = Home::new();
    let o = h.llem(&["config"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let expected_path = h.path().join(".config/llenergymeasure/config.yaml");
    assert!(out.contains(&expected_path.display().to_string()), "{out}");
    assert!(out.contains("not found; built-in defaults apply"), "{out}");
    for engine in [
        "llamacpp",
        "transformers",
        "vllm",
        "tensorrt",
        "sglang",
        "tgi",
        "openai",
    ] {
        assert!(out.contains(engine), "{engine}: {out}");
    }

    h.write(
        ".config/llenergymeasure/config.yaml",
        "runners:\n  vllm: docker\n",
    );
    let o = h.llem(
        &["config", "-v"],
        &[
            ("LLEM_DATACENTER_PUE", "1.3"),
            ("LLEM_RUNER_VLLM", "x"),
            ("LLEM_API_KEY", "sk-live-do-not-print-4242"),
        ],
    );
    let out = stdout(&o);
    // The output people paste into bug reports says the key is set, never what it is.
    assert!(
        out.contains("LLEM_API_KEY=[REDACTED] (25 chars)") && !out.contains("do-not-print"),
        "{out}"
    );
    assert!(
        out.contains("runners.vllm") && out.contains("docker  (line 2)"),
        "{out}"
    );
    assert!(
        out.contains("measurement.datacenter_pue") && out.contains("(LLEM_DATACENTER_PUE)"),
        "{out}"
    );
    assert!(out.contains("did you mean LLEM_RUNNER_VLLM?"), "{out}");

    h.write(
        ".config/llenergymeasure/config.yaml",
        "measurement:\n  datacenter_pue: 0.2\n",
    );
    let o = h.llem(&["config"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("must be at least 1"), "{}", stderr(&o));
}

#[test]
fn config_schema_is_valid_json_schema() {
    let h = Home::new();
    let o = h.llem(&["config", "schema"], &[]);
    assert!(o.status.success());
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["$schema"], "https://json-schema.org/draft/2020-12/schema");
    let props = v["properties"].as_object().unwrap();
    for k in [
        "model",
        "engine",
        "sweep",
        "experiments",
        "study_execution",
        "base",
        "_extends",
        "pytorch",
        "llamacpp",
        "traffic",
    ] {
        assert!(props.contains_key(k), "{k}");
    }
    assert_eq!(
        v["$defs"]["WarmupConfig"]["properties"]["cv_threshold"]["maximum"],
        0.5
    );
    for kind in ["experiment", "study-execution", "user"] {
        let o = h.llem(&["config", "schema", "--kind", kind], &[]);
        assert!(o.status.success(), "{kind}");
        let _: Value = serde_json::from_str(&stdout(&o)).unwrap();
    }
}

/// The hash recipe in docs/configuration.md, run with python3, reproduces llem's hashes.
#[test]
fn documented_hash_recipe_reproduces_llem_hashes() {
    let doc = std::fs::read_to_string(repo_root().join("docs/configuration.md")).unwrap();
    let start = doc.find("python3 -c '\n").expect("recipe in docs") + "python3 -c '\n".len();
    let end = start + doc[start..].find("'\n```").expect("end of recipe");
    let recipe = &doc[start..end];
    let h = Home::new();
    for file in [
        "examples/seed/fuller.yaml",
        "examples/seed/vllm-experiment.yaml",
        "examples/quickstart.yaml",
        "examples/seed/anchors-group.yaml",
    ] {
        let o = h.llem(&["run", file, "--dry-run", "--json"], &[]);
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        let mut py = Command::new("python3")
            .args(["-c", recipe])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 is part of the CI machine");
        use std::io::Write;
        py.stdin.take().unwrap().write_all(&o.stdout).unwrap();
        let out = py.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            v["configurations"][0]["config_hash"],
            "{file}"
        );
    }
}

/// Duration flags past their range are usage errors (exit 2), never an overflow panic
/// (exit 101) or a run that reports 0 J.
#[test]
fn duration_flags_past_their_range_are_refused() {
    let h = Home::new();
    for args in [
        &["measure", "--interval", "1e19s", "--", "true"][..],
        &["measure", "--baseline", "1e300s", "--", "true"][..],
        &["run", "-m", "x.gguf", "--interval", "1e19s", "--dry-run"][..],
        &["run", "-m", "x.gguf", "--timeout", "1e19", "--dry-run"][..],
        &["schedule", "study.yaml", "--every", "1e19s"][..],
    ] {
        let o = h.llem(args, &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("longer than 30 days") || stderr.contains("0 to 8760"),
            "{args:?}: {stderr}"
        );
    }
}

/// `llem ... | head`: a reader that goes away ends llem quietly, with the command's own exit
/// code (it panicked with 101 on the closed pipe once).
#[test]
fn a_closed_pipe_ends_quietly_with_the_commands_exit_code() {
    let home = Home::new();
    for (args, want) in [
        (&["config", "schema"][..], 0),
        (
            &["measure", "--sampler", "estimate", "--json", "--", "false"][..],
            1,
        ),
        (
            &[
                "results",
                "export",
                "fuzz/corpus/results",
                "--format",
                "json",
            ][..],
            0,
        ),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_llem"))
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .args(args)
            .current_dir(repo_root())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Read a few bytes, as `head -c 16` would, then hang up.
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 16];
        let _ = std::io::Read::read(&mut out, &mut first);
        drop(out);
        let o = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(want), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
}

/// `results compare` between the configurations of one study: split by a configuration path,
/// or two picked by label; the error without either says what is needed.
#[test]
fn compare_splits_one_study_by_a_configuration_path_or_two_picks() {
    let home = Home::new();
    let study = "fuzz/corpus/results";
    let o = home.llem(
        &[
            "results",
            "compare",
            study,
            "--by",
            "llamacpp.batch_size",
            "--json",
        ],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["a"], "llamacpp.batch_size=1");
    assert_eq!(v["b"], "llamacpp.batch_size=2");
    let mj = v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "mj_per_tok_total")
        .unwrap();
    assert!(mj["ratio_b_over_a"].as_f64().unwrap() > 0.0, "{mj}");

    let o = home.llem(
        &[
            "results",
            "compare",
            study,
            "--pick",
            "llamacpp.batch_size=2",
            "--pick",
            "llamacpp.batch_size=1",
        ],
        &[],
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("A: llamacpp.batch_size=2 (1 runs)\nB: llamacpp.batch_size=1 (1 runs)"),
        "{text}"
    );
    let o = home.llem(
        &["results", "compare", study, "--pick", "nothing-like-it"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    let o = home.llem(
        &["results", "compare", study, "--pick", "x", "--pick", "y"],
        &[],
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("labels: llamacpp.batch_size=1 | llamacpp.batch_size=2"),
        "{e}"
    );
}

/// Completion scripts and manual pages come from the CLI definition: every subcommand is in
/// them, the bash script parses, and `man --dir` writes a page per command.
#[test]
fn completions_and_manual_pages_cover_every_command() {
    let home = Home::new();
    for shell in ["bash", "zsh", "fish"] {
        let o = home.llem(&["completions", shell], &[]);
        assert_eq!(o.status.code(), Some(0), "{shell}");
        let script = String::from_utf8_lossy(&o.stdout);
        for sub in ["run", "measure", "results", "report", "schedule", "config"] {
            assert!(script.contains(sub), "{shell}: {sub}");
        }
        assert!(script.contains("--dry-run"), "{shell}");
    }
    let o = home.llem(&["completions", "bash"], &[]);
    let file = home.write("llem.bash", &String::from_utf8_lossy(&o.stdout));
    let check = Command::new("bash").arg("-n").arg(&file).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );

    let o = home.llem(&["man"], &[]);
    let page = String::from_utf8_lossy(&o.stdout);
    assert!(
        page.contains(".TH llem 1") && page.contains("results"),
        "{page}"
    );
    let dir = home.path().join("man");
    let o = home.llem(&["man", "--dir", dir.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(0));
    for p in [
        "llem.1",
        "llem-run.1",
        "llem-results-query.1",
        "llem-measure.1",
    ] {
        assert!(dir.join(p).is_file(), "{p}");
    }
    let run = std::fs::read_to_string(dir.join("llem-run.1")).unwrap();
    assert!(run.contains("dry\\-run"), "{run}");
}

/// `--dry-run` says how long a study will take: the fixed waits, what comes on top, and the
/// bound the timeouts set.
#[test]
fn the_dry_run_estimates_the_study_duration() {
    let home = Home::new();
    // 2 configurations x 3 cycles = 6 runs: a fresh 10 s baseline and a 20 s floor each
    // (180 s), 3 gaps of 15 s within cycles... (6 - 3) x 15 = 45 s, 2 cycle gaps of 60 s
    // (120 s): 345 s; 6 x 8 prompts; at most 6 x 100 s + 165 s.
    let file = home.write(
        "d.yaml",
        "model: m.gguf\n\
         baseline: {strategy: fresh, duration_seconds: 10}\n\
         warmup: {thermal_floor_seconds: 20}\n\
         dataset: {source: synthetic, n_prompts: 8}\n\
         sweep: {llamacpp.batch_size: [1, 2]}\n\
         study_execution: {n_cycles: 3, experiment_gap_seconds: 15, cycle_gap_seconds: 60, \
         experiment_timeout_seconds: 100}\n",
    );
    let o = home.llem(&["run", file.to_str().unwrap(), "--dry-run"], &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "duration           at least 5m45s of fixed waits (baselines, thermal floors, gaps) \
             plus the inference of 48 prompts; at most 12m45s"
        ),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `llem schedule` needs to be told when: flags or an enabled block; a bad block is located.
#[test]
fn schedule_says_when_it_is_not_told_when() {
    let h = Home::new();
    let f = h.write("s.yaml", "model: x.gguf\n");
    let o = h.llem(&["schedule", f.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("say when to run: --every, --at"),
        "{}",
        stderr(&o)
    );
    let f = h.write(
        "t.yaml",
        "model: x.gguf\nschedule:\n  enabled: true\n  at: \"09:00\"\n  days: [mon, fryday]\n",
    );
    let o = h.llem(&["schedule", f.to_str().unwrap(), "--dry-run"], &[]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("t.yaml:5:") && err.contains("did you mean `friday`?"),
        "{err}"
    );
    let o = h.llem(
        &[
            "schedule",
            f.to_str().unwrap(),
            "--dry-run",
            "--days",
            "sat",
        ],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(2),
        "the file is checked whatever the flags say"
    );
}

/// `--dry-run` estimates each configuration's device memory (seed 003): weights plus the KV
/// cache at the configured batch and lengths, from the GGUF file or a `config.json` in the
/// Hugging Face cache; `?` with the reason when the metadata is not here.
#[test]
fn dry_run_estimates_device_memory() {
    let assets = llem_app::host::assets_dir();
    let assets = assets.to_str().unwrap();
    let h = Home::new();
    let o = h.llem(
        &["run", "examples/quickstart.yaml", "--dry-run", "--json"],
        &[("LLEM_ASSETS", assets)],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let m = &v["configurations"][0]["memory_estimate"];
    // SmolLM2-135M: 30 layers x 3 KV heads x 64 x (K and V) x 2 bytes per token; the
    // quickstart's 4 sequences of 256 + 64 tokens, as llama.cpp's context plan rounds them.
    let per_token = 30 * 3 * 64 * 2 * 2;
    let tokens = m["kv_tokens"].as_u64().unwrap();
    assert!(tokens >= 4 * (256 + 64), "{m}");
    let gib = (1u64 << 30) as f64;
    let kv = m["kv_cache_gib"].as_f64().unwrap() * gib;
    assert!((kv - (tokens * per_token) as f64).abs() < 1.0, "{m}");
    let file = std::fs::metadata(Path::new(assets).join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
        .unwrap()
        .len() as f64;
    assert!(
        (m["weights_gib"].as_f64().unwrap() * gib - file).abs() < 1.0,
        "{m}"
    );

    // A Hugging Face model: its config.json in the cache gives the shape; vLLM's batch and
    // lengths give the KV cache. Without it, `?` and why.
    let snap = h.path().join("hf/hub/models--acme--tiny/snapshots/1");
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::write(
        snap.join("config.json"),
        r#"{"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
            "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 5632,
            "vocab_size": 32000, "tie_word_embeddings": false}"#,
    )
    .unwrap();
    let f = h.write(
        "s.yaml",
        "sweep:\n  model: [acme/tiny, acme/absent]\nengine: vllm\ndtype: float16\n\
         max_input_tokens: 100\nmax_output_tokens: 28\nvllm: {engine: {max_num_seqs: 2}}\n",
    );
    let hf = h.path().join("hf");
    let o = h.llem(
        &["run", f.to_str().unwrap(), "--dry-run", "--json"],
        &[("HF_HOME", hf.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let by_model = |name: &str| {
        v["configurations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["model"] == name)
            .unwrap()["memory_estimate"]
            .clone()
    };
    // Weights: 16 layers x (attention 2048 x 128 x (2 x 16 + 2 x 4) + gated FFN 3 x 2048 x
    // 5632) + untied embeddings 2 x 32000 x 2048 parameters, at 2 bytes (float16). KV: 2
    // sequences x 128 tokens x (K and V) x 16 layers x 4 heads x 128 x 2 bytes.
    let weights = (16 * (2048 * 128 * 40 + 3 * 2048 * 5632) + 2 * 32000 * 2048) * 2u64;
    let kv = 2 * 128 * 2 * 16 * 4 * 128 * 2u64;
    let m = by_model("acme/tiny");
    assert!(
        (m["weights_gib"].as_f64().unwrap() * gib - weights as f64).abs() < 1.0,
        "{m}"
    );
    assert!(
        (m["kv_cache_gib"].as_f64().unwrap() * gib - kv as f64).abs() < 1.0,
        "{m}"
    );
    assert_eq!(m["kv_tokens"], 256);
    let absent = by_model("acme/absent");
    assert!(absent["total_gib"].is_null(), "{absent}");
    assert_eq!(
        absent["basis"],
        "no config.json for acme/absent in a model directory or the Hugging Face cache"
    );
    let text = stdout(&h.llem(
        &["run", f.to_str().unwrap(), "--dry-run"],
        &[("HF_HOME", hf.to_str().unwrap())],
    ));
    assert!(
        text.contains("1.60 GiB") && text.contains("  ?  "),
        "{text}"
    );
}

/// `llem config convert` writes the other dialect atomically, or says why not.
#[test]
fn config_convert_writes_the_other_dialect() {
    let h = Home::new();
    let out = h.path().join("mixed07.yaml");
    let o = h.llem(
        &[
            "config",
            "convert",
            "examples/seed/mixed-study.yaml",
            "--to",
            "llem07",
            "-o",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.contains("serving_mode: offline") && text.contains("task:"),
        "{text}"
    );
    let o = h.llem(&["run", out.to_str().unwrap(), "--dry-run"], &[]);
    assert!(
        stdout(&o).contains("dialect            llem 0.7"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("3 configurations"), "{}", stdout(&o));
    let o = h.llem(
        &["config", "convert", out.to_str().unwrap(), "--to", "llem07"],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is already llem 0.7"), "{}", stderr(&o));
}
