//! Links the release binary's functions in the order of `symbol-order.txt`: the code a start
//! and a served call run first and together, so the pages of code the process maps (and counts
//! in its resident memory) are those it uses (BENCHMARKS.md, "Start-up and idle memory, the
//! code laid out"; the file is written by `tests/bench/symbol_order.py`).
//!
//! Only where the linker is known to take the flag: release builds (and `dist`, which inherits
//! from it) for x86_64 Linux with glibc, where rustc links with its own LLD, and no linker
//! chosen in the configuration or the flags (GNU ld does not know the flag). A name the linker
//! does not find is skipped without a warning: a stale file lays the code out no better than
//! no file, never wrongly.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=symbol-order.txt");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let var = |name: &str| env::var(name).unwrap_or_default();
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
