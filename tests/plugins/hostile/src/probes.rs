//! Probes of single promises. The socket attacks below `std::net`, through `wasi:sockets`
//! directly, so that each reaches exactly one kind of host function: binding a UDP socket (and
//! sending from it), and looking a name up; the host must refuse each, and the tool answers the
//! refusal as its error. `count` shows whether an instance served an earlier call: its memory
//! counts the calls it served. `log_steadily` logs at a steady pace, to fill a stream a client
//! does not read.

use std::sync::atomic::{AtomicU64, Ordering};

use mcpbox_sdk::{Deserialize, JsonSchema, NoArgs, Tool, Tools};
use wasip2::sockets::instance_network::instance_network;
use wasip2::sockets::ip_name_lookup::resolve_addresses;
use wasip2::sockets::network::{ErrorCode, IpAddressFamily, IpSocketAddress, Ipv4SocketAddress};
use wasip2::sockets::udp_create_socket::create_udp_socket;

#[derive(Deserialize, JsonSchema)]
struct Port {
    /// A UDP port on 127.0.0.1 to send one datagram to.
    port: u16,
}

#[derive(Deserialize, JsonSchema)]
struct Host {
    name: String,
}

fn loopback(port: u16) -> IpSocketAddress {
    IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port,
        address: (127, 0, 0, 1),
    })
}

/// Wait for a socket operation started with `start`, then finish it (WASI's two-phase calls).
fn two_phase(
    pollable: &wasip2::io::poll::Pollable,
    mut finish: impl FnMut() -> Result<(), ErrorCode>,
) -> Result<(), ErrorCode> {
    loop {
        match finish() {
            Err(ErrorCode::WouldBlock) => pollable.block(),
            other => return other,
        }
    }
}

/// Bind a UDP socket on 127.0.0.1 and send one datagram to `port`.
fn udp_send(Port { port }: Port) -> Result<String, String> {
    let network = instance_network();
    let socket = create_udp_socket(IpAddressFamily::Ipv4)
        .map_err(|e| format!("cannot create a UDP socket: {}", e.name()))?;
    socket
        .start_bind(&network, loopback(0))
        .map_err(|e| format!("cannot bind a UDP socket: {}", e.name()))?;
    two_phase(&socket.subscribe(), || socket.finish_bind())
        .map_err(|e| format!("cannot bind a UDP socket: {}", e.name()))?;
    let (_incoming, outgoing) = socket
        .stream(Some(loopback(port)))
        .map_err(|e| format!("cannot open a UDP stream: {}", e.name()))?;
    outgoing.subscribe().block();
    outgoing
        .check_send()
        .map_err(|e| format!("cannot send a UDP datagram: {}", e.name()))?;
    outgoing
        .send(&[wasip2::sockets::udp::OutgoingDatagram {
            data: b"escaped".to_vec(),
            remote_address: None,
        }])
        .map(|sent| format!("sent {sent} datagram"))
        .map_err(|e| format!("cannot send a UDP datagram: {}", e.name()))
}

/// Look `name` up and answer its addresses.
fn resolve(Host { name }: Host) -> Result<String, String> {
    let network = instance_network();
    let stream = resolve_addresses(&network, &name)
        .map_err(|e| format!("cannot resolve {name}: {}", e.name()))?;
    let mut addresses = Vec::new();
    loop {
        match stream.resolve_next_address() {
            Ok(Some(address)) => addresses.push(format!("{address:?}")),
            Ok(None) => return Ok(addresses.join(", ")),
            Err(ErrorCode::WouldBlock) => stream.subscribe().block(),
            Err(e) => return Err(format!("cannot resolve {name}: {}", e.name())),
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct Pace {
    /// How many messages.
    count: u32,
    /// The size of each, in KiB.
    kib: u32,
    /// The time between two, in milliseconds.
    every_ms: u64,
}

/// Log `count` messages of `kib` KiB, one every `every_ms` ms.
fn log_steadily(
    Pace {
        count,
        kib,
        every_ms,
    }: Pace,
) -> String {
    let message = "z".repeat(kib as usize * 1024);
    for _ in 0..count {
        mcpbox_sdk::host::info(&message);
        wasip2::clocks::monotonic_clock::subscribe_duration(every_ms.saturating_mul(1_000_000))
            .block();
    }
    format!("logged {count}")
}

/// The calls this instance served.
static SERVED: AtomicU64 = AtomicU64::new(0);

/// An object schema with these integer (`i`) or string (`s`) properties, all required. Written
/// out rather than derived: deriving them at every listing cost the plugin more
/// fuel than `mcpbox call --fuel 1000000` (a test of the CLI) leaves it.
fn schema(properties: &[(&str, char)]) -> String {
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, kind)| {
            let kind = if *kind == 'i' { "integer" } else { "string" };
            format!(r#""{name}":{{"type":"{kind}"}}"#)
        })
        .collect();
    let required: Vec<String> = properties
        .iter()
        .map(|(n, _)| format!(r#""{n}""#))
        .collect();
    format!(
        r#"{{"type":"object","properties":{{{}}},"required":[{}]}}"#,
        fields.join(","),
        required.join(",")
    )
}

/// Add the probes to `tools`.
pub fn add(tools: &mut Tools) {
    tools
        .add(
            Tool::new(
                "count",
                "How many calls this instance served, this one included",
            )
            .input_schema(r#"{"type":"object"}"#),
            |_: NoArgs| (SERVED.fetch_add(1, Ordering::Relaxed) + 1).to_string(),
        )
        .add(
            Tool::new("udp_send", "Bind a UDP socket and send a datagram")
                .input_schema(schema(&[("port", 'i')])),
            udp_send,
        )
        .add(
            Tool::new("resolve", "Look a host name up").input_schema(schema(&[("name", 's')])),
            resolve,
        )
        .add(
            Tool::new("log_steadily", "Log messages at a steady pace").input_schema(schema(&[
                ("count", 'i'),
                ("kib", 'i'),
                ("every_ms", 'i'),
            ])),
            log_steadily,
        );
}
