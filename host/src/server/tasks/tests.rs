//! Tests of tasks: the extension declared per request, and a record's status as it is seen.

use super::*;

#[test]
fn the_extension_is_declared_per_request() {
    let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
    assert!(declares_tasks(Some(&raw(
        r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#
    ))));
    assert!(!declares_tasks(Some(&raw(r#"{"extensions":{}}"#))));
    assert!(!declares_tasks(Some(&raw(r#"{"elicitation":{}}"#))));
    assert!(!declares_tasks(Some(&raw(
        r#"{"extensions":{"io.modelcontextprotocol/tasks":null}}"#
    ))));
    assert!(!declares_tasks(None));
    let error = missing_extension();
    assert_eq!(error.code, -32021);
    assert_eq!(
        error.data.unwrap()["requiredCapabilities"]["extensions"][TASKS_EXTENSION],
        json!({})
    );
}

#[test]
fn a_cancellation_wins_over_an_unfinished_status_and_a_lapsed_lease_fails() {
    let mut record = Record {
        owner: "o".into(),
        tool: "t".into(),
        params: "{}".into(),
        capabilities: None,
        status: TaskStatus::Working,
        created: 0,
        updated: 0,
        lease: lease_until(),
        round: 0,
        input_requests: None,
        request_state: None,
        result: None,
        error: None,
        message: None,
    };
    assert_eq!(record.seen(false), TaskStatus::Working);
    assert_eq!(record.seen(true), TaskStatus::Cancelled);
    record.lease = now_ms() - 1;
    assert_eq!(record.seen(false), TaskStatus::Failed);
    record.status = TaskStatus::Completed;
    assert_eq!(record.seen(true), TaskStatus::Completed);
    let view = record.envelope("id", TaskStatus::Completed, 5, "task");
    assert_eq!(view["createdAt"], "1970-01-01T00:00:00.000Z");
    assert!(!view.contains_key("requestState"));
}
