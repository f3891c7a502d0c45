//! An rmcp streamable-HTTP MCP server fixture (rmcp's own server, on a real socket), with two tools:
//! `echo` returns its `text` argument, and `notify` sends a `notifications/tools/list_changed`
//! notification to the caller before it returns, so a client can observe a server-sent notification
//! over SSE.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolsCapability,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The fixture's handler.
#[derive(Debug, Clone, Default)]
pub struct FixtureServer;

fn object(value: serde_json::Value) -> Arc<serde_json::Map<String, serde_json::Value>> {
    match value {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

impl ServerHandler for FixtureServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools_with({
                    let mut tools = ToolsCapability::default();
                    tools.list_changed = Some(true);
                    tools
                })
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
        });
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("echo", "Returns its text argument", object(schema)),
            Tool::new(
                "notify",
                "Sends a log notification, then returns",
                object(serde_json::json!({"type": "object"})),
            ),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match request.name.as_ref() {
            "echo" => {
                let text = request
                    .arguments
                    .as_ref()
                    .and_then(|a| a.get("text"))
                    .and_then(|t| t.as_str())
                    .unwrap_or_default()
                    .to_owned();
                Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
            }
            "notify" => {
                context
                    .peer
                    .notify_tool_list_changed()
                    .await
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                Ok(CallToolResult::success(vec![ContentBlock::text("sent")]).into())
            }
            other => Err(ErrorData::invalid_params(
                format!("no tool named {other}"),
                None,
            )),
        }
    }
}

/// A running MCP server; stops when dropped.
#[derive(Debug)]
pub struct McpServer {
    /// Bound address.
    pub addr: SocketAddr,
    task: JoinHandle<()>,
}

impl McpServer {
    /// The MCP endpoint URL as reached on `host` (e.g. "127.0.0.1").
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves the fixture on `listener` at `/mcp` (any path is served; clients use `/mcp`).
///
/// # Errors
/// When the listener's address cannot be read.
pub fn serve(listener: TcpListener) -> std::io::Result<McpServer> {
    let addr = listener.local_addr()?;
    // Requests arrive with the executor-side Host (a namespace address, 127.0.0.1, ...): host checks
    // guard browsers against DNS rebinding, which does not apply to this fixture.
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    let service = StreamableHttpService::new(
        || Ok(FixtureServer),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let svc = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    });
    Ok(McpServer { addr, task })
}

/// Binds 127.0.0.1:0 and serves the fixture.
///
/// # Errors
/// When binding fails.
pub async fn start() -> std::io::Result<McpServer> {
    serve(TcpListener::bind("127.0.0.1:0").await?)
}
