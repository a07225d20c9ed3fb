//! Where clients and registries look for mcpbox: the server card where the discovery draft
//! puts it (`/mcp/server-card`, `application/mcp-server-card+json`, with an `ETag`), the AI
//! Catalog (`/.well-known/ai-catalog.json`) and the earlier MCP Catalog
//! (`/.well-known/mcp/catalog.json`) pointing at it, the earlier card paths kept; the card
//! checked against the draft's JSON Schema, and `host/deploy/server.json` against the MCP
//! Registry's (both vendored under `fixtures/` from their repositories: the registry's
//! `2025-12-11` schema from modelcontextprotocol/static at a9ba437, the card's from
//! modelcontextprotocol/experimental-ext-server-card at 8924e08), validated by PyPI's
//! `jsonschema`.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::external;
use crate::support::HttpServer;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Validate `document` against the JSON Schema at `schema` (its own `$schema` draft): the
/// validator's errors, or nothing.
fn schema_errors(schema: &Path, document: &Value) -> String {
    let python = external::python(&["jsonschema==4.23.0"]);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), document.to_string()).unwrap();
    let output = std::process::Command::new(python)
        .args([
            "-c",
            "import json, sys, jsonschema\n\
             schema = json.load(open(sys.argv[1]))\n\
             document = json.load(open(sys.argv[2]))\n\
             cls = jsonschema.validators.validator_for(schema)\n\
             cls.check_schema(schema)\n\
             errors = [f'{list(e.path)}: {e.message}' for e in cls(schema).iter_errors(document)]\n\
             print('\\n'.join(errors))",
        ])
        .arg(schema)
        .arg(file.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The card at `/mcp/server-card` is the draft's (media type, CORS, an `ETag` a matching
/// `If-None-Match` answers 304 to) and valid against its schema; both catalogs name it by
/// URL; the earlier paths serve the same card.
#[tokio::test]
async fn the_card_is_where_the_discovery_draft_puts_it_and_the_catalogs_point_at_it() {
    let dir = crate::support::all_examples();
    let server = HttpServer::start(dir.path(), &[]).await;
    let http = reqwest::Client::new();
    let card_url = format!("{}/server-card", server.url);
    let response = http.get(&card_url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "application/mcp-server-card+json");
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert_eq!(headers["access-control-expose-headers"], "ETag");
    let etag = headers["etag"].to_str().unwrap().to_owned();
    let card: Value = response.json().await.unwrap();
    assert_eq!(card["remotes"][0]["url"], server.url.as_str(), "{card}");
    let errors = schema_errors(
        &repo().join("tests/e2e/fixtures/server-card.schema.json"),
        &card,
    );
    assert_eq!(errors, "", "the card against the draft's schema: {card}");

    let again = http
        .get(&card_url)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
    assert!(again.text().await.unwrap().is_empty());
    let stale = http
        .get(&card_url)
        .header("if-none-match", "\"another\"")
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 200);

    for (path, media_type, version) in [
        (
            "/.well-known/ai-catalog.json",
            "application/ai-catalog+json",
            "1.0",
        ),
        ("/.well-known/mcp/catalog.json", "application/json", "draft"),
    ] {
        let response = http
            .get(server.url.replace("/mcp", path))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()["content-type"], media_type, "{path}");
        let catalog: Value = response.json().await.unwrap();
        assert_eq!(catalog["specVersion"], version, "{catalog}");
        let entries = catalog["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{catalog}");
        assert_eq!(entries[0]["type"], "application/mcp-server-card+json");
        assert_eq!(entries[0]["url"], card_url.as_str(), "{catalog}");
        assert_eq!(
            entries[0]["identifier"], "urn:air:localhost:mcp:mcpbox",
            "{catalog}"
        );
    }
    for path in [
        "/.well-known/mcp/server-card",
        "/.well-known/mcp/server-card.json",
    ] {
        let earlier: Value = http
            .get(server.url.replace("/mcp", path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(earlier, card, "{path}");
    }
}

/// `host/deploy/server.json`, the listing for the official MCP Registry, is valid against the
/// registry's schema, names this version, and its name is the container image's label.
#[test]
fn the_registry_listing_is_valid_and_names_this_version_and_the_image() {
    let listing: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("host/deploy/server.json")).unwrap(),
    )
    .unwrap();
    let errors = schema_errors(
        &repo().join("tests/e2e/fixtures/registry-server.schema.json"),
        &listing,
    );
    assert_eq!(errors, "", "server.json against the registry's schema");
    assert_eq!(listing["version"], env!("CARGO_PKG_VERSION"));
    let name = listing["name"].as_str().unwrap();
    assert!(name.starts_with("io.github."), "{name}");
    let image = &listing["packages"][0];
    assert_eq!(image["registryType"], "oci");
    assert!(
        image["identifier"]
            .as_str()
            .unwrap()
            .ends_with(&format!(":{}", env!("CARGO_PKG_VERSION")))
    );
    let containerfile =
        std::fs::read_to_string(repo().join("host/container/Containerfile")).unwrap();
    assert!(
        containerfile.contains(&format!("io.modelcontextprotocol.server.name=\"{name}\"")),
        "the image is labelled {name}"
    );

    // A listing the schema refuses is reported: the check can fail.
    let mut broken = listing.clone();
    broken["description"] = Value::String("x".repeat(101));
    assert!(
        schema_errors(
            &repo().join("tests/e2e/fixtures/registry-server.schema.json"),
            &broken
        )
        .contains("description"),
    );
}
