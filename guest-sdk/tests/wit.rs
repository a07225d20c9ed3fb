//! The crate builds against its own copy of the plugin contract, `guest-sdk/wit/` (so that it
//! packages on its own): the copy is exactly the repository's `wit/`, but for `wit/README.md`,
//! and `guest-sdk/vendor-wit.sh` makes it so. This test fails until that script has run after
//! a change under `wit/`.

#![allow(clippy::unwrap_used, reason = "test code: a panic is a failed test")]

use std::path::{Path, PathBuf};

/// The script that copies `wit/` here, named in every failure.
const VENDOR: &str = "guest-sdk/vendor-wit.sh";

/// Every file under `dir`, by its path relative to `dir`, with its bytes, in path order.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        let entries =
            std::fs::read_dir(&next).unwrap_or_else(|e| panic!("cannot list {next:?}: {e}"));
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes =
                    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path:?}: {e}"));
                files.push((path.strip_prefix(dir).unwrap().to_owned(), bytes));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn the_crate_carries_exactly_the_repository_wit() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ours: Vec<_> = tree(&sdk.join("../wit"))
        .into_iter()
        .filter(|(path, _)| path != Path::new("README.md"))
        .collect();
    let copy = tree(&sdk.join("wit"));
    let names = |t: &[(PathBuf, Vec<u8>)]| t.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&copy),
        names(&ours),
        "guest-sdk/wit/ holds other files than wit/: run {VENDOR}"
    );
    for ((path, a), (_, b)) in ours.iter().zip(&copy) {
        assert!(
            a == b,
            "guest-sdk/wit/{} differs from wit/{}: run {VENDOR}",
            path.display(),
            path.display()
        );
    }
}
