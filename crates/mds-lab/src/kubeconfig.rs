//! The admin kubeconfig of a control plane: written for kubectl, parsed for kube clients.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::Error;
use crate::certs::Certificates;

/// A self-contained kubeconfig (certificates inline) for the admin user; `context` names the
/// context, cluster and user.
pub fn admin_kubeconfig(context: &str, api_port: u16, certs: &Certificates) -> String {
    let data = |pem: &str| STANDARD.encode(pem.as_bytes());
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {context}
  cluster:
    server: https://127.0.0.1:{api_port}
    certificate-authority-data: {ca}
users:
- name: {context}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: {context}
  context:
    cluster: {context}
    user: {context}
    namespace: default
current-context: {context}
",
        ca = data(&certs.serving_ca),
        cert = data(&certs.admin_cert),
        key = data(&certs.admin_key),
    )
}

/// The kube client configuration for a kubeconfig text.
pub async fn client_config(kubeconfig: &str) -> Result<kube::Config, Error> {
    let parsed = Kubeconfig::from_yaml(kubeconfig).map_err(|e| Error::Kubeconfig(e.to_string()))?;
    let mut config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Kubeconfig(e.to_string()))?;
    // kube reads HTTPS_PROXY from the environment; the control plane is on loopback.
    config.proxy_url = None;
    Ok(config)
}
