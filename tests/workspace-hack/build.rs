//! Empty: cargo resolves a package's `[build-dependencies]` only when it has a build script,
//! and this crate's are there to unify features (Cargo.toml).

fn main() {}
