//! WASI 0.3 plugins (`mcpbox:plugin@0.3.0`, `wit/0.3/`): the component model's
//! native async (`async func`, `stream`, `future`) beside the 0.2 plugins, in the one engine and
//! linker. This module owns the 0.3 bindings and host interface and links WASI 0.3
//! (`wasi:cli`, `wasi:clocks`, `wasi:filesystem`, `wasi:random`, `wasi:sockets` from
//! `wasmtime-wasi`'s `p3`; `wasi:http` from `wasmtime-wasi-http`'s `p3`) on the same per-call
//! contexts as 0.2: the same preopens, environment and denied sockets, and every HTTP request
//! through the same [`HttpGate`](super::http) (`WasiHttpHooks::send_request` serves both
//! versions). Running a 0.3 call lives beside the 0.2 one, in `plugin::p3`.
//!
//! Wasmtime 48 calls its WASI 0.3 support experimental ("not ready for production use";
//! security fixes limited to it get no patch releases): see ARCHITECTURE.md.

pub mod bindings;
mod host;

use wasmtime::component::{HasSelf, Linker};

use super::caller::Caller;
use super::host_interface::HostInterfaceCtx;
use super::state::StoreData;

/// Link WASI 0.3 and the 0.3 plugin world's `host` and `caller` interfaces (`CallerCtx`
/// answers both versions of `caller`).
pub fn add_to_linker(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    wasmtime_wasi::p3::add_to_linker(linker)?;
    wasmtime_wasi_http::p3::add_to_linker(linker)?;
    bindings::mcpbox::plugin::host::add_to_linker::<StoreData, HasSelf<HostInterfaceCtx>>(
        linker,
        StoreData::host_interface,
    )?;
    bindings::mcpbox::plugin::caller::add_to_linker::<StoreData, Caller>(
        linker,
        StoreData::caller,
    )?;
    // `types` holds only types: an empty instance satisfies a plugin's import of it.
    linker.instance("mcpbox:plugin/types@0.3.0")?;
    Ok(())
}
