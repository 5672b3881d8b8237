//! Credentials never leave llem in clear: not on a terminal, in a log, in a result or in
//! `requests.parquet`.
//!
//! Two rules, one owner: a variable whose name says it holds a secret is shown as set and
//! masked ([`is_secret_name`], [`masked`]); free text from outside (a server's error body, a
//! log tail) has credential-shaped spans replaced by `[REDACTED]` ([`text`]), plus any secret
//! value the caller knows is in play (the API key llem itself sent).

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// What a redacted span reads as.
pub const REDACTED: &str = "[REDACTED]";

/// Whether an environment variable's name says it holds a credential.
pub fn is_secret_name(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
    ]
    .iter()
    .any(|w| up.contains(w))
}

/// A secret value as it may be shown: that it is set and how long it is, nothing of it.
pub fn masked(value: &str) -> String {
    format!("{REDACTED} ({} chars)", value.chars().count())
}

/// `authorization: Bearer x`, `"api_key": "x"`, `password=x` and the like: the name stays,
/// the value goes. A value already redacted is taken whole, so that text redacted twice (a
/// server's error quoted in a message that is redacted again) reads the same.
static NAMED: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)((?:proxy-)?authorization|x-api-key|api[_-]?key|access[_-]?token|auth[_-]?token|password|passwd|secret|token)("?\s*[:=]\s*"?)((?:bearer|basic|token)\s+)?(?:\[REDACTED\]|[^"\s,;&}\]]+)"#,
    )
    .ok()
});

/// A scheme and its credential outside any named field: `Bearer eyJ…`.
static SCHEME: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}").ok());

/// Credentials written into a URL: `https://user:pass@host`.
static URL_USERINFO: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(://[^/\s:@]+:)[^@\s/]+@").ok());

/// Provider key shapes that are unmistakable on their own (OpenAI, Hugging Face).
static KEY_SHAPES: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\b(sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,})").ok());

/// `s` with credential-shaped spans and every occurrence of `known` secrets replaced.
pub fn text<'a>(s: &'a str, known: &[&str]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(s);
    for k in known.iter().filter(|k| k.len() >= 4) {
        if out.contains(k) {
            out = Cow::Owned(out.replace(k, REDACTED));
        }
    }
    if let Some(re) = NAMED.as_ref()
        && re.is_match(&out)
    {
        out = Cow::Owned(
            re.replace_all(&out, |c: &regex::Captures<'_>| {
                let name = c.get(1).map_or("", |m| m.as_str());
                let sep = c.get(2).map_or("", |m| m.as_str());
                let scheme = c.get(3).map_or("", |m| m.as_str());
                format!("{name}{sep}{scheme}{REDACTED}")
            })
            .into_owned(),
        );
    }
    if let Some(re) = SCHEME.as_ref()
        && re.is_match(&out)
    {
        out = Cow::Owned(re.replace_all(&out, format!("$1 {REDACTED}")).into_owned());
    }
    if let Some(re) = URL_USERINFO.as_ref()
        && re.is_match(&out)
    {
        out = Cow::Owned(
            re.replace_all(&out, format!("${{1}}{REDACTED}@"))
                .into_owned(),
        );
    }
    if let Some(re) = KEY_SHAPES.as_ref()
        && re.is_match(&out)
    {
        out = Cow::Owned(re.replace_all(&out, REDACTED).into_owned());
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn headers_fields_and_schemes_lose_their_values() {
        let cases = [
            (
                "Authorization: Bearer abc.def-123",
                "Authorization: Bearer [REDACTED]",
            ),
            (
                r#"{"headers": {"authorization": "Bearer s3cr3t-value"}}"#,
                r#"{"headers": {"authorization": "Bearer [REDACTED]"}}"#,
            ),
            ("url?api_key=abcdef&x=1", "url?api_key=[REDACTED]&x=1"),
            (r#""password":"hunter22""#, r#""password":"[REDACTED]""#),
            ("sent Bearer eyJhbGciOi", "sent Bearer [REDACTED]"),
            (
                "key sk-proj-ABCDEFGHIJKLMNOPQRST rest",
                "key [REDACTED] rest",
            ),
            ("HF hf_abcdefghijklmnopqrstuvwx", "HF [REDACTED]"),
            (
                "GET https://me:pa55@proxy.local/v1 failed",
                "GET https://me:[REDACTED]@proxy.local/v1 failed",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(text(input, &[]), want, "{input}");
            // Redacting again changes nothing: no stray `]` after a second pass.
            assert_eq!(text(want, &[]), want, "{want}");
        }
    }

    #[test]
    fn known_secrets_go_wherever_they_appear_and_clean_text_is_not_copied() {
        assert_eq!(
            text("echo: my-key-123 twice my-key-123", &["my-key-123"]),
            "echo: [REDACTED] twice [REDACTED]"
        );
        let clean = "HTTP 500: induced failure (tokens: 12)";
        assert!(matches!(text(clean, &["zzzz"]), Cow::Borrowed(_)));
        assert_eq!(text(clean, &[]), clean);
    }

    #[test]
    fn secret_names_are_recognised_and_values_masked() {
        for n in [
            "LLEM_API_KEY",
            "OPENAI_API_KEY",
            "HF_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["LLEM_RESULTS_DIR", "LLEM_PYTHON", "CUDA_VISIBLE_DEVICES"] {
            assert!(!is_secret_name(n), "{n}");
        }
        assert_eq!(masked("abcd"), "[REDACTED] (4 chars)");
    }
}
