//! The fetch server (`plugins/fetch`) under the "public internet" grant: loopback by address
//! and by name refused, before anything reaches the server; a redirect from a granted
//! address to an internal one refused on the hop; internal addresses reachable only when the
//! manifest names them. (Its sameness with the original is `services::reference`.)

use serde_json::{Value, json};

use crate::support::{Client, connect, plugin_dir, tool_text, web};

/// The refusal of a fetch of `page` whose robots.txt, `robots` on `host`, the grants refuse:
/// it names the page asked for, then the request refused (issue #55, 15).
fn refused_robots(page: &str, host: &str, robots: &str) -> String {
    format!(
        "Error executing tool fetch: Refused to fetch {page}: {host} is not a public address, and the operator has not granted it to this plugin (a manifest's [http] allow names internal addresses that may be fetched). The request refused was {robots}, made to read the page's robots.txt."
    )
}

async fn fetch(client: &Client, arguments: Value) -> (String, bool) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let result = client
        .call_tool(rmcp::model::CallToolRequestParams::new("fetch").with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("fetch: {e}\n{}", client.stderr.text()));
    tool_text(&result)
}

fn text(path: &str, status: u16, body: &str) -> crate::support::Route {
    (
        path.to_owned(),
        status,
        vec![("content-type".to_owned(), "text/plain".to_owned())],
        body.as_bytes().to_vec(),
    )
}

fn redirect(path: &str, to: &str) -> crate::support::Route {
    (
        path.to_owned(),
        302,
        vec![("location".to_owned(), to.to_owned())],
        Vec::new(),
    )
}

#[tokio::test]
async fn the_public_internet_grant_refuses_internal_addresses_and_redirects_to_them() {
    let other = web(vec![text("/page.txt", 200, "other")]).await;
    let site = web(vec![
        text("/robots.txt", 200, "User-agent: *\nAllow: /\n"),
        text("/page.txt", 200, "hello from the site"),
        redirect("/in", "/page.txt"),
        redirect("/out", &format!("http://127.0.0.1:{}/page.txt", other.port)),
        redirect("/by-name", "http://localhost/page.txt"),
        redirect("/metadata", "http://169.254.169.254/latest/meta-data/"),
    ])
    .await;
    let base = format!("http://127.0.0.1:{}", site.port);

    // The public internet alone: the site (on loopback) is not on it.
    let dir = plugin_dir(&[("fetch", "fetch.wasm")]);
    std::fs::write(dir.path().join("fetch.toml"), "[http]\npublic = true\n").unwrap();
    let client = connect(dir.path(), &[]).await;
    for (url, host, robots) in [
        (
            format!("{base}/page.txt"),
            "127.0.0.1",
            format!("{base}/robots.txt"),
        ),
        (
            format!("http://localhost:{}/page.txt", site.port),
            "localhost",
            format!("http://localhost:{}/robots.txt", site.port),
        ),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "169.254.169.254",
            "http://169.254.169.254/robots.txt".to_owned(),
        ),
        (
            "http://[::1]/".to_owned(),
            "[::1]",
            "http://[::1]/robots.txt".to_owned(),
        ),
    ] {
        assert_eq!(
            fetch(&client, json!({"url": url})).await,
            (refused_robots(&url, host, &robots), true),
        );
    }
    assert!(
        site.hits.lock().unwrap().is_empty(),
        "nothing reached the site"
    );
    let log = client.stderr.wait_for("not a public address").await;
    assert!(log.contains("denied HTTP request"), "{log}");
    client.service.cancel().await.unwrap();

    // The site named explicitly beside the public internet: it answers; its redirects to
    // internal addresses that are not named are refused on the hop.
    std::fs::write(
        dir.path().join("fetch.toml"),
        format!(
            "[http]\npublic = true\nallow = [\"127.0.0.1:{}\"]\n",
            site.port
        ),
    )
    .unwrap();
    let client = connect(dir.path(), &[]).await;
    assert_eq!(
        fetch(&client, json!({"url": format!("{base}/page.txt")})).await,
        (
            format!(
                "Content type text/plain cannot be simplified to markdown, but here is the raw content:\nContents of {base}/page.txt:\nhello from the site"
            ),
            false
        )
    );
    let (answer, failed) = fetch(&client, json!({"url": format!("{base}/in")})).await;
    assert!(
        !failed && answer.ends_with("hello from the site"),
        "{answer}"
    );
    // Each names the hop (as the original does), whose robots.txt is read first.
    for (path, hop, host, robots) in [
        (
            "/out",
            format!("http://127.0.0.1:{}/page.txt", other.port),
            "127.0.0.1",
            format!("http://127.0.0.1:{}/robots.txt", other.port),
        ),
        (
            "/by-name",
            "http://localhost/page.txt".to_owned(),
            "localhost",
            "http://localhost/robots.txt".to_owned(),
        ),
        (
            "/metadata",
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "169.254.169.254",
            "http://169.254.169.254/robots.txt".to_owned(),
        ),
    ] {
        assert_eq!(
            fetch(&client, json!({"url": format!("{base}{path}")})).await,
            (refused_robots(&hop, host, &robots), true),
            "{path}"
        );
    }
    assert!(
        other.hits.lock().unwrap().is_empty(),
        "the redirect went nowhere"
    );
    client.service.cancel().await.unwrap();

    // robots.txt ignored: the request refused is the page's own, named once.
    std::fs::write(
        dir.path().join("fetch.toml"),
        "[http]\npublic = true\n[config]\nignore-robots-txt = \"true\"\n",
    )
    .unwrap();
    let client = connect(dir.path(), &[]).await;
    assert_eq!(
        fetch(&client, json!({"url": format!("{base}/page.txt")})).await,
        (
            format!(
                "Error executing tool fetch: Refused to fetch {base}/page.txt: 127.0.0.1 is not a public address, and the operator has not granted it to this plugin (a manifest's [http] allow names internal addresses that may be fetched)."
            ),
            true
        )
    );
    client.service.cancel().await.unwrap();
}

#[tokio::test]
async fn fetch_pages_honours_robots_and_bounds_what_it_reads() {
    let big = "x".repeat(17 << 20);
    let site = web(vec![
        text(
            "/robots.txt",
            200,
            "User-agent: ModelContextProtocol\nDisallow: /private\n",
        ),
        text("/private/page", 200, "secret"),
        text("/public", 200, &"0123456789".repeat(3)),
        text("/big", 200, &big),
    ])
    .await;
    let base = format!("http://127.0.0.1:{}", site.port);
    let dir = plugin_dir(&[("fetch", "fetch.wasm")]);
    let grant = format!("[http]\nallow = [\"127.0.0.1:{}\"]\n", site.port);
    std::fs::write(dir.path().join("fetch.toml"), &grant).unwrap();
    let client = connect(dir.path(), &[]).await;
    let (answer, failed) = fetch(&client, json!({"url": format!("{base}/private/page")})).await;
    assert!(
        failed && answer.starts_with(&format!("Error executing tool fetch: The sites robots.txt ({base}/robots.txt), specifies that autonomous fetching of this page is not allowed")),
        "{answer}"
    );
    assert!(
        !site
            .hits
            .lock()
            .unwrap()
            .iter()
            .any(|p| p == "/private/page")
    );
    // Paging by characters.
    let (answer, failed) = fetch(
        &client,
        json!({"url": format!("{base}/public"), "start_index": 5, "max_length": 10}),
    )
    .await;
    assert!(!failed, "{answer}");
    assert!(
        answer.ends_with(":\n5678901234\n\n<error>Content truncated. Call the fetch tool with a start_index of 15 to get more content.</error>"),
        "{answer}"
    );
    // A body over the plugin's bound is refused, not held.
    let (answer, failed) = fetch(&client, json!({"url": format!("{base}/big")})).await;
    assert!(failed && answer.contains("larger than"), "{answer}");
    client.service.cancel().await.unwrap();

    // With robots.txt ignored (the original's --ignore-robots-txt), the page is fetched.
    std::fs::write(
        dir.path().join("fetch.toml"),
        format!("{grant}[config]\nignore-robots-txt = \"true\"\n"),
    )
    .unwrap();
    let client = connect(dir.path(), &[]).await;
    let (answer, failed) = fetch(&client, json!({"url": format!("{base}/private/page")})).await;
    assert!(!failed && answer.ends_with("secret"), "{answer}");
    client.service.cancel().await.unwrap();
}

/// A plugin whose `[http.credentials]` calls a host as the caller needs the operator's
/// providers: with none configured it does not load (issue #56), and the rest serves; a grant
/// of a host outside `http.allow` is refused with its key.
#[tokio::test]
async fn a_plugin_calling_a_host_as_the_caller_does_not_load_without_providers() {
    let dir = plugin_dir(&[("fetch", "fetch.wasm"), ("echo_tools", "echo_tools.wasm")]);
    std::fs::write(
        dir.path().join("fetch.toml"),
        "[http]\nallow = [\"127.0.0.1:9\"]\n[http.credentials]\n\"127.0.0.1:9\" = \"github\"\n",
    )
    .unwrap();
    let client = connect(dir.path(), &[]).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 4, "echo_tools serves: {tools:?}");
    let log = client.stderr.wait_for("skipped plugin").await;
    let line = log.lines().find(|l| l.contains("skipped plugin")).unwrap();
    assert!(
        line.contains("fetch.wasm")
            && line.contains("provider `github`, but no providers are configured"),
        "{line}"
    );
    client.service.cancel().await.unwrap();

    std::fs::write(
        dir.path().join("fetch.toml"),
        "[http]\nallow = [\"127.0.0.1:9\"]\n[http.credentials]\n\"127.0.0.1:8\" = \"github\"\n",
    )
    .unwrap();
    let client = connect(dir.path(), &[]).await;
    let log = client.stderr.wait_for("skipped plugin").await;
    let line = log.lines().find(|l| l.contains("skipped plugin")).unwrap();
    assert!(
        line.contains(r#"http.credentials."127.0.0.1:8""#)
            && line.contains("grant it in `http.allow` first"),
        "{line}"
    );
}
