//! Tests of a request's context toward its client: capabilities, logs, progress and requests of
//! its own.

use super::*;

#[test]
fn capabilities_are_looked_up_by_path() {
    let peer = Peer::default();
    peer.set_capabilities(json!({"sampling": {}, "elicitation": {"form": {}}, "roots": null}));
    assert!(peer.has_capability(&["sampling"]));
    assert!(peer.has_capability(&["elicitation", "form"]));
    assert!(!peer.has_capability(&["elicitation", "url"]));
    assert!(!peer.has_capability(&["roots"]));
}

#[test]
fn logs_are_off_until_a_level_is_set_then_filtered() {
    let peer = Peer::default();
    assert!(!peer.wants_log(LogLevel::Emergency));
    peer.set_log_level(LogLevel::Warning);
    assert!(!peer.wants_log(LogLevel::Info));
    assert!(peer.wants_log(LogLevel::Warning));
    assert!(peer.wants_log(LogLevel::Error));
}

#[test]
fn log_rate_is_limited_per_logger() {
    let peer = Peer::default();
    let passed = (0..1000)
        .filter(|_| peer.logs.admit_log("noisy").is_some())
        .count();
    assert!((100..=110).contains(&passed), "{passed}");
    assert!(peer.logs.admit_log("quiet").is_some());
}

#[tokio::test]
async fn progress_only_increases_and_stops_when_answered() {
    let (outbound, mut sent) = mpsc::channel(16);
    let token = RawValue::from_string("\"t\"".to_owned()).ok();
    let ctx = RequestContext::new(
        Client::V2025(Arc::new(Peer::default())),
        outbound,
        token,
        Arc::default(),
        Principal::local(),
    );
    ctx.progress(1.0, Some(3.0), None).await;
    ctx.progress(1.0, Some(3.0), None).await;
    ctx.progress(0.5, None, None).await;
    ctx.progress(2.0, None, Some("two")).await;
    ctx.finish();
    ctx.progress(3.0, None, None).await;
    let mut values = Vec::new();
    while let Ok(reply) = sent.try_recv() {
        let v: Value = serde_json::from_str(&reply.0).unwrap();
        values.push(v["params"]["progress"].as_f64().unwrap());
    }
    assert_eq!(values, [1.0, 2.0]);
}

#[tokio::test]
async fn progress_floods_are_cut_to_the_rate() {
    let (outbound, mut sent) = mpsc::channel(1000);
    let token = RawValue::from_string("1".to_owned()).ok();
    let ctx = RequestContext::new(
        Client::V2025(Arc::new(Peer::default())),
        outbound,
        token,
        Arc::default(),
        Principal::local(),
    );
    for i in 0..10_000 {
        ctx.progress(f64::from(i), None, Some(&"m".repeat(5000)))
            .await;
    }
    let mut count = 0;
    while let Ok(reply) = sent.try_recv() {
        assert!(reply.0.len() < 2000);
        count += 1;
    }
    assert!((50..=60).contains(&count), "{count}");
}

#[test]
fn urls_can_be_opened_by_clients_that_declared_url_elicitation() {
    let peer = Arc::new(Peer::default());
    let (outbound, _) = mpsc::channel(1);
    let ctx = RequestContext::new(
        Client::V2025(Arc::clone(&peer)),
        outbound,
        None,
        Arc::default(),
        Principal::local(),
    );
    peer.set_capabilities(json!({"elicitation": {"form": {}}}));
    assert!(!ctx.can_open_urls());
    peer.set_capabilities(json!({"elicitation": {"url": {}}}));
    assert!(ctx.can_open_urls());
    assert!(!RequestContext::detached().can_open_urls());
}

#[tokio::test]
async fn requests_need_the_capability() {
    let ctx = RequestContext::detached();
    let params = RawValue::from_string("{}".to_owned()).unwrap();
    let error = ctx
        .request(ServerRequest::Sampling, &params)
        .await
        .unwrap_err();
    assert!(
        error.contains("did not declare the `sampling` capability"),
        "{error}"
    );
}
