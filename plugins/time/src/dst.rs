//! `is_dst` as the original reports it: `bool(dt.dst())` of Python's `zoneinfo` reading the
//! IANA database's main data (the host's `tzdata`, or the `tzdata` package), not of jiff's
//! bundled copy, which is the database's rearguard data.
//!
//! The two differ only where the main data gives a zone *negative* daylight saving time: its
//! standard time is the summer's, and its winter is "daylight saving time" an hour back
//! (Ireland's Irish Standard Time is legally its standard time, GMT its winter time). There
//! `dst()` is minus an hour, not zero, and `bool` of it is true; the rearguard data writes the
//! same clocks with the usual positive saving time, so its flag is the other way round. The
//! spans are those `ziguard.awk` (the database's tool that turns the one into the other)
//! rewrites, as the bundled edition (2026f) has them: checked day by day from 1900 to 2040,
//! every zone, against Python's `zoneinfo` on Debian's `tzdata`.

use jiff::Timestamp;

/// A zone's span of negative saving time: its names (with the database's links), and from when
/// until when (Unix seconds, the end excluded; `None`: still in force).
struct NegativeDst {
    names: &'static [&'static str],
    from: i64,
    until: Option<i64>,
}

const NEGATIVE_DST: &[NegativeDst] = &[
    // Ireland, since 1971-10-31 02:00 UTC: IST (+01) standard, GMT its winter time.
    NegativeDst {
        names: &["Europe/Dublin", "Eire"],
        from: 57_722_400,
        until: None,
    },
    // Morocco and Western Sahara, 2018-10-28 02:00 UTC to 2026-09-20 01:00 UTC: +01 standard,
    // +00 in Ramadan (and +00 alone since).
    NegativeDst {
        names: &["Africa/Casablanca", "Africa/El_Aaiun"],
        from: 1_540_692_000,
        until: Some(1_789_866_000),
    },
    // Namibia, 1994-03-20 22:00 UTC to 2017-10-23 22:00 UTC: CAT (+02) standard, WAT its winter.
    NegativeDst {
        names: &["Africa/Windhoek"],
        from: 764_200_800,
        until: Some(1_508_796_000),
    },
    // Czechoslovakia, 1946-12-01 02:00 UTC to 1947-02-23 02:00 UTC: CET standard, GMT that
    // winter.
    NegativeDst {
        names: &["Europe/Prague", "Europe/Bratislava"],
        from: -728_517_600,
        until: Some(-721_260_000),
    },
];

/// Whether the original says `is_dst` for the zone `name` at `at`, given what jiff's data says
/// (`rearguard`).
pub fn is_dst(name: &str, at: Timestamp, rearguard: bool) -> bool {
    let second = at.as_second();
    let negative = NEGATIVE_DST.iter().any(|span| {
        span.names.contains(&name)
            && second >= span.from
            && span.until.is_none_or(|until| second < until)
    });
    rearguard != negative
}
