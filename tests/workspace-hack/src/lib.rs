//! No code: this crate's dependencies make `cargo build -p mcpbox` and `cargo test --workspace`
//! build the crates they share with the same features (see its Cargo.toml).
