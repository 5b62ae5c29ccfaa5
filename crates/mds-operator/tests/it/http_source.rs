//! `HttpSource` against engines that misbehave, each a raw TCP server on 127.0.0.1: a body
//! over the cap, a server that trickles bytes, one that never answers, redirects, error
//! statuses, a body that is not UTF-8; and the bound on page bytes held at once. Timeouts are
//! short real ones; every test bounds its own wait.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mds_operator::http_source::{HttpSource, ScrapeConfig};
use mds_operator::{MetricsSource, ScrapeError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TIMEOUT: Duration = Duration::from_millis(300);
/// Far above every timeout here: a read that is not cut short fails the test instead of
/// hanging it.
const NEVER: Duration = Duration::from_secs(10);

fn source(max_bytes: u64, max_bytes_in_flight: u64) -> HttpSource {
    HttpSource::new(ScrapeConfig {
        timeout: TIMEOUT,
        max_bytes,
        max_bytes_in_flight,
        ..ScrapeConfig::default()
    })
    .unwrap()
}

/// Reads a request's head.
async fn read_request(stream: &mut TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
}

/// Serves every connection with `answer`; returns the page's URL and the connections seen.
async fn serve<F, Fut>(answer: F) -> (String, Arc<AtomicUsize>)
where
    F: Fn(TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            read_request(&mut stream).await;
            tokio::spawn(answer(stream));
        }
    });
    (url, seen)
}

/// Answers with `head` and then `body`, and closes.
async fn reply(mut stream: TcpStream, head: String, body: Vec<u8>) {
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&body).await;
    let _ = stream.shutdown().await;
}

fn ok_head(length: Option<usize>) -> String {
    match length {
        Some(n) => format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n"),
        None => "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_string(),
    }
}

async fn page_server(body: Vec<u8>, declare_length: bool) -> String {
    let body = Arc::new(body);
    serve(move |stream| {
        let body = body.clone();
        async move {
            let head = ok_head(declare_length.then_some(body.len()));
            reply(stream, head, body.to_vec()).await
        }
    })
    .await
    .0
}

/// Fetches within `NEVER`, and how long it took.
async fn fetch(source: &HttpSource, url: &str) -> (Result<String, ScrapeError>, Duration) {
    let began = Instant::now();
    let result = tokio::time::timeout(NEVER, source.fetch(url))
        .await
        .expect("the scrape was not cut short by its timeout");
    (result, began.elapsed())
}

#[tokio::test]
async fn a_page_is_read_whole() {
    let url = page_server(b"vllm:num_requests_running 1\n".to_vec(), true).await;
    let (page, _) = fetch(&source(1024, 4096), &url).await;
    assert_eq!(page.unwrap(), "vllm:num_requests_running 1\n");
}

#[tokio::test]
async fn a_body_over_the_cap_is_refused_naming_the_cap() {
    for declare_length in [true, false] {
        let url = page_server(vec![b'#'; 5000], declare_length).await;
        let (page, _) = fetch(&source(4096, 8192), &url).await;
        let e = page.unwrap_err();
        assert_eq!(e, ScrapeError::TooLarge(4096), "declared: {declare_length}");
        assert!(e.to_string().contains("cap of 4096 bytes"), "{e}");
    }
}

#[tokio::test]
async fn a_server_that_trickles_bytes_is_cut_at_the_timeout() {
    let (url, _) = serve(|mut stream| async move {
        let _ = stream.write_all(ok_head(Some(1_000_000)).as_bytes()).await;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tick.tick().await;
            if stream.write_all(b"#").await.is_err() {
                return;
            }
        }
    })
    .await;
    let (page, took) = fetch(&source(4 << 20, 8 << 20), &url).await;
    assert_eq!(page.unwrap_err(), ScrapeError::Timeout(300));
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let (url, _) = serve(|stream| async move {
        // Keeps the connection open and says nothing.
        tokio::time::sleep(NEVER * 2).await;
        drop(stream);
    })
    .await;
    let (page, took) = fetch(&source(4096, 8192), &url).await;
    assert_eq!(page.unwrap_err(), ScrapeError::Timeout(300));
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_is_named() {
    let (elsewhere, visits) =
        serve(|stream| reply(stream, ok_head(Some(2)), b"1\n".to_vec())).await;
    let location = elsewhere.clone();
    let (url, _) = serve(move |stream| {
        let head = format!(
            "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        reply(stream, head, Vec::new())
    })
    .await;
    let (page, _) = fetch(&source(4096, 8192), &url).await;
    let e = page.unwrap_err();
    assert_eq!(
        e,
        ScrapeError::Redirect {
            status: 302,
            location: elsewhere.clone()
        }
    );
    assert!(e.to_string().contains("redirects to"), "{e}");
    assert!(e.to_string().contains(&elsewhere), "{e}");
    assert_eq!(e.reason(), "redirect");
    assert_eq!(
        visits.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
}

#[tokio::test]
async fn error_statuses_are_reported_with_their_code() {
    for (code, text) in [
        (404, "Not Found"),
        (500, "Internal Server Error"),
        (503, "Service Unavailable"),
    ] {
        let (url, _) = serve(move |stream| {
            let head =
                format!("HTTP/1.1 {code} {text}\r\nContent-Length: 4\r\nConnection: close\r\n\r\n");
            reply(stream, head, b"nope".to_vec())
        })
        .await;
        let (page, _) = fetch(&source(4096, 8192), &url).await;
        let e = page.unwrap_err();
        assert_eq!(e, ScrapeError::Status(code));
        assert!(e.to_string().contains(&code.to_string()), "{e}");
    }
}

#[tokio::test]
async fn a_body_that_is_not_utf8_is_an_error() {
    let url = page_server(vec![b'v', 0xff, 0xfe, b'\n'], true).await;
    let (page, _) = fetch(&source(4096, 8192), &url).await;
    assert_eq!(page.unwrap_err(), ScrapeError::NotText);
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    drop(listener);
    let (page, _) = fetch(&source(4096, 8192), &url).await;
    assert!(matches!(page, Err(ScrapeError::Connect(_))), "{page:?}");
}

#[tokio::test]
async fn a_page_counts_against_the_bound_until_it_is_parsed() {
    let body = vec![b'#'; 3000];
    for declare_length in [true, false] {
        let url = page_server(body.clone(), declare_length).await;
        let source = source(4096, 8192);
        let during = tokio::time::timeout(
            NEVER,
            source.fetch_with(&url, |text| (text.len(), source.bytes_in_flight())),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(during.0, 3000);
        assert!(
            (3000..=4096).contains(&during.1),
            "held while parsing: {}",
            during.1
        );
        assert_eq!(source.bytes_in_flight(), 0, "released after the parse");
    }
}

#[tokio::test]
async fn pages_in_flight_never_hold_more_than_the_bound() {
    // Eight pages of 3,000 bytes at once under a bound of 4,096 bytes: one at a time fits.
    let body = vec![b'#'; 3000];
    let url = page_server(body, true).await;
    let source = Arc::new(source(4096, 4096));
    let most = Arc::new(AtomicU64::new(0));
    let reads = (0..8).map(|_| {
        let (source, most, url) = (source.clone(), most.clone(), url.clone());
        tokio::spawn(async move {
            source
                .fetch_with(&url, |text| {
                    most.fetch_max(source.bytes_in_flight(), Ordering::SeqCst);
                    text.len()
                })
                .await
        })
    });
    for read in reads {
        let page = tokio::time::timeout(NEVER, read).await.unwrap().unwrap();
        assert_eq!(page, Ok(3000));
    }
    let most = most.load(Ordering::SeqCst);
    assert!((3000..=4096).contains(&most), "most held at once: {most}");
    assert_eq!(source.bytes_in_flight(), 0);
}
