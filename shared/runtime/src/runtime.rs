//! Running a function as Lambda runs it: a tokio runtime that fits the execution environment, TCP_NODELAY on the
//! connection to the Runtime API, and the runtime loop kept alive across a failed exchange with that API.
//!
//! **The tokio runtime.** A Lambda execution environment hands its function one request at a time, unless
//! `AWS_LAMBDA_MAX_CONCURRENCY` says more (Lambda Managed Instances). For one at a time a multi-threaded runtime
//! only costs: the Runtime API loop runs on the main thread and the SDK's connections on worker threads, so every
//! request hops between threads, and much of a request's CPU went to the kernel switching them. Measured with
//! `make bench`: a current-thread runtime takes 20–30 % less CPU per request, and about half the system time.
//! With `AWS_LAMBDA_MAX_CONCURRENCY` above 1 the functions poll that many requests at once (`lambda_http`'s
//! `run_concurrent`, which falls back to one at a time otherwise) on a multi-threaded runtime, as such an
//! environment has several vCPUs.
//!
//! **TCP_NODELAY.** `lambda_runtime` 1.5.0 (with `lambda_runtime_api_client` 1.1.1) talks to the Runtime API
//! through hyper-util's `HttpConnector` with TCP_NODELAY off, and `Runtime::new` builds that client itself: the
//! client builder takes a connector (`with_connector`) but no public constructor of the runtime takes a client, and
//! the services that would carry one are private to the crate. A streamed line written while the previous one is
//! unacknowledged then waits for the Runtime API's delayed ACK (about 40 ms on Linux): in `make bench`, p99 per
//! line 44 ms instead of 0.7, and a stream's first byte 35-45 ms instead of 2. So the functions set the option on the
//! runtime's own socket: before each request is handled they look through their open descriptors for TCP sockets
//! connected to `AWS_LAMBDA_RUNTIME_API` and set TCP_NODELAY where it is off. The connection that delivered the
//! request is the one that carries its response (the runtime reads the event whole first, which returns the
//! connection to the pool), so a new connection after a reconnect (the API closed the old one, or a SnapStart
//! restore reset the pool) has the option before its first response. (With several requests at once, a response
//! may find no idle connection and open one; that connection gets the option at the next request.) A local relay
//! would not do: Nagle's algorithm acts on the sending socket, which would still be the runtime's own. Remove this
//! once `lambda_runtime` sets TCP_NODELAY itself (or its runtime takes a client).
//!
//! Two switches exist for `make bench` only, to measure the functions as they were in the same run:
//! `CHAT_RUNTIME_FLAVOR=current_thread|multi_thread` and `CHAT_TCP_NODELAY=off`.

use std::future::Future;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use chat_edge::ConfigError;

/// The tokio runtime's flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    CurrentThread,
    MultiThread,
}

/// How a function runs under the Runtime API, from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSettings {
    pub flavor: Flavor,
    /// Whether the Runtime API connection gets TCP_NODELAY (always, but for `make bench`'s "before" figures).
    pub tcp_nodelay: bool,
    /// How many requests the environment may hand out at once (`AWS_LAMBDA_MAX_CONCURRENCY`, 1 when unset).
    pub max_concurrency: u32,
}

impl RuntimeSettings {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        // Read as lambda_runtime reads it: a positive integer, anything else meaning one at a time.
        let max_concurrency = lookup("AWS_LAMBDA_MAX_CONCURRENCY")
            .and_then(|v| v.trim().parse::<u32>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(1);
        let flavor = match lookup("CHAT_RUNTIME_FLAVOR").as_deref().map(str::trim) {
            None | Some("") if max_concurrency > 1 => Flavor::MultiThread,
            None | Some("") => Flavor::CurrentThread,
            Some("current_thread") => Flavor::CurrentThread,
            Some("multi_thread") => Flavor::MultiThread,
            Some(other) => {
                return Err(ConfigError {
                    name: "CHAT_RUNTIME_FLAVOR",
                    reason: format!("expected current_thread or multi_thread, got {other:?}"),
                });
            }
        };
        let tcp_nodelay = match lookup("CHAT_TCP_NODELAY").as_deref().map(str::trim) {
            None | Some("") | Some("on") => true,
            Some("off") => false,
            Some(other) => {
                return Err(ConfigError {
                    name: "CHAT_TCP_NODELAY",
                    reason: format!("expected on or off, got {other:?}"),
                });
            }
        };
        Ok(Self {
            flavor,
            tcp_nodelay,
            max_concurrency,
        })
    }
}

/// Runs a function's `main` future on the tokio runtime its environment calls for (see the module's notes). Whatever
/// must happen while the process has one thread (the composition root points the system's roots at their bundle
/// file: `chat_aws::https::read_bundle_only`) is done before it is called.
///
/// A bad switch does not end the process here, before logging is set up and with nothing told to Lambda: the
/// defaults run `main`, and [`crate::start`] reports the error as it reports every configuration error.
pub fn run_function<F, E>(main: F) -> Result<(), E>
where
    F: Future<Output = Result<(), E>>,
    E: From<std::io::Error>,
{
    let settings = RuntimeSettings::from_env().unwrap_or_else(|error| {
        crate::deferred::defer(error);
        RuntimeSettings::from_lookup(|_| None).expect("the defaults are valid")
    });
    // A plain server (no Runtime API) takes requests from many clients at once: threads, unless told otherwise.
    let plain_server = std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_none()
        && std::env::var_os("CHAT_RUNTIME_FLAVOR").is_none();
    let flavor = if plain_server {
        Flavor::MultiThread
    } else {
        settings.flavor
    };
    let mut builder = match flavor {
        Flavor::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        Flavor::MultiThread => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.enable_all().build()?.block_on(main)
}

/// Wraps a request handler so that each call first makes sure the Runtime API connection has TCP_NODELAY (see the
/// module's notes). Cheap: one listing of `/proc/self/fd` and a `getpeername` per descriptor, about 15 µs for the
/// dozen descriptors a function holds.
pub fn with_runtime_api_nodelay<F, Fut>(
    handler: F,
) -> impl Fn(lambda_http::Request) -> Fut + Clone + Send + Sync + 'static
where
    F: Fn(lambda_http::Request) -> Fut + Clone + Send + Sync + 'static,
{
    let sockets = RuntimeApiSockets::from_env();
    move |request| {
        if let Some(sockets) = sockets {
            sockets.set_nodelay();
        }
        handler(request)
    }
}

/// For a streamed response: sets TCP_NODELAY once more when the runtime first reads the response's body, in an
/// environment that takes several requests at once (a no-op otherwise). There a response may find no idle
/// connection and open its own after the request's check; by the time the runtime reads the body, that connection
/// is open: the runtime hands the metadata prelude to the connection first, and reads the body once it has been
/// taken. One at a time, the response always goes out on the connection that delivered the request.
pub fn on_streamed_body_start() {
    if let Some(sockets) = RuntimeApiSockets::from_env()
        && sockets.concurrent
    {
        sockets.set_nodelay();
    }
}

/// The Runtime API's addresses, resolved once; `None` when the option is switched off or the address is unknown.
struct RuntimeApiSockets {
    peers: Vec<SocketAddr>,
    /// Several requests at once (see [`on_streamed_body_start`]).
    concurrent: bool,
}

impl RuntimeApiSockets {
    fn from_env() -> Option<&'static Self> {
        static SOCKETS: OnceLock<Option<RuntimeApiSockets>> = OnceLock::new();
        SOCKETS
            .get_or_init(|| {
                let settings = RuntimeSettings::from_env().ok()?;
                if !settings.tcp_nodelay {
                    return None;
                }
                let api = std::env::var("AWS_LAMBDA_RUNTIME_API").ok()?;
                let peers = runtime_api_addresses(&api);
                if peers.is_empty() {
                    tracing::warn!(
                        runtime_api = %api,
                        "cannot resolve AWS_LAMBDA_RUNTIME_API; its connection keeps Nagle's algorithm"
                    );
                    return None;
                }
                Some(Self {
                    peers,
                    concurrent: settings.max_concurrency > 1,
                })
            })
            .as_ref()
    }

    /// Sets TCP_NODELAY on every open TCP socket connected to the Runtime API that does not have it yet.
    fn set_nodelay(&self) {
        let entries = match std::fs::read_dir("/proc/self/fd") {
            Ok(entries) => entries,
            Err(e) => {
                tracing::debug!(error = %e, "cannot list /proc/self/fd");
                return;
            }
        };
        for entry in entries.flatten() {
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<RawFd>().ok())
            else {
                continue;
            };
            // SAFETY: the descriptor is only borrowed for the calls below and never closed here. It was open when
            // listed; should another thread close it meanwhile, the calls fail or, were its number reused at once,
            // act on a socket that is then checked like any other.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            let socket = socket2::SockRef::from(&fd);
            // Not a socket, not connected, or not to the Runtime API: not ours to touch.
            let Some(peer) = socket.peer_addr().ok().and_then(|a| a.as_socket()) else {
                continue;
            };
            if !self.peers.iter().any(|p| same_address(p, &peer)) {
                continue;
            }
            if socket.tcp_nodelay().unwrap_or(true) {
                continue;
            }
            match socket.set_tcp_nodelay(true) {
                Ok(()) => {
                    tracing::debug!(%peer, "TCP_NODELAY set on the Runtime API connection")
                }
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "cannot set TCP_NODELAY on the Runtime API connection")
                }
            }
        }
    }
}

/// The addresses `AWS_LAMBDA_RUNTIME_API` (`host:port`, perhaps with a scheme or a base path) resolves to.
fn runtime_api_addresses(api: &str) -> Vec<SocketAddr> {
    let api = api
        .trim()
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let authority = api.split('/').next().unwrap_or_default();
    authority
        .to_socket_addrs()
        .map(|addrs| addrs.collect())
        .unwrap_or_default()
}

/// Equal addresses, an IPv4 address and its IPv6-mapped form counting as one.
fn same_address(a: &SocketAddr, b: &SocketAddr) -> bool {
    let canonical = |ip: IpAddr| ip.to_canonical();
    a.port() == b.port() && canonical(a.ip()) == canonical(b.ip())
}

/// Runs the runtime loop `run` again when it fails, up to three quick failures in a row.
///
/// The loop ends with an error when one response cannot be handed to the Runtime API. On AWS that is rare and
/// the sandbox would be restarted anyway; under `cargo lambda watch` (the local run) it happens when a client
/// hangs up at the wrong moment, and a function that exited is not started again, so every later request would
/// hang. Starting the loop again loses nothing: that one response could not be delivered.
pub async fn keep_running<F, Fut, E>(mut run: F) -> Result<(), E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let mut quick_failures = 0u32;
    loop {
        let started = Instant::now();
        match run().await {
            Ok(()) => return Ok(()),
            Err(e) => {
                // A loop that ran a while before failing starts the count afresh.
                if started.elapsed() > Duration::from_secs(10) {
                    quick_failures = 0;
                }
                quick_failures += 1;
                if quick_failures > 3 {
                    return Err(e);
                }
                tracing::error!(error = %e, "the runtime loop failed; starting it again");
                tokio::time::sleep(Duration::from_millis(100 * u64::from(quick_failures))).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn settings(pairs: &[(&str, &str)]) -> Result<RuntimeSettings, ConfigError> {
        RuntimeSettings::from_lookup(chat_edge::settings_in(pairs))
    }

    #[test]
    fn one_request_at_a_time_runs_on_the_current_thread_with_nodelay() {
        let expected = RuntimeSettings {
            flavor: Flavor::CurrentThread,
            tcp_nodelay: true,
            max_concurrency: 1,
        };
        assert_eq!(settings(&[]).unwrap(), expected);
        for value in ["1", "0", "", "many"] {
            assert_eq!(
                settings(&[("AWS_LAMBDA_MAX_CONCURRENCY", value)]).unwrap(),
                expected,
                "{value:?}"
            );
        }
    }

    #[test]
    fn several_requests_at_once_run_on_several_threads() {
        let s = settings(&[("AWS_LAMBDA_MAX_CONCURRENCY", "8")]).unwrap();
        assert_eq!((s.flavor, s.max_concurrency), (Flavor::MultiThread, 8));
        // The bench's switch wins either way.
        let s = settings(&[
            ("AWS_LAMBDA_MAX_CONCURRENCY", "8"),
            ("CHAT_RUNTIME_FLAVOR", "current_thread"),
        ])
        .unwrap();
        assert_eq!(s.flavor, Flavor::CurrentThread);
    }

    #[test]
    fn the_bench_switches_are_read_and_checked() {
        let s = settings(&[
            ("CHAT_RUNTIME_FLAVOR", "multi_thread"),
            ("CHAT_TCP_NODELAY", "off"),
        ])
        .unwrap();
        assert_eq!((s.flavor, s.tcp_nodelay), (Flavor::MultiThread, false));
        assert_eq!(
            settings(&[("CHAT_RUNTIME_FLAVOR", "threads")])
                .unwrap_err()
                .name,
            "CHAT_RUNTIME_FLAVOR"
        );
        assert_eq!(
            settings(&[("CHAT_TCP_NODELAY", "no")]).unwrap_err().name,
            "CHAT_TCP_NODELAY"
        );
    }

    #[test]
    fn the_runtime_api_address_is_read_with_or_without_scheme_and_path() {
        let expected: SocketAddr = "127.0.0.1:9001".parse().unwrap();
        for api in [
            "127.0.0.1:9001",
            "http://127.0.0.1:9001",
            "127.0.0.1:9001/.rt",
        ] {
            assert_eq!(runtime_api_addresses(api), vec![expected], "{api}");
        }
        assert!(runtime_api_addresses("not an address").is_empty());
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:9001".parse().unwrap();
        assert!(same_address(&expected, &mapped));
        assert!(!same_address(&expected, &"127.0.0.1:9002".parse().unwrap()));
    }

    #[test]
    fn sets_nodelay_only_on_sockets_connected_to_the_runtime_api() {
        let api = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to_api = std::net::TcpStream::connect(api.local_addr().unwrap()).unwrap();
        let to_other = std::net::TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert!(!to_api.nodelay().unwrap() && !to_other.nodelay().unwrap());
        let sockets = RuntimeApiSockets {
            peers: vec![api.local_addr().unwrap()],
            concurrent: false,
        };
        sockets.set_nodelay();
        assert!(to_api.nodelay().unwrap());
        assert!(!to_other.nodelay().unwrap());
        // A reconnect: a new socket to the API gets the option on the next call.
        let again = std::net::TcpStream::connect(api.local_addr().unwrap()).unwrap();
        assert!(!again.nodelay().unwrap());
        sockets.set_nodelay();
        assert!(again.nodelay().unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn restarts_after_a_failure_and_gives_up_after_three_quick_ones() {
        let calls = Cell::new(0);
        let result: Result<(), String> = keep_running(|| {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n == 2 {
                    Ok(())
                } else {
                    Err(format!("failure {n}"))
                }
            }
        })
        .await;
        assert_eq!((result, calls.get()), (Ok(()), 2));

        let calls = Cell::new(0);
        let result: Result<(), String> = keep_running(|| {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move { Err(format!("failure {n}")) }
        })
        .await;
        assert_eq!((result, calls.get()), (Err("failure 4".to_string()), 4));
    }
}
