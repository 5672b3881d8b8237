//! CSV records as RFC 4180 writes them (quoted fields, `""` inside quotes, CRLF or LF, a quoted
//! field may span lines), read one record at a time so a trace of a gigabyte is never held
//! whole. Each record carries the line it starts on, for errors.

use std::io::BufRead;

/// One record: its fields and the 1-based line it starts on.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Record {
    /// The fields, unquoted.
    pub fields: Vec<String>,
    /// Where it starts.
    pub line: usize,
}

/// Why a record could not be read.
#[derive(Debug)]
pub(crate) enum CsvError {
    /// The file could not be read.
    Io(std::io::Error),
    /// A quote opened on `line` never closed.
    Unterminated { line: usize },
    /// A character after a closing quote, before the separator.
    AfterQuote { line: usize, column: usize },
}

/// Reads records from `input`.
pub(crate) struct Reader<R> {
    input: R,
    line: usize,
    buf: String,
}

impl<R: BufRead> Reader<R> {
    pub(crate) fn new(input: R) -> Reader<R> {
        Reader {
            input,
            line: 0,
            buf: String::new(),
        }
    }

    /// The next record; `None` at the end. Blank lines are no records.
    pub(crate) fn next_record(&mut self) -> Option<Result<Record, CsvError>> {
        loop {
            self.buf.clear();
            match self.input.read_line(&mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(CsvError::Io(e))),
            }
            self.line += 1;
            if self.buf.trim_end_matches(['\r', '\n']).is_empty() {
                continue;
            }
            return Some(self.parse_from_buf());
        }
    }

    /// Splits the record that starts in `self.buf`, reading further lines while a quoted
    /// field is open.
    fn parse_from_buf(&mut self) -> Result<Record, CsvError> {
        let start = self.line;
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        // After a closing quote: only a separator or the end may follow.
        let mut closed = false;
        let mut at_start = true;
        loop {
            let text = std::mem::take(&mut self.buf);
            let mut chars = text.char_indices().peekable();
            while let Some((i, c)) = chars.next() {
                if quoted {
                    if c == '"' {
                        if chars.peek().map(|p| p.1) == Some('"') {
                            field.push('"');
                            chars.next();
                        } else {
                            quoted = false;
                            closed = true;
                        }
                    } else {
                        field.push(c);
                    }
                    continue;
                }
                match c {
                    ',' => {
                        fields.push(std::mem::take(&mut field));
                        closed = false;
                        at_start = true;
                    }
                    '\r' | '\n' => {}
                    '"' if at_start => {
                        quoted = true;
                        at_start = false;
                    }
                    _ if closed => {
                        return Err(CsvError::AfterQuote {
                            line: self.line,
                            column: text[..i].chars().count() + 1,
                        });
                    }
                    _ => {
                        field.push(c);
                        at_start = false;
                    }
                }
            }
            if !quoted {
                fields.push(field);
                return Ok(Record {
                    fields,
                    line: start,
                });
            }
            // The quoted field goes on to the next line.
            match self.input.read_line(&mut self.buf) {
                Ok(0) => return Err(CsvError::Unterminated { line: start }),
                Ok(_) => self.line += 1,
                Err(e) => return Err(CsvError::Io(e)),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<Result<Record, CsvError>> {
        let mut r = Reader::new(text.as_bytes());
        std::iter::from_fn(|| r.next_record()).collect()
    }

    fn fields(text: &str) -> Vec<(usize, Vec<String>)> {
        all(text)
            .into_iter()
            .map(|r| {
                let r = r.unwrap();
                (r.line, r.fields)
            })
            .collect()
    }

    #[test]
    fn plain_quoted_crlf_and_multiline_fields() {
        let got = fields("a,b\r\n1,\"x, \"\"y\"\"\"\r\n\r\n2,\"two\nlines\"\n3,\n");
        assert_eq!(
            got,
            [
                (1, vec!["a".into(), "b".into()]),
                (2, vec!["1".into(), "x, \"y\"".into()]),
                (4, vec!["2".into(), "two\nlines".into()]),
                (6, vec!["3".into(), String::new()]),
            ]
        );
        // No newline at the end of the file.
        assert_eq!(fields("x,y"), [(1, vec!["x".into(), "y".into()])]);
    }

    #[test]
    fn broken_quotes_are_errors_with_their_place() {
        let r = all("a\n\"open,1\n2\n");
        assert!(
            matches!(r[1], Err(CsvError::Unterminated { line: 2 })),
            "{r:?}"
        );
        let r = all("\"a\"b,c\n");
        assert!(
            matches!(r[0], Err(CsvError::AfterQuote { line: 1, column: 4 })),
            "{r:?}"
        );
    }
}
