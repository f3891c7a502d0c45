//! MCP streamable HTTP through the executor: rmcp's client over `ExecutorHttpClient` lists tools,
//! calls one, and receives a server-sent notification (loopback variant; always runs).

use std::time::Duration;

use outpost_client::http::ExecutorHttpClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::NotificationContext;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::sync::mpsc;

use super::proxy;

/// Counts `notifications/tools/list_changed` from the server.
#[derive(Debug, Clone)]
struct Recorder(mpsc::UnboundedSender<()>);

impl ClientHandler for Recorder {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send(());
    }
}

/// Connects rmcp to `url` through `client`, then: list tools, call `echo`, call `notify` and wait
/// for its notification.
pub(crate) async fn exercise_mcp(client: ExecutorHttpClient, url: &str) -> anyhow::Result<()> {
    let (tx, mut notifications) = mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
    );
    let service = Recorder(tx).serve(transport).await?;
    let mut names: Vec<_> = service
        .list_all_tools()
        .await?
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["echo", "notify"]);
    let args = serde_json::json!({"text": "through the executor"});
    let serde_json::Value::Object(args) = args else {
        unreachable!("a JSON object literal")
    };
    let result = service
        .call_tool(CallToolRequestParams::new("echo").with_arguments(args))
        .await?;
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone());
    assert_eq!(text.as_deref(), Some("through the executor"));
    service
        .call_tool(CallToolRequestParams::new("notify"))
        .await?;
    tokio::time::timeout(Duration::from_secs(10), notifications.recv())
        .await
        .map_err(|_| anyhow::anyhow!("no server-sent notification arrived"))?
        .ok_or_else(|| anyhow::anyhow!("the client handler went away"))?;
    service.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn mcp_over_loopback_through_the_executor() -> anyhow::Result<()> {
    let server = outpost_tests::mcp_server::start().await?;
    let (_executor, client) = proxy().await?;
    exercise_mcp(client, &server.url()).await
}
