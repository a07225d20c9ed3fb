//! Fuzzing harness for decoding: arbitrary bytes, and mutations of real messages (every line of
//! the golden files), through JSON-RPC decoding, the typed request decoder, the 2026-07-28
//! envelope ladder and the id sniffer. Whatever the input: no panic, and every error reply is
//! one JSON-RPC 2.0 error object.
//!
//! `cargo test` runs each target for a bounded number of random inputs (bolero's test mode;
//! `BOLERO_RANDOM_ITERATIONS` sets how many). For a long run under libFuzzer:
//! `cargo bolero test -p mcpbox protocol::fuzz::decoding_never_panics` (nightly).

use bolero::check;
use serde_json::Value;

use super::jsonrpc::{Decoded, Reply, decode, sniff_id};
use super::request::Method;
use super::v2026::{self, MirrorHeaders};
use super::{Message, request::ClientNotification};

/// Real messages to mutate: the golden files' client lines, and 2026-07-28 requests.
fn seeds() -> Vec<Vec<u8>> {
    let golden = include_str!("../../../tests/golden/2025-11-25/stdio.jsonl");
    let mut seeds: Vec<Vec<u8>> = golden
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line.get("send").cloned())
        .map(|message| match message {
            Value::String(text) => text.into_bytes(),
            other => other.to_string().into_bytes(),
        })
        .collect();
    seeds.push(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"inputResponses":{"k":{"action":"accept"}},"requestState":"e30.AAAA","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/logLevel":"info","progressToken":"p"}}}"#.to_vec());
    seeds.push(br#"{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["a://b"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#.to_vec());
    seeds
}

fn assert_error_reply(reply: &Reply) {
    let value: Value = serde_json::from_str(&reply.0).expect("an error reply is JSON");
    assert_eq!(value["jsonrpc"], "2.0");
    assert!(value["error"]["code"].is_i64(), "{value}");
    assert!(value["error"]["message"].is_string(), "{value}");
}

/// Everything the server does with one decoded message before dispatch.
fn exercise(input: &[u8]) {
    let _ = sniff_id(input);
    let messages = match decode(input) {
        Decoded::Single(message) => vec![message],
        Decoded::Batch(items) => items,
    };
    for message in messages {
        match message {
            Err(reply) => assert_error_reply(&reply),
            Ok(Message::Request(request)) => {
                let typed = *request;
                assert_eq!(Method::from_name(typed.method.as_str()), typed.method);
                let headers = MirrorHeaders {
                    protocol_version: Some("2026-07-28".to_owned()),
                    method: Some(typed.method.as_str().to_owned()),
                    name: typed
                        .target
                        .as_ref()
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    params: Vec::new(),
                };
                for headers in [None, Some(&headers)] {
                    if let Err(refused) = v2026::check(&typed, headers, &|_| true) {
                        assert!(refused.error.code < 0);
                    }
                }
            }
            Ok(Message::Notification(notification)) => {
                let _ = ClientNotification::decode(&notification);
            }
            Ok(Message::Response(_)) => {}
        }
    }
}

#[test]
fn decoding_never_panics_on_arbitrary_bytes() {
    check!().for_each(|input: &[u8]| exercise(input));
}

#[test]
fn decoding_never_panics_on_mutated_messages() {
    let seeds = seeds();
    check!()
        .with_type::<(u16, Vec<(u16, u8)>, u8)>()
        .for_each(|(seed, edits, cut)| {
            let mut input = seeds[usize::from(*seed) % seeds.len()].clone();
            for (at, byte) in edits {
                if input.is_empty() {
                    break;
                }
                let at = usize::from(*at) % input.len();
                // Replace, insert or delete, by the byte's low bits.
                match byte % 3 {
                    0 => input[at] = *byte,
                    1 => input.insert(at, *byte),
                    _ => {
                        input.remove(at);
                    }
                }
            }
            if *cut > 200 {
                let keep = input.len() * usize::from(*cut - 200) / 56;
                input.truncate(keep);
            }
            exercise(&input);
        });
}
