//! One HTTPS client for every AWS SDK client of a cold start, and the system's trust store the functions' TLS
//! clients verify servers with, read from its bundle file only and loaded once per process.
//!
//! **The SDK's client.** Left to itself, each SDK client (Bedrock, the knowledge base, DynamoDB, S3) builds an HTTP
//! client of its own: a connection pool for each set of timeouts it calls with, and as many TLS configurations,
//! each parsing the system's roots into trust anchors again (one more when the client is built). [`https_client`]
//! is one client for all of them, set on the SDK configuration they are built from ([`crate::load_aws_config`]):
//! the SDK's own connection pool (`aws_smithy_http_client::pool`: one pool, its TLS configuration built once), with
//! the TLS stack, crypto provider, roots and proxy settings of the SDK's default client (rustls with aws-lc-rs; the
//! roots `rustls-native-certs` loads, which the SDK keeps for the process; `HTTP(S)_PROXY`, `NO_PROXY`). Each call
//! keeps its own client's connect and read timeouts (the pool takes them per call), and http:// endpoints (the
//! local servers and moto of the tests) are served as before.
//!
//! **The trust store.** `rustls-native-certs` reads the file `SSL_CERT_FILE` names and the directories `SSL_CERT_DIR`
//! names, or, when neither is set, the system's bundle file *and* its certificate directories (`openssl-probe`'s
//! search list). Debian keeps every root in both: the bundle `/etc/ssl/certs/ca-certificates.crt`, and one file
//! per root in `/etc/ssl/certs` beside it, each opened and decoded again (about 2.5 ms of CPU of each cold start,
//! of 3.2: bench/RESULTS.md). [`read_bundle_only`], called as a function starts, names the bundle in
//! `SSL_CERT_FILE` when neither variable is set, so that every loader reads that one file: the system's roots as
//! `update-ca-certificates` (Debian) or `update-ca-trust` (Amazon Linux) wrote them, nothing narrowed. What is no
//! longer read is a file of the directory that is not in the bundle: on Debian the `ssl-cert` package's self-signed
//! `ssl-cert-snakeoil.pem`, the machine's own `localhost` certificate (`CA:FALSE`, no authority of ca-certificates'
//! list; `openssl rehash`, which `update-ca-certificates` runs, links it like the roots, so that clients reading the
//! directory trusted a server presenting it); on Amazon Linux 2023 the directory holds only the bundle again and its
//! `TRUSTED CERTIFICATE` twin, which the parser skips.
//! A root to trust beyond the system's goes into the bundle, or into a bundle `SSL_CERT_FILE` names.
//!
//! [`system_roots`] are those roots for the other TLS clients (the reqwest client of the JWKS, the OTLP exporter and
//! the MCP servers), loaded once per process by the same loader the SDK uses, so both trust the same roots.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_smithy_http_client::pool;
use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls;
use rustls_pki_types::CertificateDer;

/// The variable naming the file of trusted roots (OpenSSL's, read by `rustls-native-certs`).
const CERT_FILE: &str = "SSL_CERT_FILE";
/// The variable naming directories of trusted roots, one file each.
const CERT_DIR: &str = "SSL_CERT_DIR";

/// Names the system's bundle in `SSL_CERT_FILE` when neither it nor `SSL_CERT_DIR` is set, so that the system's
/// roots are read from that one file and not also from the certificate directories beside it (see the module's
/// notes); the bundle is the first file of `openssl-probe`'s search list that exists, the one `rustls-native-certs`
/// reads. An operator's own `SSL_CERT_FILE` or `SSL_CERT_DIR` (even empty) is left as it is. Returns the bundle it
/// named, `None` when it named none.
///
/// # Safety
///
/// It sets an environment variable: no other thread may be reading or writing the environment meanwhile. Call it
/// first thing in a process, before any other thread (a runtime's workers, a logger's) is started.
pub unsafe fn read_bundle_only() -> Option<PathBuf> {
    let bundle = bundle_to_name(
        |name| std::env::var_os(name),
        || openssl_probe::probe().cert_file,
    )?;
    // SAFETY: the caller guarantees that no other thread reads or writes the environment now.
    unsafe { std::env::set_var(CERT_FILE, &bundle) };
    Some(bundle)
}

/// The bundle [`read_bundle_only`] names: `probe`'s, unless the environment (`var`) already says where roots are.
fn bundle_to_name(
    var: impl Fn(&str) -> Option<OsString>,
    probe: impl FnOnce() -> Option<PathBuf>,
) -> Option<PathBuf> {
    if var(CERT_FILE).is_some() || var(CERT_DIR).is_some() {
        return None;
    }
    probe()
}

static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
static ROOT_LOADS: AtomicUsize = AtomicUsize::new(0);

/// The system's roots, as `rustls-native-certs` loads them (the loader of the SDK's own TLS, so that every client
/// trusts what the SDK's do), loaded on first use and kept for the process. A file that cannot be read or a
/// certificate that cannot be decoded is skipped and logged, as the SDK does.
pub fn system_roots() -> &'static [CertificateDer<'static>] {
    ROOTS.get_or_init(|| {
        ROOT_LOADS.fetch_add(1, Ordering::Relaxed);
        let loaded = rustls_native_certs::load_native_certs();
        if !loaded.errors.is_empty() {
            tracing::warn!(errors = ?loaded.errors, "some of the system's root certificates could not be read");
        }
        if loaded.certs.is_empty() {
            tracing::warn!("no root certificate found: no TLS server will be trusted");
        }
        loaded.certs
    })
}

/// How many times this process has loaded [`system_roots`]: 1 once any client has asked for them, however many.
pub fn system_roots_loads() -> usize {
    ROOT_LOADS.load(Ordering::Relaxed)
}

/// Why the shared HTTPS client could not be built (the SDK's clients then build their own, as before).
#[derive(Debug, thiserror::Error)]
pub enum HttpsClientError {
    #[error("the connection pool cannot be built: {0}")]
    Pool(#[from] pool::BuildError),
    #[error("the connection pool has no client: {0}")]
    Client(#[from] pool::ClientBuildError),
}

/// The HTTP client for every SDK client built from one configuration: one connection pool (HTTP/1.1 and HTTP/2,
/// https and http), the SDK default client's TLS (rustls, aws-lc-rs, the system's roots as the SDK loads them) and
/// proxies from the environment. Each call keeps its client's connect and read timeouts. Its connections are
/// driven on the tokio runtime of its first call.
pub fn https_client() -> Result<pool::Client, HttpsClientError> {
    let pool = pool::ConnectionPool::builder()
        .proxy_config(ProxyConfig::from_env())
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::AwsLc,
        ))
        .build_https()?;
    Ok(pool::Client::new(&pool)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_is_named_only_when_the_environment_names_no_roots() {
        let probe = || Some(PathBuf::from("/etc/ssl/certs/ca-certificates.crt"));
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(
            bundle_to_name(env(&[]), probe),
            Some(PathBuf::from("/etc/ssl/certs/ca-certificates.crt"))
        );
        assert_eq!(
            bundle_to_name(env(&[("SSL_CERT_FILE", "/mine.pem")]), probe),
            None
        );
        assert_eq!(
            bundle_to_name(env(&[("SSL_CERT_DIR", "/certs")]), probe),
            None
        );
        assert_eq!(bundle_to_name(env(&[("SSL_CERT_FILE", "")]), probe), None);
        assert_eq!(bundle_to_name(env(&[]), || None), None);
    }

    /// Reading the bundle only narrows none of the system's roots: every certificate of the system's certificate
    /// directories that OpenSSL finds (through a hash link, `openssl rehash`'s `XXXXXXXX.N`) is in the bundle
    /// [`read_bundle_only`] names, but the machine's own snakeoil certificate (see the module's notes). Checked on
    /// this system's own store (a Debian-like one keeps its roots both ways).
    #[test]
    fn the_bundle_holds_every_root_the_directories_link() {
        let probed = openssl_probe::probe();
        let bundle = probed
            .cert_file
            .expect("this system has a bundle of roots where openssl-probe looks");
        let loaded = rustls_native_certs::load_certs_from_paths(Some(&bundle), None);
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        let in_bundle: std::collections::HashSet<Vec<u8>> =
            loaded.certs.iter().map(|der| der.to_vec()).collect();
        let is_hash_link = |name: &str| {
            name.split_once('.').is_some_and(|(hash, n)| {
                hash.len() == 8
                    && hash.chars().all(|c| c.is_ascii_hexdigit())
                    && n.parse::<u32>().is_ok()
            })
        };
        let mut linked = 0;
        for dir in &probed.cert_dir {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if !path
                    .file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(is_hash_link)
                {
                    continue;
                }
                let target = std::fs::canonicalize(&path).unwrap();
                if target.file_name() == Some(std::ffi::OsStr::new("ssl-cert-snakeoil.pem")) {
                    continue;
                }
                for cert in rustls_native_certs::load_certs_from_paths(Some(&path), None).certs {
                    assert!(
                        in_bundle.contains(cert.as_ref()),
                        "{} is not in {}",
                        path.display(),
                        bundle.display()
                    );
                    linked += 1;
                }
            }
        }
        assert!(
            linked > 0,
            "no root linked in {:?}: nothing was compared",
            probed.cert_dir
        );
    }
}
