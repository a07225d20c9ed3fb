//! The progress bar of a transfer, on stderr when it is a terminal.

use std::io::IsTerminal as _;

/// A progress bar on stderr when it is a terminal and the transfer is large enough to watch;
/// hidden otherwise.
pub(super) fn progress_bar(size: u64, verb: &str) -> indicatif::ProgressBar {
    if size < 1024 * 1024 || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(size),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} {eta}",
    ) {
        bar.set_style(style);
    }
    bar.set_message(verb.to_owned());
    bar
}
