//! Unit tests of managed installs: capping by the ceiling, narrowing by the arguments, the
//! user's answer, the consent's binding to the digest and the grant set, and `[manage]`.

use std::path::{Path, PathBuf};

use super::consent::{Answer, install_question, read_answer};
use super::grants::{Grant, Offer, cap, host_allowed, manifest_text};
use super::install::without_links;
use super::search::words;
use super::settings::{Ceiling, ManageSettings, Mode, PreApprove};

fn ceiling() -> Ceiling {
    Ceiling {
        dirs: vec![
            (PathBuf::from("/srv/data"), Mode::ReadWrite),
            (PathBuf::from("/srv/docs"), Mode::ReadOnly),
        ],
        hosts: vec!["api.example.com".to_owned(), "*.example.org".to_owned()],
        public_http: false,
        env: vec!["TZ".to_owned()],
        config: vec!["api-base".to_owned()],
        state: true,
        per_caller_instances: false,
        limits: [("fuel".to_owned(), 1000), ("memory-mib".to_owned(), 64)].into(),
    }
}

/// What a greedy author asks for.
const GREEDY: &str = r#"
title = "Notes"
prefix = "notes_"
reveal-caller = true

[limits]
fuel = 5000
memory-mib = 32

[[dirs]]
host = "/srv/data/notes"
mode = "read-write"
[[dirs]]
host = "/srv/docs/manuals"
mode = "read-write"
[[dirs]]
host = "/etc"
[[dirs]]
host = "/srv/data/../../etc"
[[dirs]]
host = "data"

[env]
TZ = "UTC"
HOME = { from-host = "HOME" }
SECRET = "x"

[config]
api-base = "https://api.example.com"
token = { secret = "github-token" }

[http]
allow = ["api.example.com", "evil.example", "eu.example.org", "example.org"]
public = true
[http.credentials]
"api.example.com" = "github"

[keyvalue]
buckets = ["shared"]
caller-buckets = ["notes"]
quota-kib = 9999999
"#;

fn offer(digest: &str) -> Offer {
    Offer {
        name: "notes".to_owned(),
        reference: "registry.example/mcp/notes:1".to_owned(),
        digest: digest.to_owned(),
        signer: Some(("acme".to_owned(), "sha256:k".to_owned())),
        capped: cap(GREEDY, &ceiling()).unwrap(),
        ignored: Vec::new(),
        left_out: Vec::new(),
        replaces: None,
    }
}

fn ids(grants: &[Grant]) -> Vec<String> {
    grants.iter().map(Grant::id).collect()
}

#[test]
fn the_ceiling_caps_every_grant_and_says_what_it_removed() {
    let capped = cap(GREEDY, &ceiling()).unwrap();
    assert_eq!(
        ids(&capped.grants),
        [
            "folder:/srv/data/notes:read-write",
            "folder:/srv/docs/manuals:read-only",
            "host:api.example.com",
            "host:eu.example.org",
            "env:TZ",
            "config:api-base",
            "caller-bucket:notes",
            "bucket:shared",
        ]
    );
    let mut removed = capped.removed.clone();
    removed.sort();
    let mut expected = [
        "callers' own keys as their ids (reveal-caller): never granted to a managed plugin",
        "config `token` taken from mcpbox's environment or secrets: never granted to a managed plugin",
        "write access to the folder /srv/docs/manuals (the operator allows reading it only)",
        "the folder /etc: not inside a folder the operator allows",
        "the folder /srv/data/../../etc: a managed plugin's folders are absolute paths without `.` or `..`",
        "the folder data: a managed plugin's folders are absolute paths without `.` or `..`",
        "env `HOME` taken from mcpbox's environment or secrets: never granted to a managed plugin",
        "env `SECRET`: not one the operator allows",
        "HTTP requests to evil.example: not a host the operator allows",
        "HTTP requests to example.org: not a host the operator allows",
        "HTTP requests to any public host: the operator does not allow it",
        "callers' linked accounts ([http.credentials]): never granted to a managed plugin",
        "the state setting `quota-kib` (the defaults apply to a managed plugin)",
        "fuel 5000 (lowered to the operator's 1000)",
    ];
    expected.sort_unstable();
    assert_eq!(removed, expected);
    assert_eq!(capped.removed.len(), 14, "{:#?}", capped.removed);
    assert_eq!(capped.limits["fuel"], 1000);
    assert_eq!(capped.limits["memory-mib"], 32);
    assert_eq!(capped.kept["title"].as_str(), Some("Notes"));

    // A ceiling that allows nothing grants nothing.
    let none = cap(GREEDY, &Ceiling::default()).unwrap();
    assert!(none.grants.is_empty(), "{:?}", none.grants);
    // No manifest: no grants, the ceiling's limits.
    let bare = cap("", &ceiling()).unwrap();
    assert!(bare.grants.is_empty());
    assert_eq!(bare.limits["fuel"], 1000);
    // What a managed install cannot reason about is refused, not passed through.
    assert_eq!(
        cap("surprise = true", &ceiling()).unwrap_err().to_string(),
        "its plugin manifest has `surprise`, which a managed install does not know"
    );
    assert_eq!(
        cap("[http]\nproxy = \"x\"", &ceiling())
            .unwrap_err()
            .to_string(),
        "its plugin manifest has an [http] key `proxy` a managed install does not know"
    );
}

#[test]
fn hosts_match_exactly_or_as_a_subdomain() {
    let allowed = ["api.example.com".to_owned(), "*.example.org".to_owned()];
    assert!(host_allowed("API.example.com", &allowed));
    assert!(host_allowed("eu.example.org", &allowed));
    for refused in [
        "example.org",
        "evilexample.org",
        "api.example.com:8443",
        "x.api.example.com",
        ".example.org",
    ] {
        assert!(!host_allowed(refused, &allowed), "{refused}");
    }
}

#[test]
fn arguments_narrow_and_never_add() {
    let hostile = [
        "host:api.example.com".to_owned(),
        "host:evil.example".to_owned(),
        "folder:/etc:read-write".to_owned(),
        "folder:/srv/docs/manuals:read-write".to_owned(),
        "public-http".to_owned(),
        "env:HOME".to_owned(),
    ];
    let narrowed = offer("sha256:a").narrow(Some(&hostile));
    assert_eq!(ids(&narrowed.capped.grants), ["host:api.example.com"]);
    assert_eq!(
        narrowed.ignored,
        [
            "host:evil.example",
            "folder:/etc:read-write",
            "folder:/srv/docs/manuals:read-write",
            "public-http",
            "env:HOME"
        ]
    );
    assert_eq!(narrowed.left_out.len(), 7);
    // No list: everything on offer; an empty list: nothing.
    assert_eq!(offer("sha256:a").narrow(None).capped.grants.len(), 8);
    assert!(offer("sha256:a").narrow(Some(&[])).capped.grants.is_empty());
    // The user's approval keeps only grants on offer.
    let narrowed = offer("sha256:a").narrow(Some(&hostile));
    let forged = Grant::Host {
        host: "evil.example".to_owned(),
    };
    let approved = narrowed.approve(&[forged, narrowed.capped.grants[0].clone()]);
    assert_eq!(ids(&approved.grants), ["host:api.example.com"]);
}

#[test]
fn the_consent_is_bound_to_the_digest_and_the_grant_set() {
    let base = offer("sha256:a");
    assert_eq!(base.consent_id(), offer("sha256:a").consent_id());
    assert_ne!(
        base.consent_id(),
        offer("sha256:b").consent_id(),
        "a moved tag"
    );
    let narrowed = offer("sha256:a").narrow(Some(&["host:api.example.com".to_owned()]));
    assert_ne!(base.consent_id(), narrowed.consent_id(), "other grants");
    let mut lower = offer("sha256:a");
    lower.capped.limits.insert("fuel".to_owned(), 999);
    assert_ne!(base.consent_id(), lower.consent_id(), "other limits");
    let mut value = offer("sha256:a");
    value.capped.grants[4] = Grant::Env {
        name: "TZ".to_owned(),
        value: "Europe/Paris".to_owned(),
    };
    assert_ne!(base.consent_id(), value.consent_id(), "another value");
    let mut ceiling = ceiling();
    ceiling.hosts.pop();
    let mut capped_again = offer("sha256:a");
    capped_again.capped = cap(GREEDY, &ceiling).unwrap();
    assert_ne!(
        base.consent_id(),
        capped_again.consent_id(),
        "a ceiling changed"
    );
}

#[test]
fn only_an_explicit_accept_with_the_confirmation_installs_the_boxes_left_ticked() {
    let offered = offer("sha256:a").capped.grants;
    assert_eq!(
        read_answer(r#"{"action":"decline"}"#, &offered),
        Answer::Decline
    );
    assert_eq!(
        read_answer(r#"{"action":"cancel"}"#, &offered),
        Answer::Cancel
    );
    assert_eq!(
        read_answer(
            r#"{"action":"accept","content":{"grant_1":true}}"#,
            &offered
        ),
        Answer::Decline
    );
    assert_eq!(
        read_answer(
            r#"{"action":"accept","content":{"confirm":"true","grant_1":true}}"#,
            &offered
        ),
        Answer::Decline
    );
    assert_eq!(
        read_answer(
            r#"{"action":"accept","content":{"confirm":true,"grant_1":true,"grant_2":false,"grant_3":"yes","grant_99":true}}"#,
            &offered
        ),
        Answer::Accept(vec![offered[0].clone()])
    );
    assert!(matches!(read_answer("[]", &offered), Answer::Failed(_)));
}

#[test]
fn the_question_shows_everything_and_the_manifest_holds_exactly_what_was_approved() {
    let offer = offer("sha256:0123456789abcdef");
    let (message, schema) = install_question(&offer, false);
    for shown in [
        "Install the plugin `notes` from registry.example/mcp/notes:1?",
        "Digest: sha256:0123456789abcdef",
        "Signed by `acme` (key sha256:k)",
        "  1. read and write the folder /srv/data/notes",
        "  3. send HTTP requests to api.example.com",
        "  5. the environment variable TZ=UTC",
        "Limits: fuel 1000, memory-mib 32",
        "  - HTTP requests to evil.example: not a host the operator allows",
    ] {
        assert!(message.contains(shown), "{shown}\n{message}");
    }
    assert_eq!(schema["required"], serde_json::json!(["confirm"]));
    assert_eq!(schema["properties"]["grant_3"]["type"], "boolean");
    assert_eq!(schema["properties"]["grant_3"]["default"], true);
    assert_eq!(schema["properties"]["confirm"]["default"], false);

    let approved = offer.approve(&offer.capped.grants[2..3]);
    let text = manifest_text(&approved);
    let policy = crate::policy::parse_manifest(
        Path::new("/managed/notes.toml"),
        &text,
        crate::policy::Limits::default(),
    )
    .unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(
        table.keys().map(String::as_str).collect::<Vec<_>>(),
        ["http", "limits", "prefix", "title"]
    );
    assert_eq!(table["http"]["allow"].as_array().unwrap().len(), 1);
    assert_eq!(policy.title.as_deref(), Some("Notes"));
}

#[test]
fn the_manage_table_is_read_strictly() {
    let file = Path::new("/etc/mcpbox/mcpbox.toml");
    let parse =
        |text: &str| ManageSettings::from_toml(file, toml::from_str::<toml::Value>(text).unwrap());
    let settings = parse(
        r#"enabled = true
scope = "mcpbox:manage"
directory = "managed"
sources = ["127.0.0.1:5000/plugins/echo", "registry.example/mcp/*"]
pre-approve = "signed"
[ceiling]
dirs = [{ path = "/srv", mode = "read-write" }]
[ceiling.limits]
fuel = 5
"#,
    )
    .unwrap();
    assert_eq!(settings.directory, Path::new("/etc/mcpbox/managed"));
    assert_eq!(settings.pre_approve, PreApprove::Signed);
    assert_eq!(settings.ceiling.limits["fuel"], 5);
    for allowed in [
        "127.0.0.1:5000/plugins/echo:1.0",
        "127.0.0.1:5000/plugins/echo@sha256:00",
        "127.0.0.1:5000/plugins/echo",
        "registry.example/mcp/weather:2",
        "registry.example/mcp/team/weather:2",
    ] {
        assert!(settings.allows(allowed), "{allowed}");
    }
    for refused in [
        "127.0.0.1:5000/plugins/echo2:1.0",
        "127.0.0.1:5000/plugins/echo/evil:1.0",
        "127.0.0.1:5001/plugins/echo:1.0",
        "registry.example/mcp:1",
        "registry.example/mcpx/weather:1",
        "evil.example/registry.example/mcp/weather:1",
    ] {
        assert!(!settings.allows(refused), "{refused}");
    }
    for (text, key) in [
        ("enabled = true\nsources = [\"a/b\"]", "manage.directory"),
        ("enabled = true\ndirectory = \"d\"", "manage.sources"),
        ("sources = [\"a/b:1\"]", "manage.sources"),
        ("surprise = 1", "manage.surprise"),
        ("pre-approve = \"everyone\"", "manage.pre-approve"),
        ("[ceiling]\nhosts = \"x\"", "manage.ceiling.hosts"),
        ("[ceiling.limits]\nstack = 1", "manage.ceiling.limits"),
    ] {
        assert_eq!(parse(text).unwrap_err().0, key, "{text}");
    }
}

#[test]
fn a_query_is_a_few_distinct_words() {
    assert_eq!(
        words("Weather, weather FORECAST! a ☀"),
        ["weather", "forecast"]
    );
    assert_eq!(words(&"ab ".repeat(100)), ["ab"]);
    assert_eq!(
        words("a1 b2 c3 d4 e5 f6 g7 h8 i9 j10").len(),
        8,
        "at most eight words"
    );
}

#[test]
fn the_reference_configurations_manage_example_is_valid() {
    let text = include_str!("../../deploy/mcpbox.toml");
    let start = text.find("# [manage]\n").expect("a [manage] example");
    let example: String = text[start..]
        .lines()
        .take_while(|l| l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("# "))
        .collect::<Vec<_>>()
        .join("\n");
    let table: toml::Table = toml::from_str(&example).unwrap();
    let settings = ManageSettings::from_toml(
        Path::new("/etc/mcpbox/mcpbox.toml"),
        table["manage"].clone(),
    )
    .unwrap();
    assert!(settings.enabled);
    assert_eq!(settings.scope.as_deref(), Some("mcpbox:manage"));
    assert_eq!(settings.ceiling.limits["memory-mib"], 64);
    assert!(settings.ceiling.state);
}

#[test]
fn a_folder_reached_through_a_link_or_missing_is_removed() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let allowed = root.join("data");
    std::fs::create_dir_all(allowed.join("notes")).unwrap();
    std::fs::create_dir_all(root.join("secret")).unwrap();
    std::os::unix::fs::symlink(root.join("secret"), allowed.join("door")).unwrap();
    let ceiling = Ceiling {
        dirs: vec![(allowed.clone(), Mode::ReadWrite)],
        ..Ceiling::default()
    };
    let manifest = format!(
        "[[dirs]]\nhost = \"{0}/notes\"\n[[dirs]]\nhost = \"{0}/door\"\n[[dirs]]\nhost = \"{0}/gone\"\n",
        allowed.display()
    );
    let mut capped = cap(&manifest, &ceiling).unwrap();
    assert_eq!(capped.grants.len(), 3, "lexically, all three are inside");
    without_links(&mut capped);
    assert_eq!(
        ids(&capped.grants),
        [format!("folder:{}/notes:read-only", allowed.display())]
    );
    assert_eq!(capped.removed.len(), 2, "{:?}", capped.removed);
    assert!(
        capped.removed[0].starts_with(&format!(
            "the folder {}/door: a symbolic link leads it elsewhere ({}/secret)",
            allowed.display(),
            root.display()
        )),
        "{:?}",
        capped.removed
    );
}

/// Issue #60: an artifact's `[tasks] timeout-ms` was copied as written (up to the host's hour),
/// past the ceiling's `timeout-ms`, and neither it nor `instances = "per-caller"` was shown.
#[test]
fn a_task_time_limit_and_kept_instances_are_the_ceilings_to_allow_and_the_question_shows_them() {
    let mut ceiling = ceiling();
    ceiling.limits.insert("timeout-ms".to_owned(), 10_000);
    let asked =
        "instances = \"per-caller\"\n[tasks]\noptional = [\"report\"]\ntimeout-ms = 3600000\n";
    let capped = cap(asked, &ceiling).unwrap();
    assert_eq!(
        capped.kept["tasks"]["timeout-ms"].as_integer(),
        Some(10_000),
        "{:?}",
        capped.kept
    );
    assert_eq!(
        capped.kept["tasks"]["optional"].as_array().map(Vec::len),
        Some(1)
    );
    assert!(!capped.kept.contains_key("instances"), "{:?}", capped.kept);
    assert_eq!(
        capped.removed,
        [
            "an instance kept for the same caller's next call (instances = \"per-caller\"): the operator allows a fresh instance per call only",
            "tasks.timeout-ms 3600000 (lowered to the operator's timeout-ms 10000)",
        ]
    );
    // What the manifest written would load: a task at most the ceiling's call time.
    let policy = crate::policy::parse_manifest(
        Path::new("/managed/notes.toml"),
        &manifest_text(&capped),
        crate::policy::Limits::default(),
    )
    .unwrap();
    assert_eq!(
        policy.limits.task_timeout,
        std::time::Duration::from_secs(10)
    );
    assert_eq!(policy.instances, crate::policy::Instances::PerCall);
    // Within the ceiling, kept as written; the operator may allow instances per caller.
    ceiling.per_caller_instances = true;
    let within = cap(
        "instances = \"per-caller\"\n[tasks]\nrequired = [\"export\"]\ntimeout-ms = 5000\n",
        &ceiling,
    )
    .unwrap();
    assert_eq!(within.kept["tasks"]["timeout-ms"].as_integer(), Some(5000));
    assert_eq!(within.kept["instances"].as_str(), Some("per-caller"));
    assert!(within.removed.is_empty(), "{:?}", within.removed);

    // The user is shown what is copied from the manifest, not only the grants and limits.
    let mut offer = offer("sha256:a");
    offer.capped = within;
    let (message, _) = install_question(&offer, false);
    for shown in [
        "Also set by its manifest (as capped):",
        "  - instances = \"per-caller\"",
        "  - tasks = { required = [\"export\"], timeout-ms = 5000 }",
    ] {
        assert!(message.contains(shown), "{shown}\n{message}");
    }
}

/// Issue #60: a ceiling folder a managed plugin may write that holds the managed directory (or
/// lies inside it) let an installed plugin rewrite its own manifest, loaded live.
#[test]
fn a_writable_ceiling_folder_holding_or_inside_the_managed_directory_is_refused() {
    let file = Path::new("/etc/mcpbox/mcpbox.toml");
    let parse =
        |text: &str| ManageSettings::from_toml(file, toml::from_str::<toml::Value>(text).unwrap());
    let with = |path: &str, mode: &str| {
        format!(
            "enabled = true\ndirectory = \"/srv/mcpbox/managed\"\nsources = [\"a/b\"]\n[ceiling]\ndirs = [{{ path = \"/srv/data\", mode = \"read-write\" }}, {{ path = \"{path}\", mode = \"{mode}\" }}]\n"
        )
    };
    assert_eq!(
        parse(&with("/srv/mcpbox", "read-write")).unwrap_err(),
        (
            "manage.ceiling.dirs".to_owned(),
            "the folder /srv/mcpbox, which a managed plugin may be granted to write, holds the plugin directory /srv/mcpbox/managed: such a plugin could rewrite plugins and their manifests there; allow a folder apart from it".to_owned()
        )
    );
    assert_eq!(
        parse(&with("/srv/mcpbox/managed/data", "read-write")).unwrap_err(),
        (
            "manage.ceiling.dirs".to_owned(),
            "the folder /srv/mcpbox/managed/data, which a managed plugin may be granted to write, lies inside the plugin directory /srv/mcpbox/managed: such a plugin could rewrite plugins and their manifests there; allow a folder apart from it".to_owned()
        )
    );
    // A relative managed directory is compared where it lies.
    let relative = "enabled = true\ndirectory = \"managed\"\nsources = [\"a/b\"]\n[ceiling]\ndirs = [{ path = \"/etc\", mode = \"read-write\" }]\n";
    assert_eq!(parse(relative).unwrap_err().0, "manage.ceiling.dirs");
    // Reading it, or a folder beside it, is allowed.
    assert!(parse(&with("/srv/mcpbox", "read-only")).is_ok());
    assert!(parse(&with("/srv/mcpbox/other", "read-write")).is_ok());
    assert!(parse(&with("/srv/mcpbox/managed-data", "read-write")).is_ok());
}

/// Issue #60: an install under a name mcpbox installed, of a plugin the caller may not see
/// (gated by a scope they lack), replaced it; removal already refused the same caller.
#[tokio::test]
async fn an_install_under_a_managed_name_the_caller_may_not_see_is_refused() {
    use crate::catalog::{EventHub, INSTALL_PLUGIN, PluginInstaller, PluginSet};

    let dir = tempfile::tempdir().unwrap();
    let managed = dir.path().join("managed");
    std::fs::create_dir_all(&managed).unwrap();
    std::fs::write(
        managed.join("mcpbox.lock"),
        "version = 1\n[plugin.gated]\nreference = \"127.0.0.1:1/plugins/gated:1\"\ndigest = \"sha256:00\"\ncomponent = \"sha256:11\"\nmanifest = \"\"\n",
    )
    .unwrap();
    let settings = ManageSettings {
        enabled: true,
        directory: managed,
        sources: vec!["127.0.0.1:1/plugins/echo".to_owned()],
        ..ManageSettings::default()
    };
    let (hub, _relists) = EventHub::new();
    // Nothing this caller may see is loaded under that name.
    let plugins = std::sync::Arc::new(PluginSet::new(Vec::new(), 100, true, hub));
    let installs = super::Installs::new(
        settings,
        None,
        plugins,
        std::sync::Arc::default(),
        None,
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    let ctx = crate::server::RequestContext::detached();
    let arguments = serde_json::value::RawValue::from_string(
        r#"{"reference":"127.0.0.1:1/plugins/echo:1","name":"gated"}"#.to_owned(),
    )
    .unwrap();
    let output = installs
        .call(INSTALL_PLUGIN, &arguments, &ctx)
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(output.body.get()).unwrap();
    assert!(output.is_error, "{body}");
    assert_eq!(
        body["content"][0]["text"],
        "the name `gated` is taken by a plugin mcpbox installed that this caller may not see (only those they may see can be replaced here): install under another name; nothing was installed"
    );
}

/// A registry on loopback answering each request's target (`/v2/…`) with what `answer` gives
/// (a whole HTTP response; `None` never answers): its `host:port` and the targets asked.
async fn fake_registry(
    answer: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (answer, log) = (std::sync::Arc::new(answer), asked.clone());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (answer, log) = (answer.clone(), log.clone());
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let target = text.split(' ').nth(1).unwrap_or_default().to_owned();
                log.lock().unwrap().push(target.clone());
                if let Some(response) = answer(&target) {
                    let _ = stream.write_all(response.as_bytes()).await;
                }
                // Held open (an unanswered request is never answered).
                let _ = stream.read(&mut buffer).await;
            });
        }
    });
    (host, asked)
}

fn http_ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// The management tools over `sources` of the registry at `host` (plain HTTP), with nothing
/// loaded, and the result of searching `query`: its text.
async fn search_text(
    host: &str,
    sources: &[&str],
    tune: impl FnOnce(&mut super::Installs),
) -> String {
    use crate::catalog::{EventHub, PluginInstaller, PluginSet, SEARCH_PLUGINS};
    let dir = tempfile::tempdir().unwrap();
    let settings = ManageSettings {
        enabled: true,
        directory: dir.path().join("managed"),
        sources: sources.iter().map(|s| format!("{host}/{s}")).collect(),
        insecure_registries: vec![host.to_owned()],
        ..ManageSettings::default()
    };
    let (hub, _relists) = EventHub::new();
    let plugins = std::sync::Arc::new(PluginSet::new(Vec::new(), 100, true, hub));
    let mut installs = super::Installs::new(
        settings,
        None,
        plugins,
        std::sync::Arc::default(),
        None,
        std::time::Duration::from_secs(60),
    )
    .unwrap();
    tune(&mut installs);
    let ctx = crate::server::RequestContext::detached();
    let arguments =
        serde_json::value::RawValue::from_string(r#"{"query":"weather"}"#.to_owned()).unwrap();
    let output = installs
        .call(SEARCH_PLUGINS, &arguments, &ctx)
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(output.body.get()).unwrap();
    body["content"][0]["text"].as_str().unwrap().to_owned()
}

/// Issue #60: at the cap on artifacts a search reads, only the inner loop ended, so every
/// further repository's tags were still fetched.
#[tokio::test]
async fn a_search_reads_no_more_tag_lists_once_it_read_its_most_artifacts() {
    let (host, asked) = fake_registry(|target| {
        if target.contains("/tags/list") {
            let tags: Vec<String> = (0..50).map(|i| format!("\"{i}\"")).collect();
            Some(http_ok(&format!(
                "{{\"name\":\"x\",\"tags\":[{}]}}",
                tags.join(",")
            )))
        } else if target.contains("/manifests/") {
            Some(
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    .to_owned(),
            )
        } else {
            Some(http_ok("{}"))
        }
    })
    .await;
    let text = search_text(&host, &["p/a", "p/b", "p/c", "p/d"], |_| {}).await;
    let lists: Vec<String> = asked
        .lock()
        .unwrap()
        .iter()
        .filter(|t| t.contains("/tags/list"))
        .cloned()
        .collect();
    assert_eq!(
        lists,
        ["/v2/p/a/tags/list?n=50", "/v2/p/b/tags/list?n=50"],
        "{text}"
    );
    assert!(
        text.ends_with(
            "\n(A search reads at most 100 artifacts: the sources after them were not searched.)"
        ),
        "{text}"
    );
}

/// Issue #60: a search had no overall time limit: each registry read had its own, one after
/// the other, so a slow registry held the call for minutes.
#[tokio::test]
async fn a_search_stops_at_its_time_limit_and_says_so() {
    let (host, _) =
        fake_registry(|target| (!target.contains("/tags/list")).then(|| http_ok("{}"))).await;
    let search = search_text(&host, &["p/slow", "p/slower"], |installs| {
        installs.search_time = std::time::Duration::from_millis(500);
    });
    let text = tokio::time::timeout(std::time::Duration::from_secs(10), search)
        .await
        .expect("the search ends within its time limit, not the registry reads' 60 s each");
    assert_eq!(
        text,
        "Nothing matches.\n(The search stopped at its time limit of 0.5 s: sources not read by then were left out.)"
    );
}
