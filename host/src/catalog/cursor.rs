//! Opaque pagination cursors: a list position, encoded so clients cannot mistake it for
//! anything they should build themselves.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

const PREFIX: &str = "mcpbox/v1/";

/// The cursor for the page starting at `offset`.
pub fn encode(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("{PREFIX}{offset}"))
}

/// The offset a cursor stands for, or `None` if it is not one of ours.
pub fn decode(cursor: &str) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let offset = text.strip_prefix(PREFIX)?;
    if offset.is_empty() || !offset.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    offset.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for offset in [1, 100, 123_456] {
            assert_eq!(decode(&encode(offset)), Some(offset));
        }
    }

    #[test]
    fn foreign_cursors_are_refused() {
        assert_eq!(decode("100"), None);
        assert_eq!(decode(""), None);
        assert_eq!(decode("!!!"), None);
        assert_eq!(decode(&URL_SAFE_NO_PAD.encode("mcpbox/v1/-1")), None);
        assert_eq!(decode(&URL_SAFE_NO_PAD.encode("other/5")), None);
    }
}
