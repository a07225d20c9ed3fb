//! Test fixture: a plugin that misbehaves in every way the sandbox must contain. Each tool is
//! one attack; the tests assert what a client sees and that the host serves on.

#![expect(clippy::print_stdout, reason = "flooding stdout is one of the attacks")]

use std::hint::black_box;

use mcpbox_sdk::{Deserialize, JsonSchema, NoArgs, Plugin, ResourceInfo, Resources, Tool, Tools};

#[derive(Deserialize, JsonSchema)]
struct Path {
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct Name {
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct Address {
    address: String,
}

#[derive(Deserialize, JsonSchema)]
struct Url {
    url: String,
}

#[derive(Clone, Copy, Deserialize, JsonSchema)]
struct Amount {
    mib: u64,
}

fn spin(_: NoArgs) -> String {
    let mut n: u64 = 0;
    loop {
        n = black_box(n.wrapping_add(1));
    }
}

fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth; 64]);
    if black_box(depth) == u64::MAX {
        frame[0]
    } else {
        recurse(depth + 1) + frame[1]
    }
}

/// Recursion whose frames stay on wasm's own stack (nothing in linear memory).
fn recurse_native(depth: u64) -> u64 {
    if black_box(depth) == u64::MAX {
        depth
    } else {
        recurse_native(black_box(depth + 1)).wrapping_add(1)
    }
}

fn alloc_bomb(Amount { mib }: Amount) -> String {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    for _ in 0..mib {
        hoard.push(black_box(vec![1u8; 1 << 20]));
    }
    format!("allocated {} MiB", hoard.len())
}

fn flood(Amount { mib }: Amount) -> String {
    let line = "x".repeat(1023);
    for _ in 0..mib * 1024 {
        println!("{line}");
    }
    "flooded".to_owned()
}

fn read_file(Path { path }: Path) -> Result<String, String> {
    std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))
}

fn write_file(Path { path }: Path) -> Result<String, String> {
    std::fs::write(&path, b"pwned")
        .map(|()| "written".to_owned())
        .map_err(|e| format!("cannot write {path}: {e}"))
}

fn read_env(Name { name }: Name) -> Result<String, String> {
    std::env::var(&name).map_err(|e| format!("cannot read ${name}: {e}"))
}

fn tcp_connect(Address { address }: Address) -> Result<String, String> {
    std::net::TcpStream::connect(&address)
        .map(|_| "connected".to_owned())
        .map_err(|e| format!("cannot connect to {address}: {e}"))
}

fn http_get(Url { url }: Url) -> Result<String, String> {
    mcpbox_sdk::http::get(&url)
        .map(|r| r.text())
        .map_err(|e| e.to_string())
}

fn sleep_forever(_: NoArgs) -> String {
    std::thread::sleep(std::time::Duration::from_secs(1 << 30));
    "woke up".to_owned()
}

struct Hostile;

impl Plugin for Hostile {
    fn tools(tools: &mut Tools) {
        tools
            .add(Tool::new("spin", "Loop forever"), spin)
            .add(
                Tool::new("recurse", "Recurse until the stack runs out"),
                |_: NoArgs| recurse(0).to_string(),
            )
            .add(
                Tool::new("recurse_native", "Recurse until wasm's stack runs out"),
                |_: NoArgs| recurse_native(0).to_string(),
            )
            .add(
                Tool::new("alloc_bomb", "Allocate this many MiB"),
                alloc_bomb,
            )
            .add(Tool::new("flood", "Print this many MiB to stdout"), flood)
            .add(
                Tool::new("panic", "Panic with a message"),
                |Name { name }: Name| -> String { panic!("{name}") },
            )
            .add(Tool::new("read_file", "Read a file"), read_file)
            .add(Tool::new("write_file", "Write a file"), write_file)
            .add(
                Tool::new("read_env", "Read an environment variable"),
                read_env,
            )
            .add(
                Tool::new("tcp_connect", "Open a TCP connection"),
                tcp_connect,
            )
            .add(Tool::new("http_get", "Fetch a URL"), http_get)
            .add(
                Tool::new("sleep_forever", "Wait in a host call forever"),
                sleep_forever,
            )
            .add(Tool::new("ok", "Behave"), |_: NoArgs| "fine");
    }

    fn resources(resources: &mut Resources) {
        resources.add(
            ResourceInfo::new("hostile://big", "big").mime_type("text/plain"),
            || "y".repeat(100 << 10),
        );
    }
}

mcpbox_sdk::export!(Hostile);
