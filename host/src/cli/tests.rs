//! The command line's validation, before anything runs: values clap refuses through mcpbox's
//! own parsers, and what `serve`'s settings refuse before a plugin is loaded (#61).

#![allow(clippy::unwrap_used, reason = "test code")]

use super::*;

/// `mcpbox ARGS…` as the command line reads it.
fn load(args: &[&str]) -> Result<Cli, ArgsError> {
    let mut all = vec![OsString::from("mcpbox")];
    all.extend(args.iter().map(OsString::from));
    Cli::load(all)
}

/// The message of a command line `load` refuses.
fn refused(args: &[&str]) -> String {
    match load(args) {
        Ok(cli) => panic!("{args:?} was accepted: {cli:?}"),
        Err(e) => e.to_string(),
    }
}

fn serve_args(args: &[&str]) -> ServeArgs {
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    match load(&all).unwrap().command {
        Command::Serve(serve) => *serve,
        other => panic!("not serve: {other:?}"),
    }
}

/// The message `serve`'s settings refuse `args` with.
fn settings_refused(args: &[&str]) -> String {
    match serve_args(args).settings() {
        Ok(_) => panic!("{args:?} was accepted"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn origins_are_scheme_host_and_port_only() {
    assert_eq!(
        args::parse_origin("https://App.Example.com/").unwrap(),
        "https://app.example.com"
    );
    assert_eq!(
        args::parse_origin("http://localhost:5173").unwrap(),
        "http://localhost:5173"
    );
    // A scheme is case-insensitive (RFC 3986, 3.1): a browser sends it in lower case.
    assert_eq!(
        args::parse_origin("HTTPS://App.Example.com").unwrap(),
        "https://app.example.com"
    );
    for bad in [
        "null",
        "app.example.com",
        "ftp://app.example.com",
        "https://",
        "https://app.example.com/path",
        "https://app.example.com?q",
        "https://app example.com",
    ] {
        let error = args::parse_origin(bad).unwrap_err();
        assert_eq!(
            error,
            format!(
                "`{bad}` is not an origin: expected scheme://host[:port], such as https://app.example.com"
            )
        );
    }
    let message = refused(&["serve", "--allowed-origin", "null"]);
    assert!(message.contains("`null` is not an origin"), "{message}");
}

#[test]
fn a_public_url_is_https_or_loopback_http_without_a_query() {
    assert_eq!(
        args::parse_public_url("https://mcp.example.com/").unwrap(),
        "https://mcp.example.com"
    );
    for loopback in [
        "http://localhost:8080",
        "http://127.0.0.1:1",
        "http://[::1]:9",
    ] {
        assert_eq!(args::parse_public_url(loopback).unwrap(), loopback);
    }
    assert!(
        args::parse_public_url("http://mcp.example.com")
            .unwrap_err()
            .starts_with(
                "`http://mcp.example.com` must be https:// (http:// only on a loopback host)"
            )
    );
    assert_eq!(
        args::parse_public_url("https://mcp.example.com/?a=1").unwrap_err(),
        "`https://mcp.example.com/?a=1` must have no query or fragment"
    );
    assert!(
        args::parse_public_url("not a url")
            .unwrap_err()
            .starts_with("`not a url` is not a URL: ")
    );
    let message = refused(&["serve", "--public-url", "http://mcp.example.com"]);
    assert!(message.contains("must be https://"), "{message}");
}

#[test]
fn a_call_id_header_is_an_http_header_name() {
    assert_eq!(
        args::parse_header_name("X-Request-Id").unwrap(),
        "x-request-id"
    );
    assert_eq!(
        args::parse_header_name("bad header").unwrap_err(),
        "`bad header` is not an HTTP header name"
    );
    let message = refused(&["serve", "--call-id-header", "a:b"]);
    assert!(
        message.contains("`a:b` is not an HTTP header name"),
        "{message}"
    );
}

#[test]
fn numbers_out_of_their_range_are_refused_naming_the_flag() {
    for (flag, value) in [
        ("--page-size", "0"),
        ("--max-input-rounds", "0"),
        ("--task-ttl-ms", "999"),
        ("--max-tasks-per-caller", "0"),
        ("--task-timeout-ms", "0"),
        ("--page-size", "many"),
    ] {
        let message = refused(&["serve", flag, value]);
        assert!(
            message.contains(&format!("invalid value '{value}' for '{flag}")),
            "{flag} {value}: {message}"
        );
    }
}

#[test]
fn unknown_flags_commands_and_log_formats_are_refused() {
    assert!(refused(&["serve", "--no-such-flag"]).contains("unexpected argument '--no-such-flag'"));
    assert!(refused(&["sereve"]).contains("unrecognized subcommand 'sereve'"));
    assert!(refused(&["--log-format", "xml", "serve"]).contains("invalid value 'xml'"));
    assert!(refused(&[]).contains("Usage: mcpbox"));
}

#[test]
fn serve_needs_a_plugin_directory() {
    assert!(
        settings_refused(&[]).starts_with("no plugin directory: give --plugins DIR"),
        "{}",
        settings_refused(&[])
    );
    let missing = settings_refused(&["--plugins", "/no/such/mcpbox/plugins"]);
    assert!(
        missing.starts_with("cannot read the plugin directory /no/such/mcpbox/plugins"),
        "{missing}"
    );
}

#[test]
fn empty_secrets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().to_str().unwrap();
    assert_eq!(
        settings_refused(&["--plugins", plugins, "--state-key", ""]),
        "--state-key (MCPBOX_STATE_KEY) must not be empty"
    );
    assert_eq!(
        settings_refused(&[
            "--plugins",
            plugins,
            "--http",
            "127.0.0.1:0",
            "--auth-token",
            ""
        ]),
        "--auth-token (MCPBOX_AUTH_TOKEN) must not be empty"
    );
}

#[test]
fn a_call_id_header_needs_http_and_redis() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().to_str().unwrap();
    let state = dir.path().join("state");
    let state = state.to_str().unwrap();
    assert_eq!(
        settings_refused(&["--plugins", plugins, "--call-id-header", "X-Request-Id"]),
        "--call-id-header x-request-id (MCPBOX_CALL_ID_HEADER) needs --http: it names a header a balancer sets on HTTP requests"
    );
    let message = settings_refused(&[
        "--plugins",
        plugins,
        "--http",
        "127.0.0.1:0",
        "--state-dir",
        state,
        "--call-id-header",
        "X-Request-Id",
    ]);
    assert!(
        message.starts_with(
            "--call-id-header x-request-id (MCPBOX_CALL_ID_HEADER) needs a shared state store: give --state redis://…"
        ),
        "{message}"
    );
}
