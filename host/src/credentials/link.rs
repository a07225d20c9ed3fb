//! Linking a caller's account, the broker's side: a pending link request for a caller and
//! provider ([`Broker::begin_link`]) and the wait for it ([`Broker::wait_linked`]), and the
//! browser's side of the flow: `/oauth/link/start` ([`Broker::start`], counted per ticket)
//! and `/oauth/link/callback` ([`Broker::complete`], which exchanges the code and seals the
//! record).

use super::*;

impl Broker {
    /// The caller's pending link request for `provider` (the same ticket, URL and id while it
    /// is pending and unexpired), or a new one.
    pub async fn begin_link(
        &self,
        caller_key: &str,
        provider: &str,
        plugin: Option<&str>,
    ) -> Result<LinkPrompt, CredentialError> {
        let configured = self.provider(provider)?;
        if configured.exchange().is_some() {
            return Err(CredentialError::NotLinkable(provider.to_owned()));
        }
        let now = now_ms();
        self.sweep(now).await;
        let pending = match self.store.pending(caller_key, provider).await {
            Ok(pending) => pending,
            Err(CredentialError::Sealed(_)) => None,
            Err(e) => return Err(e),
        };
        let mut reuse = None;
        if let Some(id) = pending
            && let Some((_, ticket)) = self.store.get_ticket(&id, now).await.ok().flatten()
            && ticket.status == TicketStatus::Pending
            && ticket.caller == caller_key
            && ticket.provider == provider
        {
            reuse = Some((id, ticket.elicitation_id));
        }
        let (id, elicitation_id) = match reuse {
            Some(found) => found,
            None => {
                let random = random_bytes::<32>().map_err(|error| CredentialError::Provider {
                    provider: provider.to_owned(),
                    error,
                })?;
                let id = expiring_key(now + millis(self.settings.ticket_ttl), &base64url(&random));
                let ticket = Ticket {
                    caller: caller_key.to_owned(),
                    provider: provider.to_owned(),
                    plugin: plugin.map(str::to_owned),
                    elicitation_id: uuid::Uuid::new_v4().to_string(),
                    status: TicketStatus::Pending,
                };
                self.store.put_ticket(&id, &ticket).await?;
                (id, ticket.elicitation_id.clone())
            }
        };
        let display = &configured.display_name;
        let message = match plugin {
            Some(plugin) => format!(
                "`{plugin}` needs your {display} account. Open the link to sign in at {display} \
                 and allow mcpbox to act for you there; the call then goes on."
            ),
            None => format!(
                "Open the link to sign in at {display} and allow mcpbox to act for you there."
            ),
        };
        Ok(LinkPrompt {
            provider: provider.to_owned(),
            elicitation_id,
            url: format!(
                "{}{START_PATH}?ticket={id}",
                self.settings.public_url.as_str().trim_end_matches('/')
            ),
            message,
        })
    }

    /// Wait until the request `prompt` shows is linked, failed or expired, or `deadline`
    /// passes. Reads the store (so a callback on another replica counts), and wakes at once
    /// for a callback on this one.
    pub async fn wait_linked(
        &self,
        caller_key: &str,
        provider: &str,
        prompt: &LinkPrompt,
        deadline: tokio::time::Instant,
    ) -> WaitOutcome {
        let Some(id) = ticket_of(&prompt.url) else {
            return WaitOutcome::Failed("not a link request of this mcpbox".to_owned());
        };
        let notify = Arc::clone(
            self.waiters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(id.clone())
                .or_default(),
        );
        let outcome = loop {
            let woken = notify.notified();
            match self.store.get_ticket(&id, now_ms()).await {
                Ok(None) => break WaitOutcome::Failed("the link request expired".to_owned()),
                Ok(Some((_, ticket)))
                    if ticket.caller != caller_key || ticket.provider != provider =>
                {
                    break WaitOutcome::Failed("not this caller's link request".to_owned());
                }
                Ok(Some((_, ticket))) => match ticket.status {
                    TicketStatus::Linked => break WaitOutcome::Linked,
                    TicketStatus::Failed(why) => break WaitOutcome::Failed(why),
                    TicketStatus::Pending => {}
                },
                Err(e) => tracing::debug!("reading a link request: {e}"),
            }
            if tokio::time::Instant::now() >= deadline {
                break WaitOutcome::Pending;
            }
            let nap = tokio::time::Instant::now() + WAIT_POLL;
            tokio::select! {
                () = woken => {}
                () = tokio::time::sleep_until(nap.min(deadline)) => {}
            }
        };
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        if Arc::strong_count(&notify) == 2 {
            waiters.remove(&id);
        }
        outcome
    }

    fn wake(&self, ticket: &str) {
        if let Some(notify) = self
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(ticket)
        {
            notify.notify_waiters();
        }
    }

    /// Count one more flow started for `ticket` on this replica, refusing past
    /// [`MAX_STARTS_PER_TICKET`] (counts of expired tickets are forgotten).
    fn count_start(&self, ticket: &str, now: u64) -> Result<(), CallbackError> {
        let mut starts = self.starts.lock().unwrap_or_else(PoisonError::into_inner);
        starts.retain(|_, (_, expires)| *expires > now);
        if !starts.contains_key(ticket) && starts.len() >= MAX_COUNTED_TICKETS {
            return Err(CallbackError::TooManyStarts);
        }
        let expires = expiry_of(ticket).unwrap_or(now);
        let (count, _) = starts.entry(ticket.to_owned()).or_insert((0, expires));
        if *count >= MAX_STARTS_PER_TICKET {
            return Err(CallbackError::TooManyStarts);
        }
        *count += 1;
        Ok(())
    }

    /// `/oauth/link/start?ticket=T`: a new authorization flow for the pending request `T`
    /// (each visit makes its own, so a link preview does not use the request up).
    pub async fn start(&self, ticket: &str) -> Result<StartRedirect, CallbackError> {
        let now = now_ms();
        self.sweep(now).await;
        let Some((_, found)) = self.store.get_ticket(ticket, now).await? else {
            return Err(if expiry_of(ticket).is_some_and(|e| e <= now) {
                CallbackError::Expired
            } else {
                CallbackError::Invalid
            });
        };
        if found.status != TicketStatus::Pending {
            return Err(CallbackError::Used);
        }
        self.count_start(ticket, now)?;
        let provider = self.provider(&found.provider)?;
        let endpoints =
            self.tokens.endpoints(provider).await.map_err(|e| {
                CallbackError::Provider(format!("provider `{}`: {e}", provider.name))
            })?;
        let fail = |e: TokenError| CallbackError::Internal(e.to_string());
        let expires = (now + millis(FLOW_TTL)).min(expiry_of(ticket).unwrap_or(now));
        let state = expiring_key(expires, &base64url(&random_bytes::<32>().map_err(fail)?));
        let cookie = base64url(&random_bytes::<32>().map_err(fail)?);
        let (verifier, challenge) = token::pkce().map_err(fail)?;
        let redirect_uri = self.redirect_uri();
        let flow = Flow {
            ticket: ticket.to_owned(),
            caller: found.caller.clone(),
            provider: found.provider.clone(),
            verifier: verifier.to_string(),
            cookie_hash: sha256_hex(&cookie),
            redirect_uri: redirect_uri.clone(),
        };
        self.store
            .put_flow(&expiring_key(expires, &sha256_hex(&state)), &flow)
            .await?;
        let Some(mut location) = endpoints.authorization.clone() else {
            return Err(CallbackError::Provider(format!(
                "provider `{}` names no authorization endpoint",
                provider.name
            )));
        };
        {
            let mut query = location.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &provider.client_id)
                .append_pair("redirect_uri", &redirect_uri);
            if !provider.scopes.is_empty() {
                query.append_pair("scope", &provider.scopes.join(" "));
            }
            query
                .append_pair("state", &state)
                .append_pair("code_challenge", &challenge)
                .append_pair("code_challenge_method", "S256");
            for (name, value) in &provider.authorize_params {
                query.append_pair(name, value);
            }
        }
        let secure = if self.settings.public_url.scheme() == "https" {
            "; Secure"
        } else {
            ""
        };
        // The routes are under the public URL's path (behind a proxy that mounts mcpbox there).
        let path = format!(
            "{}/oauth/link",
            self.settings.public_url.path().trim_end_matches('/')
        );
        Ok(StartRedirect {
            location: location.into(),
            set_cookie: format!(
                "{LINK_COOKIE}={cookie}; HttpOnly; SameSite=Lax; Path={path}; Max-Age={}{secure}",
                (expires.saturating_sub(now)) / 1000
            ),
        })
    }

    /// `/oauth/link/callback`: check the state (known, unexpired, unused), the browser (its
    /// cookie is the one the flow was started with) and the request (still pending, for the
    /// flow's caller and provider), all before the code is spent; then exchange the code and
    /// store the link. Anything else links nothing.
    pub async fn complete(
        &self,
        query: CallbackQuery,
        cookie: Option<&str>,
    ) -> Result<Linked, CallbackError> {
        let now = now_ms();
        let state = query.state.as_deref().ok_or(CallbackError::Invalid)?;
        let expiry = expiry_of(state).ok_or(CallbackError::Invalid)?;
        let key = expiring_key(expiry, &sha256_hex(state));
        let (raw, flow) = match self.store.get_flow(&key, now).await? {
            FlowLookup::Found(raw, flow) => (raw, flow),
            FlowLookup::Missing => return Err(CallbackError::Invalid),
            FlowLookup::Expired => return Err(CallbackError::Expired),
            FlowLookup::Used => return Err(CallbackError::Used),
        };
        let failed = |error: CallbackError| {
            self.emit(
                CredentialEvent::LinkFailed(error.reason()),
                &flow.caller,
                &flow.provider,
                None,
            );
            error
        };
        if cookie.is_none_or(|cookie| sha256_hex(cookie) != flow.cookie_hash) {
            return Err(failed(CallbackError::OtherBrowser));
        }
        if !self.store.consume_flow(&key, raw).await? {
            return Err(CallbackError::Used);
        }
        let Some((ticket_raw, ticket)) = self.store.get_ticket(&flow.ticket, now).await? else {
            return Err(failed(CallbackError::Expired));
        };
        if ticket.status != TicketStatus::Pending {
            return Err(failed(CallbackError::Used));
        }
        if ticket.caller != flow.caller || ticket.provider != flow.provider {
            return Err(failed(CallbackError::Invalid));
        }
        let plugin = ticket.plugin.clone();
        let ticket_id = flow.ticket.as_str();
        let settle = |status: TicketStatus| {
            let ticket = Ticket {
                status,
                ..ticket.clone()
            };
            let raw = ticket_raw.clone();
            async move {
                let swapped = self.store.swap_ticket(ticket_id, raw, &ticket).await;
                self.wake(ticket_id);
                swapped
            }
        };
        if let Some(error) = &query.error {
            let (why, outcome) = if error == "access_denied" {
                (
                    "declined at the provider".to_owned(),
                    CallbackError::Declined,
                )
            } else {
                let code: String = error
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .take(64)
                    .collect();
                let why = format!("the provider answered `{code}`");
                (why.clone(), CallbackError::Provider(why))
            };
            settle(TicketStatus::Failed(why.clone())).await?;
            self.emit(
                CredentialEvent::LinkFailed(why),
                &flow.caller,
                &flow.provider,
                plugin.as_deref(),
            );
            return Err(outcome);
        }
        let Some(code) = query.code.as_deref().filter(|c| !c.is_empty()) else {
            return Err(failed(CallbackError::Invalid));
        };
        let provider = self.provider(&flow.provider)?;
        let secret = self.client_secret(provider)?;
        let issued = self
            .tokens
            .exchange_code(
                provider,
                secret.as_deref().map(String::as_str),
                code,
                &flow.verifier,
                &flow.redirect_uri,
            )
            .await;
        let tokens = match issued {
            Ok(tokens) => tokens,
            Err(error) => {
                let why = format!("provider `{}`: {error}", provider.name);
                settle(TicketStatus::Failed(why.clone())).await?;
                self.emit(
                    CredentialEvent::LinkFailed(why.clone()),
                    &flow.caller,
                    &flow.provider,
                    plugin.as_deref(),
                );
                return Err(CallbackError::Provider(why));
            }
        };
        let record = record_of(&tokens, None, now, plugin.clone());
        self.store
            .put_link(&flow.caller, &flow.provider, &record)
            .await?;
        settle(TicketStatus::Linked).await?;
        self.emit(
            CredentialEvent::Linked,
            &flow.caller,
            &flow.provider,
            plugin.as_deref(),
        );
        Ok(Linked {
            display_name: provider.display_name.clone(),
            caller: flow.caller.clone(),
        })
    }
}

/// The ticket a link URL carries.
pub(super) fn ticket_of(url: &str) -> Option<String> {
    let url = Url::parse(url).ok()?;
    url.query_pairs()
        .find(|(name, _)| name == "ticket")
        .map(|(_, value)| value.into_owned())
}
