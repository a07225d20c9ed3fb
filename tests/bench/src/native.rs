//! The native baseline: the benchmark's tools (`echo`, `wait`, and optionally `tool_0000` … )
//! in a plain Rust MCP server built the ordinary way with the official `rmcp` crate, over stdio
//! or Streamable HTTP. `mcpbench` drives it with the same client code it drives mcpbox with.
//!
//! Usage: `native-echo [--http 127.0.0.1:PORT] [--tools N]`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt as _;
use clap::Parser;
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::schema_for_input;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Deserialize;

/// Command line.
#[derive(Parser)]
struct Args {
    /// Serve Streamable HTTP at `/mcp` on this address instead of stdio.
    #[arg(long)]
    http: Option<SocketAddr>,
    /// How many generated echo tools (`tool_0000` …) to serve beside `echo` and `wait`.
    #[arg(long, default_value_t = 0)]
    tools: u32,
}

/// Arguments of `echo` and the generated tools.
#[derive(Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

/// Arguments of `wait`.
#[derive(Deserialize, schemars::JsonSchema)]
struct WaitArgs {
    /// How long to sleep, in milliseconds (at most 10,000).
    ms: u32,
}

/// The server: its tools.
#[derive(Clone)]
struct Bench {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Bench {
    fn new(extra: u32) -> anyhow::Result<Self> {
        let mut tool_router = Self::tool_router();
        let schema = schema_for_input::<EchoArgs>().map_err(|e| anyhow::anyhow!(e))?;
        for i in 0..extra {
            let tool = Tool::new(
                format!("tool_{i:04}"),
                format!("Generated tool {i}: send the text back unchanged"),
                Arc::clone(&schema),
            )
            .with_annotations(ToolAnnotations::new().read_only(true));
            tool_router.add_route(ToolRoute::new(
                tool,
                |Parameters(EchoArgs { text }): Parameters<EchoArgs>| text,
            ));
        }
        Ok(Self { tool_router })
    }

    #[tool(
        description = "Send the text back unchanged",
        annotations(read_only_hint = true)
    )]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(
        description = "Sleep for `ms` milliseconds",
        annotations(read_only_hint = true)
    )]
    async fn wait(
        &self,
        Parameters(WaitArgs { ms }): Parameters<WaitArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if ms > 10_000 {
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "{ms} ms is over the 10,000 ms maximum"
            ))]));
        }
        tokio::time::sleep(Duration::from_millis(u64::from(ms))).await;
        Ok(CallToolResult::success(vec![ContentBlock::text("waited")]))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Bench {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let server = Bench::new(args.tools)?;
    match args.http {
        None => {
            let running = server.serve(rmcp::transport::stdio()).await?;
            running.waiting().await?;
        }
        Some(addr) => {
            let service = StreamableHttpService::new(
                move || Ok(server.clone()),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            );
            let router = axum::Router::new().nest_service("/mcp", service);
            // As any HTTP server of small replies should (mcpbox does too): without it, Nagle's
            // algorithm and the client's delayed ACK add 40 ms to every streamed reply.
            let listener = tokio::net::TcpListener::bind(addr).await?.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            axum::serve(listener, router).await?;
        }
    }
    Ok(())
}
