//! `outpost-test-mcp-server ADDR`: the MCP server fixture as a process, so tests can run it inside a
//! network namespace. Prints `listening http://ADDR/mcp` once bound; runs until killed.

use anyhow::Context;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("cannot bind {addr}"))?;
    let server = outpost_tests::mcp_server::serve(listener)?;
    println!("listening {}", server.url());
    std::future::pending::<()>().await;
    Ok(())
}
