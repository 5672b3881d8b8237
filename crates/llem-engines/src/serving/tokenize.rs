//! Text to the server's own token ids (a trace replay's prompts are cut from them, so their
//! lengths are what the server counts), through the route its engine has.

use std::time::Duration;

use serde_json::{Value, json};

use super::ServerEngine;
use super::client;
use super::engines::TokenizeRoute;
use crate::engine::EngineError;

/// How long one tokenize call may take (a long conversation on a loaded server).
const TOKENIZE_TIMEOUT: Duration = Duration::from_secs(60);

impl ServerEngine {
    /// The token ids of `text`, without special tokens, as the server tokenizes it.
    pub(super) fn tokenize_text(&self, text: &str) -> Result<Vec<u32>, EngineError> {
        let route = self.spec.and_then(|s| s.tokenize).ok_or_else(|| {
            EngineError::Config(format!(
                "the {} server has no tokenize route llem knows, so prompts of exact token \
                 lengths cannot be made for it",
                self.cfg.engine
            ))
        })?;
        let body = match route {
            TokenizeRoute::Content => json!({"content": text, "add_special": false}),
            TokenizeRoute::Prompt => json!({
                "model": self.endpoint.model,
                "prompt": text,
                "add_special_tokens": false,
            }),
        };
        let url = format!("{}/tokenize", self.endpoint.base_url);
        let mut rb = self
            .control
            .post(&url)
            .timeout(TOKENIZE_TIMEOUT)
            .json(&body);
        if let Some(k) = &self.endpoint.api_key {
            rb = rb.bearer_auth(k);
        }
        let failed = |why: String| EngineError::Inference(format!("{url}: tokenize: {why}"));
        let (status, text) = self
            .rt
            .block_on(async move {
                let r = rb.send().await.map_err(|e| client::error_chain(&e))?;
                let status = r.status();
                let text = r.text().await.map_err(|e| client::error_chain(&e))?;
                Ok::<_, String>((status, text))
            })
            .map_err(failed)?;
        let known: Vec<&str> = self.endpoint.api_key.as_deref().into_iter().collect();
        let quoted = || {
            llem_config::redact::text(&text, &known)
                .chars()
                .take(300)
                .collect::<String>()
        };
        if !status.is_success() {
            return Err(failed(format!("{status}: {}", quoted())));
        }
        token_ids(&text).ok_or_else(|| failed(format!("no `tokens` list of ids in {}", quoted())))
    }
}

/// The `tokens` list of a tokenize answer (both engines name it so).
fn token_ids(body: &str) -> Option<Vec<u32>> {
    let v: Value = serde_json::from_str(body).ok()?;
    v.get("tokens")?
        .as_array()?
        .iter()
        .map(|t| t.as_u64().and_then(|n| u32::try_from(n).ok()))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn both_engines_answers_are_read_and_anything_else_is_none() {
        assert_eq!(
            token_ids(r#"{"tokens":[19556,905,28]}"#),
            Some(vec![19556, 905, 28])
        );
        assert_eq!(
            token_ids(r#"{"count":2,"max_model_len":2048,"tokens":[1,2],"token_strs":null}"#),
            Some(vec![1, 2])
        );
        // llama-server with `with_pieces` answers objects: not ids.
        assert_eq!(token_ids(r#"{"tokens":[{"id":1,"piece":"a"}]}"#), None);
        assert_eq!(token_ids(r#"{"tokens":[-1]}"#), None);
        assert_eq!(token_ids("<html>"), None);
    }
}
