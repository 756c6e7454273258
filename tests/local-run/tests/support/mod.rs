//! Starting a local run (`local-run`, what `make run` runs) for a test file, and stopping it with the test process.
#![allow(dead_code)] // Each test file uses its own part of it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// A local run serving every route on `http://127.0.0.1:{port}`.
pub struct LocalRun {
    pub port: u16,
    /// Everything the local run and its functions printed.
    pub log: PathBuf,
    // Its standard input is a pipe held open by this process: when the test process exits, the pipe closes and
    // the local run stops with everything it started.
    _child: Child,
}

impl LocalRun {
    /// Starts a local run on `port` (with moto and the local Bedrock server on `port + 100` and `port + 200`) and
    /// `env` added to its environment, and waits until every function answers. Retrieval is off
    /// (`KNOWLEDGE_BASE_ID` empty, so no local knowledge base starts) unless `env` sets `KNOWLEDGE_BASE_ID`.
    pub fn start(name: &str, port: u16, env: &[(&str, &str)]) -> LocalRun {
        Self::start_with(name, port, env, &[])
    }

    /// [`LocalRun::start`] with the local knowledge base on (`port + 300`): turns are grounded in the sample
    /// documents.
    pub fn start_grounded(name: &str, port: u16, env: &[(&str, &str)]) -> LocalRun {
        Self::launch(name, port, env, &[], true)
    }

    /// [`LocalRun::start`] with more arguments for `local-run` (`--cargo-lambda-watch`).
    pub fn start_with(name: &str, port: u16, env: &[(&str, &str)], args: &[&str]) -> LocalRun {
        Self::launch(name, port, env, args, false)
    }

    fn launch(
        name: &str,
        port: u16,
        env: &[(&str, &str)],
        args: &[&str],
        grounded: bool,
    ) -> LocalRun {
        // The log lives outside the workspace: a file inside it would make `cargo lambda watch` reload.
        let log = std::env::temp_dir().join(format!("chat-backend-{name}-local-run.log"));
        let file = std::fs::File::create(&log).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_local-run"));
        command
            .arg("--exit-with-stdin")
            .args(args)
            .current_dir(root())
            .env("LOCAL_PORT", port.to_string())
            .env("LOCAL_BEDROCK_PORT", (port + 100).to_string())
            .env("LOCAL_DYNAMODB_PORT", (port + 200).to_string())
            .env("LOCAL_KB_PORT", (port + 300).to_string())
            // These tests check answers as the model alone gives them, unless they ask for the knowledge base.
            .env("KNOWLEDGE_BASE_ID", "")
            // The model answers at once unless the test asks for pacing.
            .env("LOCAL_MODEL_PACE_MS", "0")
            .envs(env.iter().copied());
        if grounded {
            // Unset, the local run starts its local knowledge base and points the functions at it.
            command.env_remove("KNOWLEDGE_BASE_ID");
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("local-run starts");
        let start = Instant::now();
        loop {
            let text = read(&log);
            if text.contains("local-run: ready on") {
                break;
            }
            // It exits (after printing why) when it cannot start.
            if child.try_wait().unwrap().is_some() {
                panic!("the local run failed to start:\n{text}");
            }
            if start.elapsed() > Duration::from_secs(900) {
                panic!("the local run was not ready within 15 minutes:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        LocalRun {
            port,
            log,
            _child: child,
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log_text(&self) -> String {
        read(&self.log)
    }
}

fn read(path: &Path) -> String {
    let mut text = String::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    text
}

/// A local run whose callers are proven by JWTs (`AUTH_MODE=jwt`) that a signing key made for it signs.
pub struct JwtRun {
    pub local: LocalRun,
    pub signer: chat_testing::harness::JwtSigner,
    issuer: &'static str,
    audience: &'static str,
}

impl JwtRun {
    /// `start` given the environment that accepts the tokens of `issuer` for `audience` signed by a new key `kid`.
    pub fn start(
        kid: &str,
        issuer: &'static str,
        audience: &'static str,
        start: impl FnOnce(&[(&str, &str)]) -> LocalRun,
    ) -> JwtRun {
        let signer = chat_testing::harness::JwtSigner::new(kid);
        let jwks = signer.jwks_path();
        let local = start(&chat_testing::setup::jwt_env(issuer, audience, &jwks));
        JwtRun {
            local,
            signer,
            issuer,
            audience,
        }
    }

    /// A token with `claims` over the usual ones.
    pub fn token(&self, claims: serde_json::Value) -> String {
        self.signer
            .token_with(self.issuer, self.audience, |_| {}, claims)
    }
}

/// What an HTTP answer of a local run says: its status, its `Retry-After` and its body as text.
pub async fn read_answer(response: reqwest::Response) -> (u16, Option<String>, String) {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry_after, response.text().await.unwrap())
}
