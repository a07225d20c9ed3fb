//! The credentials broker as the engine and the catalog see it: the one adapter that turns
//! [`Broker`] into the engine's [`CredentialSource`] (the HTTP gate asks it for
//! each caller's token) and the catalog's [`Linker`] (the link flow and the host's own tools).
//! Neither room knows the broker; the composition root hands this to both.
//!
//! Uses: `catalog`, `credentials`, `engine`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::catalog::{LinkPrompt, LinkSummary, Linker, WaitOutcome};
use crate::credentials::{self, Broker, UnlinkedBy};
use crate::engine::{CredentialSource, TokenLookup};

type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The broker behind the engine's and the catalog's traits.
#[derive(Debug, Clone)]
pub(super) struct Brokered(pub(super) Arc<Broker>);

impl CredentialSource for Brokered {
    fn header(&self, provider: &str) -> Option<(http::HeaderName, Option<String>)> {
        self.0.header(provider)
    }

    fn access_token<'a>(&'a self, caller_key: &'a str, provider: &'a str) -> Fut<'a, TokenLookup> {
        Box::pin(async move {
            match self.0.access_token(caller_key, provider).await {
                credentials::TokenLookup::Ready(token) => TokenLookup::Ready(token.into_secret()),
                credentials::TokenLookup::LinkNeeded => TokenLookup::LinkNeeded,
                credentials::TokenLookup::Unavailable(why) => TokenLookup::Unavailable(why),
            }
        })
    }

    fn has_provider(&self, provider: &str) -> bool {
        self.0.has_provider(provider)
    }
}

impl Linker for Brokered {
    fn begin_link<'a>(
        &'a self,
        caller_key: &'a str,
        provider: &'a str,
        plugin: Option<&'a str>,
    ) -> Fut<'a, Result<LinkPrompt, String>> {
        Box::pin(async move {
            self.0
                .begin_link(caller_key, provider, plugin)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn wait_linked<'a>(
        &'a self,
        caller_key: &'a str,
        provider: &'a str,
        prompt: &'a LinkPrompt,
        deadline: tokio::time::Instant,
    ) -> Fut<'a, WaitOutcome> {
        Box::pin(self.0.wait_linked(caller_key, provider, prompt, deadline))
    }

    fn links_of<'a>(&'a self, caller_key: &'a str) -> Fut<'a, Result<Vec<LinkSummary>, String>> {
        Box::pin(async move { self.0.links_of(caller_key).await.map_err(|e| e.to_string()) })
    }

    fn unlink<'a>(
        &'a self,
        caller_key: &'a str,
        provider: &'a str,
    ) -> Fut<'a, Result<bool, String>> {
        Box::pin(async move {
            self.0
                .unlink(caller_key, provider, UnlinkedBy::User)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn display_name(&self, provider: &str) -> Option<String> {
        self.0.display_name(provider)
    }
}
