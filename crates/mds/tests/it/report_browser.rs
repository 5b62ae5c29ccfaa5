//! The HTML report in a real browser: `mds simulate --report` writes a page that headless
//! Chromium renders to a screenshot that is not blank, and in which every plot drew its data.
//! Without Chromium (Debian's `chromium`; `.ci/run` installs it) the test says loudly that it
//! skipped.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Scratch, mds, text};

/// Chromium: `MDS_CHROMIUM`, else the usual paths.
fn chromium() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("MDS_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    [
        "/usr/bin/chromium",
        "/usr/bin/chromium-browser",
        "/usr/bin/google-chrome",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// Chromium for `test`, or a loud line that it is skipped.
fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        eprintln!(
            "!!! SKIPPED {test}: no Chromium (install Debian's chromium, or set MDS_CHROMIUM)"
        );
    }
    found
}

/// Headless Chromium with the flags a closed network needs, its profile in `scratch`.
fn headless(browser: &Path, scratch: &Path) -> Command {
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!(
        "--user-data-dir={}",
        scratch.join("profile").display()
    ));
    cmd
}

/// Pixels of an RGBA or RGB PNG: (width, height, rgb of each pixel).
fn pixels(png_path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).expect("the screenshot"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let channels = info.color_type.samples();
    let rgb = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    (info.width, info.height, rgb)
}

/// The DOM after layout: the page's own record of what each plot drew; each of `ids` drew
/// something visible, and no text of any plot overlaps another or leaves its plot.
fn assert_drawn(browser: &Path, scratch: &Path, url: &str, ids: &[&str]) {
    let dom = headless(browser, scratch)
        .args(["--virtual-time-budget=2000", "--dump-dom", url])
        .output()
        .expect("chromium runs");
    let dom = text(&dom.stdout);
    let overlaps = dom
        .split("data-overlaps=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("the page did not report its overlaps:\n{dom:.2000}"));
    assert!(overlaps.is_empty(), "texts overlap: {overlaps}");
    let drawn = dom
        .split("data-drawn=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("the page did not report what it drew:\n{dom:.2000}"));
    let plots: Vec<&str> = drawn.split(';').filter(|p| !p.is_empty()).collect();
    for id in ids {
        let plot = plots
            .iter()
            .find(|p| p.starts_with(&format!("{id}:")))
            .unwrap_or_else(|| panic!("plot {id} missing from {drawn}"));
        // `id:elements:WIDTHxHEIGHT`, the union of the drawn series and dots in pixels (a
        // constant series is a flat line: no height).
        let fields: Vec<&str> = plot.split(':').collect();
        let elements: u32 = fields.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        let size: Vec<f64> = fields
            .get(2)
            .map(|v| v.split('x').map(|n| n.parse().unwrap_or(0.0)).collect())
            .unwrap_or_default();
        assert!(
            elements > 0 && size.len() == 2 && (size[0] >= 8.0 || size[1] >= 8.0),
            "plot {id} drew nothing visible: {plot}"
        );
    }
}

#[test]
fn the_frontier_page_draws_each_policys_frontier() {
    let Some(browser) = chromium_or_skip("the_frontier_page_draws_each_policys_frontier") else {
        return;
    };
    let scratch = Scratch::new("frontier-browser");
    let page = scratch.0.join("frontier.html");
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--until",
            "10m",
            "--frontier",
            "90,95",
            "--frontier-grid",
            "0.5..4:4",
            "--compare",
            "mds-tokenthroughput,hpa,static-peak",
            "--report",
            &page.display().to_string(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Reaching 95 %"), "the tiers' tables");
    assert!(!html.contains("<script src"), "nothing is fetched");
    assert_drawn(
        &browser,
        &scratch.0,
        &format!("file://{}", page.display()),
        &["frontier-0"],
    );
}

/// `(stroke, stroke-dasharray)` of every series' legend key in the chart `id` of `html`
/// (every series has one, drawn or clipped).
fn series_styles(html: &str, id: &str) -> Vec<(String, String)> {
    let chart = html
        .split(&format!("<svg id=\"{id}\""))
        .nth(1)
        .and_then(|rest| rest.split("</svg>").next())
        .unwrap_or_else(|| panic!("no chart {id}"));
    let attr = |tag: &str, name: &str| {
        tag.split(&format!(" {name}=\""))
            .nth(1)
            .and_then(|v| v.split('"').next())
            .unwrap_or_default()
            .to_string()
    };
    chart
        .split("<line ")
        .skip(1)
        .map(|tag| tag.split("/>").next().unwrap_or_default())
        .filter(|tag| tag.contains("class=\"key\""))
        .map(|tag| (attr(tag, "stroke"), attr(tag, "stroke-dasharray")))
        .collect()
}

#[test]
fn the_frontier_page_tells_fifteen_policies_apart_and_shows_its_inputs() {
    let Some(browser) = chromium_or_skip("the_frontier_page_tells_fifteen_policies_apart") else {
        return;
    };
    let scratch = Scratch::new("frontier-many");
    let page = scratch.0.join("frontier.html");
    let keda = common::repo().join("examples/peers/keda.yaml");
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--until",
            "5m",
            "--frontier",
            "90,95",
            "--frontier-grid",
            "0.5..2:2",
            "--compare",
            "peers",
            "--peer",
            &keda.display().to_string(),
            "--report",
            &page.display().to_string(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    // The tuned row, thirteen peers and the team's file: each drawn its own way, ours blue.
    let drawn = series_styles(&html, "frontier-0");
    assert_eq!(drawn.len(), 15, "{drawn:?}");
    let colours: std::collections::BTreeSet<&String> = drawn.iter().map(|(c, _)| c).collect();
    assert_eq!(
        colours.len(),
        drawn.len(),
        "two peers in one colour: {drawn:?}"
    );
    assert_eq!(
        drawn[0],
        ("#0072b2".to_string(), String::new()),
        "ours solid, in our colour"
    );
    assert!(
        drawn[1..].iter().all(|(_, dash)| !dash.is_empty()),
        "peers dashed"
    );
    assert!(
        html.contains("class=\"label end-label\""),
        "lines named at their ends"
    );
    for shown in [
        "<h3>Inputs</h3>",
        "<dt>profile</dt>",
        "<dt>SLO</dt>",
        "<dt>cold start</dt>",
        "<dt>quota</dt>",
        "<dt>at 95 %</dt>",
        "keda as written (target 16 running + waiting requests)",
    ] {
        assert!(html.contains(shown), "{shown} missing");
    }
    assert_drawn(
        &browser,
        &scratch.0,
        &format!("file://{}", page.display()),
        &["frontier-0"],
    );
}

#[test]
fn the_report_renders_in_chromium_with_every_plot_drawn() {
    let Some(browser) = chromium_or_skip("the_report_renders_in_chromium_with_every_plot_drawn")
    else {
        return;
    };
    let scratch = Scratch::new("report-browser");
    let page = scratch.0.join("report.html");
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--until",
            "10m",
            "--compare",
            "all",
            "--report",
            &page.display().to_string(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&format!("report: {}", page.display())));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script src"), "nothing is fetched");
    assert!(!html.contains("<link"), "nothing is fetched");
    let url = format!("file://{}", page.display());

    assert_drawn(
        &browser,
        &scratch.0,
        &url,
        &["demand", "replicas", "ttft", "itl", "policies"],
    );

    // The screenshot: not blank, and the plots' colours are on it.
    let shot = scratch.0.join("report.png");
    let status = headless(&browser, &scratch.0)
        .args(["--window-size=1280,3200"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .status()
        .expect("chromium runs");
    assert!(status.success(), "chromium failed to take the screenshot");
    let (w, h, px) = pixels(&shot);
    assert_eq!((w, h), (1280, 3200));
    let ink = px.iter().filter(|p| p.iter().any(|c| *c < 200)).count();
    assert!(
        ink > px.len() / 100,
        "the screenshot is nearly blank: {ink} dark pixels"
    );
    let blue = px
        .iter()
        .filter(|p| p[2] > 150 && p[0] < 40 && (90..140).contains(&p[1]))
        .count();
    assert!(
        blue > 200,
        "our series colour (#0072b2) is missing: {blue} pixels"
    );
    if let Ok(dir) = std::env::var("MDS_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, Path::new(&dir).join("report.png")).unwrap();
    }
}

#[test]
fn predictives_forecast_is_drawn_against_demand() {
    let Some(browser) = chromium_or_skip("predictives_forecast_is_drawn_against_demand") else {
        return;
    };
    let scratch = Scratch::new("forecast-browser");
    let page = scratch.0.join("forecast.html");
    let out = mds(
        &[
            "simulate",
            "--no-progress",
            "--until",
            "30m",
            "--scaler",
            "examples/predictive.yaml",
            "--compare",
            "none",
            "--report",
            &page.display().to_string(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h2>Forecast</h2>"), "the forecast section");
    assert!(
        html.contains("sMAPE at the horizon"),
        "the forecast's error"
    );
    assert_drawn(
        &browser,
        &scratch.0,
        &format!("file://{}", page.display()),
        &["demand", "replicas", "forecast", "ttft", "itl"],
    );
}
