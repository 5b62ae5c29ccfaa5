//! Certificates for the self-signed install and the webhook configuration objects.

use std::net::IpAddr;

use base64::Engine as _;
use jiff::Timestamp;
use mds_webhook::certs::{self, CertsError, IssueRequest};
use mds_webhook::configuration::{self, Endpoint, Settings};
use mds_webhook::router::{MUTATE_SCALERS_PATH, VALIDATE_SCALERS_PATH, VALIDATE_TARGETS_PATH};
use serde_json::{Value, json};

fn request() -> IssueRequest {
    IssueRequest {
        dns_names: vec!["mds-webhook.mds-system.svc".into()],
        ips: vec![],
        valid_days: 365,
        ca_valid_days: 3650,
        ca: None,
        now: "2026-03-01T00:00:00Z".parse::<Timestamp>().unwrap(),
    }
}

#[test]
fn a_new_ca_signs_the_pair_and_can_sign_the_next_one() {
    let issued = certs::issue(&request()).unwrap();
    for pem in [&issued.ca_cert_pem, &issued.cert_pem] {
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
    }
    for pem in [&issued.ca_key_pem, &issued.key_pem] {
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
    }
    let next = certs::issue(&IssueRequest {
        ca: Some((issued.ca_cert_pem.clone(), issued.ca_key_pem.clone())),
        ..request()
    })
    .unwrap();
    assert_eq!(
        next.ca_cert_pem, issued.ca_cert_pem,
        "the caBundle stays valid"
    );
    assert!(
        next.ca_key_pem.is_empty(),
        "a reused CA key is not written again"
    );
    assert_ne!(next.cert_pem, issued.cert_pem);
    let bundle = certs::ca_bundle(&issued.ca_cert_pem);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(&bundle)
        .unwrap();
    assert_eq!(decoded, issued.ca_cert_pem.as_bytes());
}

#[test]
fn bad_requests_say_what_to_fix() {
    let none = IssueRequest {
        dns_names: vec![],
        ..request()
    };
    assert!(matches!(certs::issue(&none), Err(CertsError::NoNames)));
    let ip_only = IssueRequest {
        dns_names: vec![],
        ips: vec!["127.0.0.1".parse::<IpAddr>().unwrap()],
        ..request()
    };
    assert!(certs::issue(&ip_only).is_ok());
    let bad_days = IssueRequest {
        valid_days: 0,
        ..request()
    };
    assert_eq!(
        certs::issue(&bad_days).unwrap_err().to_string(),
        "validity of 0 days is out of range; use 1 to 36500"
    );
    let bad_name = IssueRequest {
        dns_names: vec!["bad\u{e9}name".into()],
        ..request()
    };
    assert!(
        certs::issue(&bad_name)
            .unwrap_err()
            .to_string()
            .starts_with("\"bad\u{e9}name\" is not a usable DNS name"),
    );
    let bad_ca = IssueRequest {
        ca: Some(("not a certificate".into(), "not a key".into())),
        ..request()
    };
    assert!(
        certs::issue(&bad_ca)
            .unwrap_err()
            .to_string()
            .starts_with("the CA certificate or key cannot be used")
    );
}

fn webhooks(value: &Value) -> Vec<Value> {
    value["webhooks"].as_array().unwrap().clone()
}

#[test]
fn configurations_for_a_url_send_each_webhook_to_its_path_with_the_ca() {
    let pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".to_vec();
    let settings = Settings::new(Endpoint::Url("https://127.0.0.1:8443/".into()), pem.clone());
    let mutating = serde_json::to_value(configuration::mutating(&settings)).unwrap();
    let validating = serde_json::to_value(configuration::validating(&settings)).unwrap();
    assert_eq!(mutating["kind"], "MutatingWebhookConfiguration");
    assert_eq!(validating["apiVersion"], "admissionregistration.k8s.io/v1");
    let bundle = base64::engine::general_purpose::STANDARD.encode(&pem);
    let all: Vec<Value> = webhooks(&mutating)
        .into_iter()
        .chain(webhooks(&validating))
        .collect();
    let urls: Vec<&str> = all
        .iter()
        .map(|w| w["clientConfig"]["url"].as_str().unwrap())
        .collect();
    assert_eq!(
        urls,
        [
            MUTATE_SCALERS_PATH,
            VALIDATE_SCALERS_PATH,
            VALIDATE_TARGETS_PATH
        ]
        .map(|p| format!("https://127.0.0.1:8443{p}"))
    );
    for webhook in &all {
        assert_eq!(webhook["clientConfig"]["caBundle"], json!(bundle));
        assert_eq!(webhook["failurePolicy"], "Fail");
        assert_eq!(webhook["sideEffects"], "None");
        assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]));
        assert_eq!(
            webhook["rules"][0]["operations"],
            json!(["CREATE", "UPDATE"])
        );
        assert_eq!(
            webhook["rules"][0]["apiGroups"],
            json!(["worker.gpustack.ai"])
        );
    }
    let fence = &webhooks(&validating)[1];
    assert_eq!(fence["name"], configuration::FENCE_WEBHOOK);
    assert_eq!(fence["rules"][0]["resources"], json!(["modeldeployments"]));
    // The CRD, where every write arrives (GPUStack's aggregated v1 writes through to it), and
    // with Equivalent any version the CRD itself serves.
    assert_eq!(fence["rules"][0]["apiVersions"], json!(["v1alpha1"]));
    assert_eq!(fence["matchPolicy"], "Equivalent");
}

#[test]
fn configurations_for_a_service_name_the_service_and_path() {
    let endpoint = Endpoint::Service {
        namespace: "mds-system".into(),
        name: "mds-webhook".into(),
        port: Some(8443),
    };
    let validating = serde_json::to_value(configuration::validating(&Settings::new(
        endpoint,
        b"ca".to_vec(),
    )))
    .unwrap();
    assert_eq!(
        webhooks(&validating)[0]["clientConfig"]["service"],
        json!({"namespace": "mds-system", "name": "mds-webhook", "path": VALIDATE_SCALERS_PATH, "port": 8443})
    );
    assert!(
        webhooks(&validating)[0]["clientConfig"]
            .get("url")
            .is_none()
    );
}
