//! The production `MetricsSource`: one pooled reqwest client for every scaler, a timeout per
//! Pod, a body cap (`MAX_PAGE_BYTES`, refused rather than parsed in part), a bound on
//! concurrent scrapes across all scalers and a bound on the page bytes held at once.
//!
//! Memory: a page is read into one buffer, handed to the parser as soon as it is complete and
//! dropped when the parse returns (`fetch_with`). Every byte of buffer counts against
//! `max_bytes_in_flight` (default 64 MiB) from the moment it is allocated until the parse is
//! done, so the pages of all passes together never hold more than that, whatever the number of
//! scalers, Pods or concurrent scrapes; a scrape that would exceed it waits for room, within
//! its own timeout. Without the bound, 128 concurrent scrapes of pages at the 16 MiB cap could
//! hold 2 GiB.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use mds_signals::scrape::MAX_PAGE_BYTES;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ports::{MetricsSource, ScrapeError};
use crate::tokio_clock::TokioClock;
use mds_worker::schedule::Clock;

/// Page bytes held at once across all scrapes, by default: four pages at the cap, about 300
/// ordinary 200 KB vLLM pages.
pub const MAX_BYTES_IN_FLIGHT: u64 = 64 * 1024 * 1024;

/// Scraping limits.
#[derive(Clone, Debug)]
pub struct ScrapeConfig {
    /// Per-Pod budget for connecting and reading the whole page.
    pub timeout: Duration,
    /// Concurrent scrapes across all scalers.
    pub concurrency: usize,
    /// The largest page read; a larger one is refused (`ScrapeError::TooLarge`).
    pub max_bytes: u64,
    /// Page bytes held at once across all scrapes, from the first byte read until the page is
    /// parsed. Raised to `max_bytes` when lower, so that one page at the cap can be read.
    pub max_bytes_in_flight: u64,
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
            max_bytes_in_flight: MAX_BYTES_IN_FLIGHT,
            tls_insecure: false,
            ca_pem: None,
        }
    }
}

pub struct HttpSource {
    client: reqwest::Client,
    permits: Arc<Semaphore>,
    /// One permit per byte of page buffer held.
    bytes: Arc<Semaphore>,
    bytes_total: usize,
    config: ScrapeConfig,
    /// When pages arrive: monotonic, on tokio's clock (paused with it in tests).
    clock: TokioClock,
}

/// A page read into memory and the bytes it holds of the bound.
struct Body {
    bytes: Vec<u8>,
    held: Option<OwnedSemaphorePermit>,
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
        // A semaphore holds at most `Semaphore::MAX_PERMITS` (2^61 on 64-bit) permits, and one
        // acquisition at most u32::MAX.
        let max_bytes = config.max_bytes.min(u64::from(u32::MAX));
        let bytes_total = config
            .max_bytes_in_flight
            .max(max_bytes)
            .min(Semaphore::MAX_PERMITS as u64) as usize;
        Ok(HttpSource {
            client,
            permits: Arc::new(Semaphore::new(config.concurrency.max(1))),
            bytes: Arc::new(Semaphore::new(bytes_total)),
            bytes_total,
            clock: TokioClock::new(jiff::Timestamp::now()),
            config: ScrapeConfig {
                max_bytes,
                ..config
            },
        })
    }

    /// Page bytes held right now, across all scrapes.
    pub fn bytes_in_flight(&self) -> u64 {
        (self.bytes_total - self.bytes.available_permits()) as u64
    }

    fn timeout(&self) -> ScrapeError {
        ScrapeError::Timeout(self.config.timeout.as_millis() as u64)
    }

    async fn read(&self, url: &str) -> Result<Body, ScrapeError> {
        let classify = |e: reqwest::Error| {
            if e.is_timeout() {
                self.timeout()
            } else if e.is_connect() {
                ScrapeError::Connect(e.to_string())
            } else {
                ScrapeError::Other(e.to_string())
            }
        };
        let response = self.client.get(url).send().await.map_err(classify)?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned())
                .unwrap_or_default();
            return Err(ScrapeError::Redirect {
                status: status.as_u16(),
                location,
            });
        }
        if !status.is_success() {
            return Err(ScrapeError::Status(status.as_u16()));
        }
        let max = self.config.max_bytes;
        let declared = response.content_length();
        if declared.is_some_and(|n| n > max) {
            return Err(ScrapeError::TooLarge(max));
        }
        let mut body = Body {
            bytes: Vec::new(),
            held: None,
        };
        if let Some(n) = declared {
            self.grow(&mut body, n as usize).await?;
        }
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(classify)?;
            let needed = body.bytes.len() + chunk.len();
            if needed as u64 > max {
                return Err(ScrapeError::TooLarge(max));
            }
            if needed > body.bytes.capacity() {
                // Double as a `Vec` would, within the cap, and count the whole buffer.
                let capacity = needed.max(body.bytes.capacity() * 2).min(max as usize);
                self.grow(&mut body, capacity).await?;
            }
            body.bytes.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// Makes room for `capacity` bytes in `body`, once that many bytes of the bound are free.
    async fn grow(&self, body: &mut Body, capacity: usize) -> Result<(), ScrapeError> {
        let more = capacity.saturating_sub(body.bytes.capacity());
        if more == 0 {
            return Ok(());
        }
        // `more` is at most `max_bytes`, which fits in a u32 and in the bound.
        let permit = self
            .bytes
            .clone()
            .acquire_many_owned(more as u32)
            .await
            .map_err(|_| ScrapeError::Other("the scraper is shutting down".into()))?;
        match &mut body.held {
            Some(held) => held.merge(permit),
            None => body.held = Some(permit),
        }
        body.bytes.reserve_exact(capacity - body.bytes.len());
        Ok(())
    }
}

impl MetricsSource for HttpSource {
    fn now(&self) -> Option<jiff::Timestamp> {
        Some(self.clock.now())
    }

    async fn fetch(&self, url: &str) -> Result<String, ScrapeError> {
        self.fetch_with(url, str::to_owned).await
    }

    async fn fetch_with<T, F>(&self, url: &str, parse: F) -> Result<T, ScrapeError>
    where
        T: Send,
        F: FnOnce(&str) -> T + Send,
    {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| ScrapeError::Other("the scraper is shutting down".into()))?;
        // The client's own timeout covers connect and the whole body; this one also covers a
        // server that trickles bytes, and the wait for room under the bytes bound.
        let body = match tokio::time::timeout(self.config.timeout, self.read(url)).await {
            Ok(body) => body?,
            Err(_) => return Err(self.timeout()),
        };
        let text = std::str::from_utf8(&body.bytes).map_err(|_| ScrapeError::NotText)?;
        // The page's bytes stay counted until the parse is done; then they go.
        Ok(parse(text))
    }
}
