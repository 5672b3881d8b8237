//! Precedence: command line > YAML > LLEM_* variables > user config file > defaults.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::{Files, env, plan_with};
use llem_config::{Engine, Env, ExperimentOrder, Overrides, RunnerSpec};

fn user_env(f: &Files, user_yaml: &str, vars: &[(&str, &str)]) -> Env {
    let path = f.write("user-config.yaml", user_yaml);
    let mut pairs: Vec<(String, String)> =
        vec![("LLEM_CONFIG_PATH".into(), path.display().to_string())];
    pairs.extend(
        vars.iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string())),
    );
    Env::from_pairs(pairs)
}

fn vllm_runner(p: &llem_config::StudyPlan) -> String {
    p.configs[0]
        .config
        .runners
        .get(&Engine::Vllm)
        .unwrap()
        .to_string()
}

#[test]
fn runners_user_file_then_env_then_yaml() {
    let f = Files::new();
    let bare = f.write("bare.yaml", "model: m\nengine: vllm\n");
    let pinned = f.write(
        "pinned.yaml",
        "model: m\nengine: vllm\nrunners: {vllm: local}\n",
    );
    let o = Overrides::default;

    let p = plan_with(&bare, o(), true, &env()).unwrap();
    assert_eq!(vllm_runner(&p), "local", "built-in default");

    let e = user_env(&f, "runners: {vllm: docker}\n", &[]);
    assert_eq!(
        vllm_runner(&plan_with(&bare, o(), true, &e).unwrap()),
        "docker",
        "user file"
    );

    let e = user_env(
        &f,
        "runners: {vllm: docker}\n",
        &[("LLEM_RUNNER_VLLM", "external:http://10.0.0.5:8000")],
    );
    assert_eq!(
        vllm_runner(&plan_with(&bare, o(), true, &e).unwrap()),
        "external:http://10.0.0.5:8000",
        "env over file"
    );
    assert_eq!(
        vllm_runner(&plan_with(&pinned, o(), true, &e).unwrap()),
        "local",
        "YAML over env"
    );
}

/// Where results go is environment; what runs is identity, wherever it was named: a user
/// config that puts vLLM in a container makes another configuration than a local vLLM
/// (docs/configuration.md, Hashes), and naming the default runner changes nothing.
#[test]
fn the_runner_is_identity_and_the_results_directory_is_not() {
    let f = Files::new();
    let bare = f.write("bare.yaml", "model: m\nengine: vllm\n");
    let a = plan_with(&bare, Overrides::default(), true, &env()).unwrap();
    let e = user_env(&f, "output: {results_dir: /data/r}\n", &[]);
    let b = plan_with(&bare, Overrides::default(), true, &e).unwrap();
    assert_eq!(a.configs[0].digest, b.configs[0].digest);
    assert_eq!(b.output_dir, "/data/r");
    assert_eq!(b.configs[0].config.output_dir.as_deref(), Some("/data/r"));
    let local = user_env(&f, "runners: {vllm: local}\n", &[]);
    let c = plan_with(&bare, Overrides::default(), true, &local).unwrap();
    assert_eq!(a.configs[0].digest, c.configs[0].digest);
    let docker = user_env(&f, "runners: {vllm: docker}\n", &[]);
    let d = plan_with(&bare, Overrides::default(), true, &docker).unwrap();
    assert_ne!(a.configs[0].digest, d.configs[0].digest);
}

#[test]
fn command_line_overrides_yaml() {
    let f = Files::new();
    let study = f.write(
        "s.yaml",
        "model: m\nengine: transformers\ndataset: {n_prompts: 10}\noutput_dir: ./yaml-results\nsweep: {dtype: [float16, bfloat16]}\nstudy_execution: {n_cycles: 2, experiment_order: reverse}\n",
    );
    let over = Overrides {
        model: Some("other".into()),
        engine: Some(Engine::Transformers),
        n_prompts: Some(3),
        output_dir: Some("/tmp/cli".into()),
        cycles: Some(4),
        order: Some(ExperimentOrder::Interleave),
    };
    let p = plan_with(&study, over, true, &env()).unwrap();
    assert!(
        p.configs
            .iter()
            .all(|c| c.config.model == "other" && c.config.dataset.n_prompts == 3)
    );
    assert_eq!(p.execution.n_cycles, 4);
    assert_eq!(p.execution.experiment_order, ExperimentOrder::Interleave);
    assert_eq!(p.runs.len(), 8);
    assert_eq!(p.output_dir, "/tmp/cli");
}

#[test]
fn command_line_engine_is_located_when_it_conflicts() {
    let f = Files::new();
    let s = f.write("s.yaml", "model: m\nllamacpp: {batch_size: 2}\n");
    let over = Overrides {
        engine: Some(Engine::Vllm),
        ..Overrides::default()
    };
    let e = plan_with(&s, over, true, &env()).unwrap_err();
    assert!(
        e.diagnostics[0]
            .message
            .contains("`llamacpp:` section given but `engine` is `vllm`")
    );
}

#[test]
fn study_and_experiment_defaults() {
    let f = Files::new();
    let study = f.write("s.yaml", "model: m\nsweep: {random_seed: [1, 2]}\n");
    let p = plan_with(&study, Overrides::default(), true, &env()).unwrap();
    assert_eq!(p.execution.n_cycles, 3);
    assert_eq!(p.execution.experiment_order, ExperimentOrder::Shuffle);
    assert_eq!(p.execution.experiment_gap_seconds, 60.0);
    assert_eq!(p.execution.cycle_gap_seconds, 300.0);
    assert_eq!(p.execution.max_consecutive_failures, 10);
    // 600 s for the run, on top of the default baseline (30 s) and thermal floor (60 s).
    assert_eq!(p.execution.experiment_timeout_seconds, 690.0);

    let exp = f.write("e.yaml", "model: m\n");
    let p = plan_with(&exp, Overrides::default(), true, &env()).unwrap();
    assert_eq!(p.execution.n_cycles, 1);
    assert_eq!(p.execution.experiment_order, ExperimentOrder::Sequential);
    assert_eq!(p.study_name, "e");

    // An experiment file may still ask for repetitions.
    let exp = f.write(
        "e2.yaml",
        "model: m\nname: single\nstudy_execution: {n_cycles: 5}\n",
    );
    let p = plan_with(&exp, Overrides::default(), true, &env()).unwrap();
    assert_eq!(p.runs.len(), 5);
    assert_eq!(p.study_name, "single");
}

#[test]
fn gaps_come_from_user_config_unless_yaml_sets_them() {
    let f = Files::new();
    let e = user_env(
        &f,
        "execution: {experiment_gap_seconds: 5, cycle_gap_seconds: 7}\n",
        &[("LLEM_CYCLE_GAP_SECONDS", "9")],
    );
    let study = f.write("s.yaml", "model: m\nsweep: {random_seed: [1, 2]}\n");
    let p = plan_with(&study, Overrides::default(), true, &e).unwrap();
    assert_eq!(
        (
            p.execution.experiment_gap_seconds,
            p.execution.cycle_gap_seconds
        ),
        (5.0, 9.0)
    );
    let study = f.write(
        "t.yaml",
        "model: m\nsweep: {random_seed: [1, 2]}\nstudy_execution: {experiment_gap_seconds: 1}\n",
    );
    let p = plan_with(&study, Overrides::default(), true, &e).unwrap();
    assert_eq!(p.execution.experiment_gap_seconds, 1.0);
}

#[test]
fn energy_sampler_default_from_user_config() {
    let f = Files::new();
    let e = user_env(&f, "measurement: {energy_sampler: rapl}\n", &[]);
    let bare = f.write("a.yaml", "model: m\n");
    let p = plan_with(&bare, Overrides::default(), true, &e).unwrap();
    assert_eq!(
        p.configs[0].config.energy_sampler.map(|s| s.as_str()),
        Some("rapl")
    );
    let set = f.write("b.yaml", "model: m\nenergy_sampler: estimate\n");
    let p = plan_with(&set, Overrides::default(), true, &e).unwrap();
    assert_eq!(
        p.configs[0].config.energy_sampler.map(|s| s.as_str()),
        Some("estimate")
    );
}

#[test]
fn bad_user_config_is_reported_at_its_origin() {
    let f = Files::new();
    let e = user_env(&f, "runners:\n  vllm: dokcer\n", &[]);
    let s = f.write("a.yaml", "model: m\n");
    let err = plan_with(&s, Overrides::default(), true, &e).unwrap_err();
    let d = &err.diagnostics[0];
    assert!(
        d.message.contains("unknown runner `dokcer`"),
        "{}",
        d.message
    );
    assert!(
        d.location
            .as_ref()
            .unwrap()
            .file
            .ends_with("user-config.yaml")
    );
    assert_eq!(d.location.as_ref().unwrap().line, 2);

    let e = user_env(
        &f,
        "",
        &[("LLEM_RUNNER_TRANSFORMERS", "external:http://x:1")],
    );
    let err = plan_with(&s, Overrides::default(), true, &e).unwrap_err();
    assert_eq!(
        err.diagnostics[0].location.as_ref().unwrap().file,
        "LLEM_RUNNER_TRANSFORMERS"
    );
}

#[test]
fn command_line_only_experiment() {
    let p = llem_config::plan(&llem_config::PlanRequest {
        config: None,
        config_dir: None,
        overrides: Overrides {
            model: Some("models/tiny.gguf".into()),
            n_prompts: Some(50),
            ..Overrides::default()
        },
        dedup: true,
        env: &env(),
    })
    .unwrap();
    assert_eq!(p.configs.len(), 1);
    let c = &p.configs[0].config;
    assert_eq!(c.engine, Engine::LlamaCpp);
    assert_eq!(c.runner(), Some(&RunnerSpec::Embedded));
    assert_eq!(c.dataset.n_prompts, 50);
    assert_eq!(p.study_name, "tiny");

    let e = llem_config::plan(&llem_config::PlanRequest {
        config: None,
        config_dir: None,
        overrides: Overrides::default(),
        dedup: true,
        env: &env(),
    })
    .unwrap_err();
    assert!(e.diagnostics[0].message.contains("--model"));
}

/// A file written out for a caller (Python's dict) plans with the caller's directory for its
/// relative `base:` and `_extends`; without `config_dir` they are the file's own.
#[test]
fn config_dir_is_where_relative_base_and_extends_resolve() {
    let (written, caller) = (Files::new(), Files::new());
    caller.write("base.yaml", "model: m.gguf\nmax_output_tokens: 6\n");
    caller.write("parent.yaml", "model: m.gguf\nmax_input_tokens: 40\n");
    let study = written.write(
        "study.yaml",
        "name: s\nbase: base.yaml\nsweep: {llamacpp.batch_size: [1, 2]}\n",
    );
    let experiment = written.write("e.yaml", "_extends: parent.yaml\nname: e\n");
    let plan = |path: &std::path::Path, dir: Option<&std::path::Path>| {
        llem_config::plan(&llem_config::PlanRequest {
            config: Some(path),
            config_dir: dir,
            overrides: Overrides::default(),
            dedup: true,
            env: &env(),
        })
    };
    let p = plan(&study, Some(caller.dir.path())).unwrap();
    assert_eq!(p.configs.len(), 2);
    assert!(
        p.configs
            .iter()
            .all(|c| c.config.max_output_tokens == Some(6))
    );
    let p = plan(&experiment, Some(caller.dir.path())).unwrap();
    assert_eq!(p.configs[0].config.max_input_tokens, Some(40));
    // Beside the written file there is no base.yaml or parent.yaml.
    for (f, missing) in [(&study, "base.yaml"), (&experiment, "parent.yaml")] {
        let e = plan(f, None).unwrap_err().to_string();
        assert!(e.contains(missing) && e.contains("not found"), "{e}");
    }
}

#[test]
fn user_config_engine_aliases_fill_the_canonical_engine() {
    let f = Files::new();
    let e = user_env(&f, "runners: {pytorch: docker}\n", &[]);
    let s = f.write("a.yaml", "model: m\nengine: transformers\n");
    let p = plan_with(&s, Overrides::default(), true, &e).unwrap();
    assert_eq!(
        p.configs[0]
            .config
            .runners
            .get(&Engine::Transformers)
            .map(ToString::to_string)
            .as_deref(),
        Some("docker")
    );
    let s = f.write(
        "b.yaml",
        "model: m\nengine: transformers\nrunners: {pytorch: local}\n",
    );
    let p = plan_with(&s, Overrides::default(), true, &e).unwrap();
    assert_eq!(
        p.configs[0]
            .config
            .runners
            .get(&Engine::Transformers)
            .map(ToString::to_string)
            .as_deref(),
        Some("local"),
        "the YAML's alias wins over the user default"
    );
}

/// A plan that launches a server allows the server's start on top of the default
/// per-experiment limit, and says so; one that only talks to a running server does not; a
/// written limit shorter than the start is kept and warned about.
#[test]
fn the_experiment_timeout_covers_a_launched_servers_start() {
    let launched =
        common::plan_text("name: s\nmodel: m.gguf\nengine: llamacpp\nrunners: {llamacpp: local}\n")
            .unwrap();
    assert_eq!(launched.execution.experiment_timeout_seconds, 1890.0);
    assert_eq!(
        launched.execution.experiment_timeout_derivation.as_deref(),
        Some(
            "server start up to 1200 s + 90 s of fixed waits (baseline, thermal floor, timed \
             traffic) + 600 s"
        )
    );
    let external = common::plan_text(
        "name: s\nmodel: m\nengine: openai\nrunners: {openai: \"external:http://127.0.0.1:1\"}\n",
    )
    .unwrap();
    assert_eq!(external.execution.experiment_timeout_seconds, 690.0);
    assert!(
        !external
            .execution
            .experiment_timeout_derivation
            .as_deref()
            .unwrap_or_default()
            .contains("server start")
    );
    let embedded = common::plan_text(
        "name: s\nmodel: m.gguf\nbaseline: {enabled: false}\nwarmup: {enabled: false}\n",
    )
    .unwrap();
    assert_eq!(embedded.execution.experiment_timeout_seconds, 600.0);
    assert!(embedded.execution.experiment_timeout_derivation.is_none());

    let short = common::plan_text(
        "name: s\nmodel: m.gguf\nengine: llamacpp\nrunners: {llamacpp: local}\n\
         study_execution: {experiment_timeout_seconds: 900}\n",
    )
    .unwrap();
    assert_eq!(short.execution.experiment_timeout_seconds, 900.0);
    assert!(
        short
            .warnings
            .iter()
            .any(|w| w.contains("(900 s) is no longer than the wait for a launched server")),
        "{:?}",
        short.warnings
    );
}

/// A study of methodology `windows` needs its ramp and every window in each cell: the cell
/// limit is derived from that (never below what a cell must wait), the dry-run JSON carries
/// the duration estimate with its least no larger than its most, and a limit given below
/// what a cell must wait is refused, naming both numbers.
#[test]
fn the_cell_limit_follows_from_what_the_methodology_needs() {
    let study = "model: m\nengine: openai\nrunners: {openai: \"external:http://127.0.0.1:9\"}\n\
                 measurement: {methodology: windows}\nbaseline: {enabled: false}\n\
                 warmup: {enabled: false}\ntraffic: {arrival: poisson}\n\
                 sweep:\n  traffic.rate_qps: [1, 2, 4]\n";
    let p = llem_config_plan(study).unwrap();
    let fixed = p.configs[0].config.fixed_cell_seconds();
    // The defaults: a 30 s ramp and 3 windows of 240 s.
    assert_eq!(fixed, 30.0 + 3.0 * 240.0);
    let e = &p.execution;
    assert!(e.experiment_timeout_seconds > fixed, "{e:?}");
    assert!(
        e.experiment_timeout_derivation
            .as_deref()
            .is_some_and(|d| d.contains("fixed waits")),
        "{e:?}"
    );
    let json = serde_json::to_value(&p).unwrap();
    let d = &json["duration_estimate"];
    let (least, most) = (
        d["fixed_s"].as_f64().unwrap(),
        d["upper_s"].as_f64().unwrap(),
    );
    assert!(least >= 3.0 * fixed && least <= most, "{d}");
    assert_eq!(d["timed_traffic"], true);

    let given = format!("{study}study_execution: {{experiment_timeout_seconds: 600}}\n");
    let refused = llem_config_plan(&given).unwrap_err().to_string();
    assert!(
        refused.contains("experiment_timeout_seconds is 600 s, but a cell waits at least 750 s"),
        "{refused}"
    );
}

fn llem_config_plan(text: &str) -> Result<llem_config::StudyPlan, llem_config::ConfigError> {
    common::plan_text(text)
}

/// `steady_state` at a request rate is said to be the wrong tool before the run: such a
/// cell cannot fill the batch its stability rule asks for. `windows` draws no such warning.
#[test]
fn a_rate_sweep_under_steady_state_is_warned_about_at_plan_time() {
    let base = "model: m\nengine: openai\nrunners: {openai: \"external:http://127.0.0.1:9\"}\n\
                traffic: {arrival: poisson, rate_qps: [1, 2, 4]}\n";
    let steady = common::plan_text(&format!(
        "{base}measurement: {{methodology: steady_state}}\n"
    ))
    .unwrap();
    assert_eq!(steady.configs.len(), 3);
    for c in &steady.configs {
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("methodology steady_state with traffic at")
                    && w.contains("use methodology `windows`")),
            "{:?}",
            c.warnings
        );
    }
    let windows =
        common::plan_text(&format!("{base}measurement: {{methodology: windows}}\n")).unwrap();
    assert!(
        windows
            .configs
            .iter()
            .all(|c| c.warnings.iter().all(|w| !w.contains("steady_state"))),
        "{:?}",
        windows.configs[0].warnings
    );
}
