//! Tests of running calls: a plugin's panic message, and when an instance may be kept for its
//! caller's next call.

use super::call::panic_message;
use super::reuse::{Leftovers, may_keep, may_serve};
use super::*;

#[test]
fn panic_messages_are_extracted_from_stderr() {
    let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:12:5:\nboom: it broke\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
    assert_eq!(panic_message(stderr).as_deref(), Some("boom: it broke"));
    assert_eq!(panic_message("memory allocation failed"), None);
}

const MIB: usize = 1 << 20;

fn healthy() -> Leftovers {
    Leftovers {
        growth_refused: false,
        memory_bytes: 2 * MIB,
        handles: 3,
        age: Duration::from_millis(5),
    }
}

#[test]
fn a_healthy_instance_is_kept_and_serves_its_callers_next_call() {
    assert!(may_keep(healthy(), 64 * MIB));
    assert!(may_serve(
        Duration::from_secs(2),
        Duration::from_millis(900)
    ));
}

#[test]
fn a_kept_instance_serves_at_most_ten_seconds_after_it_was_made() {
    // Literal times, not the constant: what OPERATING.md promises.
    let (just_under, ten) = (Duration::from_millis(9_999), Duration::from_secs(10));
    assert!(may_serve(just_under, Duration::ZERO));
    assert!(!may_serve(ten, Duration::ZERO), "served at ten seconds");
    assert!(!may_serve(Duration::from_secs(3600), Duration::ZERO));
    assert!(may_keep(
        Leftovers {
            age: just_under,
            ..healthy()
        },
        64 * MIB
    ));
    assert!(!may_keep(
        Leftovers {
            age: ten,
            ..healthy()
        },
        64 * MIB
    ));
}

#[test]
fn a_kept_instance_waits_at_most_a_second_for_its_caller() {
    assert!(may_serve(Duration::ZERO, Duration::from_millis(999)));
    assert!(!may_serve(Duration::ZERO, Duration::from_secs(1)));
}

#[test]
fn an_instance_left_unhealthy_is_not_kept() {
    let limit = 64 * MIB;
    let refused = Leftovers {
        growth_refused: true,
        ..healthy()
    };
    assert!(!may_keep(refused, limit), "memory growth was refused");
    let at_quarter = Leftovers {
        memory_bytes: limit / 4,
        ..healthy()
    };
    assert!(may_keep(at_quarter, limit));
    let over_quarter = Leftovers {
        memory_bytes: limit / 4 + 1,
        ..healthy()
    };
    assert!(
        !may_keep(over_quarter, limit),
        "over a quarter of its memory limit"
    );
    let at_handles = Leftovers {
        handles: 64,
        ..healthy()
    };
    assert!(may_keep(at_handles, limit));
    let over_handles = Leftovers {
        handles: 65,
        ..healthy()
    };
    assert!(!may_keep(over_handles, limit), "over 64 handles");
}

#[test]
fn sizes_and_durations_read_well() {
    assert_eq!(human_bytes(64 << 20), "64 MiB");
    assert_eq!(human_bytes(80 << 20), "80 MiB");
    assert_eq!(human_bytes(4096), "4 KiB");
    assert_eq!(human_duration(Duration::from_secs(2)), "2 s");
    assert_eq!(human_duration(Duration::from_millis(1500)), "1.5 s");
    assert_eq!(human_duration(Duration::from_millis(250)), "250 ms");
}
