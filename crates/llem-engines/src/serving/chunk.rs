//! One streamed chunk of an OpenAI-compatible response, read without allocating: only the
//! length of the text each choice carries, its finish reason, usage and errors are kept.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use llem_results::FinishReason;

/// What a chunk says.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ChunkInfo {
    /// Bytes of generated text in the first choice (`text`, or `delta.content` plus
    /// `delta.reasoning_content` for chat); 0 for role-only and empty chunks.
    pub text_bytes: u32,
    /// The first choice's finish reason, when set.
    pub finish: Option<FinishReason>,
    /// `usage.prompt_tokens`, when the chunk carries usage.
    pub prompt_tokens: Option<u32>,
    /// `usage.completion_tokens`, when the chunk carries usage.
    pub completion_tokens: Option<u32>,
    /// `usage.prompt_tokens_details.cached_tokens`: prompt tokens served from the prefix
    /// cache, when the server says.
    pub cached_prompt_tokens: Option<u32>,
    /// The chunk is an error object.
    pub is_error: bool,
    /// `choices` held at least one choice (a usage-only chunk has none).
    pub has_choice: bool,
}

/// Parses one `data:` payload. `[DONE]` is `Ok(None)`.
pub fn parse(data: &[u8]) -> Result<Option<ChunkInfo>, crate::ChunkError> {
    if data == b"[DONE]" {
        return Ok(None);
    }
    let raw: RawChunk = serde_json::from_slice(data).map_err(|source| crate::ChunkError {
        source,
        start: String::from_utf8_lossy(data.get(..data.len().min(200)).unwrap_or_default())
            .into_owned(),
    })?;
    let has_choice = raw.choices.is_some();
    let c = raw.choices.unwrap_or_default();
    let delta = c.delta.unwrap_or_default();
    let len = |s: Option<StrLen>| s.map_or(0, |s| s.0);
    let text =
        len(c.text) + len(delta.content) + len(delta.reasoning_content) + len(delta.reasoning);
    Ok(Some(ChunkInfo {
        text_bytes: u32::try_from(text).unwrap_or(u32::MAX),
        finish: c.finish_reason.and_then(|f| f.0),
        prompt_tokens: raw.usage.as_ref().and_then(|u| u.prompt_tokens),
        cached_prompt_tokens: raw
            .usage
            .as_ref()
            .and_then(|u| u.prompt_tokens_details.as_ref())
            .and_then(|d| d.cached_tokens),
        completion_tokens: raw.usage.and_then(|u| u.completion_tokens),
        is_error: raw.error.is_some() || raw.object.is_some_and(|o| o.0),
        has_choice,
    }))
}

/// The reply text a chunk carries (`text`, or a chat delta's `content`; reasoning left out),
/// for a conversation that threads the server's replies into its next prompt. Allocates,
/// so only those requests read it.
pub fn reply_text(data: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Chunk {
        #[serde(default)]
        choices: Vec<Choice>,
    }
    #[derive(Deserialize)]
    struct Choice {
        #[serde(default)]
        text: Option<String>,
        #[serde(default)]
        delta: Option<Delta>,
    }
    #[derive(Deserialize)]
    struct Delta {
        #[serde(default)]
        content: Option<String>,
    }
    let c: Chunk = serde_json::from_slice(data).ok()?;
    let first = c.choices.into_iter().next()?;
    first.text.or(first.delta.and_then(|d| d.content))
}

#[derive(Deserialize)]
struct RawChunk {
    #[serde(default, deserialize_with = "first_choice")]
    choices: Option<RawChoice>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(default)]
    object: Option<ErrorObject>,
}

#[derive(Deserialize, Default)]
struct RawChoice {
    #[serde(default)]
    text: Option<StrLen>,
    #[serde(default)]
    delta: Option<RawDelta>,
    #[serde(default)]
    finish_reason: Option<Finish>,
}

#[derive(Deserialize, Default)]
struct RawDelta {
    #[serde(default)]
    content: Option<StrLen>,
    #[serde(default)]
    reasoning_content: Option<StrLen>,
    #[serde(default)]
    reasoning: Option<StrLen>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: Option<u32>,
    #[serde(default)]
    completion_tokens: Option<u32>,
    #[serde(default)]
    prompt_tokens_details: Option<RawPromptDetails>,
}

#[derive(Deserialize)]
struct RawPromptDetails {
    #[serde(default)]
    cached_tokens: Option<u32>,
}

/// The length of a JSON string, read without keeping it.
struct StrLen(usize);

impl<'de> Deserialize<'de> for StrLen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = StrLen;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<StrLen, E> {
                Ok(StrLen(s.len()))
            }
        }
        d.deserialize_str(V)
    }
}

/// A finish reason, mapped without keeping the string.
struct Finish(Option<FinishReason>);

impl<'de> Deserialize<'de> for Finish {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Finish;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a finish reason")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Finish, E> {
                Ok(Finish(Some(match s {
                    "length" => FinishReason::Length,
                    "error" | "abort" => FinishReason::Error,
                    // stop, eos_token, stop_sequence, tool_calls, content_filter
                    _ => FinishReason::Stop,
                })))
            }
        }
        d.deserialize_str(V)
    }
}

/// `"object": "error"` (vLLM's and SGLang's error chunks).
struct ErrorObject(bool);

impl<'de> Deserialize<'de> for ErrorObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ErrorObject;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<ErrorObject, E> {
                Ok(ErrorObject(s == "error"))
            }
        }
        d.deserialize_str(V)
    }
}

/// The first element of `choices`, the rest skipped (one request per stream: n = 1).
fn first_choice<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RawChoice>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<RawChoice>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array of choices")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let first = seq.next_element::<RawChoice>()?;
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(first)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn reply_text_is_the_content_without_reasoning() {
        let chat = br#"{"choices":[{"delta":{"content":"Hi","reasoning_content":"hmm"}}]}"#;
        assert_eq!(reply_text(chat).as_deref(), Some("Hi"));
        let text = br#"{"choices":[{"text":" there","finish_reason":null}]}"#;
        assert_eq!(reply_text(text).as_deref(), Some(" there"));
        assert_eq!(reply_text(br#"{"choices":[],"usage":{}}"#), None);
        assert_eq!(reply_text(b"[DONE]"), None);
    }

    #[test]
    fn completion_chat_usage_and_error_chunks() {
        let c =
            parse(br#"{"id":"x","choices":[{"index":0,"text":"Hel\nlo","finish_reason":null}]}"#)
                .unwrap()
                .unwrap();
        assert_eq!(c.text_bytes, 6);
        assert_eq!(c.finish, None);
        let role = parse(br#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(role.text_bytes, 0);
        let role2 = parse(br#"{"choices":[{"delta":{"role":"assistant"}}]}"#)
            .unwrap()
            .unwrap();
        assert_eq!(role2.text_bytes, 0);
        let chat = parse(br#"{"choices":[{"delta":{"content":"Paris","reasoning_content":null},"finish_reason":"stop"}],"usage":null}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            (chat.text_bytes, chat.finish),
            (5, Some(FinishReason::Stop))
        );
        let cached = parse(br#"{"choices":[],"usage":{"prompt_tokens":46,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":45}}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(cached.cached_prompt_tokens, Some(45));
        let usage = parse(br#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":30,"total_tokens":42}}"#)
            .unwrap()
            .unwrap();
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (Some(12), Some(30))
        );
        assert!(
            parse(br#"{"object":"error","message":"boom","code":500}"#)
                .unwrap()
                .unwrap()
                .is_error
        );
        assert!(
            parse(br#"{"error":{"message":"boom"}}"#)
                .unwrap()
                .unwrap()
                .is_error
        );
        assert_eq!(parse(b"[DONE]").unwrap(), None);
        assert!(parse(b"{not json").is_err());
    }
}
