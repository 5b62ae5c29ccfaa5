//! The server over real TLS on 127.0.0.1: a client that trusts only our CA connects, the
//! certificate files are rewritten, a new connection sees the new certificate and the old
//! connection keeps working on the old one.

use crate::common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use jiff::Timestamp;
use mds_webhook::certs::{self, IssueRequest, Issued};
use mds_webhook::server::serve;
use mds_webhook::tls::{CertificateError, CertificateFiles, ReloadingCertificate, crypto_provider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;

/// A fresh directory under cargo's scratch space for integration tests.
fn scratch(name: &str) -> PathBuf {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn issue(ca: Option<&Issued>) -> Issued {
    certs::issue(&IssueRequest {
        dns_names: vec!["localhost".into()],
        ips: vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
        valid_days: 2,
        ca_valid_days: 2,
        ca: ca.map(|ca| (ca.ca_cert_pem.clone(), ca.ca_key_pem.clone())),
        // rustls checks validity against the real clock, so the window is around it.
        now: Timestamp::now(),
    })
    .expect("certificates are issued")
}

fn write(files: &CertificateFiles, pair: &Issued) {
    std::fs::write(&files.cert, &pair.cert_pem).unwrap();
    std::fs::write(&files.key, &pair.key_pem).unwrap();
}

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

fn client(ca: &Issued) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    roots.add(der(&ca.ca_cert_pem)).unwrap();
    let mut config = ClientConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    // A resumed session shows the certificate of the session it resumes; every connection
    // here does a full handshake so it shows what the server serves now.
    config.resumption = rustls::client::Resumption::disabled();
    TlsConnector::from(Arc::new(config))
}

/// One HTTP/1.1 connection over TLS, and the certificate the server showed on it.
async fn connect(
    connector: &TlsConnector,
    addr: SocketAddr,
) -> std::io::Result<(SendRequest<Empty<Bytes>>, CertificateDer<'static>)> {
    let tcp = TcpStream::connect(addr).await?;
    let tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await?;
    let shown = tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned();
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(connection);
    Ok((sender, shown))
}

async fn healthz(sender: &mut SendRequest<Empty<Bytes>>) -> (u16, String) {
    let request = hyper::Request::get("/healthz")
        .header("host", "localhost")
        .body(Empty::new())
        .unwrap();
    let response = sender
        .send_request(request)
        .await
        .expect("the connection answers");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_certificate_serves_new_connections_while_old_ones_keep_theirs() {
    let dir = scratch("tls-reload");
    let files = CertificateFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    };
    let first = issue(None);
    write(&files, &first);

    let certificate = ReloadingCertificate::load(files.clone()).unwrap();
    let tls = certificate.server_config().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        listener,
        common::app(common::Fake::default()),
        tls,
        async {
            let _ = stopped.await;
        },
    ));
    let reloader = tokio::spawn(certificate.clone().watch(Duration::from_millis(20)));
    let mut generation = certificate.generation();

    let connector = client(&first);
    let (mut old, shown) = connect(&connector, addr).await.unwrap();
    assert_eq!(shown, der(&first.cert_pem));
    assert_eq!(healthz(&mut old).await, (200, "ok\n".into()));

    // Rotate: a new pair from the same CA, written over the old files.
    let second = issue(Some(&first));
    assert_ne!(second.cert_pem, first.cert_pem);
    write(&files, &second);
    tokio::time::timeout(Duration::from_secs(10), generation.wait_for(|g| *g >= 2))
        .await
        .expect("the reload happens within the deadline")
        .unwrap();

    let (mut new, shown) = connect(&connector, addr).await.unwrap();
    assert_eq!(
        shown,
        der(&second.cert_pem),
        "a new connection gets the new certificate"
    );
    assert_eq!(healthz(&mut new).await.0, 200);
    assert_eq!(
        healthz(&mut old).await,
        (200, "ok\n".into()),
        "the old connection still works"
    );

    // A pair from a CA the client does not trust is refused: the check above is real.
    let stranger = issue(None);
    write(&files, &stranger);
    tokio::time::timeout(Duration::from_secs(10), generation.wait_for(|g| *g >= 3))
        .await
        .expect("the reload happens within the deadline")
        .unwrap();
    assert!(connect(&connector, addr).await.is_err());

    drop((old, new));
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
    reloader.abort();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_changed_pair_that_does_not_load_leaves_the_old_one_serving() {
    let dir = scratch("tls-bad-pair");
    let files = CertificateFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    };
    let first = issue(None);
    write(&files, &first);
    let certificate = ReloadingCertificate::load(files.clone()).unwrap();
    assert!(
        !certificate.reload_if_changed().unwrap(),
        "unchanged files are not reloaded"
    );

    // Half a rotation: the new certificate is written, the key is still the old one.
    let second = issue(Some(&first));
    std::fs::write(&files.cert, &second.cert_pem).unwrap();
    let err = certificate.reload_if_changed().unwrap_err();
    assert!(matches!(err, CertificateError::Mismatch { .. }), "{err}");
    assert!(err.to_string().contains("do not form a pair"), "{err}");
    assert_eq!(certificate.current().cert[0], der(&first.cert_pem));

    std::fs::write(&files.key, &second.key_pem).unwrap();
    assert!(certificate.reload_if_changed().unwrap());
    assert_eq!(certificate.current().cert[0], der(&second.cert_pem));

    std::fs::write(&files.cert, "not a certificate").unwrap();
    let err = certificate.reload_if_changed().unwrap_err();
    assert!(
        err.to_string()
            .contains("tls.crt: no PEM certificate found"),
        "{err}"
    );
    std::fs::remove_file(&files.key).unwrap();
    let err = certificate.reload_if_changed().unwrap_err();
    assert!(err.to_string().contains("tls.key: cannot read"), "{err}");
    assert_eq!(certificate.current().cert[0], der(&second.cert_pem));

    let err = ReloadingCertificate::load(files).unwrap_err();
    assert!(err.to_string().contains("tls.key: cannot read"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
