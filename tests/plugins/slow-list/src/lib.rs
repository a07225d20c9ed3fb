//! Test fixture: a plugin that takes its time to say what it offers. mcpbox must serve the
//! other plugins meanwhile, and add this one when it is done.
//!
//! Without a grant it lists after 8 seconds (waiting in a host call). With the directory
//! `/gate` granted read-write, a test decides instead: the plugin writes `/gate/listing` when
//! its listing starts (its sign that the host is listing it) and lists once `/gate/open`
//! exists (checked every 10 ms, for at most 60 s).

use std::path::Path;
use std::time::Duration;

use mcpbox_sdk::{NoArgs, Plugin, Tool, Tools};

/// Wait until the test opens the gate, or 8 s without one.
fn wait_to_list() {
    let gate = Path::new("/gate");
    if std::fs::write(gate.join("listing"), b"listing").is_err() {
        std::thread::sleep(Duration::from_secs(8));
        return;
    }
    for _ in 0..6000 {
        if gate.join("open").exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

struct SlowList;

impl Plugin for SlowList {
    fn tools(tools: &mut Tools) {
        wait_to_list();
        tools.add(Tool::new("slow_tool", "Listed late"), |_: NoArgs| "slow");
    }
}

mcpbox_sdk::export!(SlowList);
