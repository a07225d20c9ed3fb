//! The configuration file through the real binary: the reference file names every flag and
//! each of its examples is valid; `mcpbox check` names file, line and key for every kind of
//! mistake; `serve --config` applies flag > environment > file > default; a plugin section
//! governs its plugin and reloads live, and other changed keys are reported as needing a
//! restart.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, PaginatedRequestParams};
use rmcp::service::RunningService;

use crate::support::{Stderr, connect_command, fresh_state_dir, plugin_dir, tool_text};

fn reference() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/mcpbox.toml")
}

/// `mcpbox check --config FILE`: (success, stdout).
fn check(file: &Path) -> (bool, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(["check", "--config"])
        .arg(file)
        .env_remove("MCPBOX_LOG")
        .output()
        .expect("run mcpbox check");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// The long flags `mcpbox serve --help` lists (a file may set each but these three).
fn serve_flags() -> Vec<String> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(["serve", "--help"])
        .output()
        .expect("run mcpbox serve --help");
    let help = String::from_utf8_lossy(&output.stdout);
    let mut flags: Vec<String> = help
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let rest = line.strip_prefix("--").or_else(|| {
                line.strip_prefix('-')
                    .and_then(|l| l.split_once(", --"))
                    .map(|(_, r)| r)
            })?;
            let flag: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            (!flag.is_empty()).then_some(flag)
        })
        .filter(|f| !matches!(f.as_str(), "help" | "version" | "config"))
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn the_reference_file_names_every_flag_and_each_example_is_valid() {
    let text = std::fs::read_to_string(reference()).unwrap();
    let (ok, out) = check(&reference());
    assert!(ok, "the reference file must check: {out}");
    let flags = serve_flags();
    assert!(flags.len() >= 20, "too few flags found: {flags:?}");
    for flag in &flags {
        let named = text.lines().any(|line| {
            let line = line.trim_start_matches("# ");
            line.starts_with(&format!("{flag} = "))
        });
        assert!(named, "host/deploy/mcpbox.toml does not name `{flag}`");
    }
    // Each commented example (a run of consecutive example lines together, such as the
    // OAuth settings that need each other), uncommented, is valid. The files examples name
    // beside the configuration file exist (a secrets file must, and be its owner's alone).
    let dir = tempfile::tempdir().unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        let secrets = dir.path().join("secrets.toml");
        std::fs::write(&secrets, "").unwrap();
        std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let lines: Vec<&str> = text.lines().collect();
    fn example<'a>(line: &'a str, flags: &[String]) -> Option<&'a str> {
        line.strip_prefix("# ").filter(|rest| {
            rest.split_once(" = ")
                .is_some_and(|(key, _)| flags.iter().any(|f| f == key))
        })
    }
    let mut examples = 0;
    let mut i = 0;
    while i < lines.len() {
        if example(lines[i], &flags).is_none() {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && example(lines[i], &flags).is_some() {
            i += 1;
        }
        examples += i - start;
        let edited: Vec<&str> = lines
            .iter()
            .enumerate()
            .map(|(j, l)| {
                if (start..i).contains(&j) {
                    example(l, &flags).unwrap_or(l)
                } else {
                    l
                }
            })
            .collect();
        let file = dir.path().join("mcpbox.toml");
        std::fs::write(&file, edited.join("\n")).unwrap();
        let (ok, out) = check(&file);
        assert!(
            ok,
            "uncommenting {:?} breaks the file: {out}",
            &lines[start..i]
        );
    }
    assert!(examples >= 10, "only {examples} commented examples");
}

#[test]
fn check_names_the_file_line_and_key_of_every_mistake() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcpbox.toml");
    let cases: &[(&str, &[&str])] = &[
        (
            "page-size = 5\nfule = 1\n",
            &["line 2", "`fule`", "unknown key", "fuel"],
        ),
        ("fuel = \"lots\"\n", &["line 1", "`fuel`", "invalid value"]),
        (
            "fuel = 1\n[signatures.require]\nweather = [\"acme\"]\n",
            &["line 2", "`signatures`", "`acme`", "does not define"],
        ),
        (
            "[signatures.keys]\nacme = \"nowhere.pub\"\n",
            &["line 1", "`signatures.keys.acme`", "cannot read it"],
        ),
        ("page-size = 0\n", &["line 1", "`page-size`"]),
        (
            "no-watch = \"yes\"\n",
            &["line 1", "`no-watch`", "true or false"],
        ),
        (
            "allowed-origin = [\"not an origin\"]\n",
            &["`allowed-origin`", "not an origin"],
        ),
        ("log-format = \"xml\"\n", &["`log-format`", "xml"]),
        (
            "state = \"redis://127.0.0.1:1\"\nstate-dir = \"x\"\n",
            &["line 2", "`state-dir`", "cannot be used with '--state"],
        ),
        (
            "config = \"other.toml\"\n",
            &["`config`", "cannot name another"],
        ),
        ("fuel = \n", &["line 1", "`fuel`"]),
        ("plugin = 3\n", &["line 1", "plugin", "expected a map"]),
        (
            "\n[plugin.weather.limits]\nfule = 1\n",
            &[
                "line 3",
                "plugin.weather.limits.fule",
                "unknown field `fule`",
            ],
        ),
        (
            "[plugin.weather.limits]\nmemory-mib = 0\n",
            &["line 2", "plugin.weather.limits.memory-mib"],
        ),
        (
            "[plugin.weather.http]\nallow = [\"*\"]\n",
            &["line 2", "plugin.weather.http.allow"],
        ),
        (
            "fuel = 5\n\n[plugin.weather]\nprefix = \"w x\"\n",
            &["line 4", "plugin.weather.prefix", "a prefix is"],
        ),
        (
            "[plugin.weather.tools]\nallow = [\"a\"]\ndeny = [\"a\"]\n",
            &["line 3", "plugin.weather.tools.deny[0]", "listed twice"],
        ),
    ];
    for (text, needles) in cases {
        std::fs::write(&file, text).unwrap();
        let (ok, out) = check(&file);
        assert!(!ok, "{text:?} should be refused: {out}");
        assert!(
            out.contains("mcpbox.toml"),
            "{text:?}: names the file: {out}"
        );
        for needle in *needles {
            assert!(
                out.contains(needle),
                "{text:?}: `{needle}` missing from: {out}"
            );
        }
    }
    // serve refuses the same file before doing anything, with status 2.
    std::fs::write(&file, "fule = 1\n").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(["serve", "--config"])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("line 1") && stderr.contains("`fule`"),
        "{stderr}"
    );
}

/// `mcpbox serve --config FILE <extra>` over stdio with `env`, connected with rmcp's client.
async fn serve(
    config: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (RunningService<RoleClient, ()>, Stderr) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"));
    command
        .arg("serve")
        .arg("--config")
        .arg(config)
        .args(extra)
        .env_remove("MCPBOX_LOG")
        .env("MCPBOX_STATE_DIR", fresh_state_dir())
        .envs(crate::support::test_cache())
        .kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    connect_command(command, ()).await
}

async fn page_len(client: &RunningService<RoleClient, ()>) -> usize {
    client
        .list_tools(Some(PaginatedRequestParams::default()))
        .await
        .unwrap()
        .tools
        .len()
}

#[tokio::test]
async fn flags_beat_the_environment_which_beats_the_file() {
    let root = tempfile::tempdir().unwrap();
    let plugins = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    std::fs::rename(plugins.path(), root.path().join("plugins")).unwrap();
    let config = root.path().join("mcpbox.toml");
    // A relative plugin directory: relative to the file, not to where mcpbox runs.
    std::fs::write(&config, "plugins = \"plugins\"\npage-size = 1\n").unwrap();

    let (client, _) = serve(&config, &[], &[]).await;
    assert_eq!(page_len(&client).await, 1, "the file's page-size");
    client.cancel().await.unwrap();

    let (client, _) = serve(&config, &[], &[("MCPBOX_PAGE_SIZE", "2")]).await;
    assert_eq!(page_len(&client).await, 2, "the environment beats the file");
    client.cancel().await.unwrap();

    let (client, _) = serve(&config, &["--page-size", "3"], &[("MCPBOX_PAGE_SIZE", "2")]).await;
    assert_eq!(page_len(&client).await, 3, "a flag beats both");
    client.cancel().await.unwrap();

    // Neither: the default (100) lists all four tools.
    std::fs::write(&config, "plugins = \"plugins\"\n").unwrap();
    let (client, _) = serve(&config, &[], &[]).await;
    assert_eq!(page_len(&client).await, 4, "the default");
    client.cancel().await.unwrap();
}

async fn spin(client: &RunningService<RoleClient, ()>) -> String {
    let result = client
        .call_tool(CallToolRequestParams::new("spin").with_arguments(serde_json::Map::new()))
        .await
        .unwrap();
    let (text, is_error) = tool_text(&result);
    assert!(is_error, "{text}");
    text
}

#[tokio::test]
async fn a_plugin_section_governs_its_plugin_and_reloads_live() {
    let plugins = plugin_dir(&[("hostile", "hostile.wasm")]);
    // A manifest beside the plugin, which the section overrides.
    std::fs::write(
        plugins.path().join("hostile.toml"),
        "[limits]\nfuel = 100_000_000\n",
    )
    .unwrap();
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("mcpbox.toml");
    let write = |fuel: &str, page_size: u32| {
        let text = format!(
            "plugins = {:?}\npage-size = {page_size}\nreload-debounce-ms = 50\n\n[plugin.hostile.limits]\nfuel = {fuel}\ntimeout-ms = 5000\n",
            plugins.path().display().to_string()
        );
        // Written beside and renamed into place, as editors and config managers do.
        let next = root.path().join(".mcpbox.toml.tmp");
        std::fs::write(&next, text).unwrap();
        std::fs::rename(&next, &config).unwrap();
    };
    write("500_000_000", 100);
    let (client, stderr) = serve(&config, &[], &[]).await;
    assert_eq!(
        spin(&client).await,
        "plugin `hostile` ran out of fuel after 500000000 units"
    );
    assert!(
        stderr
            .text()
            .contains("ignored the manifest beside plugin `hostile`"),
        "{}",
        stderr.text()
    );

    // The section changes: the plugin reloads under it, without a restart.
    write("300_000_000", 100);
    stderr.wait_for("reloaded plugin").await;
    assert_eq!(
        spin(&client).await,
        "plugin `hostile` ran out of fuel after 300000000 units"
    );

    // Another option changes: reported, not applied.
    write("300_000_000", 7);
    stderr
        .wait_for("`page-size` changed in the configuration file")
        .await;
    assert!(
        page_len(&client).await > 7,
        "the running page size stays 100"
    );

    // An invalid file: logged, and the previous configuration stays.
    std::fs::write(&config, "[plugin.hostile.limits]\nfule = 1\n").unwrap();
    stderr
        .wait_for("the configuration file changed but is invalid")
        .await;
    assert!(stderr.text().contains("unknown field `fule`"));
    assert_eq!(
        spin(&client).await,
        "plugin `hostile` ran out of fuel after 300000000 units"
    );
    client.cancel().await.unwrap();
}

#[test]
fn check_accepts_a_minimal_file_and_says_what_it_sets() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcpbox.toml");
    std::fs::write(
        &file,
        "fuel = 1_000_000\nallowed-host = \"mcp.example.com\"\n[plugin.todo.keyvalue]\nbuckets = [\"default\"]\n",
    )
    .unwrap();
    let (ok, out) = check(&file);
    assert!(ok, "{out}");
    assert!(out.contains("2 options (allowed-host, fuel)"), "{out}");
    assert!(out.contains("1 plugin sections (todo)"), "{out}");
    assert!(out.contains("sets no `plugins` directory"), "{out}");
}
