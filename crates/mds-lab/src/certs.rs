//! Certificates and keys for one control plane, made fresh at every start (ECDSA P-256).
//!
//! Two CAs, as envtest does: one signs the API server's serving certificate, the other signs
//! client certificates (the admin user is in `system:masters`). The ServiceAccount token key pair
//! is separate; its public half is written as SPKI, the form the API server reads.

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

/// PEM texts of everything a control plane and its clients need.
pub struct Certificates {
    /// Verifies the API server (goes into kubeconfigs as the cluster CA).
    pub serving_ca: String,
    pub serving_cert: String,
    pub serving_key: String,
    /// Passed to the API server as `--client-ca-file`.
    pub client_ca: String,
    pub admin_cert: String,
    pub admin_key: String,
    pub service_account_key: String,
    pub service_account_public_key: String,
}

impl Certificates {
    /// `name` goes into the CAs' common names (`<name> serving CA`), so a certificate says
    /// which tool made it.
    pub fn generate(name: &str) -> Result<Certificates, rcgen::Error> {
        let serving_ca = certificate_authority(&format!("{name} serving CA"))?;
        let serving_key = KeyPair::generate()?;
        let mut serving = CertificateParams::new(vec!["localhost".to_string()])?;
        serving
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving.signed_by(&serving_key, &*serving_ca)?;

        let client_ca = certificate_authority(&format!("{name} client CA"))?;
        let admin_key = KeyPair::generate()?;
        let mut admin = CertificateParams::new(Vec::<String>::new())?;
        // The API server takes the user from CN and the groups from O.
        admin.distinguished_name.push(DnType::CommonName, "admin");
        admin
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        admin.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin_cert = admin.signed_by(&admin_key, &*client_ca)?;

        let service_account = KeyPair::generate()?;
        Ok(Certificates {
            serving_ca: serving_ca.pem(),
            serving_cert: serving_cert.pem(),
            serving_key: serving_key.serialize_pem(),
            client_ca: client_ca.pem(),
            admin_cert: admin_cert.pem(),
            admin_key: admin_key.serialize_pem(),
            service_account_key: service_account.serialize_pem(),
            service_account_public_key: service_account.public_key_pem(),
        })
    }
}

fn certificate_authority(name: &str) -> Result<CertifiedIssuer<'static, KeyPair>, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate()?)
}
