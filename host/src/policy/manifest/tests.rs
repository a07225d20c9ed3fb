//! Tests of reading a manifest: its tables, limits and naming, and the errors that name the
//! file and line.

use std::time::Duration;

use super::test_support::{error, write};
use super::*;
use crate::policy::HttpGrant;

#[test]
fn tasks_name_tools_once_within_the_operators_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let policy = load_manifest(
            &write(
                dir.path(),
                "[limits]\ntimeout-ms = 2000\n[tasks]\noptional = [\"report\"]\nrequired = [\"export\"]\n",
            ),
            Limits::default(),
        )
        .unwrap();
    assert_eq!(
        policy.tasks.support("report"),
        crate::policy::TaskSupport::Optional
    );
    assert_eq!(
        policy.tasks.support("export"),
        crate::policy::TaskSupport::Required
    );
    assert_eq!(
        policy.tasks.support("other"),
        crate::policy::TaskSupport::Forbidden
    );
    // Without its own limit, a task has the plugin's.
    assert_eq!(policy.limits.task_timeout, Duration::from_secs(2));
    let policy = load_manifest(
        &write(
            dir.path(),
            "[tasks]\noptional = [\"report\"]\ntimeout-ms = 600000\n",
        ),
        Limits::default(),
    )
    .unwrap();
    assert_eq!(policy.limits.task_timeout, Duration::from_secs(600));
    for (text, expected) in [
        ("[tasks]\ntimeout-ms = 7200000\n", "--task-timeout-ms"),
        ("[tasks]\ntimeout-ms = 0\n", "greater than 0"),
        (
            "[tasks]\noptional = [\"a\"]\nrequired = [\"a\"]\n",
            "listed twice",
        ),
        ("[tasks]\noptional = [\"\"]\n", "must not be empty"),
        ("[tasks]\nmaybe = [\"a\"]\n", "unknown field"),
    ] {
        let message = error(text);
        assert!(
            message.contains("tasks") && message.contains(expected),
            "{text}: {message}"
        );
    }
}

#[test]
fn instances_are_per_call_unless_the_manifest_keeps_them_per_caller() {
    let dir = tempfile::tempdir().unwrap();
    let policy = load_manifest(&write(dir.path(), ""), Limits::default()).unwrap();
    assert_eq!(policy.instances, Instances::PerCall);
    for (text, expected) in [
        ("instances = \"per-call\"\n", Instances::PerCall),
        ("instances = \"per-caller\"\n", Instances::PerCaller),
    ] {
        let policy = load_manifest(&write(dir.path(), text), Limits::default()).unwrap();
        assert_eq!(policy.instances, expected, "{text}");
        assert_eq!(
            policy.instances.as_str(),
            text[13..text.len() - 2].to_owned()
        );
    }
    for text in ["instances = \"shared\"\n", "instances = true\n"] {
        let message = error(text);
        assert!(
            message.contains("instances") && message.contains("per-caller"),
            "{text}: {message}"
        );
    }
}

#[test]
fn a_full_manifest_parses() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let text = r#"
            title = "Weather, by Example Corp"

            [limits]
            fuel = 1000
            timeout-ms = 2000
            memory-mib = 64

            [[dirs]]
            host = "data"
            guest = "/data"
            mode = "read-write"

            [env]
            UNITS = "metric"
            HOME_DIR = { from-host = "CARGO_MANIFEST_DIR" }

            [http]
            allow = ["API.example.com", "127.0.0.1:8080", "[::1]:9000"]
        "#;
    let policy = load_manifest(&write(dir.path(), text), Limits::default()).unwrap();
    assert_eq!(policy.title.as_deref(), Some("Weather, by Example Corp"));
    assert_eq!(policy.limits.fuel, 1000);
    assert_eq!(policy.limits.timeout, Duration::from_secs(2));
    assert_eq!(policy.limits.memory_bytes, 64 << 20);
    assert_eq!(policy.limits.output_bytes, Limits::DEFAULT_OUTPUT_BYTES);
    assert_eq!(policy.dirs[0].guest, "/data");
    assert!(policy.dirs[0].writable);
    assert!(policy.dirs[0].host.is_absolute());
    assert_eq!(policy.env[0].name, "HOME_DIR");
    assert_eq!(
        policy.env[0].from_host.as_deref(),
        Some("CARGO_MANIFEST_DIR")
    );
    assert_eq!(policy.env[1].value, "metric");
    assert_eq!(
        policy.http[0],
        HttpGrant {
            host: "api.example.com".into(),
            port: None
        }
    );
    assert_eq!(
        policy.http[1],
        HttpGrant {
            host: "127.0.0.1".into(),
            port: Some(8080)
        }
    );
    assert_eq!(
        policy.http[2],
        HttpGrant {
            host: "::1".into(),
            port: Some(9000)
        }
    );
}

#[test]
fn a_directory_without_a_guest_path_is_seen_where_the_host_has_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("notes")).unwrap();
    let text = "[[dirs]]\nhost = \"notes\"\nmode = \"read-write\"\n";
    let policy = load_manifest(&write(dir.path(), text), Limits::default()).unwrap();
    let real = dir.path().join("notes").canonicalize().unwrap();
    assert_eq!(policy.dirs[0].host, real);
    assert_eq!(Path::new(&policy.dirs[0].guest), real);
}

#[test]
fn unknown_keys_name_the_line() {
    let e = error("[limits]\nfule = 5\n");
    assert!(
        e.contains("plugin.toml: line 2") && e.contains("unknown field `fule`"),
        "{e}"
    );
    let e = error("[network]\nallow = true\n");
    assert!(
        e.contains("line 1") && e.contains("unknown field `network`"),
        "{e}"
    );
}

#[test]
fn bad_values_name_the_key() {
    assert!(error("[limits]\nfuel = 0\n").contains("limits.fuel: must be greater than 0"));
    assert!(error("[limits]\nmemory-mib = 100000\n").contains("limits.memory-mib"));
    let e = error("[[dirs]]\nhost = \"nope\"\nguest = \"/x\"\n");
    assert!(e.contains("dirs[0].host: cannot use directory"), "{e}");
    let e = error("[[dirs]]\nhost = \".\"\nguest = \"../x\"\n");
    assert!(e.contains("dirs[0].guest"), "{e}");
    // Without `guest`, the directory is where the host has it: mapped twice is named.
    let e = error("[[dirs]]\nhost = \".\"\n[[dirs]]\nhost = \".\"\n");
    assert!(
        e.contains("dirs[1].host") && e.contains("is mapped twice"),
        "{e}"
    );
    let e = error("[env]\nX = { from-host = \"MCPBOX_TEST_SURELY_UNSET\" }\n");
    assert!(e.contains("env.X") && e.contains("not set"), "{e}");
    let e = error("[env]\n\"1X\" = \"v\"\n");
    assert!(e.contains("env.1X"), "{e}");
    let e = error("[http]\nallow = [\"https://x.com\"]\n");
    assert!(
        e.contains("http.allow[0]: expected `host` or `host:port`"),
        "{e}"
    );
    let e = error("[http]\nallow = [\"x.com:99999\"]\n");
    assert!(e.contains("is not a port number"), "{e}");
    let e = error("[env]\nX = 5\n");
    assert!(e.contains("line 2") && e.contains("from-host"), "{e}");
}

#[test]
fn errors_name_the_line_and_the_key() {
    let e = error("title = \"x\"\n\n[limits]\nfuel = 0\n");
    assert!(
        e.contains("plugin.toml: line 4: limits.fuel: must be"),
        "{e}"
    );
    let e = error("[limits]\nfuel = \"many\"\n");
    assert!(e.contains("line 2: limits.fuel: invalid type"), "{e}");
    // A section of the configuration file: its key and its line in the file.
    let config = "fuel = 5\n\n[plugin.todo]\ntitle = \"T\"\n\n[plugin.todo.limits]\nfuel = 0\n";
    let section = "title = \"T\"\n[limits]\nfuel = 0\n";
    let e = parse_section(Path::new("mcpbox.toml"), "todo", section, Limits::default())
        .unwrap_err()
        .in_file(config)
        .to_string();
    assert_eq!(
        e,
        "mcpbox.toml: line 7: plugin.todo.limits.fuel: must be greater than 0"
    );
    let e = check_sections(Path::new("mcpbox.toml"), "[plugin.todo.tools]\nallow = 5\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mcpbox.toml: line 2: plugin.todo.tools.allow: invalid type"),
        "{e}"
    );
}
