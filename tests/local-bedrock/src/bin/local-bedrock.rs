//! Runs the local Bedrock-compatible server as a process: `local-bedrock [--port N]` (default 9100).

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut port: u16 = 9100;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => {
                port = args
                    .next()
                    .and_then(|p| p.parse().ok())
                    .expect("--port takes a port number");
            }
            other => panic!("unknown argument {other}; usage: local-bedrock [--port N]"),
        }
    }
    let server = local_bedrock::LocalBedrock::start_on(([127, 0, 0, 1], port).into(), true).await?;
    eprintln!("local-bedrock: listening on {}", server.endpoint());
    server.wait().await;
    Ok(())
}
