//! A server-sent-events framer over a byte stream: `data:` payloads out, one per event.
//!
//! Hand-written rather than `eventsource-stream` because that allocates a `String` per event;
//! here the line buffer and the payload buffer are reused for the whole stream, so a streamed
//! token costs no allocation. Only what OpenAI-compatible servers send is interpreted (`data:`
//! lines, blank-line dispatch, `:` comments); `event:`, `id:` and `retry:` are ignored.

/// The largest event llem buffers, bytes: a chunk of an OpenAI stream is a few hundred bytes
/// (a few KiB with logprobs); past this a server is sending something else, and buffering it
/// without a bound would let it take the host's memory.
pub const MAX_EVENT_BYTES: usize = 4 << 20;

/// Splits a byte stream into SSE events.
#[derive(Debug, Default)]
pub struct SseFramer {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    overflowed: bool,
}

impl SseFramer {
    /// A framer with room for typical chunks.
    pub fn new() -> SseFramer {
        SseFramer {
            line: Vec::with_capacity(1024),
            data: Vec::with_capacity(1024),
            has_data: false,
            overflowed: false,
        }
    }

    /// Whether feeding stopped because an event grew past [`MAX_EVENT_BYTES`].
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Feeds bytes; calls `on_event` with each complete event's data (lines joined by `\n`).
    /// Returning `false` from `on_event` stops at once (the rest of `bytes` is dropped).
    pub fn feed(&mut self, bytes: &[u8], on_event: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            let (head, tail) = rest.split_at(nl);
            rest = tail.get(1..).unwrap_or_default();
            let line: &[u8] = if self.line.is_empty() {
                head
            } else {
                self.line.extend_from_slice(head);
                &self.line
            };
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let keep_going = if line.is_empty() {
                let go = !self.has_data || on_event(&self.data);
                self.data.clear();
                self.has_data = false;
                go
            } else {
                if let Some(v) = line.strip_prefix(b"data:") {
                    let v = v.strip_prefix(b" ").unwrap_or(v);
                    if self.has_data {
                        self.data.push(b'\n');
                    }
                    self.data.extend_from_slice(v);
                    self.has_data = true;
                }
                true
            };
            self.line.clear();
            if !keep_going {
                return false;
            }
            if self.data.len() > MAX_EVENT_BYTES {
                self.overflowed = true;
                return false;
            }
        }
        if self.line.len() + rest.len() + self.data.len() > MAX_EVENT_BYTES {
            self.overflowed = true;
            return false;
        }
        self.line.extend_from_slice(rest);
        true
    }

    /// Ends the stream: an event not closed by a blank line is still delivered (some servers
    /// close the connection right after the last `data:` line).
    pub fn finish(&mut self, on_event: &mut dyn FnMut(&[u8]) -> bool) {
        if self.overflowed {
            return;
        }
        if !self.line.is_empty() {
            let _ = self.feed(b"\n", on_event);
        }
        if self.has_data {
            on_event(&self.data);
            self.data.clear();
            self.has_data = false;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn events(parts: &[&[u8]]) -> Vec<String> {
        let mut f = SseFramer::new();
        let mut out = Vec::new();
        for p in parts {
            f.feed(p, &mut |d| {
                out.push(String::from_utf8(d.to_vec()).unwrap());
                true
            });
        }
        f.finish(&mut |d| {
            out.push(String::from_utf8(d.to_vec()).unwrap());
            true
        });
        out
    }

    #[test]
    fn events_split_anywhere_are_reassembled() {
        let whole = b"data: {\"a\":1}\n\n: keep-alive\n\ndata:{\"b\":2}\r\n\r\nevent: x\ndata: l1\ndata: l2\n\ndata: [DONE]\n\n";
        let expected = vec!["{\"a\":1}", "{\"b\":2}", "l1\nl2", "[DONE]"];
        assert_eq!(events(&[whole]), expected);
        for cut in 1..whole.len() {
            let (a, b) = whole.split_at(cut);
            assert_eq!(events(&[a, b]), expected, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(events(&bytes), expected);
    }

    #[test]
    fn an_unterminated_last_event_is_delivered() {
        assert_eq!(events(&[b"data: x\n\ndata: y"]), vec!["x", "y"]);
    }

    #[test]
    fn an_endless_line_or_event_stops_the_framer_at_the_bound() {
        let piece = vec![b'x'; 64 * 1024];
        let mut f = SseFramer::new();
        let mut fed = 0usize;
        let mut n_events = 0;
        f.feed(b"data: ", &mut |_| true);
        while f.feed(&piece, &mut |_| {
            n_events += 1;
            true
        }) {
            fed += piece.len();
            assert!(fed <= MAX_EVENT_BYTES + piece.len(), "never stopped");
        }
        assert!(f.overflowed() && n_events == 0);
        assert!(f.line.capacity() <= 2 * MAX_EVENT_BYTES);
        // Many short data lines that never end the event are bounded too.
        let mut g = SseFramer::new();
        let lines =
            b"data: yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\n".repeat(4096);
        let mut rounds = 0;
        while g.feed(&lines, &mut |_| true) {
            rounds += 1;
            assert!(rounds < 10_000, "never stopped");
        }
        assert!(g.overflowed());
        assert_eq!(events(&[b"data: ok\n\n"]), vec!["ok"]);
    }
}
