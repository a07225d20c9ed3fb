//! Keeps the rooms' dependency docs true. Each room of the crate (a `pub mod` of `lib.rs`)
//! opens with a `//!` doc whose `Uses:` line names, in backticks, the rooms it may use (or says
//! `nothing`). These tests read every file of every room and fail when one names `crate::X` for
//! a room its `Uses:` line does not list, when a `Uses:` line lists a room it does not use (a
//! stale doc), or when the allowed arrows form a cycle (an arrow pointing back up).
//! Test modules (from a file's first `#[cfg(test)]` on) and comments are not counted. A file
//! inside a room whose own `//!` doc has a `Uses:` line (a narrower promise than its room's)
//! is held to that line the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crate's source directory.
fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The rooms: every `pub mod` of `lib.rs`.
fn rooms() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    lib.lines()
        .filter_map(|line| line.strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches(';').to_owned())
        .collect()
}

/// The file that opens `room` (`room.rs` or `room/mod.rs`), and every file of it.
fn files_of(room: &str) -> (PathBuf, Vec<PathBuf>) {
    let single = src().join(format!("{room}.rs"));
    if single.is_file() {
        return (single.clone(), vec![single]);
    }
    let dir = src().join(room);
    let mut files = Vec::new();
    let mut pending = vec![dir.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("a room directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    (dir.join("mod.rs"), files)
}

/// The rooms named on the `Uses:` line of `opening`'s `//!` doc (the line and the doc lines
/// that continue it, up to a blank doc line or the end of the doc).
fn declared(opening: &Path, rooms: &BTreeSet<String>) -> BTreeSet<String> {
    let text = std::fs::read_to_string(opening).expect("a room's opening file");
    let doc: Vec<&str> = text
        .lines()
        .take_while(|line| line.starts_with("//!"))
        .map(|line| line.trim_start_matches("//!").trim())
        .collect();
    let start = doc
        .iter()
        .position(|line| line.starts_with("Uses:"))
        .unwrap_or_else(|| panic!("{} has no `Uses:` line in its //! doc", opening.display()));
    let mut used = BTreeSet::new();
    for line in doc[start..].iter().take_while(|line| !line.is_empty()) {
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 1 {
                let room = part.split("::").next().unwrap_or(part);
                assert!(
                    rooms.contains(room),
                    "{}: `Uses:` names `{part}`, which is not a room",
                    opening.display()
                );
                used.insert(room.to_owned());
            }
        }
    }
    used
}

/// The rooms the code of `files` names as `crate::X` (outside comments and test modules).
fn used(room: &str, files: &[PathBuf], rooms: &BTreeSet<String>) -> BTreeMap<String, PathBuf> {
    let mut used = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("a source file");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group
                        .split(['}', ','])
                        .map(|n| n.trim().split("::").next().unwrap_or_default())
                        .collect(),
                    None => vec![
                        rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                            .next()
                            .unwrap_or_default(),
                    ],
                };
                for name in names {
                    if name != room && rooms.contains(name) {
                        used.entry(name.to_owned()).or_insert_with(|| file.clone());
                    }
                }
            }
        }
    }
    used
}

#[test]
fn every_room_uses_only_what_its_doc_says_and_says_only_what_it_uses() {
    let rooms: BTreeSet<String> = rooms().into_iter().collect();
    let mut problems = Vec::new();
    for room in &rooms {
        let (opening, files) = files_of(room);
        let declared = declared(&opening, &rooms);
        let used = used(room, &files, &rooms);
        for (name, file) in &used {
            if !declared.contains(name) {
                problems.push(format!(
                    "`{room}` uses `{name}` ({}) but its `Uses:` line does not say so",
                    file.display()
                ));
            }
        }
        for name in &declared {
            if !used.contains_key(name) {
                problems.push(format!(
                    "`{room}`'s `Uses:` line names `{name}`, which it does not use"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Whether `file`'s `//!` doc has a `Uses:` line.
fn has_uses_line(file: &Path) -> bool {
    let text = std::fs::read_to_string(file).expect("a source file");
    text.lines()
        .take_while(|line| line.starts_with("//!"))
        .any(|line| line.trim_start_matches("//!").trim().starts_with("Uses:"))
}

#[test]
fn a_file_with_its_own_uses_line_uses_only_what_it_says() {
    let rooms: BTreeSet<String> = rooms().into_iter().collect();
    let mut problems = Vec::new();
    for room in &rooms {
        let (opening, files) = files_of(room);
        for file in files.iter().filter(|f| **f != opening && has_uses_line(f)) {
            let declared = declared(file, &rooms);
            let used = used(room, std::slice::from_ref(file), &rooms);
            for name in used.keys() {
                if !declared.contains(name) {
                    problems.push(format!(
                        "{} uses `{name}` but its `Uses:` line does not say so",
                        file.display()
                    ));
                }
            }
            for name in &declared {
                if !used.contains_key(name) {
                    problems.push(format!(
                        "{}'s `Uses:` line names `{name}`, which it does not use",
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_arrow_points_back_up() {
    let rooms: BTreeSet<String> = rooms().into_iter().collect();
    let arrows: BTreeMap<String, BTreeSet<String>> = rooms
        .iter()
        .map(|room| (room.clone(), declared(&files_of(room).0, &rooms)))
        .collect();
    // Take away, again and again, the rooms that use no room left: what cannot be taken away
    // is on a cycle.
    let mut left: BTreeSet<String> = rooms;
    loop {
        let leaves: Vec<String> = left
            .iter()
            .filter(|room| arrows[*room].iter().all(|used| !left.contains(used)))
            .cloned()
            .collect();
        if leaves.is_empty() {
            break;
        }
        for leaf in leaves {
            left.remove(&leaf);
        }
    }
    assert!(
        left.is_empty(),
        "an arrow points back up: a cycle runs through these rooms or what they use: {left:?}"
    );
}
