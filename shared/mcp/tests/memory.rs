//! A server answering a tool call with 50 MB is cut while it is read: the process's peak memory (VmHWM) stays
//! within 64 MiB of its figure before the call. Alone in its test binary, so that nothing else runs in the process
//! meanwhile; the server (tests/local-mcp's flood server) makes its answer as it sends it, so it holds next to
//! nothing of it.

use std::time::Duration;

use chat_core::{Caller, ToolSource};
use chat_mcp::McpServers;
use serde_json::json;

const ANSWER_BYTES: u64 = 50 * 1000 * 1000;
const MARGIN_KIB: u64 = 64 * 1024;

/// A figure of /proc/self/status, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

#[tokio::test]
async fn an_answer_of_50_mb_is_cut_without_holding_it() {
    let (addr, _server) = local_mcp::flood::start(([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let source = McpServers::from_json(
        &json!([{"name": "flood", "url": local_mcp::url(addr)}]).to_string(),
        Duration::from_secs(10),
        chat_mcp::http_client(),
    )
    .unwrap();
    let caller = Caller::owner("u");
    let listing = source.list(&caller).await;
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    let flood = listing.tools[0].clone();
    // Each path once, small, so that what the process sets up for a call is in the idle figure.
    for sse in [false, true] {
        flood
            .call(&caller, &json!({"bytes": 100_000, "sse": sse}))
            .await
            .unwrap();
    }
    // The peak from here: reset to the current figure where the kernel lets a process do so.
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let idle = if reset {
        status_kib("VmRSS")
    } else {
        status_kib("VmHWM")
    };
    for sse in [false, true] {
        let text = flood
            .call(&caller, &json!({"bytes": ANSWER_BYTES, "sse": sse}))
            .await
            .unwrap()
            .text;
        assert!(text.len() <= 16 * 1024, "{}", text.len());
        assert!(
            text.contains("[cut: the MCP server's answer was longer than"),
            "{text}"
        );
        let peak = status_kib("VmHWM");
        let grew = peak.saturating_sub(idle);
        println!(
            "answer of {ANSWER_BYTES} bytes as {}: idle {idle} KiB (peak reset: {reset}), peak {peak} KiB, grew {grew} KiB",
            if sse { "SSE" } else { "JSON" },
        );
        assert!(
            grew < MARGIN_KIB,
            "the peak grew {grew} KiB over the idle {idle} KiB"
        );
    }
}
