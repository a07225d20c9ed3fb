//! Tests of the rules every backend obeys: keys, cursors, counters and quotas.

use super::*;

#[test]
fn keys_are_checked_for_length_only() {
    assert!(check_key("").is_err());
    assert!(check_key(&"k".repeat(MAX_KEY_BYTES + 1)).is_err());
    for key in [
        "../other/x",
        "a\0b",
        "ключ",
        "k",
        &"k".repeat(MAX_KEY_BYTES),
    ] {
        assert!(check_key(key).is_ok(), "{key:?}");
    }
}

#[test]
fn quotas_name_the_limit() {
    let quota = Quota {
        max_bytes: 100,
        max_keys: 2,
        max_value_bytes: 50,
        total: None,
    };
    let used = Usage { bytes: 0, keys: 0 };
    let after = check_quota("p", used, "key", None, 10, quota).unwrap_or_default();
    assert_eq!(after, Usage { bytes: 13, keys: 1 });
    let error = check_quota("p", used, "k", None, 51, quota)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        error.contains("plugin `p`") && error.contains("max-value-kib"),
        "{error}"
    );
    let full = Usage { bytes: 20, keys: 2 };
    let error = check_quota("p", full, "k", None, 1, quota)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(error.contains("max-keys"), "{error}");
    // Replacing a value keeps the key count.
    assert!(check_quota("p", full, "k", Some(5), 6, quota).is_ok());
    let big = Usage { bytes: 95, keys: 1 };
    let error = check_quota("p", big, "k", Some(5), 20, quota)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(error.contains("quota-kib"), "{error}");
    // Shrinking is always allowed, even over the quota (after the quota was lowered).
    let over = Usage {
        bytes: 500,
        keys: 1,
    };
    assert!(check_quota("p", over, "k", Some(40), 10, quota).is_ok());
}

#[test]
fn counters_parse_and_overflow_clearly() {
    assert_eq!(parse_counter(None).ok(), Some(0));
    assert_eq!(parse_counter(Some(b"41")).ok(), Some(41));
    assert_eq!(parse_counter(Some(b"-41")).ok(), Some(-41));
    assert_eq!(parse_counter(Some(b"0")).ok(), Some(0));
    assert_eq!(
        parse_counter(Some(i64::MIN.to_string().as_bytes())).ok(),
        Some(i64::MIN)
    );
    for bad in [
        "x",
        "007",
        "+5",
        "-0",
        " 5",
        "5 ",
        "5.0",
        "",
        "00",
        "9223372036854775808",
    ] {
        assert!(parse_counter(Some(bad.as_bytes())).is_err(), "{bad:?}");
    }
    assert!(add_counter(i64::MAX, 1, false).is_err());
    assert_eq!(add_counter(-5, 1, false).ok(), Some(-4));
    assert!(add_counter(-5, 1, true).is_err());
    assert!(check_cursor(&"k".repeat(MAX_KEY_BYTES)).is_ok());
    assert!(check_cursor(&"k".repeat(MAX_KEY_BYTES + 1)).is_err());
}
