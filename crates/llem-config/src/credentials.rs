//! Credentials written into a runner's URL (`external:http://user:key@host`): used for the
//! requests, never written or printed. A [`RunnerSpec`] shows and serialises its URL with the
//! userinfo redacted, so `effective_config.json`, `result.json`, `cell_spec.json`, the plan
//! and every message carry `[REDACTED]`; a cell process started by a study gets the real URL
//! back from its parent through the environment ([`RUNNER_CREDENTIALS_ENV`]), not from disk.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::model::{ExperimentConfig, RunnerSpec};
use crate::redact::REDACTED;

/// Environment variable through which a study hands its cells the runner URLs with their
/// credentials: a JSON object from each URL as written (redacted) to the URL itself.
pub const RUNNER_CREDENTIALS_ENV: &str = "LLEM_CELL_CREDENTIALS";

/// Where the userinfo of an `http(s)://userinfo@host/...` URL lies, as a byte range (the
/// `@` excluded); `None` when the URL carries none.
fn userinfo_range(url: &str) -> Option<std::ops::Range<usize>> {
    let start = url.find("://")? + 3;
    let rest = url.get(start..)?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest.get(..authority_end)?.rfind('@')?;
    Some(start..start + at)
}

/// The URL as it may be shown: the password of `user:password@` (or a lone token) replaced
/// by `[REDACTED]`, the user name kept.
pub fn redact_url(url: &str) -> Cow<'_, str> {
    let Some(r) = userinfo_range(url) else {
        return Cow::Borrowed(url);
    };
    let userinfo = url.get(r.clone()).unwrap_or_default();
    if userinfo.ends_with(REDACTED) {
        return Cow::Borrowed(url);
    }
    let shown = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:{REDACTED}"),
        None => REDACTED.to_string(),
    };
    Cow::Owned(format!(
        "{}{shown}{}",
        url.get(..r.start).unwrap_or_default(),
        url.get(r.end..).unwrap_or_default()
    ))
}

/// True when `url` carries userinfo that was redacted (it cannot be used for a request).
pub fn is_redacted(url: &str) -> bool {
    userinfo_range(url)
        .and_then(|r| url.get(r))
        .is_some_and(|u| u.ends_with(REDACTED))
}

/// The runner URLs of these configurations that carry usable credentials.
fn credentialed_urls<'a>(
    configs: impl IntoIterator<Item = &'a ExperimentConfig>,
) -> impl Iterator<Item = &'a str> {
    configs.into_iter().flat_map(|c| {
        c.runners.iter().filter_map(|(_, r)| match r {
            RunnerSpec::External { url } if userinfo_range(url).is_some() && !is_redacted(url) => {
                Some(url.as_str())
            }
            _ => None,
        })
    })
}

/// The variable ([`RUNNER_CREDENTIALS_ENV`], value) that hands a process started for these
/// configurations their runner URLs: each URL that carries credentials, under its redacted
/// form; `None` when none does.
pub fn env_var<'a>(
    configs: impl IntoIterator<Item = &'a ExperimentConfig>,
) -> Option<(String, String)> {
    let map: BTreeMap<String, &str> = credentialed_urls(configs)
        .map(|url| (redact_url(url).into_owned(), url))
        .collect();
    (!map.is_empty()).then(|| {
        (
            RUNNER_CREDENTIALS_ENV.to_string(),
            serde_json::to_string(&map).unwrap_or_default(),
        )
    })
}

/// The secrets in these configurations' runner URLs (each userinfo's password, or the
/// userinfo when it is a lone token), for redacting text that quotes them (a copy of the
/// study file).
pub fn secrets<'a>(configs: impl IntoIterator<Item = &'a ExperimentConfig>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for url in credentialed_urls(configs) {
        let Some(info) = userinfo_range(url).and_then(|r| url.get(r)) else {
            continue;
        };
        let secret = info.split_once(':').map_or(info, |(_, p)| p);
        if !secret.is_empty() && !out.iter().any(|s| s == secret) {
            out.push(secret.to_string());
        }
    }
    out
}

/// The URL without its userinfo: the server it names, whoever logs in.
pub fn url_without_userinfo(url: &str) -> Cow<'_, str> {
    match userinfo_range(url) {
        Some(r) => Cow::Owned(format!(
            "{}{}",
            url.get(..r.start).unwrap_or_default(),
            url.get(r.end + 1..).unwrap_or_default()
        )),
        None => Cow::Borrowed(url),
    }
}

/// Why a cell cannot have its runner credentials back.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The variable is set but not a JSON object of URLs.
    #[error("{RUNNER_CREDENTIALS_ENV} is not a JSON object of URLs: {0}")]
    NotJson(serde_json::Error),
    /// A redacted runner URL whose credentials the process was not given.
    #[error(
        "the runner URL {url} had credentials, which are never written to disk; this process \
         was not given them ({RUNNER_CREDENTIALS_ENV}): run it through `llem run`, which \
         passes them to its cells"
    )]
    Missing {
        /// The URL as written, redacted.
        url: String,
    },
}

/// Puts the credentials back into a configuration read from a file (a cell's spec), from
/// the value of [`RUNNER_CREDENTIALS_ENV`]. An error names the runner whose credentials are
/// not there: a request with `[REDACTED]` as its password would only be refused.
pub fn restore(
    config: &mut ExperimentConfig,
    env_value: Option<&str>,
) -> Result<(), CredentialsError> {
    let map: BTreeMap<String, String> = match env_value {
        Some(v) => serde_json::from_str(v).map_err(CredentialsError::NotJson)?,
        None => BTreeMap::new(),
    };
    let engines: Vec<_> = config.runners.iter().map(|(e, _)| *e).collect();
    for engine in engines {
        let Some(RunnerSpec::External { url }) = config.runners.get(&engine) else {
            continue;
        };
        if !is_redacted(url) {
            continue;
        }
        let full = map
            .get(url.as_str())
            .cloned()
            .ok_or_else(|| CredentialsError::Missing { url: url.clone() })?;
        config
            .runners
            .insert(engine, RunnerSpec::External { url: full });
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_redacted_and_the_rest_kept() {
        assert_eq!(
            redact_url("http://user:s3cr3t@10.0.0.5:8000/v1"),
            "http://user:[REDACTED]@10.0.0.5:8000/v1"
        );
        assert_eq!(redact_url("https://tok3n@host"), "https://[REDACTED]@host");
        assert_eq!(redact_url("http://host:8000/a@b"), "http://host:8000/a@b");
        let once = redact_url("http://u:p@h").into_owned();
        assert_eq!(redact_url(&once), once, "idempotent");
        assert!(is_redacted(&once) && !is_redacted("http://u:p@h"));
    }

    #[test]
    fn a_cell_gets_its_credentials_back_from_the_environment_only() {
        let mut c: ExperimentConfig = serde_json::from_value(serde_json::json!({
            "model": "m", "engine": "openai",
            "runners": {"openai": "external:http://u:s3cr3t@127.0.0.1:9"}
        }))
        .unwrap();
        // Written: redacted.
        let written = serde_json::to_string(&c).unwrap();
        assert!(
            written.contains("http://u:[REDACTED]@127.0.0.1:9"),
            "{written}"
        );
        assert!(!written.contains("s3cr3t"));
        let (name, env) = env_var([&c]).unwrap();
        assert_eq!(name, RUNNER_CREDENTIALS_ENV);
        // Read back: unusable until restored.
        let mut read: ExperimentConfig = serde_json::from_str(&written).unwrap();
        let e = restore(&mut read.clone(), None).unwrap_err();
        assert!(e.to_string().contains("never written to disk"), "{e}");
        restore(&mut read, Some(&env)).unwrap();
        assert_eq!(read.runners, c.runners);
        // Nothing to restore: nothing asked.
        c.runners = Default::default();
        assert!(env_var([&c]).is_none());
        restore(&mut c, None).unwrap();
    }
}
