//! `local-mcp`: the local MCP server on its own, on 127.0.0.1 (`LOCAL_MCP_PORT`, 9400 by default; `--port N`
//! too). `LOCAL_MCP_TOKEN` makes it require `Authorization: Bearer <token>`.

use std::net::SocketAddr;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port = args
        .iter()
        .position(|a| a == "--port")
        .and_then(|at| args.get(at + 1).cloned())
        .or_else(|| std::env::var("LOCAL_MCP_PORT").ok())
        .map(|p| {
            p.trim().parse::<u16>().unwrap_or_else(|_| {
                eprintln!("local-mcp: the port must be a number from 0 to 65535");
                std::process::exit(2)
            })
        })
        .unwrap_or(9400);
    let options = local_mcp::Options {
        bearer_token: std::env::var("LOCAL_MCP_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
        ..Default::default()
    };
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let (addr, task) = local_mcp::start_with(addr, options)
        .await
        .unwrap_or_else(|e| {
            eprintln!("local-mcp: cannot listen on {addr}: {e}");
            std::process::exit(1)
        });
    eprintln!(
        "local-mcp: serving add, echo, sleep and note on {}",
        local_mcp::url(addr)
    );
    tokio::select! {
        _ = task => {}
        _ = tokio::signal::ctrl_c() => eprintln!("local-mcp: stopping"),
    }
}
