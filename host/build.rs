//! The host's build script, two jobs:
//!
//! - Lists the plugin contract for `mcpbox new` (`src/scaffold.rs`), which writes it into
//!   Python and JavaScript projects: `$OUT_DIR/wit_files.rs` holds every file of the
//!   repository's `wit/` but its README, as `(path, include_str!(…))`, so a file added there
//!   travels in the binary without a list to keep by hand.
//! - Links the release binary's functions in the order of `symbol-order.txt`: the code a start
//!   and a served call run first and together, so the pages of code the process maps (and
//!   counts in its resident memory) are those it uses (BENCHMARKS.md, "Start-up and idle
//!   memory, the code laid out"; the file is written by `tests/bench/symbol_order.py`).
//!
//!   Only where the linker is known to take the flag: release builds (and `dist`, which
//!   inherits from it) for x86_64 Linux with glibc, where rustc links with its own LLD, and no
//!   linker chosen in the configuration or the flags (GNU ld does not know the flag). A name
//!   the linker does not find is skipped without a warning: a stale file lays the code out no
//!   better than no file, never wrongly.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=symbol-order.txt");
    println!("cargo:rerun-if-changed=../wit");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    list_wit_files();
    lay_out_code();
}

fn var(name: &str) -> String {
    env::var(name).unwrap_or_default()
}

/// Write `$OUT_DIR/wit_files.rs`: a slice of every file under `../wit` but `README.md`, each
/// as its path relative to `wit/` (with `/`) and its text, in path order.
fn list_wit_files() {
    let wit = Path::new(&var("CARGO_MANIFEST_DIR")).join("../wit");
    let mut files = Vec::new();
    collect(&wit, &wit, &mut files);
    files.sort();
    let mut list = String::from("&[\n");
    for (name, path) in &files {
        let path = path
            .to_str()
            .unwrap_or_else(|| panic!("{path:?} is not UTF-8"));
        // `{:?}` of a `str` is a Rust string literal.
        let _ = writeln!(list, "    ({name:?}, include_str!({path:?})),");
    }
    list.push_str("]\n");
    let out = Path::new(&var("OUT_DIR")).join("wit_files.rs");
    std::fs::write(&out, list).unwrap_or_else(|e| panic!("cannot write {out:?}: {e}"));
}

/// Every file under `dir` but `root`'s README: its name relative to `root`, and its path.
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {dir:?}: {e}"));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| panic!("cannot list {dir:?}: {e}"))
            .path();
        if path.is_dir() {
            collect(root, &path, files);
        } else if path != root.join("README.md") {
            let name = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            files.push((name, path));
        }
    }
}

/// Pass `symbol-order.txt` to the linker, where it takes it.
fn lay_out_code() {
    let lld_by_default = var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let linker_chosen =
        env::var_os("RUSTC_LINKER").is_some() || var("CARGO_ENCODED_RUSTFLAGS").contains("link");
    if var("PROFILE") != "release" || !lld_by_default || linker_chosen {
        return;
    }
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("symbol-order.txt");
    if !order.is_file() {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bin=mcpbox=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    println!("cargo:rustc-link-arg-bin=mcpbox=-Wl,--no-warn-symbol-ordering");
}
