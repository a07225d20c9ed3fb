//! Example plugin with a directory grant: list and read the files of a directory the operator
//! mapped into the plugin at `/data`.

use mcpbox_sdk::{Deserialize, JsonSchema, Plugin, Tool, Tools};

/// Where the granted directory appears inside the plugin.
const ROOT: &str = "/data";

/// A path inside the granted directory.
#[derive(Deserialize, JsonSchema)]
struct Location {
    /// A path relative to the granted directory; empty for its top.
    #[serde(default)]
    path: String,
}

fn full_path(path: &str) -> String {
    let path = path.trim_start_matches('/');
    if path.is_empty() {
        ROOT.to_owned()
    } else {
        format!("{ROOT}/{path}")
    }
}

fn list_files(Location { path }: Location) -> Result<String, String> {
    let dir = full_path(&path);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot list {dir}: {e}"))?
        .filter_map(Result::ok)
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                format!("{name}/")
            } else {
                name
            }
        })
        .collect();
    names.sort();
    Ok(names.join("\n"))
}

fn read_file(Location { path }: Location) -> Result<String, String> {
    let file = full_path(&path);
    std::fs::read_to_string(&file).map_err(|e| format!("cannot read {file}: {e}"))
}

struct Files;

impl Plugin for Files {
    fn tools(tools: &mut Tools) {
        tools
            .add(
                Tool::new("list_files", "List the files in the granted directory").read_only(true),
                list_files,
            )
            .add(
                Tool::new("read_file", "Read a text file from the granted directory")
                    .read_only(true),
                read_file,
            );
    }
}

mcpbox_sdk::export!(Files);
