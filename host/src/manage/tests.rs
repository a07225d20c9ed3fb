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
