//! The command-line reference, `CLI.md`, is the binary's own help: for `mcpbox` and every
//! subcommand (found in each help's `Commands:` section, recursively, leaving out clap's own
//! `help`), the output of `mcpbox help <command…>` in a fenced block under a heading. This
//! test builds the page from the real binary and checks that it is the committed one.
//!
//! After a deliberate change to the command line, rewrite the page and review the diff:
//!
//! ```sh
//! MCPBOX_BLESS=1 cargo test -p mcpbox --test e2e docs::
//! ```
//!
//! The help must not depend on where it runs. The binary runs with an empty environment: a
//! set `MCPBOX_*` variable would show its value in the help (`[env: MCPBOX_LOG=debug]`), and
//! `CLICOLOR_FORCE` would colour it. Its output is a pipe, so it has no colours, and clap is
//! built without `wrap_help`, so nothing is wrapped to a terminal's width (were it enabled,
//! with no terminal and no `COLUMNS` clap would wrap at 100 columns, the same everywhere).
//! Trailing spaces are trimmed from every line, so that editors leave the page alone.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The page, at the repository's top level.
fn page_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../CLI.md")
}

/// What the page starts with: its title and the line saying how it is made.
const HEADER: &str = "# Command-line reference\n\n\
    Generated from `mcpbox help <command…>` by `tests/e2e/docs.rs`, which checks that it is \
    current; do not edit it by hand. Regenerate it with \
    `MCPBOX_BLESS=1 cargo test -p mcpbox --test e2e docs::`.\n";

/// `mcpbox help <command…>`: what it prints, each line's trailing spaces trimmed, with no
/// blank lines at the end.
fn help(command: &[String]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .arg("help")
        .args(command)
        .env_clear()
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "mcpbox help {}: {}\n{}",
        command.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    lines.join("\n").trim_end().to_owned()
}

/// The subcommands a help lists under `Commands:`, in its order, without clap's `help`. Each
/// is a line indented by two spaces, its name first.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.strip_prefix("  "))
        .filter(|entry| !entry.starts_with(' '))
        .filter_map(|entry| entry.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// `command` and every command below it, depth first in the order the helps list them, each
/// with its help.
fn collect(command: &[String], found: &mut Vec<(Vec<String>, String)>) {
    let text = help(command);
    let children = subcommands(&text);
    found.push((command.to_vec(), text));
    for child in children {
        let mut next = command.to_vec();
        next.push(child);
        collect(&next, found);
    }
}

/// A command's name as the page shows it: `mcpbox state ls`.
fn title(command: &[String]) -> String {
    std::iter::once("mcpbox")
        .chain(command.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The page: the header, a list of the commands linking to their sections, and a section per
/// command (`##` for `mcpbox` and its commands, one `#` more for each level below).
fn page() -> String {
    let mut commands = Vec::new();
    collect(&[], &mut commands);
    assert!(
        commands.iter().any(|(command, _)| command == &["serve"]),
        "no `serve` found under `Commands:` in `mcpbox help`:\n{}",
        commands[0].1
    );
    let mut page = String::from(HEADER);
    page.push('\n');
    for (command, _) in &commands {
        let indent = "  ".repeat(command.len().saturating_sub(1));
        let title = title(command);
        let anchor = title.replace(' ', "-");
        page.push_str(&format!("{indent}- [`{title}`](#{anchor})\n"));
    }
    for (command, text) in &commands {
        let level = "#".repeat(1 + command.len().max(1));
        let title = title(command);
        page.push_str(&format!("\n{level} `{title}`\n\n```text\n{text}\n```\n"));
    }
    page
}

#[test]
fn the_command_line_reference_is_the_help_of_every_command() {
    let page = page();
    let path = page_path();
    if std::env::var_os("MCPBOX_BLESS").is_some_and(|value| value == "1") {
        std::fs::write(&path, &page).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "read {}: {e} (run with MCPBOX_BLESS=1 to create it)",
            path.display()
        )
    });
    if committed == page {
        return;
    }
    let (want, got): (Vec<&str>, Vec<&str>) = (committed.lines().collect(), page.lines().collect());
    let line = want
        .iter()
        .zip(&got)
        .position(|(want, got)| want != got)
        .unwrap_or(want.len().min(got.len()));
    panic!(
        "{} is not the help of the binary, from line {}:\n  CLI.md: {}\n    help: {}\n\
         After a deliberate change to the command line, run with MCPBOX_BLESS=1 and review the diff.",
        path.display(),
        line + 1,
        want.get(line).unwrap_or(&"(end of file)"),
        got.get(line).unwrap_or(&"(end of page)"),
    );
}
