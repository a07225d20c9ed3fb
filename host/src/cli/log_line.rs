//! One event, one log line: the writer every `tracing` event passes through on its way to
//! stderr, escaping the control characters inside it.
//!
//! A log line carries values that plugins, clients and tokens supply (a skill's path, a
//! front matter's `name`, an OAuth `sub`, a tool name). Were a newline among them written as
//! it is, the text after it would read as a line of mcpbox's own; a NUL, a carriage return or
//! a terminal escape can hide or rewrite what a reader sees. Escaping at each call site would
//! miss the next one, so it is done here, once, for every event: the formatter hands its whole
//! line (ending in its one newline) to [`EscapedLines`]' writer in a single write, and every
//! C0 control character but the tab, DEL, and the Unicode line breaks (U+0085, U+2028,
//! U+2029) before that last newline are written as escapes (`\n`, `\r`, `\u001b`, `\u2028`…).
//! The escapes are valid inside a JSON string too, where the JSON formatter has already
//! escaped what JSON must, so both log formats go through it.
//!
//! Uses: nothing else in the crate.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

/// A [`MakeWriter`] whose writers escape the control characters of each line (see the module
/// documentation).
#[derive(Debug, Clone, Copy)]
pub struct EscapedLines<M>(pub M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for EscapedLines<M> {
    type Writer = Escaping<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        Escaping(self.0.make_writer())
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        Escaping(self.0.make_writer_for(meta))
    }
}

/// A writer that escapes the control characters of what it is given, but for one newline at
/// its end.
#[derive(Debug)]
pub struct Escaping<W>(W);

impl<W: Write> Write for Escaping<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match escaped(buf) {
            None => self.0.write_all(buf)?,
            // One write, so that lines of other threads cannot land inside it.
            Some(line) => self.0.write_all(&line)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// `line` with its control characters escaped (a final newline kept), or `None` when it has
/// none to escape.
pub fn escaped(line: &[u8]) -> Option<Vec<u8>> {
    let (body, end): (&[u8], &[u8]) = match line.strip_suffix(b"\n") {
        Some(body) => (body, b"\n"),
        None => (line, b""),
    };
    let first = position(body)?;
    let mut out = Vec::with_capacity(line.len() + 16);
    out.extend_from_slice(&body[..first]);
    let mut rest = &body[first..];
    while let Some(at) = position(rest) {
        out.extend_from_slice(&rest[..at]);
        let (escape, width) = escape(&rest[at..]);
        out.extend_from_slice(escape.as_bytes());
        rest = &rest[at + width..];
    }
    out.extend_from_slice(rest);
    out.extend_from_slice(end);
    Some(out)
}

/// Where the first character to escape in `bytes` begins.
fn position(bytes: &[u8]) -> Option<usize> {
    bytes.iter().enumerate().find_map(|(i, &b)| {
        let control = (b < 0x20 && b != b'\t') || b == 0x7f;
        let line_break = bytes[i..].starts_with(&[0xc2, 0x85])
            || bytes[i..].starts_with(&[0xe2, 0x80, 0xa8])
            || bytes[i..].starts_with(&[0xe2, 0x80, 0xa9]);
        (control || line_break).then_some(i)
    })
}

/// The escape for the character at the start of `bytes` (one [`position`] found), and how
/// many bytes it takes.
fn escape(bytes: &[u8]) -> (String, usize) {
    match bytes {
        [b'\n', ..] => ("\\n".to_owned(), 1),
        [b'\r', ..] => ("\\r".to_owned(), 1),
        [0xc2, 0x85, ..] => ("\\u0085".to_owned(), 2),
        [0xe2, 0x80, 0xa8, ..] => ("\\u2028".to_owned(), 3),
        [0xe2, 0x80, 0xa9, ..] => ("\\u2029".to_owned(), 3),
        [b, ..] => (format!("\\u{:04x}", b), 1),
        [] => (String::new(), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(line: &str) -> String {
        String::from_utf8(escaped(line.as_bytes()).unwrap_or_else(|| line.as_bytes().to_vec()))
            .unwrap()
    }

    #[test]
    fn a_value_cannot_start_a_line_of_its_own() {
        assert_eq!(
            text("WARN refused skill `a\nINFO forged`\n"),
            "WARN refused skill `a\\nINFO forged`\n"
        );
        assert_eq!(
            text("x\r\0\u{1b}[2Jy\u{7f}\n"),
            "x\\r\\u0000\\u001b[2Jy\\u007f\n"
        );
        assert_eq!(
            text("a\u{85}b\u{2028}c\u{2029}d"),
            "a\\u0085b\\u2028c\\u2029d"
        );
    }

    #[test]
    fn plain_lines_tabs_and_other_text_pass_as_they_are() {
        for line in ["INFO serving\n", "a\tb — ü ✓\n", "", "no newline"] {
            assert!(escaped(line.as_bytes()).is_none(), "{line:?}");
        }
        // Only the last newline is the line's own.
        assert_eq!(text("a\n\n"), "a\\n\n");
    }

    #[test]
    fn the_writer_writes_each_line_whole_and_escaped() {
        let mut out = Vec::new();
        let mut writer = Escaping(&mut out);
        writer.write_all(b"one\ntwo\n").unwrap();
        writer.write_all(b"three\n").unwrap();
        assert_eq!(out, b"one\\ntwo\nthree\n");
    }

    #[test]
    fn the_escapes_keep_a_json_line_json() {
        let line = format!("{}\n", serde_json::json!({"sub": "a\u{2028}b\u{85}c"}));
        let out = text(&line);
        let value: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
        assert_eq!(value["sub"], "a\u{2028}b\u{85}c");
    }
}
