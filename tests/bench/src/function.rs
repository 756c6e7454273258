//! A function's binary started as Lambda starts it: a clean environment holding the Runtime API's address and the
//! variables Lambda sets, plus the function's own configuration.

use std::io;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Emulator;

/// A running function process; it is killed when dropped.
pub struct Function {
    child: Child,
    /// Just before the process was started.
    pub spawned_at: Instant,
}

impl Function {
    /// Starts `binary` against `emulator` with `env` on top of Lambda's variables. With `quiet`, its output goes
    /// nowhere (the bench); otherwise it shares this process's standard error (tests), and logs only warnings
    /// unless `env` says otherwise.
    pub fn spawn(
        binary: &Path,
        emulator: &Emulator,
        env: &[(&str, &str)],
        quiet: bool,
    ) -> io::Result<Self> {
        let runtime_api = emulator.runtime_api();
        Self::start(
            binary,
            &[("AWS_LAMBDA_RUNTIME_API", &runtime_api)],
            env,
            quiet,
        )
    }

    /// Starts `binary` as a plain HTTP server on 127.0.0.1:`port` (no Runtime API), with `env` on top of the
    /// variables Lambda would set.
    pub fn spawn_server(binary: &Path, port: u16, env: &[(&str, &str)]) -> io::Result<Self> {
        let port = port.to_string();
        Self::start(
            binary,
            &[("PORT", &port), ("BIND_ADDRESS", "127.0.0.1")],
            env,
            true,
        )
    }

    /// `binary` with a clean environment: `mode` (how it is served), Lambda's variables, then `env`.
    fn start(
        binary: &Path,
        mode: &[(&str, &str)],
        env: &[(&str, &str)],
        quiet: bool,
    ) -> io::Result<Self> {
        let name = binary
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "function".into());
        let mut command = Command::new(binary);
        // Nothing of the caller's environment (AWS profiles, RUST_LOG) leaks into the function.
        command.env_clear().envs(mode.iter().copied());
        command
            .env("AWS_LAMBDA_FUNCTION_NAME", &name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}"))
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "local")
            .env("AWS_SECRET_ACCESS_KEY", "local")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_LAMBDA_LOG_LEVEL", "WARN")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(if quiet {
                Stdio::null()
            } else {
                Stdio::inherit()
            })
            .stderr(if quiet {
                Stdio::null()
            } else {
                Stdio::inherit()
            });
        let spawned_at = Instant::now();
        Ok(Self {
            child: command.spawn()?,
            spawned_at,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited (and how), without waiting.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The most memory the process has held resident so far (`VmHWM` of `/proc/<pid>/status`), in KiB.
    pub fn peak_rss_kib(&self) -> io::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| io::Error::other("no VmHWM in /proc/<pid>/status"))
    }

    /// CPU time the process has used so far, all threads, as (user, system), from `/proc/<pid>/stat`.
    pub fn cpu_time(&self) -> io::Result<(Duration, Duration)> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))?;
        // The command name (field 2) may hold spaces; the fields after it are plain numbers.
        let rest = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .ok_or_else(|| io::Error::other("unreadable /proc/<pid>/stat"))?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // After the name: state is field 3, utime field 14, stime field 15.
        let ticks = |field: usize| -> io::Result<u64> {
            fields
                .get(field - 3)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| io::Error::other("unreadable /proc/<pid>/stat"))
        };
        // SAFETY: sysconf reads a constant of the system.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let seconds = |t: u64| Duration::from_secs_f64(t as f64 / per_second);
        Ok((seconds(ticks(14)?), seconds(ticks(15)?)))
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
