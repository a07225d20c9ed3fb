//! The time server (`plugins/time`) on what needs no original beside it: `is_dst` as the
//! original reads the database, where Ireland's winter is daylight saving time an hour back. (Its sameness with the original, call by call and on chosen dates, is
//! `services::reference`.)

use serde_json::{Value, json};

use crate::support::{Client, connect, plugin_dir, tool_text};

async fn current_time(client: &Client, zone: &str) -> Value {
    let mut arguments = serde_json::Map::new();
    arguments.insert("timezone".to_owned(), json!(zone));
    let result = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("get_current_time").with_arguments(arguments),
        )
        .await
        .unwrap_or_else(|e| panic!("get_current_time: {e}\n{}", client.stderr.text()));
    let (text, failed) = tool_text(&result);
    assert!(!failed, "{zone}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{zone}: {e}: {text}"))
}

/// Issue #55 (17): in the main data the original reads, Ireland's standard time is its summer's
/// (IST, +01:00) and its winter (GMT) is daylight saving time an hour back. So on any day,
/// `is_dst` is true in Dublin exactly when the offset is +00:00, where London's is the other
/// way round. (Morocco's Ramadan, the other such span in force lately, is checked on chosen
/// dates by `services::reference`.)
#[tokio::test]
async fn is_dst_is_the_originals_in_zones_with_negative_daylight_saving_time() {
    let dir = plugin_dir(&[("time", "time.wasm")]);
    let client = connect(dir.path(), &[]).await;
    for zone in ["Europe/Dublin", "Eire"] {
        let now = current_time(&client, zone).await;
        let datetime = now["datetime"].as_str().unwrap_or_default();
        assert_eq!(
            now["is_dst"],
            json!(datetime.ends_with("+00:00")),
            "{zone}: {now}"
        );
    }
    let london = current_time(&client, "Europe/London").await;
    let datetime = london["datetime"].as_str().unwrap_or_default();
    assert_eq!(
        london["is_dst"],
        json!(datetime.ends_with("+01:00")),
        "{london}"
    );
    client.service.cancel().await.unwrap();
}
