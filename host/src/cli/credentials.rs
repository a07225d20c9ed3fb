//! `mcpbox credentials`: the operator's view of linked accounts (per-user credentials) in the
//! state store: `ls` (who linked which provider; with the key, when, until when, and whether
//! it refreshes), `rm` (unlink one caller, or everyone, from one provider or all), and
//! `keygen` (a new credentials key). Names are readable without the key (only the values are
//! sealed); no command ever prints a token. Like `mcpbox state`, it may run beside serving
//! mcpbox processes (the embedded store admits several; Redis is shared anyway).

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;

use super::Outcome;
use super::state_args::StateArgs;
use crate::credentials::store::{all_links, remove_link};
use crate::credentials::{Cipher, CredentialStore, Key};
use crate::kv::StateService;

/// Arguments of `mcpbox credentials`.
#[derive(Debug, clap::Args)]
pub struct CredentialsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: CredentialsAction,

    /// Where the state is.
    #[command(flatten)]
    pub state: StateArgs,

    /// The credentials key (as `serve --credentials-key-file`): with it, `ls` shows when each
    /// link was made and expires.
    #[arg(long, env = "MCPBOX_CREDENTIALS_KEY_FILE", value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub credentials_key_file: Option<PathBuf>,

    /// The audit log (as `serve --audit-log`): `rm` appends a `credentials/unlink` record for
    /// each link it removes (client `mcpbox credentials rm`).
    #[arg(long, env = "MCPBOX_AUDIT_LOG", value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub audit_log: Option<PathBuf>,
}

/// `mcpbox credentials` actions.
#[derive(Debug, Subcommand)]
pub enum CredentialsAction {
    /// List linked accounts: principal, provider, and with the key when linked, when the
    /// token expires, and whether it can be refreshed.
    Ls {
        /// One caller's, by principal key (`oauth:ISSUER sub:SUBJECT`, `token:NAME`, `local`).
        #[arg(long, value_name = "KEY")]
        principal: Option<String>,
        /// One provider's.
        #[arg(long, value_name = "NAME")]
        provider: Option<String>,
    },
    /// Remove links (the caller must link again): one caller's (`--principal`) or everyone's
    /// (`--all`), for one provider (`--provider`) or all.
    Rm {
        /// The caller, by principal key.
        #[arg(
            long,
            value_name = "KEY",
            conflicts_with = "all",
            required_unless_present = "all"
        )]
        principal: Option<String>,
        /// Every caller's.
        #[arg(long)]
        all: bool,
        /// Only this provider's.
        #[arg(long, value_name = "NAME")]
        provider: Option<String>,
    },
    /// Print a new credentials key (32 random bytes, base64) for `--credentials-key-file`.
    Keygen,
}

/// Run `mcpbox credentials`.
pub(super) async fn credentials_command(args: CredentialsArgs) -> anyhow::Result<Outcome> {
    if matches!(args.action, CredentialsAction::Keygen) {
        let mut key = Key::generate()?;
        key.push('\n');
        return Ok(Outcome {
            output: Some(key),
            failed: false,
        });
    }
    let state = std::sync::Arc::new(StateService::new(args.state.config())?);
    let output = match args.action {
        CredentialsAction::Ls {
            principal,
            provider,
        } => {
            let links = chosen(&state, principal.as_deref(), provider.as_deref()).await?;
            let opened = match &args.credentials_key_file {
                Some(path) => {
                    let key = Key::read(path)?;
                    Some(CredentialStore::new(
                        std::sync::Arc::clone(&state),
                        std::sync::Arc::new(Cipher::new(&key, None)?),
                    ))
                }
                None => None,
            };
            let mut out = String::new();
            for (caller, provider) in &links {
                let detail = match &opened {
                    None => "(sealed: give --credentials-key-file for times)".to_owned(),
                    Some(store) => match store.get_link(caller, provider).await {
                        Ok(Some((_, record))) => format!(
                            "linked {}\texpires {}\t{}",
                            time(record.linked_at_ms),
                            record
                                .expires_at_ms
                                .map_or_else(|| "never".to_owned(), time),
                            if record.refresh_token.is_some() {
                                "refreshable"
                            } else {
                                "not refreshable"
                            }
                        ),
                        Ok(None) => "(gone)".to_owned(),
                        Err(e) => format!("(does not open: {e})"),
                    },
                };
                out.push_str(&format!("{caller}\t{provider}\t{detail}\n"));
            }
            out.push_str(&format!(
                "{} linked accounts in {}",
                links.len(),
                state.config()
            ));
            out
        }
        CredentialsAction::Rm {
            principal,
            all,
            provider,
        } => {
            let principal = if all { None } else { principal };
            let links = chosen(&state, principal.as_deref(), provider.as_deref()).await?;
            let mut removed = 0;
            for (caller, provider) in &links {
                if remove_link(&state, caller, provider).await? {
                    tracing::info!(caller, provider, by = "operator", "credentials/unlink");
                    if let Some(path) = &args.audit_log {
                        audit_unlink(path, caller, provider)?;
                    }
                    removed += 1;
                }
            }
            format!("removed {removed} linked accounts from {}", state.config())
        }
        CredentialsAction::Keygen => String::new(),
    };
    Ok(Outcome {
        output: Some(output),
        failed: false,
    })
}

/// Append the operator's removal of `caller`'s link to `provider` to the audit log at `path`
/// (created owner-only, as `serve` creates it): the record `serve` writes for an unlink, with
/// `mcpbox credentials rm` as the client.
fn audit_unlink(path: &std::path::Path, caller: &str, provider: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let line = crate::server::AuditRecord {
        time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        principal: caller.to_owned(),
        client: Some("mcpbox credentials rm".to_owned()),
        method: "credentials/unlink".to_owned(),
        plugin: None,
        item: Some(provider.to_owned()),
        outcome: "ok",
        code: None,
        duration_ms: 0.0,
        fuel: None,
        request_id: serde_json::Value::Null,
        trace_id: None,
        cut: std::collections::BTreeMap::new(),
    }
    .into_line();
    options
        .open(path)
        .and_then(|mut file| file.write_all(line.as_bytes()))
        .with_context(|| format!("cannot append to the audit log {}", path.display()))
}

/// The links matching `principal` and `provider` (either absent: any).
async fn chosen(
    state: &StateService,
    principal: Option<&str>,
    provider: Option<&str>,
) -> anyhow::Result<Vec<(String, String)>> {
    Ok(all_links(state)
        .await?
        .into_iter()
        .filter(|(c, p)| principal.is_none_or(|w| w == c) && provider.is_none_or(|w| w == p))
        .collect())
}

/// A time in milliseconds since the epoch, as RFC 3339 (UTC).
fn time(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(
            || ms.to_string(),
            |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::LinkRecord;

    #[tokio::test]
    async fn ls_names_links_without_values_and_rm_removes_them() {
        let dir = tempfile::tempdir().expect("dir");
        let state_dir = dir.path().join("state");
        let key_file = dir.path().join("key");
        let audit = dir.path().join("audit.jsonl");
        let key = Key::generate().expect("key");
        std::fs::write(&key_file, &key).expect("write");
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600))
                .expect("chmod");
        }
        {
            let state = std::sync::Arc::new(
                StateService::new(crate::kv::StateConfig::Disk(state_dir.clone())).expect("state"),
            );
            let store = CredentialStore::new(
                state,
                std::sync::Arc::new(
                    Cipher::new(&Key::parse(&key).expect("key"), None).expect("cipher"),
                ),
            );
            for (caller, provider) in [
                ("token:alice", "github"),
                ("token:bob", "github"),
                ("token:alice", "gitlab"),
            ] {
                let record = LinkRecord {
                    access_token: format!("secret-{caller}-{provider}"),
                    refresh_token: None,
                    token_type: None,
                    scopes: Vec::new(),
                    expires_at_ms: None,
                    linked_at_ms: 1_700_000_000_000,
                    refreshed_at_ms: None,
                    plugin: None,
                };
                store
                    .put_link(caller, provider, &record)
                    .await
                    .expect("put");
            }
        }
        let args = |action, key: bool| CredentialsArgs {
            action,
            state: StateArgs {
                state_dir: Some(state_dir.clone()),
                state: None,
            },
            credentials_key_file: key.then(|| key_file.clone()),
            audit_log: Some(audit.clone()),
        };
        let run = |args| async move {
            credentials_command(args)
                .await
                .expect("runs")
                .output
                .unwrap_or_default()
        };
        let sealed = run(args(
            CredentialsAction::Ls {
                principal: None,
                provider: None,
            },
            false,
        ))
        .await;
        assert!(
            sealed.starts_with("token:alice\tgithub\t(sealed"),
            "{sealed}"
        );
        assert!(sealed.contains("3 linked accounts"), "{sealed}");
        assert!(!sealed.contains("secret-"), "{sealed}");
        let opened = run(args(
            CredentialsAction::Ls {
                principal: Some("token:alice".into()),
                provider: Some("github".into()),
            },
            true,
        ))
        .await;
        assert_eq!(
            opened.lines().next(),
            Some(
                "token:alice\tgithub\tlinked 2023-11-14T22:13:20Z\texpires never\tnot refreshable"
            )
        );
        assert!(!opened.contains("secret-"), "{opened}");
        let removed = run(args(
            CredentialsAction::Rm {
                principal: None,
                all: true,
                provider: Some("github".into()),
            },
            false,
        ))
        .await;
        assert!(
            removed.starts_with("removed 2 linked accounts"),
            "{removed}"
        );
        let records: Vec<serde_json::Value> = std::fs::read_to_string(&audit)
            .expect("the audit log")
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        let unlinked: Vec<(&str, &str, &str)> = records
            .iter()
            .map(|r| {
                (
                    r["method"].as_str().unwrap_or_default(),
                    r["principal"].as_str().unwrap_or_default(),
                    r["item"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            unlinked,
            [
                ("credentials/unlink", "token:alice", "github"),
                ("credentials/unlink", "token:bob", "github"),
            ]
        );
        assert_eq!(records[0]["client"], "mcpbox credentials rm");
        assert!(
            !std::fs::read_to_string(&audit)
                .expect("read")
                .contains("secret-")
        );
        let left = run(args(
            CredentialsAction::Ls {
                principal: None,
                provider: None,
            },
            false,
        ))
        .await;
        assert!(left.starts_with("token:alice\tgitlab\t"), "{left}");
        assert!(left.contains("1 linked accounts"), "{left}");
        let key = run(args(CredentialsAction::Keygen, false)).await;
        assert!(Key::parse(&key).is_ok(), "{key}");
    }

    fn private(path: &std::path::Path, text: &str) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::write(path, text).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }

    const PROVIDER: &str = "[providers.github]\ndisplay-name = \"GitHub\"\n\
        authorization-endpoint = \"https://github.com/login/oauth/authorize\"\n\
        token-endpoint = \"https://github.com/login/oauth/access_token\"\n\
        client-id = \"Iv1.0123\"\nclient-secret = { secret = \"github-client-secret\" }\n";

    async fn check(dir: &std::path::Path, text: &str) -> Outcome {
        let config = dir.join("mcpbox.toml");
        std::fs::write(&config, text).expect("write");
        super::super::commands::check(&super::super::CheckArgs { config })
            .await
            .expect("runs")
    }

    #[tokio::test]
    async fn check_reports_bad_providers_missing_secrets_and_a_missing_key() {
        let dir = tempfile::tempdir().expect("dir");
        let bare = check(dir.path(), PROVIDER).await;
        let report = bare.output.unwrap_or_default();
        assert!(bare.failed, "{report}");
        assert!(report.contains("\nproviders: github (GitHub)"), "{report}");
        assert!(
            report.contains(
                "\nerror: provider `github`: its client secret `github-client-secret` is not in the secrets file"
            ),
            "{report}"
        );
        assert!(
            report.contains("\nerror: providers are configured but no credentials key seals their tokens: give --credentials-key-file PATH"),
            "{report}"
        );
        // The secret and the key in the secrets file: nothing to report.
        let secrets = dir.path().join("secrets.toml");
        private(
            &secrets,
            &format!(
                "github-client-secret = \"s\"\ncredentials-key = \"{}\"\n",
                Key::generate().expect("key")
            ),
        );
        let good = check(
            dir.path(),
            &format!("secrets = \"secrets.toml\"\n{PROVIDER}"),
        )
        .await;
        assert!(!good.failed, "{:?}", good.output);
        // A key file others may read.
        let key = dir.path().join("key");
        private(&key, &Key::generate().expect("key"));
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        let open = check(
            dir.path(),
            &format!("secrets = \"secrets.toml\"\ncredentials-key-file = \"key\"\n{PROVIDER}"),
        )
        .await;
        let report = open.output.unwrap_or_default();
        assert!(open.failed && report.contains("chmod 600"), "{report}");
        // A bad provider: the file is invalid, naming the provider and the key.
        let bad = check(dir.path(), &format!("{PROVIDER}lifetime = 3\n")).await;
        let report = bad.output.unwrap_or_default();
        assert!(bad.failed, "{report}");
        assert!(
            report.starts_with("invalid: ")
                && report.contains("`providers.github`: unknown key `lifetime`"),
            "{report}"
        );
    }

    #[test]
    fn serve_refuses_providers_without_a_key_naming_the_flag() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir(dir.path().join("plugins")).expect("dir");
        let config = dir.path().join("mcpbox.toml");
        std::fs::write(&config, format!("plugins = \"plugins\"\n{PROVIDER}")).expect("write");
        let cli = super::super::Cli::load(vec![
            "mcpbox".into(),
            "serve".into(),
            "--config".into(),
            config.into_os_string(),
        ])
        .expect("loads");
        let super::super::Command::Serve(serve) = cli.command else {
            panic!("not serve");
        };
        let error = serve
            .settings()
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        assert!(
            error.contains("its client secret `github-client-secret` is not in the secrets file"),
            "{error}"
        );
        let secrets = dir.path().join("secrets.toml");
        private(&secrets, "github-client-secret = \"s\"\n");
        let mut serve = serve;
        serve.secrets = Some(secrets);
        let error = serve
            .settings()
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        assert!(
            error.contains("give --credentials-key-file PATH"),
            "{error}"
        );
    }
}
