//! The end-to-end tests that need more than the `mcpbox` binary and the wasm plugins built from
//! this repository: each installs or starts something through [`crate::external`] (Debian
//! packages, PyPI and npm packages into `target/tools/`) and drives mcpbox against it. They
//! are the slow part of the suite (installs on first use, services to start, whole
//! toolchains), so they live under `services::`, and a developer can leave them out with
//! one filter; `cargo test --workspace` runs them with everything else.
//!
//! ```sh
//! cargo test -p mcpbox -- --skip services:: --test-threads 4  # the fast set: unit tests and the rest of e2e
//! cargo test -p mcpbox --test e2e services::    # these alone
//! ```
//!
//! What each needs: `conformance`, Node 22 and the official conformance suite (npm);
//! `container`, buildah; `componentize`, componentize-py (PyPI), componentize-js and Node 22
//! (npm); `prometheus`, a Prometheus server; `oauth`, an authorization server (npm's
//! `oauth2-mock-server` on Node 22) and the official Python SDK (PyPI); `python`, the official
//! Python SDK; `budgets_shared`, `promises_redis`, `redis_down`, `state_redis` and
//! `tasks_shared`, a `redis-server`; `credentials`, npm's `oauth2-mock-server` on Node 22 (as
//! mcpbox's own issuer and as the downstream provider), the official Python SDK and a
//! `redis-server`; `docker_registry`, a CNCF distribution registry (`docker-registry`, with
//! `htpasswd` and `script` for two tests); `manage` (managed installs), the registry, npm's
//! `oauth2-mock-server` on Node 22 and the official Python SDK; `reference`, Node 22 and the
//! original reference servers (npm); `scale`, `redis-server` and HAProxy; `chromium`, a
//! headless chromium;
//! `bundle`, npm's `@anthropic-ai/mcpb`. Each is named for the service it needs, so no name
//! here repeats a module one level up: the tests of the same area that need none of this are
//! there (`registry`, `languages`, `status`, `readiness`, `metrics`).

mod budgets_shared;
mod bundle;
mod chromium;
mod componentize;
mod conformance;
mod container;
mod credentials;
mod docker_registry;
mod fake_api;
mod manage;
mod oauth;
mod prometheus;
mod promises_redis;
mod python;
mod redis_down;
mod reference;
mod scale;
mod state_redis;
mod tasks_shared;
