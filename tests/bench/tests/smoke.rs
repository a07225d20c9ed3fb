//! The harness works: `mcpbench --smoke` drives the real mcpbox binary (the debug build beside
//! this test's binaries) and the native baseline through every part of the benchmark, checking
//! every answer, and writes a report with every section. The figures are not looked at: timing
//! has no place in tests on a shared machine.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_part_of_the_benchmark_runs() {
    let root = root();
    let built = Command::new(root.join("plugins/build.sh"))
        .arg("--with-bench-plugin")
        .status()
        .expect("run plugins/build.sh");
    assert!(built.success(), "plugins/build.sh failed");

    let harness = PathBuf::from(env!("CARGO_BIN_EXE_mcpbench"));
    let mcpbox = harness.with_file_name("mcpbox");
    assert!(
        mcpbox.exists(),
        "{} is missing: run the tests with `cargo test --workspace`, which builds it",
        mcpbox.display()
    );
    let work = root.join("target/bench-smoke");
    let report = work.join("report.md");
    std::fs::create_dir_all(&work).expect("create the work directory");
    let output = Command::new(&harness)
        .arg("--mcpbox")
        .arg(&mcpbox)
        .arg("--native")
        .arg(env!("CARGO_BIN_EXE_native-echo"))
        .arg("--plugin")
        .arg(root.join("target/bench-plugins/bench_tools.wasm"))
        .arg("--alt-plugin")
        .arg(root.join("target/plugins/echo_tools.wasm"))
        .arg("--work")
        .arg(work.join("work"))
        .arg("--out")
        .arg(&report)
        .arg("--smoke")
        .output()
        .expect("run mcpbench");
    assert!(
        output.status.success(),
        "mcpbench failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = std::fs::read_to_string(&report).expect("read the report");
    for section in [
        "tools/call over stdio",
        "tools/call over stdio (echo), an event-loop client (asyncio)",
        "tools/call over stdio (echo, instances kept per caller)",
        "tools/call over stdio (echo, instances kept per caller), an event-loop client (asyncio)",
        "tools/call over HTTP",
        "tools/call over HTTP (echo), an event-loop client (asyncio)",
        "tools/call over HTTP (echo, instances kept per caller)",
        "Start-up",
        "tools/list over 1000 tools",
        "Hot reload",
        "Plugin state",
        "Budgets per caller: tools/call over HTTP",
        "Budgets per caller: bob's echo round trips",
        "Brokered credentials: a plugin GET",
        "Targets met:",
    ] {
        assert!(
            report.contains(section),
            "no {section:?} in the report:\n{report}"
        );
    }
}
