//! The repositories of a registry under a path, read from the registry's catalog (`GET
//! /v2/_catalog`, the distribution API's listing: Docker's registry and Debian's
//! `docker-registry` serve it; many hosted registries do not, or only to some credentials):
//! what a search needs of a source `REGISTRY/PATH/*` (`manage`).
//!
//! The catalog is in lexical order, so reading starts just before PATH's repositories
//! (`last=PATH`) and stops at the first name past them. Pages of at most [`CATALOG_PAGE`] names
//! are asked for, and followed by the `last` the `Link` header's `rel="next"` gives (only
//! forward: a `last` not after the one asked for and the names listed ends the listing). At most
//! [`MAX_CATALOG_PAGES`] pages are read, each at most [`MAX_CATALOG_PAGE_BYTES`] (a page
//! declared larger is refused unread, one that grows past it is cut), and at most
//! [`MAX_INDEX_REPOSITORIES`] repositories are kept.

use super::{Registry, RegistryError, parse_reference};

/// The most repositories of one `REGISTRY/PATH/*` source a search reads.
pub const MAX_INDEX_REPOSITORIES: usize = 20;
/// The most catalog pages read for one source.
pub const MAX_CATALOG_PAGES: usize = 10;
/// The largest catalog page read.
pub const MAX_CATALOG_PAGE_BYTES: u64 = 64 * 1024;
/// How many names one catalog page is asked for (`n`).
pub const CATALOG_PAGE: usize = 100;

/// What one catalog page says about the repositories under a path.
#[derive(Debug, PartialEq, Eq)]
struct Page {
    /// The repositories under the path, in the page's order.
    under: Vec<String>,
    /// Whether the page reached a name past the path's repositories (none can follow).
    past: bool,
    /// The greatest name the page lists: the next page must start after it.
    greatest: Option<String>,
}

/// The repositories under `path` (`PATH/…`) on the catalog page `bytes`.
fn page(bytes: &[u8], path: &str) -> Result<Page, String> {
    #[derive(serde::Deserialize)]
    struct Catalog {
        repositories: Option<Vec<String>>,
    }
    let catalog: Catalog =
        serde_json::from_slice(bytes).map_err(|e| format!("its catalog is not JSON: {e}"))?;
    let inside = format!("{path}/");
    // Every name under `PATH/` sorts before `PATH0` ('0' follows '/').
    let after = format!("{path}0");
    let mut page = Page {
        under: Vec::new(),
        past: false,
        greatest: None,
    };
    for name in catalog.repositories.unwrap_or_default() {
        if page.greatest.as_ref().is_none_or(|g| name > *g) {
            page.greatest = Some(name.clone());
        }
        if name.starts_with(&inside) && name.len() > inside.len() {
            page.under.push(name);
        } else if name >= after {
            page.past = true;
            break;
        }
    }
    Ok(page)
}

/// The `last` of the `rel="next"` target of a `Link` header (`</v2/_catalog?last=x&n=100>;
/// rel="next"`), if it has one.
fn next_last(link: &str) -> Option<String> {
    link.split(',').find_map(|entry| {
        let (target, params) = entry.trim().split_once(';')?;
        let next = params
            .split(';')
            .any(|p| matches!(p.trim(), "rel=\"next\"" | "rel=next"));
        if !next {
            return None;
        }
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let (_, query) = target.split_once('?')?;
        url::form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == "last")
            .map(|(_, value)| value.into_owned())
    })
}

impl Registry {
    /// The repositories (`REGISTRY/REPOSITORY`) under `under` (`REGISTRY/PATH`), read from the
    /// registry's catalog within the bounds the module gives, in the catalog's order.
    pub async fn repositories(&self, under: &str) -> Result<Vec<String>, RegistryError> {
        let (registry, path) = under
            .split_once('/')
            .ok_or_else(|| RegistryError::Reference {
                reference: under.to_owned(),
                reason: "it names no path under the registry".to_owned(),
            })?;
        let reference = parse_reference(&format!("{under}:latest"))?;
        let auth = Registry::auth(&reference);
        let doing = format!("listing the repositories under {under}/ (GET /v2/_catalog)");
        let mut found: Vec<String> = Vec::new();
        let mut last = path.to_owned();
        for _ in 0..MAX_CATALOG_PAGES {
            let below = format!(
                "_catalog?n={CATALOG_PAGE}&last={}",
                url::form_urlencoded::byte_serialize(last.as_bytes()).collect::<String>()
            );
            let Some(fetched) = self
                .get_v2(
                    &reference,
                    &below,
                    &["application/json"],
                    (MAX_CATALOG_PAGE_BYTES, "catalog page"),
                    &reference,
                    &auth,
                )
                .await?
            else {
                return Err(RegistryError::Other {
                    registry: registry.to_owned(),
                    doing,
                    reason: "it does not serve its catalog (404 Not Found); name the repositories themselves as sources".to_owned(),
                });
            };
            let page = page(&fetched.bytes, path).map_err(|reason| RegistryError::Other {
                registry: registry.to_owned(),
                doing: doing.clone(),
                reason,
            })?;
            let greatest = page.greatest.unwrap_or_default();
            for name in page.under {
                if found.len() == MAX_INDEX_REPOSITORIES {
                    return Ok(found);
                }
                found.push(format!("{registry}/{name}"));
            }
            if page.past {
                break;
            }
            match fetched.link.as_deref().and_then(next_last) {
                Some(next) if next > last && next >= greatest => last = next,
                _ => break,
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// A registry on loopback answering each request's target (`/v2/…`) with what `answer`
    /// gives (a whole HTTP response), closing each connection: its `host:port` and the catalog
    /// requests it was sent.
    async fn registry(
        answer: impl Fn(&str) -> String + Send + Sync + 'static,
    ) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let (answer, log) = (Arc::new(answer), asked.clone());
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
                    if target.starts_with("/v2/_catalog") {
                        log.lock().unwrap().push(target.clone());
                    }
                    let _ = stream.write_all(answer(&target).as_bytes()).await;
                    // Held open: a body declared but never sent must not be waited for.
                    let _ = stream.read(&mut buffer).await;
                });
            }
        });
        (host, asked)
    }

    fn ok(body: &str, link: Option<&str>) -> String {
        let link = link.map(|l| format!("link: {l}\r\n")).unwrap_or_default();
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{link}connection: close\r\n\r\n{body}",
            body.len()
        )
    }

    async fn listed(host: &str, under: &str) -> Result<Vec<String>, RegistryError> {
        let registry = Registry::new(&[host.to_owned()], Duration::from_secs(5)).unwrap();
        registry.repositories(&format!("{host}/{under}")).await
    }

    #[tokio::test]
    async fn the_catalog_is_read_from_the_path_page_by_page_until_past_it() {
        let (host, asked) = registry(|target| match target {
            "/v2/_catalog?n=100&last=index" => ok(
                r#"{"repositories": ["index-a", "index/a"]}"#,
                Some(r#"</v2/_catalog?last=index%2Fa&n=100>; rel="next""#),
            ),
            "/v2/_catalog?n=100&last=index%2Fa" => ok(
                r#"{"repositories": ["index/b", "index0", "plugins/c"]}"#,
                Some(r#"</v2/_catalog?last=plugins%2Fc&n=100>; rel="next""#),
            ),
            "/v2/" => ok("{}", None),
            _ => "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n".to_owned(),
        })
        .await;
        assert_eq!(
            listed(&host, "index").await.unwrap(),
            [format!("{host}/index/a"), format!("{host}/index/b")]
        );
        // Stopped at `index0`: the page after it was not asked for.
        assert_eq!(asked.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn the_listing_is_bounded_in_pages_repositories_and_bytes() {
        // A catalog without end: one more repository under the path on each page.
        let (host, asked) = registry(|target| {
            let n: usize = target
                .rsplit("index%2F")
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            ok(
                &format!(r#"{{"repositories": ["index/{}"]}}"#, n + 1),
                Some(&format!(
                    r#"</v2/_catalog?last=index%2F{}&n=100>; rel="next""#,
                    n + 1
                )),
            )
        })
        .await;
        assert_eq!(
            listed(&host, "index").await.unwrap().len(),
            MAX_CATALOG_PAGES
        );
        assert_eq!(asked.lock().unwrap().len(), MAX_CATALOG_PAGES);

        // Many repositories on one page: at most MAX_INDEX_REPOSITORIES kept.
        let (host, _) = registry(|_| {
            let names: Vec<String> = (0..50).map(|i| format!("\"index/{i:02}\"")).collect();
            ok(
                &format!(r#"{{"repositories": [{}]}}"#, names.join(",")),
                None,
            )
        })
        .await;
        let found = listed(&host, "index").await.unwrap();
        assert_eq!(found.len(), MAX_INDEX_REPOSITORIES);
        assert_eq!(found[0], format!("{host}/index/00"));

        // A link that goes back is not followed.
        let (host, asked) = registry(|_| {
            ok(
                r#"{"repositories": ["index/z"]}"#,
                Some(r#"</v2/_catalog?last=index%2Fa&n=100>; rel="next""#),
            )
        })
        .await;
        assert_eq!(listed(&host, "index").await.unwrap().len(), 1);
        assert_eq!(asked.lock().unwrap().len(), 1);

        // A page declared larger than the bound is refused unread (none of it is sent).
        let (host, _) = registry(|target| {
            if target == "/v2/" {
                return ok("{}", None);
            }
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n",
                MAX_CATALOG_PAGE_BYTES + 1
            )
        })
        .await;
        let error = tokio::time::timeout(Duration::from_secs(3), listed(&host, "index"))
            .await
            .expect("refused without reading")
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "refusing {host}/index:latest: its catalog page is 65537 bytes, over the 65536 bytes (64 KiB) mcpbox accepts"
            )
        );
    }

    #[tokio::test]
    async fn a_registry_without_a_catalog_or_refusing_it_is_named() {
        let (host, _) = registry(|target| match target {
            "/v2/" => ok("{}", None),
            _ => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_owned(),
        })
        .await;
        assert_eq!(
            listed(&host, "index").await.unwrap_err().to_string(),
            format!(
                "the registry {host} failed while listing the repositories under {host}/index/ (GET /v2/_catalog): it does not serve its catalog (404 Not Found); name the repositories themselves as sources"
            )
        );
        let (host, _) = registry(|target| match target {
            "/v2/" => ok("{}", None),
            _ => {
                let body =
                    r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#;
                format!(
                    "HTTP/1.1 401 Unauthorized\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
        })
        .await;
        let error = listed(&host, "index").await.unwrap_err();
        assert!(matches!(error, RegistryError::Denied { .. }), "{error}");
    }

    #[test]
    fn a_page_keeps_the_repositories_under_the_path_and_sees_when_it_is_past_them() {
        let bytes = br#"{"repositories": ["index-a", "index/echo", "index/tools/files", "index/", "indexed/x", "plugins/echo"]}"#;
        assert_eq!(
            page(bytes, "index").unwrap(),
            Page {
                under: vec!["index/echo".to_owned(), "index/tools/files".to_owned()],
                past: true,
                greatest: Some("indexed/x".to_owned()),
            }
        );
        // All under the path: more may follow.
        let bytes = br#"{"repositories": ["index/a", "index/b"]}"#;
        assert!(!page(bytes, "index").unwrap().past);
        // A registry with nothing, or an empty list.
        assert_eq!(
            page(br#"{"repositories": null}"#, "index").unwrap(),
            Page {
                under: Vec::new(),
                past: false,
                greatest: None,
            }
        );
        assert_eq!(
            page(b"<html>", "index").unwrap_err(),
            "its catalog is not JSON: expected value at line 1 column 1"
        );
    }

    #[test]
    fn the_next_page_is_the_last_the_link_header_gives() {
        assert_eq!(
            next_last(r#"</v2/_catalog?last=index%2Fecho&n=100>; rel="next""#).as_deref(),
            Some("index/echo")
        );
        assert_eq!(
            next_last(r#"</v2/_catalog?n=2&last=b>; rel=next"#).as_deref(),
            Some("b")
        );
        assert_eq!(
            next_last(r#"<https://r.example/v2/_catalog?last=x>; rel="prev", </v2/_catalog?last=y>; rel="next""#)
                .as_deref(),
            Some("y")
        );
        for link in [
            "",
            r#"</v2/_catalog?last=x>; rel="prev""#,
            r#"</v2/_catalog?n=100>; rel="next""#,
            r#"/v2/_catalog?last=x; rel="next""#,
        ] {
            assert_eq!(next_last(link), None, "{link}");
        }
    }
}
