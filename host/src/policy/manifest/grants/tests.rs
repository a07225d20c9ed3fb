//! Tests of the grants of a manifest: each table parsed, validated and refused.

use super::super::test_support::{error, write};
use super::*;
use crate::policy::Limits;
use crate::policy::manifest::load_manifest;

#[test]
fn keyvalue_grants_buckets_and_quotas() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[keyvalue]\nbuckets = [\"default\", \"cache\"]\nmax-keys = 5\n";
    let policy = load_manifest(&write(dir.path(), text), Limits::default()).unwrap();
    let grant = policy.keyvalue.unwrap();
    assert_eq!(grant.buckets, ["default", "cache"]);
    assert_eq!(grant.max_keys, 5);
    assert_eq!(grant.max_bytes, KvGrant::DEFAULT_MAX_BYTES);
    let e = error("[keyvalue]\nbuckets = []\n");
    assert!(
        e.contains("keyvalue.buckets") && e.contains("at least one"),
        "{e}"
    );
    let e = error("[keyvalue]\nbuckets = [\"a\", \"a\"]\n");
    assert!(
        e.contains("keyvalue.buckets[1]") && e.contains("twice"),
        "{e}"
    );
    let e = error("[keyvalue]\nbuckets = [\"\"]\n");
    assert!(e.contains("keyvalue.buckets[0]"), "{e}");
    let e = error("[keyvalue]\nbuckets = [\"a\"]\nquota-kib = 0\n");
    assert!(
        e.contains("keyvalue.quota-kib: must be greater than 0"),
        "{e}"
    );
    let e = error("[keyvalue]\nbuckets = [\"a\"]\nmax-value-kb = 1\n");
    assert!(e.contains("unknown field `max-value-kb`"), "{e}");
    assert!(error("[keyvalue]\nquota-kib = 1\n").contains("grant at least one bucket"));
    let text = "[keyvalue]\ncaller-buckets = [\"t\"]\ncaller-scope = \"session\"\n";
    let policy = load_manifest(&write(dir.path(), text), Limits::default()).unwrap();
    assert!(policy.keyvalue.unwrap().per_session);
    let text = "[keyvalue]\ncaller-buckets = [\"t\"]\ncaller-scope = \"caller\"\n";
    let policy = load_manifest(&write(dir.path(), text), Limits::default()).unwrap();
    assert!(!policy.keyvalue.unwrap().per_session);
    let e = error("[keyvalue]\ncaller-buckets = [\"t\"]\ncaller-scope = \"process\"\n");
    assert!(
        e.contains("keyvalue.caller-scope") && e.contains("\"session\""),
        "{e}"
    );
    let e = error("[keyvalue]\nbuckets = [\"t\"]\ncaller-scope = \"session\"\n");
    assert!(e.contains("none are granted"), "{e}");
    let e = error("[keyvalue]\nbuckets = [\"a\"]\ncaller-buckets = [\"a\"]\n");
    assert!(
        e.contains("keyvalue.caller-buckets[0]") && e.contains("twice"),
        "{e}"
    );
    let e = error("[config]\nkey = { secret = \"bad name\" }\n");
    assert!(
        e.contains("config.key") && e.contains("not a valid name"),
        "{e}"
    );
    let e = error("[config]\nkey = { vault = \"x\" }\n");
    assert!(e.contains("unexpected key `vault`"), "{e}");
    let e = error("[config]\nkey = { env = \"MCPBOX_TEST_SURELY_UNSET\" }\n");
    assert!(
        e.contains("is not set") && e.contains("optional = true"),
        "{e}"
    );
    assert!(error("title = \"\"\n").contains("title: a title is 1 to 128 bytes"));
}

#[test]
fn credential_grants_name_allowed_hosts_and_providers() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[http]\nallow = [\"api.github.com\", \"127.0.0.1:8080\"]\n\
                    [http.credentials]\n\"API.github.com\" = \"github\"\n\"127.0.0.1:8080\" = \"corp-1_x\"\n";
    let policy = load_manifest(&write(dir.path(), text), Limits::default()).unwrap();
    assert_eq!(
        policy.credentials,
        [
            CredentialGrant {
                host: parse_http_grant("127.0.0.1:8080").unwrap(),
                provider: "corp-1_x".to_owned(),
            },
            CredentialGrant {
                host: parse_http_grant("api.github.com").unwrap(),
                provider: "github".to_owned(),
            },
        ]
    );
    assert_eq!(
        crate::policy::GrantSummary(&policy).to_string(),
        "http api.github.com (ports 80/443) as the caller (github); \
             http 127.0.0.1:8080 as the caller (corp-1_x)"
    );
    // Not in `allow` (another port, or only the public internet).
    let e = error(
        "[http]\nallow = [\"api.github.com\"]\n[http.credentials]\n\"api.github.com:8443\" = \"github\"\n",
    );
    assert!(
        e.contains(r#"http.credentials."api.github.com:8443""#)
            && e.contains("grant it in `http.allow` first"),
        "{e}"
    );
    let e = error("[http]\npublic = true\n[http.credentials]\n\"api.github.com\" = \"github\"\n");
    assert!(e.contains("grant it in `http.allow` first"), "{e}");
    // A bad provider name, a bad host, a host named twice (by case).
    for (name, expected) in [
        ("GitHub", "not a provider name"),
        ("", "not a provider name"),
        ("1github", "not a provider name"),
        (&"a".repeat(65), "not a provider name"),
    ] {
        let e = error(&format!(
            "[http]\nallow = [\"api.github.com\"]\n[http.credentials]\n\"api.github.com\" = \"{name}\"\n"
        ));
        assert!(e.contains(expected), "{name}: {e}");
    }
    assert!(check_provider_name(&"a".repeat(64)).is_ok());
    let e = error(
        "[http]\nallow = [\"api.github.com\"]\n[http.credentials]\n\"https://api.github.com\" = \"github\"\n",
    );
    assert!(e.contains("expected `host` or `host:port`"), "{e}");
    let e = error(
        "[http]\nallow = [\"api.github.com\"]\n[http.credentials]\n\"api.github.com\" = \"github\"\n\"API.GITHUB.COM\" = \"other\"\n",
    );
    assert!(e.contains("named twice"), "{e}");
    let e = error("[http]\nallow = [\"a.com\"]\n[http.credentials]\n\"a.com\" = 5\n");
    assert!(e.contains("http.credentials"), "{e}");
}

/// The command line narrows what a manifest grants, never widens it; a manifest's
/// directory that does not exist here (a template's) is a placeholder it stands in for.
#[test]
fn command_line_dirs_lie_within_the_manifests_and_replace_them() {
    use crate::policy::manifest::parse_manifest_granting;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for sub in ["ro/inner", "rw/inner", "elsewhere"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    let manifest = write(
        &root,
        "[[dirs]]\nhost = \"ro\"\nguest = \"/notes\"\n\
             [[dirs]]\nhost = \"rw\"\nmode = \"read-write\"\n\
             [[dirs]]\nhost = \"/surely/not/here\"\nmode = \"read-write\"\n",
    );
    let text = std::fs::read_to_string(&manifest).unwrap();
    let granting = |grants: &[&str]| {
        let grants: Vec<CommandLineGrant> = grants
            .iter()
            .map(|g| g.replace("ROOT", root.to_str().unwrap()).parse().unwrap())
            .collect();
        parse_manifest_granting(&manifest, &text, Limits::default(), &grants)
    };
    // Inside a bound: seen below its guest path, in its mode unless narrowed.
    let policy = granting(&[
        "p:dir=ROOT/ro/inner",
        "p:dir=ROOT/rw/inner:ro",
        "p:dir=ROOT/rw",
    ])
    .unwrap();
    let dirs: Vec<(PathBuf, &str, bool)> = policy
        .dirs
        .iter()
        .map(|d| (d.host.clone(), d.guest.as_str(), d.writable))
        .collect();
    let rw = root.join("rw");
    assert_eq!(
        dirs,
        [
            (root.join("ro/inner"), "/notes/inner", false),
            (
                root.join("rw/inner"),
                rw.join("inner").to_str().unwrap(),
                false
            ),
            (rw.clone(), rw.to_str().unwrap(), true),
        ]
    );
    // Wider is refused, naming the flag: another place, or read-write in read-only.
    let e = granting(&["p:dir=ROOT/elsewhere"]).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "--grant p:dir={0}/elsewhere: {0}/elsewhere is outside the directories the \
                 plugin's manifest grants ({0}/ro, {0}/rw): the command line may only narrow them",
            root.display()
        )
    );
    let e = granting(&["p:dir=ROOT/ro/inner:rw"])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "--grant p:dir={0}/ro/inner:rw: read-write is wider than the manifest allows: \
                 it grants {0}/ro read-only",
            root.display()
        )
    );
    let e = granting(&["p:dir=ROOT/missing"]).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "--grant p:dir={}/missing: cannot use directory",
            root.display()
        )),
        "{e}"
    );
    // The template: no directory of the manifest exists, so the command line's stand alone.
    let template = write(
        &root,
        "[[dirs]]\nhost = \"/home/me/notes-surely-absent\"\nmode = \"read-only\"\n",
    );
    let text = std::fs::read_to_string(&template).unwrap();
    let grant: CommandLineGrant = format!("p:dir={}", root.join("elsewhere").display())
        .parse()
        .unwrap();
    let policy = parse_manifest_granting(&template, &text, Limits::default(), &[grant]).unwrap();
    assert_eq!(policy.dirs.len(), 1);
    assert_eq!(policy.dirs[0].host, root.join("elsewhere"));
    assert!(policy.dirs[0].writable, "read-write unless :ro");
    // Without a command-line grant, the template's missing directory is still an error.
    let e = load_manifest(&template, Limits::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dirs[0].host: cannot use directory")
            && e.contains("grant one with --grant PLUGIN:dir=PATH"),
        "{e}"
    );
    // No manifest at all: an empty one, with the grant.
    let grant: CommandLineGrant = format!("p:dir={}:ro", root.join("elsewhere").display())
        .parse()
        .unwrap();
    let policy =
        parse_manifest_granting(&root.join("p.toml"), "", Limits::default(), &[grant]).unwrap();
    assert!(!policy.dirs[0].writable);
    // The same directory twice.
    let e = granting(&["p:dir=ROOT/rw", "p:dir=ROOT/rw/:ro"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("is mapped twice"), "{e}");
}

#[test]
fn grants_match_host_and_port() {
    let grant = parse_http_grant("api.example.com").unwrap();
    assert!(grant.allows("api.example.com", 443, 443));
    assert!(!grant.allows("api.example.com", 8443, 443));
    assert!(!grant.allows("evil.com", 443, 443));
    assert!(!grant.is_address_literal());
    assert!(
        parse_http_grant("127.0.0.1:80")
            .unwrap()
            .is_address_literal()
    );
}
