//! moto's DynamoDB-compatible server, started from the project's tools (`make tools`) on a loopback port, taking
//! one request at a time (`moto_serial.py` says why); and [`fault_proxy`], which puts the network's faults (silence,
//! refused connections, lost answers) between a client and it.

pub mod fault_proxy;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A running moto server. It stops when this value is dropped, or when the process that started it exits (its
/// keeper shell watches the pipe to this process).
pub struct LocalDynamo {
    port: u16,
    keeper: Child,
}

/// The workspace's root directory (where `.tools` and `Cargo.toml` are), for the local servers and tools that
/// run from it.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/local-dynamodb sits two levels below the workspace root")
        .to_path_buf()
}

/// The Python of the environment moto is installed in: the workspace's own tools (`make tools`), or else the one
/// whose `moto_server` is on `PATH` (a second worktree sharing the first one's tools).
fn moto_python() -> Option<PathBuf> {
    let own = workspace_root().join(".tools/venv/bin");
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    std::iter::once(own)
        .chain(on_path)
        .find(|dir| dir.join("moto_server").is_file() && dir.join("python").is_file())
        .map(|dir| dir.join("python"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl LocalDynamo {
    /// Starts moto on `port` (a free one when `None`) and waits until it accepts connections.
    pub fn start(port: Option<u16>) -> Result<Self, String> {
        let python = moto_python().ok_or("moto is not installed: run `make tools`")?;
        // moto's own server, taking one request at a time (see moto_serial.py for why).
        let launcher = Path::new(env!("CARGO_MANIFEST_DIR")).join("moto_serial.py");
        let port = port.unwrap_or_else(free_port);
        // The keeper runs moto and kills it once its standard input (a pipe from this process) closes.
        let script = format!(
            "'{}' '{}' 127.0.0.1 {port} >/dev/null 2>&1 & pid=$!; trap 'kill $pid 2>/dev/null' EXIT; cat >/dev/null",
            python.display(),
            launcher.display()
        );
        let keeper = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start moto_server: {e}"))?;
        let server = Self { port, keeper };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "moto_server did not open port {port} within a minute"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(server)
    }

    /// One server for the whole test process.
    pub fn shared() -> &'static LocalDynamo {
        static SHARED: OnceLock<LocalDynamo> = OnceLock::new();
        SHARED.get_or_init(|| Self::start(None).unwrap_or_else(|e| panic!("{e}")))
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment a process of its own (a function, a command) takes to reach this server through the SDK: the
    /// endpoint, with the credentials and region [`Self::sdk_config`] gives.
    pub fn sdk_env(&self) -> [(&'static str, String); 4] {
        [
            ("AWS_ENDPOINT_URL_DYNAMODB", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", "local".into()),
            ("AWS_SECRET_ACCESS_KEY", "local".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// An SDK configuration whose clients talk to this server.
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        Self::sdk_config_at(&self.endpoint()).await
    }

    /// An SDK configuration whose clients talk to a DynamoDB-compatible server at `endpoint`, started elsewhere.
    pub async fn sdk_config_at(endpoint: &str) -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_credential_types::Credentials::new(
                "local",
                "local",
                None,
                None,
                "local-dynamodb",
            ))
            .endpoint_url(endpoint)
            .load()
            .await
    }

    pub async fn client(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.sdk_config().await)
    }

    /// A new, empty table of the project's design, with a unique name.
    pub async fn fresh_table(&self) -> (aws_sdk_dynamodb::Client, String) {
        let client = self.client().await;
        let name = format!("chat-test-{}", uuid::Uuid::new_v4().simple());
        chat_aws::table::ensure_table(&client, &name)
            .await
            .expect("the table is created");
        (client, name)
    }
}

impl Drop for LocalDynamo {
    fn drop(&mut self) {
        // Closing the keeper's input makes it stop moto.
        drop(self.keeper.stdin.take());
        let _ = self.keeper.wait();
    }
}
