//! Plain SVG charts: lines over time with reference lines and event marks, and a scatter of
//! policies. No script and nothing fetched: the page is readable offline and in print. Each
//! chart carries `data-points` (how many points it drew) so a test can tell an empty plot
//! from a drawn one.

use std::fmt::Write as _;

/// Colours that stay apart in print and for the common colour-vision deficiencies.
pub const PALETTE: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#999999",
];

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 40.0;

/// One line.
pub struct Series {
    pub name: String,
    pub colour: &'static str,
    pub dashed: bool,
    /// Steps hold each value until the next point (counts); else points are joined.
    pub steps: bool,
    pub points: Vec<(f64, f64)>,
}

/// A chart of lines over one x axis.
pub struct LineChart {
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Horizontal reference lines: label and value (an SLO).
    pub references: Vec<(String, f64)>,
    /// Vertical marks: x and colour (scale actions, fault windows).
    pub marks: Vec<(f64, &'static str)>,
    /// Plot y on a log scale (latencies span orders of magnitude).
    pub log_y: bool,
    /// Shaded x ranges with a label (fault windows).
    pub bands: Vec<(f64, f64, String)>,
    /// The axes' ranges, where not fitted to the data from zero: (x from, x to), (y from, y to).
    pub window: Option<((f64, f64), (f64, f64))>,
}

/// Escapes text for HTML and SVG.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// Round numbers for ticks between `lo` and `hi`, about `n` of them.
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(1e-9);
    let raw = span / n.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(raw);
    let mut out = Vec::new();
    let mut t = (lo / step).ceil() * step;
    while t <= hi + step * 1e-9 && out.len() < 50 {
        out.push(t);
        t += step;
    }
    out
}

fn number(v: f64) -> String {
    if v.abs() >= 1000.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{:.2}", v)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// A plot's frame: grid lines with their tick labels (pixel position, value), the frame and
/// the axis labels.
struct Axes<'a> {
    y_ticks: &'a [(f64, f64)],
    x_ticks: &'a [(f64, f64)],
    plot_w: f64,
    plot_h: f64,
    height: f64,
    x_label: &'a str,
    y_label: &'a str,
}

fn axes(svg: &mut String, a: &Axes) {
    for (y, t) in a.y_ticks {
        let _ = write!(
            svg,
            r#"<line x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{tx}" y="{ty:.1}" class="tick" text-anchor="end">{label}</text>"#,
            x2 = LEFT + a.plot_w,
            tx = LEFT - 6.0,
            ty = y + 4.0,
            label = number(*t),
        );
    }
    for (x, t) in a.x_ticks {
        let _ = write!(
            svg,
            r#"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{y2}" class="grid"/><text x="{x:.1}" y="{ty}" class="tick" text-anchor="middle">{label}</text>"#,
            y2 = TOP + a.plot_h,
            ty = TOP + a.plot_h + 16.0,
            label = number(*t),
        );
    }
    let my = TOP + a.plot_h / 2.0;
    let _ = write!(
        svg,
        r#"<rect x="{LEFT}" y="{TOP}" width="{w}" height="{h}" class="frame"/><text x="{x}" y="{y}" class="axis" text-anchor="middle">{xl}</text><text x="14" y="{my}" class="axis" text-anchor="middle" transform="rotate(-90 14 {my})">{yl}</text>"#,
        w = a.plot_w,
        h = a.plot_h,
        x = LEFT + a.plot_w / 2.0,
        y = a.height - 6.0,
        xl = escape(a.x_label),
        yl = escape(a.y_label),
    );
}

impl LineChart {
    pub fn render(&self) -> String {
        let points: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        let drawn = points.len();
        let x_max = points.iter().map(|p| p.0).fold(1.0, f64::max);
        let (x_min, x_max) = self.window.map_or((0.0, x_max), |w| w.0);
        let floor = if self.log_y { 1e-3 } else { 0.0 };
        let mut y_max = points.iter().map(|p| p.1).fold(floor, f64::max);
        for (_, v) in &self.references {
            y_max = y_max.max(*v);
        }
        let y_max = if y_max <= floor { 1.0 } else { y_max * 1.08 };
        let y_max = self.window.map_or(y_max, |w| w.1.1);
        let y_min = if let Some(w) = self.window {
            w.1.0
        } else if self.log_y {
            points
                .iter()
                .map(|p| p.1)
                .filter(|v| *v > 0.0)
                .fold(y_max, f64::min)
                .min(self.references.iter().map(|r| r.1).fold(y_max, f64::min))
                .max(1e-3)
                / 1.5
        } else {
            0.0
        };
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let sx =
            |x: f64| LEFT + ((x - x_min) / (x_max - x_min).max(1e-12)).clamp(0.0, 1.0) * plot_w;
        let sy = |y: f64| {
            let f = if self.log_y {
                (y.max(y_min).ln() - y_min.ln()) / (y_max.ln() - y_min.ln())
            } else {
                (y - y_min) / (y_max - y_min)
            };
            TOP + plot_h * (1.0 - f.clamp(0.0, 1.0))
        };
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg id="{id}" class="chart" data-points="{drawn}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{title}" xmlns="http://www.w3.org/2000/svg">"#,
            id = escape(&self.id),
            title = escape(&self.title),
        );
        let _ = write!(
            svg,
            r#"<text x="{LEFT}" y="16" class="title">{}</text>"#,
            escape(&self.title)
        );
        // Grid and ticks.
        let y_ticks = if self.log_y {
            let mut t = Vec::new();
            let mut v = 10f64.powf(y_min.log10().ceil());
            while v <= y_max && t.len() < 12 {
                for m in [1.0, 2.0, 5.0] {
                    if v * m >= y_min && v * m <= y_max {
                        t.push(v * m);
                    }
                }
                v *= 10.0;
            }
            t
        } else {
            ticks(y_min, y_max, 5)
        };
        let y_ticks: Vec<(f64, f64)> = y_ticks.iter().map(|t| (sy(*t), *t)).collect();
        let x_ticks: Vec<(f64, f64)> = ticks(x_min, x_max, 8)
            .into_iter()
            .map(|t| (sx(t), t))
            .collect();
        axes(
            &mut svg,
            &Axes {
                y_ticks: &y_ticks,
                x_ticks: &x_ticks,
                plot_w,
                plot_h,
                height: HEIGHT,
                x_label: &self.x_label,
                y_label: &self.y_label,
            },
        );
        for (x0, x1, label) in &self.bands {
            let (a, b) = (sx(x0.max(0.0)), sx(x1.min(x_max).max(*x0)));
            let _ = write!(
                svg,
                r#"<rect x="{a:.1}" y="{TOP}" width="{w:.1}" height="{plot_h}" class="band"><title>{t}</title></rect>"#,
                w = (b - a).max(1.5),
                t = escape(label),
            );
        }
        for (x, colour) in &self.marks {
            let x = sx(*x);
            let _ = write!(
                svg,
                r#"<line x1="{x:.1}" x2="{x:.1}" y1="{y1}" y2="{y2}" stroke="{colour}" class="mark"/>"#,
                y1 = TOP + plot_h - 8.0,
                y2 = TOP + plot_h,
            );
        }
        for (label, v) in &self.references {
            let y = sy(*v);
            let _ = write!(
                svg,
                r#"<line x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" class="reference"/><text x="{tx}" y="{ty:.1}" class="tick reference-label">{}</text>"#,
                escape(label),
                x2 = LEFT + plot_w,
                tx = LEFT + 6.0,
                ty = (y - 4.0).max(TOP + 10.0),
            );
        }
        for (i, s) in self.series.iter().enumerate() {
            let mut d = String::new();
            let mut last: Option<(f64, f64)> = None;
            for &(x, y) in s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
            {
                let (px, py) = (sx(x), sy(y));
                match last {
                    None => {
                        let _ = write!(d, "M{px:.1},{py:.1}");
                    }
                    Some(_) if s.steps => {
                        let _ = write!(d, "H{px:.1}V{py:.1}");
                    }
                    Some(_) => {
                        let _ = write!(d, "L{px:.1},{py:.1}");
                    }
                }
                last = Some((px, py));
            }
            if !d.is_empty() {
                let _ = write!(
                    svg,
                    r#"<path d="{d}" fill="none" stroke="{c}" stroke-width="1.6"{dash} class="series"/>"#,
                    c = s.colour,
                    dash = if s.dashed {
                        r#" stroke-dasharray="5 3""#
                    } else {
                        ""
                    },
                );
            }
            let ly = TOP + 10.0 + 16.0 * i as f64;
            let lx = LEFT + plot_w + 8.0;
            let _ = write!(
                svg,
                r#"<line x1="{lx}" x2="{x2}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/><text x="{tx}" y="{ty}" class="legend">{name}</text>"#,
                x2 = lx + 18.0,
                c = s.colour,
                dash = if s.dashed {
                    r#" stroke-dasharray="5 3""#
                } else {
                    ""
                },
                tx = lx + 22.0,
                ty = ly + 4.0,
                name = escape(&s.name),
            );
        }
        svg.push_str("</svg>");
        svg
    }
}

/// One policy in the scatter.
pub struct Dot {
    pub name: String,
    pub x: f64,
    pub y: f64,
    pub ours: bool,
}

/// Attainment against GPU-hours across policies, with a vertical reference (Oracle B).
pub fn scatter(id: &str, title: &str, dots: &[Dot], reference: Option<(String, f64)>) -> String {
    let drawn = dots
        .iter()
        .filter(|d| d.x.is_finite() && d.y.is_finite())
        .count();
    let x_max = dots
        .iter()
        .map(|d| d.x)
        .chain(reference.as_ref().map(|r| r.1))
        .fold(0.1, f64::max)
        * 1.1;
    let y_min = dots.iter().map(|d| d.y).fold(100.0, f64::min).min(90.0);
    let y_min = (y_min / 10.0).floor() * 10.0;
    let (w, h) = (WIDTH, 340.0);
    let plot_w = w - LEFT - RIGHT;
    let plot_h = h - TOP - BOTTOM;
    let sx = |x: f64| LEFT + x / x_max * plot_w;
    // Headroom above 100 % for the labels of the policies that meet every request.
    let y_top = 100.0 + (100.0 - y_min) * 0.12;
    let sy = |y: f64| TOP + plot_h * (1.0 - ((y - y_min) / (y_top - y_min)).clamp(0.0, 1.0));
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg id="{id}" class="chart" data-points="{drawn}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><text x="{LEFT}" y="16" class="title">{t}</text>"#,
        id = escape(id),
        t = escape(title),
    );
    let y_ticks: Vec<(f64, f64)> = ticks(y_min, 100.0, 5)
        .into_iter()
        .map(|t| (sy(t), t))
        .collect();
    let x_ticks: Vec<(f64, f64)> = ticks(0.0, x_max, 8)
        .into_iter()
        .map(|t| (sx(t), t))
        .collect();
    axes(
        &mut svg,
        &Axes {
            y_ticks: &y_ticks,
            x_ticks: &x_ticks,
            plot_w,
            plot_h,
            height: h,
            x_label: "GPU-hours",
            y_label: "SLO attainment (%)",
        },
    );
    // The colour legend: ours and the peers.
    let lx = w - RIGHT - 150.0;
    let _ = write!(
        svg,
        r#"<g class="legend"><circle cx="{c0:.1}" cy="12" r="5" fill="{ours}"/><text x="{t0:.1}" y="16" class="tick">ours (mds)</text><circle cx="{c1:.1}" cy="12" r="4" fill="{peers}"/><text x="{t1:.1}" y="16" class="tick">peers</text></g>"#,
        c0 = lx,
        t0 = lx + 8.0,
        c1 = lx + 90.0,
        t1 = lx + 98.0,
        ours = PALETTE[0],
        peers = PALETTE[1],
    );
    if let Some((label, x)) = &reference {
        let px = sx(*x);
        let _ = write!(
            svg,
            r#"<line x1="{px:.1}" x2="{px:.1}" y1="{TOP}" y2="{y2}" class="reference"/><text x="{tx:.1}" y="{ty}" class="tick reference-label">{}</text>"#,
            escape(label),
            y2 = TOP + plot_h,
            tx = px + 4.0,
            ty = TOP + plot_h - 6.0,
        );
    }
    // Labels go right of their dot, moved up or down until they clear the labels placed so far.
    let mut placed: Vec<(f64, f64, f64)> = Vec::new();
    let mut order: Vec<&Dot> = dots
        .iter()
        .filter(|d| d.x.is_finite() && d.y.is_finite())
        .collect();
    order.sort_by(|a, b| a.x.total_cmp(&b.x));
    for d in order {
        let (cx, cy) = (sx(d.x), sy(d.y));
        let colour = if d.ours { PALETTE[0] } else { PALETTE[1] };
        let width = 6.2 * d.name.chars().count() as f64;
        let x0 = cx + 7.0;
        let clear = |y: f64, placed: &[(f64, f64, f64)]| {
            placed
                .iter()
                .all(|(px0, px1, py)| (y - py).abs() >= 11.0 || x0 > *px1 || x0 + width < *px0)
        };
        let ty = (0..12)
            .map(|k| {
                let step = 11.0 * f64::from((k + 1) / 2);
                cy + 4.0 + if k % 2 == 0 { step } else { -step }
            })
            .filter(|y| *y > TOP + 10.0 && *y < TOP + plot_h - 2.0)
            .find(|y| clear(*y, &placed))
            .unwrap_or(cy + 4.0);
        placed.push((x0, x0 + width, ty));
        let _ = write!(
            svg,
            r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="{r}" fill="{colour}" class="dot"><title>{name}: {y:.1} %, {x:.2} GPU-h</title></circle><text x="{x0:.1}" y="{ty:.1}" class="label">{name}</text>"#,
            r = if d.ours { 5 } else { 4 },
            name = escape(&d.name),
            y = d.y,
            x = d.x,
        );
    }
    svg.push_str("</svg>");
    svg
}
