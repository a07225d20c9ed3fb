//! Test fixture: a plugin that takes 8 seconds (waiting in a host call) to say what it offers.
//! mcpbox must serve the other plugins meanwhile, and add this one when it is done.

use mcpbox_sdk::{NoArgs, Plugin, Tool, Tools};

struct SlowList;

impl Plugin for SlowList {
    fn tools(tools: &mut Tools) {
        std::thread::sleep(std::time::Duration::from_secs(8));
        tools.add(Tool::new("slow_tool", "Listed late"), |_: NoArgs| "slow");
    }
}

mcpbox_sdk::export!(SlowList);
