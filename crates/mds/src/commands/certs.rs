//! `mds certs`: a self-signed CA, a serving pair, the `caBundle` and, on request, the webhook
//! configurations that carry it.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use jiff::Timestamp;
use mds_webhook::certs::{self, IssueRequest};
use mds_webhook::configuration::{self, Endpoint, Settings};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory to write ca.crt, ca.key (for a new CA), tls.crt and tls.key into.
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
    /// A DNS name of the webhook, such as mds-webhook.mds-system.svc (repeatable).
    #[arg(long = "dns", value_name = "NAME")]
    pub dns_names: Vec<String>,
    /// An IP address of the webhook, such as 127.0.0.1 (repeatable).
    #[arg(long = "ip", value_name = "ADDR")]
    pub ips: Vec<IpAddr>,
    /// Days the serving certificate is valid.
    #[arg(long, value_name = "DAYS", default_value_t = 365)]
    pub days: u32,
    /// Days a new CA is valid.
    #[arg(long, value_name = "DAYS", default_value_t = 3650)]
    pub ca_days: u32,
    /// Sign with this existing CA certificate instead of making a new CA (with --ca-key). The
    /// caBundle stays the same, so rotating the serving pair needs no configuration change.
    #[arg(long, value_name = "FILE", requires = "ca_key")]
    pub ca_cert: Option<PathBuf>,
    /// Private key of --ca-cert.
    #[arg(long, value_name = "FILE", requires = "ca_cert")]
    pub ca_key: Option<PathBuf>,
    /// Also write webhooks.yaml, both webhook configurations, for this Service
    /// (NAMESPACE/NAME or NAMESPACE/NAME:PORT).
    #[arg(long, value_name = "NS/NAME[:PORT]", conflicts_with = "url")]
    pub service: Option<String>,
    /// Also write webhooks.yaml, both webhook configurations, for a webhook the API server
    /// reaches at this base URL (https://127.0.0.1:8443).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Replace files that already exist (the serving pair is replaced file by file; a running
    /// webhook skips the moment the two do not match and loads the pair once both are new).
    #[arg(long)]
    pub force: bool,
}

fn fail(message: &str) -> ExitCode {
    super::emit("", &format!("mds certs: {message}\n"));
    ExitCode::from(2)
}

/// `NS/NAME[:PORT]` as a Service endpoint.
fn parse_service(text: &str) -> Result<Endpoint, String> {
    let bad = || format!("--service {text:?}: expected NAMESPACE/NAME or NAMESPACE/NAME:PORT");
    let (namespace, rest) = text.split_once('/').ok_or_else(bad)?;
    let (name, port) = match rest.split_once(':') {
        Some((name, port)) => (name, Some(port.parse::<i32>().map_err(|_| bad())?)),
        None => (rest, None),
    };
    if namespace.is_empty() || name.is_empty() || port.is_some_and(|p| !(1..=65535).contains(&p)) {
        return Err(bad());
    }
    Ok(Endpoint::Service {
        namespace: namespace.into(),
        name: name.into(),
        port,
    })
}

/// Writes a file through a temporary name and a rename, so a reader (a running webhook)
/// never sees it half written; private files are readable by their owner only.
fn write_file(path: &Path, text: &str, private: bool) -> Result<(), String> {
    let temporary = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let written = options
        .open(&temporary)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|()| std::fs::rename(&temporary, path));
    written.map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

pub fn run(args: &Args) -> ExitCode {
    let endpoint = match (&args.service, &args.url) {
        (Some(service), _) => match parse_service(service) {
            Ok(endpoint) => Some(endpoint),
            Err(e) => return fail(&e),
        },
        (None, Some(url)) if url.starts_with("https://") => Some(Endpoint::Url(url.clone())),
        (None, Some(url)) => {
            return fail(&format!(
                "--url {url:?}: the API server calls webhooks over https://"
            ));
        }
        (None, None) => None,
    };
    let ca = match (&args.ca_cert, &args.ca_key) {
        (Some(cert), Some(key)) => {
            let read = |p: &PathBuf| {
                super::read_text(p, 1024 * 1024)
                    .map_err(|e| format!("{}: cannot read: {e}", p.display()))
            };
            match (read(cert), read(key)) {
                (Ok(cert), Ok(key)) => Some((cert, key)),
                (Err(e), _) | (_, Err(e)) => return fail(&e),
            }
        }
        _ => None,
    };
    let request = IssueRequest {
        dns_names: args.dns_names.clone(),
        ips: args.ips.clone(),
        valid_days: args.days,
        ca_valid_days: args.ca_days,
        ca,
        now: Timestamp::now(),
    };
    let issued = match certs::issue(&request) {
        Ok(issued) => issued,
        Err(e) => return fail(&e.to_string()),
    };
    if let Err(e) = std::fs::create_dir_all(&args.out_dir) {
        return fail(&format!("{}: cannot create: {e}", args.out_dir.display()));
    }
    let mut files: Vec<(&str, String, bool)> = Vec::new();
    if !issued.ca_key_pem.is_empty() {
        files.push(("ca.crt", issued.ca_cert_pem.clone(), false));
        files.push(("ca.key", issued.ca_key_pem.clone(), true));
    }
    files.push(("tls.crt", issued.cert_pem.clone(), false));
    files.push(("tls.key", issued.key_pem.clone(), true));
    if let Some(endpoint) = endpoint {
        let settings = Settings::new(endpoint, issued.ca_cert_pem.clone().into_bytes());
        let text = format!(
            "# Written by `mds certs`; the caBundle is the CA in ca.crt.\n{}---\n{}",
            to_yaml(&configuration::mutating(&settings)),
            to_yaml(&configuration::validating(&settings))
        );
        files.push(("webhooks.yaml", text, false));
    }
    let existing: Vec<String> = files
        .iter()
        .map(|(name, _, _)| args.out_dir.join(name))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if !existing.is_empty() && !args.force {
        return fail(&format!(
            "{} already exist; pass --force to replace them",
            existing.join(", ")
        ));
    }
    let mut report = String::new();
    for (name, text, private) in &files {
        let path = args.out_dir.join(name);
        if let Err(e) = write_file(&path, text, *private) {
            return fail(&e);
        }
        let _ = writeln!(report, "wrote {}", path.display());
    }
    let _ = writeln!(
        report,
        "caBundle (base64 of the CA certificate) on standard output"
    );
    super::emit(
        &format!("{}\n", certs::ca_bundle(&issued.ca_cert_pem)),
        &report,
    );
    ExitCode::SUCCESS
}

fn to_yaml<T: serde::Serialize>(value: &T) -> String {
    serde_yaml_ng::to_string(value).unwrap_or_else(|e| format!("# cannot write: {e}\n"))
}
