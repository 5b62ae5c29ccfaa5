//! The serving certificate, read from a PEM certificate chain and a PEM private key and swapped
//! when the files change. Each TLS handshake asks [`ReloadingCertificate`] for the current pair,
//! so a new pair serves new connections at once while connections already open keep theirs.
//!
//! Change is detected by reading both files every few seconds and comparing their bytes with
//! the pair in use (no modification-time games: Kubernetes updates a mounted Secret by swapping
//! a symlink, and a byte comparison sees that as any other rewrite). A pair that does not load
//! (half written, key and certificate not matching) is reported and skipped; the previous pair
//! keeps serving until a good one appears.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;

/// Where the serving pair lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateFiles {
    /// PEM certificate chain, serving certificate first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Why a pair did not load; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: no PEM certificate found (expected a \"BEGIN CERTIFICATE\" block)")]
    NoCertificate { path: PathBuf },
    #[error("{path}: not a readable PEM file: {detail}")]
    Pem { path: PathBuf, detail: String },
    #[error("{path}: no usable private key: {detail}")]
    Key { path: PathBuf, detail: String },
    #[error("{cert} and {key} do not form a pair: {detail}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        detail: String,
    },
    #[error("TLS settings: {0}")]
    Config(String),
}

/// The pair in use and the bytes it was read from.
struct Loaded {
    key: Arc<CertifiedKey>,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

/// The serving certificate, reloaded from its files.
pub struct ReloadingCertificate {
    files: CertificateFiles,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<Loaded>>,
    /// Counts the pairs loaded so far (1 after start); tests and logs wait on it.
    generation: watch::Sender<u64>,
}

impl fmt::Debug for ReloadingCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCertificate")
            .field("files", &self.files)
            .field("generation", &*self.generation.borrow())
            .finish()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CertificateError> {
    std::fs::read(path).map_err(|source| CertificateError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The ring provider, the one kube-client uses too, named explicitly so a second provider
/// elsewhere in the binary never makes the choice ambiguous.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses a PEM pair into a signing certificate, checking the key belongs to it.
pub fn parse_pair(
    files: &CertificateFiles,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, CertificateError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| CertificateError::Pem {
            path: files.cert.clone(),
            detail: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(CertificateError::NoCertificate {
            path: files.cert.clone(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| CertificateError::Key {
        path: files.key.clone(),
        detail: e.to_string(),
    })?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| CertificateError::Mismatch {
        cert: files.cert.clone(),
        key: files.key.clone(),
        detail: e.to_string(),
    })
}

impl ReloadingCertificate {
    /// Loads the pair; fails when it does not load, naming the file and the problem.
    pub fn load(files: CertificateFiles) -> Result<Arc<ReloadingCertificate>, CertificateError> {
        let provider = crypto_provider();
        let cert_pem = read(&files.cert)?;
        let key_pem = read(&files.key)?;
        let key = parse_pair(&files, &cert_pem, &key_pem, &provider)?;
        let loaded = Loaded {
            key: Arc::new(key),
            cert_pem,
            key_pem,
        };
        Ok(Arc::new(ReloadingCertificate {
            files,
            provider,
            current: RwLock::new(Arc::new(loaded)),
            generation: watch::Sender::new(1),
        }))
    }

    fn loaded(&self) -> Arc<Loaded> {
        // A poisoned lock only means a panic elsewhere while swapping an Arc; the Arc inside
        // is still whole.
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The pair new handshakes get.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.loaded().key.clone()
    }

    /// Reads both files again and swaps in the new pair when their bytes changed. `Ok(true)`:
    /// swapped; `Ok(false)`: unchanged; `Err`: changed but not loadable (the old pair stays).
    pub fn reload_if_changed(&self) -> Result<bool, CertificateError> {
        let cert_pem = read(&self.files.cert)?;
        let key_pem = read(&self.files.key)?;
        let old = self.loaded();
        if cert_pem == old.cert_pem && key_pem == old.key_pem {
            return Ok(false);
        }
        let key = parse_pair(&self.files, &cert_pem, &key_pem, &self.provider)?;
        let loaded = Arc::new(Loaded {
            key: Arc::new(key),
            cert_pem,
            key_pem,
        });
        match self.current.write() {
            Ok(mut guard) => *guard = loaded,
            Err(poisoned) => *poisoned.into_inner() = loaded,
        }
        self.generation.send_modify(|g| *g += 1);
        Ok(true)
    }

    /// Follows the number of pairs loaded (1 after start, one more per reload).
    pub fn generation(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// TLS settings that take the certificate from `self` at every handshake; HTTP/2 and
    /// HTTP/1.1 offered (the API server speaks either).
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, CertificateError> {
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| CertificateError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// Checks the files every `every` until the task is dropped or aborted; reloads are logged,
    /// and so are pairs that do not load.
    pub async fn watch(self: Arc<Self>, every: Duration) {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let this = self.clone();
            match tokio::task::spawn_blocking(move || this.reload_if_changed()).await {
                Ok(Ok(true)) => tracing::info!(
                    cert = %self.files.cert.display(),
                    generation = *self.generation.borrow(),
                    "serving certificate reloaded"
                ),
                Ok(Ok(false)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "serving certificate not reloaded; the previous one stays")
                }
                Err(e) => tracing::warn!(error = %e, "certificate check did not finish"),
            }
        }
    }
}

impl ResolvesServerCert for ReloadingCertificate {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}
