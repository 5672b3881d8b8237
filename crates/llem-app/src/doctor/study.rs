//! `llem doctor study.yaml`: what this study needs from the host, configuration by
//! configuration (identical outcomes collapsed), so a night is not lost to a missing server,
//! an unreadable sensor or an unreachable Docker daemon.

use std::collections::BTreeMap;

use llem_config::{EnergySampler, RunnerSpec, StudyPlan};

use super::engines::Docker;
use super::host::{Facts, RAPL_FIX};
use super::{Line, Status};

/// `#1, #2, #5` for configuration indices (0-based in, 1-based out), shortened past eight.
fn which(ix: &[usize]) -> String {
    let mut s: Vec<String> = ix.iter().take(8).map(|i| format!("#{}", i + 1)).collect();
    if ix.len() > 8 {
        s.push(format!("and {} more", ix.len() - 8));
    }
    s.join(", ")
}

/// The checks of every configuration, each outcome once with the configurations it concerns.
pub fn checks(plan: &StudyPlan, f: &Facts, docker: &Docker, python: Option<&str>) -> Vec<Line> {
    let assets = llem_engines::assets::assets_dir(std::env::var("LLEM_ASSETS").ok().as_deref());
    // (status, message, fix) -> configuration indices.
    let mut found: BTreeMap<(Status, String, Option<String>), Vec<usize>> = BTreeMap::new();
    // Each endpoint is asked once, however many configurations name it.
    let mut endpoints: BTreeMap<String, Option<Line>> = BTreeMap::new();
    let mut add = |line: Line, i: usize| {
        found
            .entry((line.status, line.message, line.fix))
            .or_default()
            .push(i);
    };
    // The device-settings check reads the sensor roots only; node power plays no part in it.
    let senv = llem_energy::SensorEnv::from_process(plan.user.measurement.cpu_tdp_w);
    for (i, pc) in plan.configs.iter().enumerate() {
        let cfg = &pc.config;
        let mut lines = Vec::new();
        if let Err(e) = llem_harness::lifecycle::check_runnable(cfg, &assets, python) {
            lines.push(Line::fail(e.to_string()));
        }
        if let Err(problems) = llem_harness::device_settings::check(cfg, &senv) {
            lines.extend(problems.into_iter().map(Line::fail));
        }
        lines.extend(sampler(cfg.energy_sampler, f));
        if let Some(RunnerSpec::Docker { image }) = cfg.runner() {
            let image = image
                .clone()
                .or_else(|| cfg.images.get(&cfg.engine).cloned())
                .or_else(|| llem_engines::registry::default_image(cfg.engine).map(String::from));
            match (&docker.daemon, image) {
                (Err(why), _) => lines.push(
                    Line::fail(format!(
                        "runner docker, but the Docker daemon did not answer: {why}"
                    ))
                    .fix("start Docker and let this user reach it (docker group)"),
                ),
                (Ok(_), Some(img)) if docker.has_image(&img) == Some(false) => lines.push(
                    Line::info(format!("image {img} is not pulled yet"))
                        .fix(format!("docker pull {img}")),
                ),
                _ => {}
            }
        }
        if let Some(RunnerSpec::External { url }) = cfg.runner() {
            let line = endpoints
                .entry(url.clone())
                .or_insert_with(|| endpoint(url))
                .clone();
            lines.extend(line);
        }
        if lines.iter().all(|l| l.status < Status::Warn) {
            lines.push(Line::ok(format!(
                "{} can run here ({})",
                cfg.engine.as_str(),
                runner_words(cfg)
            )));
        }
        for l in lines {
            add(l, i);
        }
    }
    let mut found: Vec<_> = found.into_iter().collect();
    // Failures first: they are what the reader came for.
    found.sort_by_key(|f| std::cmp::Reverse(f.0.0));
    found
        .into_iter()
        .map(|((status, message, fix), ix)| {
            let all = ix.len() == plan.configs.len() && ix.len() > 1;
            let whom = if all {
                "every configuration".to_string()
            } else {
                which(&ix)
            };
            Line {
                status,
                message: format!("{whom}: {message}"),
                fix,
            }
        })
        .collect()
}

fn runner_words(cfg: &llem_config::ExperimentConfig) -> String {
    cfg.runner()
        .map_or_else(|| "no runner".into(), |r| format!("runner {r}"))
}

/// How long the doctor waits for an endpoint's answer.
const ENDPOINT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether the server an `external:` runner names answers: nothing to say when it is ready.
fn endpoint(url: &str) -> Option<Line> {
    use llem_engines::serving::probe::EndpointProbe;
    let shown = llem_config::credentials::redact_url(url);
    match llem_engines::serving::probe::probe(url, ENDPOINT_TIMEOUT) {
        EndpointProbe::Ready { .. } => None,
        EndpointProbe::Answering { last } => Some(
            Line::warn(format!(
                "{shown} answers but is not ready ({})",
                llem_config::redact::text(&last, &[])
            ))
            .fix("wait for the server to load its model, or check its API key"),
        ),
        EndpointProbe::Unreachable { reason } => Some(
            Line::fail(format!("nothing answers at {shown}: {reason}"))
                .fix("start the server, or correct the URL in runners:"),
        ),
    }
}

/// Whether the sensors `sampler` asks for are here.
fn sampler(sampler: Option<EnergySampler>, f: &Facts) -> Vec<Line> {
    let absent = |family: &str| {
        f.family(family)
            .and_then(|fam| fam.unavailable.clone())
            .unwrap_or_default()
    };
    let gpus_ok = f
        .family("nvml")
        .is_some_and(|fam| fam.unavailable.is_none());
    match sampler.unwrap_or(EnergySampler::Auto) {
        EnergySampler::Nvml | EnergySampler::Zeus if !gpus_ok => {
            let why = absent("nvml");
            vec![Line::fail(format!(
                "energy_sampler {} needs NVIDIA GPUs through NVML: {why}",
                sampler.map_or("auto", |s| s.as_str())
            ))]
        }
        EnergySampler::Nvml | EnergySampler::Zeus | EnergySampler::Auto => {
            let mig = f
                .gpus
                .as_ref()
                .map(|g| g.iter().filter(|g| g.mig == Some(true)).count())
                .unwrap_or(0);
            if mig > 0 {
                vec![
                    Line::fail(format!(
                        "{mig} GPU(s) in MIG mode: NVML cannot attribute their energy"
                    ))
                    .fix("sudo nvidia-smi -i <gpu> -mig 0"),
                ]
            } else {
                Vec::new()
            }
        }
        EnergySampler::Rapl if f.rapl_denied() => vec![
            Line::fail("energy_sampler rapl, but this user cannot read the RAPL counters")
                .fix(RAPL_FIX),
        ],
        EnergySampler::Rapl if f.family("rapl").is_some_and(|r| r.unavailable.is_some()) => {
            vec![Line::fail(format!(
                "energy_sampler rapl, but there is no RAPL: {}",
                absent("rapl")
            ))]
        }
        EnergySampler::Amdgpu if f.family("amdgpu").is_some_and(|r| r.unavailable.is_some()) => {
            vec![Line::fail(format!(
                "energy_sampler amdgpu, but there is no amdgpu hwmon: {}",
                absent("amdgpu")
            ))]
        }
        _ => Vec::new(),
    }
}
