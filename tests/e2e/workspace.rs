//! The edit–test loop's own promise (TESTING.md): the quick start's build (`cargo build -p
//! mcpbox`, in `plugins/run.sh`) and the test command (`cargo test --workspace`) build every
//! dependency they share with the same features, so the second compiles none of them again.
//! A dev-dependency that turns on a feature the host's own dependencies do not (serde's `rc`,
//! tokio's `process`, libc's `extra_traits`…) breaks that silently: `cargo test` then builds a
//! second copy of that crate and of everything above it (a fresh clone measured 145 crates
//! compiled twice for libc's `extra_traits` alone). The host asks for those features too:
//! host/Cargo.toml for crates it uses, tests/workspace-hack/Cargo.toml (a crate of dependencies
//! only, which the host depends on) for crates it does not.
//!
//! The check reads both commands' unit graphs (what cargo would compile, without compiling):
//! every registry crate the test command builds in a variant the quick start does not build,
//! while the quick start builds that crate too, is a crate compiled twice; and so is every
//! variant the quick start builds that the test command does not (the test command builds it
//! otherwise, and everything above it again).
//!
//! Beside it, the release build's code layout: host/symbol-order.txt holds linker names, and
//! the build script passes it to the linker only where that linker takes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The (package, features) of every registry crate `args` would compile.
fn variants(args: &[&str]) -> BTreeSet<(String, Vec<String>)> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    // `--unit-graph` is unstable; RUSTC_BOOTSTRAP lets this one stable cargo print it. Nothing
    // is compiled, so no fingerprint records the variable.
    let output = Command::new(cargo)
        .args(args)
        .args(["--offline", "--unit-graph", "-Z", "unstable-options"])
        .arg("--manifest-path")
        .arg(&manifest)
        .env("RUSTC_BOOTSTRAP", "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    let graph: Value = serde_json::from_slice(&output.stdout).unwrap();
    graph["units"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|unit| unit["mode"] == "build")
        .filter_map(|unit| {
            let id = unit["pkg_id"].as_str()?;
            let package = id.strip_prefix("registry+")?.rsplit('#').next()?;
            let features = unit["features"]
                .as_array()?
                .iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect();
            Some((package.to_owned(), features))
        })
        .collect()
}

#[test]
fn quick_start_and_tests_share_one_build() {
    let quick_start = variants(&["build", "-p", "mcpbox"]);
    let tests = variants(&["test", "--workspace", "--no-run"]);
    let shared: BTreeSet<&String> = quick_start.iter().map(|(package, _)| package).collect();
    let mut twice: BTreeMap<&String, Vec<&Vec<String>>> = BTreeMap::new();
    for (package, features) in tests.difference(&quick_start) {
        if shared.contains(package) {
            twice.entry(package).or_default().push(features);
        }
    }
    assert!(
        quick_start.len() > 300,
        "the quick start builds only {} crates?",
        quick_start.len()
    );
    assert!(
        twice.is_empty(),
        "`cargo test --workspace` would compile these again, with features `cargo build -p \
         mcpbox` does not turn on (a dev-dependency turns them on; ask for them too, in \
         tests/workspace-hack/Cargo.toml, or in host/Cargo.toml if the host uses the crate): \
         {twice:?}"
    );
    // The other way: a variant only the quick start builds is one the test command builds
    // otherwise, and with it every crate above it (a build-dependency of the host's that asks
    // for fewer features than the proc macros the tests share with it; ask for them in
    // tests/workspace-hack/Cargo.toml's `[build-dependencies]`).
    let only_quick_start: Vec<_> = quick_start.difference(&tests).collect();
    assert!(
        only_quick_start.is_empty(),
        "`cargo build -p mcpbox` compiles these in a variant `cargo test --workspace` does \
         not, so the test command compiles them and all above them again (ask for the \
         features the tests turn on in tests/workspace-hack/Cargo.toml's \
         `[build-dependencies]`): {only_quick_start:?}"
    );
}

/// The crates only the default features bring: a build for serving alone
/// (`--no-default-features`, OPERATING.md) compiles none of them, and the default build all.
#[test]
fn a_build_for_serving_alone_leaves_out_registries_and_telemetry() {
    const LEFT_OUT: [&str; 6] = [
        "oci-client",
        "sigstore",
        "docker_credential",
        "indicatif",
        "opentelemetry-otlp",
        "tracing-opentelemetry",
    ];
    let packages = |args: &[&str]| -> BTreeSet<String> {
        variants(args)
            .into_iter()
            .filter_map(|(package, _)| Some(package.split_once('@')?.0.to_owned()))
            .collect()
    };
    let default = packages(&["build", "-p", "mcpbox"]);
    let alone = packages(&["build", "-p", "mcpbox", "--no-default-features"]);
    for name in LEFT_OUT {
        assert!(
            default.contains(name),
            "the default build no longer has {name}"
        );
        assert!(
            !alone.contains(name),
            "a build without default features still compiles {name}"
        );
    }
}

/// The release build lays its code out by host/symbol-order.txt (host/build.rs, BENCHMARKS.md
/// "Start-up and idle memory, the code laid out"). The linker skips a name it does not find
/// without a word, so a list of demangled or mangled-wrong names would quietly do nothing:
/// the file must hold linker names, each once.
#[test]
fn the_code_layout_lists_linker_names_once_each() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("symbol-order.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    assert!(names.len() > 1000, "only {} names in {path:?}", names.len());
    let mut seen = BTreeSet::new();
    for name in &names {
        let linker_name = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_$.".contains(c));
        assert!(linker_name, "{name:?} is not a linker name (demangled?)");
        assert!(seen.insert(name), "{name} is listed twice");
    }
    for name in ["main", "_ZN6mcpbox4main"] {
        assert!(
            names.iter().any(|n| n.starts_with(name)),
            "the start ({name}) is not in the list"
        );
    }
}

/// The build script passes the layout to the linker in release builds for x86_64 Linux, where
/// rustc links with its own LLD, and never where the flag could break the link: another
/// profile, another target, or a linker the configuration chose.
#[test]
fn the_build_script_passes_the_layout_only_to_lld_in_release_builds() {
    // The build script cargo built for this test run (the newest, if older ones linger).
    let build = std::env::current_exe()
        .unwrap()
        .ancestors()
        .nth(2)
        .unwrap()
        .join("build");
    let script = std::fs::read_dir(&build)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("mcpbox-"))
        .map(|entry| entry.path().join("build-script-build"))
        .filter(|path| path.is_file())
        .max_by_key(|path| path.metadata().and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| panic!("no build script of mcpbox under {build:?}"));
    // Where the script writes the list of WIT files it also makes.
    let out = tempfile::tempdir().unwrap();
    let run = |changes: &[(&str, &str)]| -> String {
        let mut command = Command::new(&script);
        command
            .env_remove("RUSTC_LINKER")
            .env("CARGO_MANIFEST_DIR", env!("CARGO_MANIFEST_DIR"))
            .env("OUT_DIR", out.path())
            .env("PROFILE", "release")
            .env("CARGO_CFG_TARGET_ARCH", "x86_64")
            .env("CARGO_CFG_TARGET_OS", "linux")
            .env("CARGO_CFG_TARGET_ENV", "gnu")
            .env("CARGO_ENCODED_RUSTFLAGS", "");
        for (key, value) in changes {
            command.env(key, value);
        }
        let output = command.output().unwrap();
        assert!(output.status.success(), "{script:?} failed");
        String::from_utf8(output.stdout).unwrap()
    };
    let flag = "cargo:rustc-link-arg-bin=mcpbox=-Wl,--symbol-ordering-file=";
    assert!(run(&[]).contains(flag), "a release build is not laid out");
    for (change, why) in [
        (("PROFILE", "debug"), "a debug build"),
        (("CARGO_CFG_TARGET_ARCH", "aarch64"), "another target"),
        (("CARGO_CFG_TARGET_ENV", "musl"), "musl"),
        (("RUSTC_LINKER", "/usr/bin/gcc"), "a chosen linker"),
        (
            ("CARGO_ENCODED_RUSTFLAGS", "-Clinker=clang"),
            "a linker in the flags",
        ),
    ] {
        assert!(!run(&[change]).contains(flag), "{why} gets the flag");
    }
}
