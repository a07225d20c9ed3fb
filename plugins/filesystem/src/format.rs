//! How the original writes numbers, dates, names and URLs, reproduced: its `formatSize`
//! (JavaScript's `toFixed(2)`), `Date.prototype.toString` (in UTC: the sandbox has no local
//! zone), `padEnd`/`padStart` (counted in UTF-16 units, as JavaScript counts),
//! `localeCompare` (CLDR root collation, as ICU without a locale) and Node's `pathToFileURL`.

use std::cmp::Ordering;
use std::time::SystemTime;

/// The original's `formatSize`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    if bytes == 0 {
        return "0 B".to_owned();
    }
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "as JavaScript computes it: Math.floor(Math.log(bytes) / Math.log(1024))"
    )]
    let i = ((bytes as f64).ln() / 1024f64.ln()).floor() as usize;
    if i == 0 {
        return format!("{bytes} B");
    }
    let unit = i.min(UNITS.len() - 1);
    // `(bytes / 1024^unit).toFixed(2)`: the quotient is exact (a power of two), and toFixed
    // rounds half up.
    let divisor = 1u128 << (10 * unit);
    let hundredths = (u128::from(bytes) * 200 + divisor) / (2 * divisor);
    format!(
        "{}.{:02} {}",
        hundredths / 100,
        hundredths % 100,
        UNITS[unit]
    )
}

/// `Date.prototype.toString()` of `time`, in UTC.
pub fn date(time: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let seconds = match time.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        // Before 1970: whole seconds back, a partial one counted as whole.
        Err(e) => {
            let back = e.duration();
            -i64::try_from(back.as_secs() + u64::from(back.subsec_nanos() > 0)).unwrap_or(0)
        }
    };
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil(days);
    let weekday = DAYS[usize::try_from(days.rem_euclid(7)).unwrap_or(0)];
    format!(
        "{weekday} {} {day:02} {year:04} {:02}:{:02}:{:02} GMT+0000 (Coordinated Universal Time)",
        MONTHS[usize::try_from(month - 1).unwrap_or(0)],
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The civil date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Length as JavaScript counts it (UTF-16 code units).
fn js_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// `s.padEnd(width)`.
pub fn pad_end(s: &str, width: usize) -> String {
    format!("{s}{}", " ".repeat(width.saturating_sub(js_len(s))))
}

/// `s.padStart(width)`.
pub fn pad_start(s: &str, width: usize) -> String {
    format!("{}{s}", " ".repeat(width.saturating_sub(js_len(s))))
}

/// `a.localeCompare(b)` without a locale: CLDR root collation, punctuation not ignored.
pub fn locale_compare(a: &str, b: &str) -> Ordering {
    thread_local! {
        static COLLATOR: std::cell::RefCell<feruca::Collator> =
            std::cell::RefCell::new(feruca::Collator::new(feruca::Tailoring::default(), false, false));
    }
    COLLATOR.with(|c| c.borrow_mut().collate(a, b))
}

/// Node's `pathToFileURL(path).href` for an absolute path.
pub fn file_url(path: &str) -> String {
    let mut url = String::from("file://");
    for byte in path.bytes() {
        let keep = byte.is_ascii_graphic()
            && !matches!(
                byte,
                b'"' | b'#' | b'%' | b'<' | b'>' | b'?' | b'`' | b'{' | b'}' | b'\\'
            );
        if keep {
            url.push(char::from(byte));
        } else {
            url.push_str(&format!("%{byte:02X}"));
        }
    }
    url
}
