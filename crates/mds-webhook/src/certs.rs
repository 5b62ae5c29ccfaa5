//! A self-signed CA and a serving pair it signs, for installs without cert-manager. The API
//! server trusts the CA through the webhook configurations' `caBundle`; the webhook serves the
//! pair. Reusing the CA to issue a new pair keeps the `caBundle` valid, so rotation is only a
//! rewrite of the pair's files (the webhook reloads them).

use std::net::IpAddr;

use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use time::OffsetDateTime;

/// What to issue.
#[derive(Clone, Debug)]
pub struct IssueRequest {
    /// DNS names the server answers to (`mds-webhook.mds-system.svc`).
    pub dns_names: Vec<String>,
    /// Addresses the server answers to (`127.0.0.1` when the API server calls a URL).
    pub ips: Vec<IpAddr>,
    /// Days the serving certificate is valid.
    pub valid_days: u32,
    /// Days a new CA is valid.
    pub ca_valid_days: u32,
    /// An existing CA (certificate PEM, key PEM) to sign with; a new one is made without it.
    pub ca: Option<(String, String)>,
    pub now: Timestamp,
}

/// The issued PEM texts.
#[derive(Clone, Debug)]
pub struct Issued {
    pub ca_cert_pem: String,
    /// Empty when an existing CA was reused (its key stays where it was).
    pub ca_key_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("name at least one DNS name or IP address for the serving certificate")]
    NoNames,
    #[error("{0:?} is not a usable DNS name: {1}")]
    BadName(String, String),
    #[error("the CA certificate or key cannot be used: {0}")]
    BadCa(String),
    #[error("validity of {0} days is out of range; use 1 to 36500")]
    BadValidity(u32),
    #[error("certificate generation failed: {0}")]
    Generation(String),
}

fn generation(e: rcgen::Error) -> CertsError {
    CertsError::Generation(e.to_string())
}

/// A validity window from an hour before `now` (clocks differ a little) to `days` after it.
fn window(params: &mut CertificateParams, now: Timestamp, days: u32) -> Result<(), CertsError> {
    if !(1..=36_500).contains(&days) {
        return Err(CertsError::BadValidity(days));
    }
    let at = |seconds: i64| {
        OffsetDateTime::from_unix_timestamp(seconds)
            .map_err(|e| CertsError::Generation(e.to_string()))
    };
    params.not_before = at(now.as_second() - 3600)?;
    params.not_after = at(now.as_second() + i64::from(days) * 86_400)?;
    Ok(())
}

fn name(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

/// Issues the serving pair (and a CA unless one is given).
pub fn issue(request: &IssueRequest) -> Result<Issued, CertsError> {
    if request.dns_names.is_empty() && request.ips.is_empty() {
        return Err(CertsError::NoNames);
    }
    let (issuer, ca_cert_pem, ca_key_pem) = match &request.ca {
        Some((cert_pem, key_pem)) => {
            let key = KeyPair::from_pem(key_pem).map_err(|e| CertsError::BadCa(e.to_string()))?;
            let issuer = Issuer::from_ca_cert_pem(cert_pem, key)
                .map_err(|e| CertsError::BadCa(e.to_string()))?;
            (issuer, cert_pem.clone(), String::new())
        }
        None => {
            let key = KeyPair::generate().map_err(generation)?;
            let mut params = CertificateParams::default();
            params.distinguished_name = name("mds webhook CA");
            params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
            params.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            window(&mut params, request.now, request.ca_valid_days)?;
            let cert = params.self_signed(&key).map_err(generation)?;
            let key_pem = key.serialize_pem();
            (Issuer::new(params, key), cert.pem(), key_pem)
        }
    };

    let mut params = CertificateParams::default();
    let common_name = request
        .dns_names
        .first()
        .cloned()
        .unwrap_or_else(|| "mds-webhook".to_string());
    params.distinguished_name = name(&common_name);
    for dns in &request.dns_names {
        let ia5 = dns
            .as_str()
            .try_into()
            .map_err(|e: rcgen::Error| CertsError::BadName(dns.clone(), e.to_string()))?;
        params.subject_alt_names.push(SanType::DnsName(ia5));
    }
    params
        .subject_alt_names
        .extend(request.ips.iter().map(|ip| SanType::IpAddress(*ip)));
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    window(&mut params, request.now, request.valid_days)?;
    let key = KeyPair::generate().map_err(generation)?;
    let cert = params.signed_by(&key, &issuer).map_err(generation)?;
    Ok(Issued {
        ca_cert_pem,
        ca_key_pem,
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The `caBundle` value of a webhook configuration: the CA's PEM, base64-encoded.
pub fn ca_bundle(ca_cert_pem: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(ca_cert_pem)
}
