//! `mds certs` and `mds webhook` as a user runs them: files, exit codes, and a live server on
//! 127.0.0.1 whose refusals carry the same lines as `mds validate`.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

fn mds(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mds"))
        .args(args)
        .output()
        .expect("mds runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn certs(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "certs",
        "--out-dir",
        dir.to_str().unwrap(),
        "--dns",
        "localhost",
        "--ip",
        "127.0.0.1",
    ];
    args.extend_from_slice(extra);
    mds(&args)
}

#[test]
fn certs_writes_a_ca_a_pair_and_the_ca_bundle_and_renews_with_the_same_ca() {
    let dir = scratch("certs");
    let out = certs(&dir, &["--service", "mds-system/mds-webhook:8443"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let ca = std::fs::read_to_string(dir.join("ca.crt")).unwrap();
    let bundle = text(&out.stdout).trim().to_string();
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&bundle)
            .unwrap(),
        ca.as_bytes()
    );
    let webhooks = std::fs::read_to_string(dir.join("webhooks.yaml")).unwrap();
    assert!(
        webhooks.contains(&format!("caBundle: {bundle}")),
        "{webhooks}"
    );
    assert!(
        webhooks.contains("path: /validate/modeldeployments"),
        "{webhooks}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.join("tls.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "private keys are the owner's alone");
    }

    // Nothing is replaced without --force.
    let again = certs(&dir, &[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("already exist; pass --force"),
        "{}",
        text(&again.stderr)
    );

    // Renewal with the same CA: new pair, same caBundle, CA files untouched.
    let pair = std::fs::read_to_string(dir.join("tls.crt")).unwrap();
    let ca_cert = dir.join("ca.crt");
    let ca_key = dir.join("ca.key");
    let renewed = certs(
        &dir,
        &[
            "--ca-cert",
            ca_cert.to_str().unwrap(),
            "--ca-key",
            ca_key.to_str().unwrap(),
            "--force",
        ],
    );
    assert_eq!(renewed.status.code(), Some(0), "{}", text(&renewed.stderr));
    assert_eq!(text(&renewed.stdout).trim(), bundle);
    assert_ne!(std::fs::read_to_string(dir.join("tls.crt")).unwrap(), pair);
    assert_eq!(std::fs::read_to_string(&ca_cert).unwrap(), ca);

    for (args, expected) in [
        (vec!["--service", "no-slash"], "expected NAMESPACE/NAME"),
        (vec!["--url", "http://127.0.0.1:8443"], "over https://"),
        (vec!["--days", "0", "--force"], "out of range"),
    ] {
        let out = certs(&dir, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(expected),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn webhook_help_explains_every_flag() {
    let out = mds(&["webhook", "--help"]);
    let help = text(&out.stdout);
    for flag in [
        "--cert <FILE>",
        "--key <FILE>",
        "--listen <ADDR>",
        "--operator-user <NAME>",
        "--kubeconfig <PATH>",
        "--no-api-lookups",
        "FOR TESTS ONLY",
        "--cert-check-seconds",
        "--lookup-timeout-ms",
        "failurePolicy Fail",
    ] {
        assert!(help.contains(flag), "missing {flag} in {help}");
    }
}

#[test]
fn webhook_refuses_to_start_without_what_it_needs() {
    let dir = scratch("webhook-refuses");
    let certs_out = certs(&dir, &[]);
    assert_eq!(certs_out.status.code(), Some(0));
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    // The lookups need the cluster: a kubeconfig that is not there is named.
    let absent = dir.join("absent.kubeconfig");
    let out = mds(&[
        "webhook",
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        "--kubeconfig",
        absent.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("absent.kubeconfig"),
        "{}",
        text(&out.stderr)
    );
    let missing = dir.join("missing.key");
    let out = mds(&[
        "webhook",
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        missing.to_str().unwrap(),
        "--no-api-lookups",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("missing.key: cannot read"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A running `mds webhook`, stopped with SIGTERM when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mds"))
            .args(["webhook", "--listen", "127.0.0.1:0", "--no-api-lookups"])
            .arg("--cert")
            .arg(dir.join("tls.crt"))
            .arg("--key")
            .arg(dir.join("tls.key"))
            .stderr(Stdio::piped())
            .spawn()
            .expect("mds webhook starts");
        let stderr = child.stderr.take().unwrap();
        let (found, port) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("address=127.0.0.1:").nth(1) {
                    let port: u16 = rest.split_whitespace().next().unwrap().parse().unwrap();
                    let _ = found.send(port);
                }
            }
        });
        let port = port
            .recv_timeout(Duration::from_secs(20))
            .expect("the webhook reports its address");
        Server { child, port }
    }

    /// POSTs a body over TLS (trusting `ca_pem` only) and returns the response body.
    fn post(&self, ca_pem: &str, path: &str, body: &Value) -> Value {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
            .unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = "localhost".try_into().unwrap();
        let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let mut tls = rustls::StreamOwned::new(connection, tcp);
        let payload = serde_json::to_vec(body).unwrap();
        write!(
            tls,
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            payload.len()
        )
        .unwrap();
        tls.write_all(&payload).unwrap();
        let mut response = Vec::new();
        let _ = tls.read_to_end(&mut response);
        let response = text(&response);
        let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    fn stop(mut self) -> Option<i32> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().ok().and_then(|s| s.code())
    }
}

const INVALID_SCALER: &str = "apiVersion: worker.gpustack.ai/v1
kind: ModelDeploymentScaler
metadata:
  name: llm
  namespace: default
spec:
  targetRef:
    name: llm-serving
  sampling:
    intervalSeconds: 2
  roles:
    - name: server
      minReplicas: 9
      maxReplicas: 4
  algorithm:
    proportional:
      metric: QueueDepth
      roleTargets:
        - name: server
          target: \"8\"
  rebalance:
    policy: Opposing
    priority: [server]
";

fn review(object: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3c1b2a9e-0000-4000-8000-000000000001",
            "kind": {"group": "worker.gpustack.ai", "version": "v1", "kind": "ModelDeploymentScaler"},
            "resource": {"group": "worker.gpustack.ai", "version": "v1", "resource": "modeldeploymentscalers"},
            "name": "llm",
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": false
        }
    })
}

#[test]
fn a_live_webhook_refuses_with_the_lines_mds_validate_prints_and_stops_on_sigterm() {
    let dir = scratch("webhook-live");
    assert_eq!(certs(&dir, &[]).status.code(), Some(0));
    let ca = std::fs::read_to_string(dir.join("ca.crt")).unwrap();
    let manifest = dir.join("scaler.yaml");
    std::fs::write(&manifest, INVALID_SCALER).unwrap();
    let validated = mds(&["validate", "-f", manifest.to_str().unwrap()]);
    assert_eq!(validated.status.code(), Some(1));
    let cli = text(&validated.stdout);
    let cli_lines: Vec<&str> = cli.lines().collect();

    let server = Server::start(&dir);
    let object: Value = serde_yaml_ng::from_str(INVALID_SCALER).unwrap();
    let answer = server.post(&ca, "/validate/modeldeploymentscalers", &review(&object));
    let response = &answer["response"];
    assert_eq!(response["allowed"], false);
    let message = response["status"]["message"].as_str().unwrap().to_string();
    let hook_lines: Vec<&str> = message.lines().collect();
    // The verdict line differs only in what it says about the target; every finding is the same.
    assert!(
        cli_lines[0].ends_with(
            "ModelDeploymentScaler llm: invalid (no target given: target-dependent rules skipped)"
        ),
        "{cli}"
    );
    assert!(
        hook_lines[0].starts_with(
            "ModelDeploymentScaler llm: invalid (ModelDeployment \"llm-serving\" could not be read"
        ),
        "{message}"
    );
    let cli_errors: Vec<&str> = cli_lines[1..]
        .iter()
        .copied()
        .filter(|l| !l.starts_with("  warning: "))
        .collect();
    assert_eq!(
        hook_lines[1..],
        cli_errors[..],
        "webhook:\n{message}\ncli:\n{cli}"
    );
    assert!(hook_lines.len() >= 3, "{message}");
    // Warnings travel apart, each as `mds validate` words it after its "warning: ".
    let cli_warnings: Vec<String> = cli_lines
        .iter()
        .filter_map(|l| l.strip_prefix("  warning: "))
        .map(str::to_string)
        .collect();
    assert!(!cli_warnings.is_empty(), "{cli}");
    let hook_warnings: Vec<String> = response["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        hook_warnings[1..],
        cli_warnings[..],
        "the first warning says the target was not read"
    );

    // The mutating endpoint stores the defaults.
    let answer = server.post(&ca, "/mutate/modeldeploymentscalers", &review(&object));
    let patch = base64::engine::general_purpose::STANDARD
        .decode(answer["response"]["patch"].as_str().unwrap())
        .unwrap();
    let patch: Value = serde_json::from_slice(&patch).unwrap();
    assert!(
        patch.as_array().unwrap().contains(
            &json!({"op": "add", "path": "/spec/algorithm/type", "value": "Proportional"})
        ),
        "{patch}"
    );

    assert_eq!(server.stop(), Some(0), "SIGTERM is a clean stop");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `mds webhook --log-format <format>` with standard error piped (not a terminal), sends
/// SIGTERM as soon as it says where it listens, and returns its exit code and every line it
/// logged.
fn logs_of_a_run_stopped_at_once(format: &str) -> (Option<i32>, Vec<String>) {
    let dir = scratch(&format!("webhook-{format}-logs"));
    assert_eq!(certs(&dir, &[]).status.code(), Some(0));
    let mut child = Command::new(env!("CARGO_BIN_EXE_mds"))
        .args(["webhook", "--listen", "127.0.0.1:0", "--no-api-lookups"])
        .args(["--log-format", format])
        .arg("--cert")
        .arg(dir.join("tls.crt"))
        .arg("--key")
        .arg(dir.join("tls.key"))
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .spawn()
        .expect("mds webhook starts");
    let stderr = child.stderr.take().unwrap();
    let (found, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = found.send(line);
        }
    });
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|l: &String| l.contains("webhooks listening"))
    {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no listening line; saw {seen:?}"));
        seen.push(line);
    }
    // At once: the handler is installed before the port is bound, so this SIGTERM is a clean
    // stop, never the default action that kills the process.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let code = child.wait().ok().and_then(|s| s.code());
    seen.extend(lines.iter());
    let _ = std::fs::remove_dir_all(&dir);
    (code, seen)
}

#[test]
fn with_log_format_json_every_log_line_is_a_json_object() {
    let (code, seen) = logs_of_a_run_stopped_at_once("json");
    assert_eq!(
        code,
        Some(0),
        "SIGTERM right after the listening line: {seen:?}"
    );
    for line in &seen {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(value["level"].is_string(), "{line}");
    }
    let listening: Value = seen
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["message"] == "webhooks listening")
        .unwrap();
    assert!(
        listening["address"]
            .as_str()
            .is_some_and(|a| a.starts_with("127.0.0.1:")),
        "{listening}"
    );
    assert!(seen.last().unwrap().contains("\"stopped\""), "{seen:?}");
}

#[test]
fn text_logs_off_a_terminal_carry_no_colour_codes() {
    let (code, seen) = logs_of_a_run_stopped_at_once("text");
    assert_eq!(code, Some(0), "{seen:?}");
    assert!(seen.len() >= 3, "{seen:?}");
    for line in &seen {
        assert!(!line.contains('\u{1b}'), "an escape code in {line:?}");
    }
    assert!(seen.last().unwrap().ends_with("stopped"), "{seen:?}");
}
