//! What the bench reads while it measures: a process's CPU time and resident memory from
//! `/proc`, Prometheus text pages (the controller's `/metrics` over plain HTTP, the API server's
//! through the admin client), and quantiles from histogram buckets.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// CPU seconds (user + system) a process has used so far.
pub fn cpu_seconds(pid: u32) -> Result<f64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // The command name is in parentheses and may hold spaces; fields count from after it.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| format!("/proc/{pid}/stat: no command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3 of stat(5), utime 14 and stime 15.
    let tick = |i: usize| -> Result<u64, String> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("/proc/{pid}/stat: field {} unreadable", i + 3))
    };
    let ticks = tick(11)? + tick(12)?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Ok(ticks as f64 / per_second.max(1) as f64)
}

/// Resident set size in bytes (`VmRSS`).
pub fn rss_bytes(pid: u32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| format!("/proc/{pid}/status: no VmRSS"))
}

/// One sample of a Prometheus text page.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the sample lines of a Prometheus or OpenMetrics text page (comments skipped, label
/// values unescaped). Lines that do not parse are skipped: the bench reads known series only.
pub fn parse_page(text: &str) -> Vec<Series> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Series> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = line[..name_end].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices().peekable();
        let mut key = String::new();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '}' => break i,
                ',' | ' ' => {}
                '=' => {
                    if chars.next()?.1 != '"' {
                        return None;
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next()?.1 {
                            '"' => break,
                            '\\' => match chars.next()?.1 {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            other => value.push(other),
                        }
                    }
                    labels.insert(std::mem::take(&mut key), value);
                }
                other => key.push(other),
            }
        };
        rest = &inner[end + 1..];
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Series {
        name,
        labels,
        value,
    })
}

/// The sum of every series of that name whose labels include `with`.
pub fn sum(page: &[Series], name: &str, with: &[(&str, &str)]) -> f64 {
    page.iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            with.iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .sum()
}

/// Cumulative bucket counts of a histogram by upper bound, `+Inf` last.
pub fn buckets(page: &[Series], histogram: &str) -> Vec<(f64, f64)> {
    let name = format!("{histogram}_bucket");
    let mut out: Vec<(f64, f64)> = page
        .iter()
        .filter(|s| s.name == name)
        .filter_map(|s| {
            let le = s.labels.get("le")?;
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((bound, s.value))
        })
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// Bucket counts over a window: `end - start`, bound by bound.
pub fn bucket_delta(start: &[(f64, f64)], end: &[(f64, f64)]) -> Vec<(f64, f64)> {
    end.iter()
        .map(|(bound, count)| {
            let before = start
                .iter()
                .find(|(b, _)| b == bound)
                .map_or(0.0, |(_, c)| *c);
            (*bound, count - before)
        })
        .collect()
}

/// A quantile estimated from cumulative buckets the way Prometheus' `histogram_quantile` does:
/// find the bucket holding the rank, interpolate linearly inside it (the first bucket starts
/// at 0). A rank in the `+Inf` bucket gives the largest finite bound. `None` without samples.
pub fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(bound, count) in buckets {
        if count >= rank {
            if bound.is_infinite() {
                return Some(lower.0);
            }
            let inside = count - lower.1;
            let fraction = if inside > 0.0 {
                (rank - lower.1) / inside
            } else {
                1.0
            };
            return Some(lower.0 + (bound - lower.0) * fraction);
        }
        lower = (bound, count);
    }
    Some(lower.0)
}

/// `GET path` over plain HTTP/1.0; the body of a 200 answer.
pub async fn http_get(address: SocketAddr, path: &str) -> Result<String, String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| format!("connecting to {address}: {e}"))?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("writing to {address}: {e}"))?;
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .await
            .map_err(|e| format!("reading from {address}: {e}"))?;
        let answer = String::from_utf8(answer).map_err(|_| format!("{path}: not UTF-8"))?;
        let (head, body) = answer
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("{path}: no header end"))?;
        let status = head.lines().next().unwrap_or_default();
        if status.split_whitespace().nth(1) != Some("200") {
            return Err(format!("{path}: {status}"));
        }
        Ok(body.to_string())
    };
    tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .map_err(|_| format!("{path} on {address}: no answer in 30 s"))?
}

/// The API server's own metrics page.
pub async fn api_server_metrics(client: &kube::Client) -> Result<Vec<Series>, String> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| format!("reading the API server's /metrics: {e}"))?;
    Ok(parse_page(&text))
}

/// Checks the page parser and the quantile arithmetic on a known page; the bench runs it before
/// measuring (a bench target's own tests never run).
pub fn self_check() {
    let page = parse_page(
        "# HELP x\nreq_total{verb=\"GET\",resource=\"pods\",msg=\"a,\\\"b\\\"\"} 3\n\
         h_bucket{le=\"0.001\"} 0\nh_bucket{le=\"0.002\"} 50\nh_bucket{le=\"0.004\"} 100\n\
         h_bucket{le=\"+Inf\"} 100\nplain 7 1700000000\n# EOF\n",
    );
    assert_eq!(page.len(), 6, "{page:?}");
    assert_eq!(page[0].labels["msg"], "a,\"b\"");
    assert_eq!(sum(&page, "req_total", &[("verb", "GET")]), 3.0);
    assert_eq!(sum(&page, "plain", &[]), 7.0);
    let b = buckets(&page, "h");
    assert_eq!(quantile(0.5, &b), Some(0.002));
    assert!((quantile(0.99, &b).unwrap() - 0.00396).abs() < 1e-12);
    assert_eq!(quantile(0.25, &b), Some(0.0015));
    assert_eq!(quantile(0.5, &bucket_delta(&b, &b)), None);
}
