//! The production `MetricsSource`: one pooled reqwest client for every scaler, a timeout per
//! Pod, a body cap (`MAX_PAGE_BYTES`, refused rather than parsed in part) and a bound on
//! concurrent scrapes across all scalers.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use mds_signals::scrape::MAX_PAGE_BYTES;
use tokio::sync::Semaphore;

use crate::ports::{MetricsSource, ScrapeError};

/// Scraping limits.
#[derive(Clone, Debug)]
pub struct ScrapeConfig {
    /// Per-Pod budget for connecting and reading the whole page.
    pub timeout: Duration,
    /// Concurrent scrapes across all scalers.
    pub concurrency: usize,
    pub max_bytes: u64,
    /// Accept any certificate from `https` engines. Pod IPs rarely appear in serving
    /// certificates, so an `https` engine is otherwise unreadable unless `ca_pem` names the
    /// CA that signed a certificate valid for its IP.
    pub tls_insecure: bool,
    /// Extra CA (PEM) trusted for `https` engines.
    pub ca_pem: Option<Vec<u8>>,
}

impl Default for ScrapeConfig {
    fn default() -> Self {
        ScrapeConfig {
            timeout: Duration::from_secs(2),
            concurrency: 128,
            max_bytes: MAX_PAGE_BYTES,
            tls_insecure: false,
            ca_pem: None,
        }
    }
}

pub struct HttpSource {
    client: reqwest::Client,
    permits: Arc<Semaphore>,
    config: ScrapeConfig,
}

impl HttpSource {
    pub fn new(config: ScrapeConfig) -> Result<HttpSource, reqwest::Error> {
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .pool_idle_timeout(Duration::from_secs(90))
            // A proxy must not sit between the operator and Pod IPs, and a Pod must not send
            // the scraper anywhere else.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .danger_accept_invalid_certs(config.tls_insecure)
            .user_agent("mds-scraper");
        if let Some(pem) = &config.ca_pem {
            builder = builder.add_root_certificate(reqwest::Certificate::from_pem(pem)?);
        }
        let client = builder.build()?;
        Ok(HttpSource {
            client,
            permits: Arc::new(Semaphore::new(config.concurrency.max(1))),
            config,
        })
    }

    async fn read(&self, url: &str) -> Result<String, ScrapeError> {
        let timeout_ms = self.config.timeout.as_millis() as u64;
        let classify = |e: reqwest::Error| {
            if e.is_timeout() {
                ScrapeError::Timeout(timeout_ms)
            } else if e.is_connect() {
                ScrapeError::Connect(e.to_string())
            } else {
                ScrapeError::Other(e.to_string())
            }
        };
        let response = self.client.get(url).send().await.map_err(classify)?;
        if !response.status().is_success() {
            return Err(ScrapeError::Status(response.status().as_u16()));
        }
        if response
            .content_length()
            .is_some_and(|n| n > self.config.max_bytes)
        {
            return Err(ScrapeError::TooLarge(self.config.max_bytes));
        }
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(classify)?;
            if body.len() as u64 + chunk.len() as u64 > self.config.max_bytes {
                return Err(ScrapeError::TooLarge(self.config.max_bytes));
            }
            body.extend_from_slice(&chunk);
        }
        String::from_utf8(body).map_err(|_| ScrapeError::NotText)
    }
}

impl MetricsSource for HttpSource {
    async fn fetch(&self, url: &str) -> Result<String, ScrapeError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| ScrapeError::Other("the scraper is shutting down".into()))?;
        // The client's own timeout covers connect and the whole body; this one also covers a
        // server that trickles bytes.
        match tokio::time::timeout(self.config.timeout, self.read(url)).await {
            Ok(result) => result,
            Err(_) => Err(ScrapeError::Timeout(self.config.timeout.as_millis() as u64)),
        }
    }
}
