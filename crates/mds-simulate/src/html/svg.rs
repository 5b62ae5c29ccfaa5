//! Plain SVG charts: lines over time with reference lines and event marks, and a scatter of
//! policies. No script and nothing fetched: the page is readable offline and in print. Each
//! chart carries `data-points` (how many points it drew) so a test can tell an empty plot
//! from a drawn one.

use std::fmt::Write as _;

mod scatter;

pub use scatter::{Dot, scatter};

/// Colours that stay apart in print and for the common colour-vision deficiencies.
pub const PALETTE: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000", "#999999",
];

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 64.0;
/// The legend's column right of a line chart, at its narrowest.
const RIGHT: f64 = 150.0;
/// About how wide one character of a 10.5 px label is, for placing labels apart.
const CHAR_WIDTH: f64 = 6.2;
/// A label's line height.
const LINE: f64 = 12.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 40.0;

/// One line.
pub struct Series {
    pub name: String,
    pub colour: &'static str,
    /// An SVG `stroke-dasharray` (`styles::SOLID`: none).
    pub dash: &'static str,
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
    /// Name each series at its last point too (many lines: the legend alone is hard to
    /// match by colour).
    pub end_labels: bool,
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

/// The round step that cuts `span` into about `n` parts.
fn round_step(span: f64, n: usize) -> f64 {
    let raw = span.max(1e-9) / n.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(raw)
}

/// Round numbers for ticks between `lo` and `hi`, about `n` of them.
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let step = round_step(hi - lo, n);
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
    /// A chart of `series` over the run's minutes, on a linear y axis from zero, with no
    /// references, marks or bands until the caller sets them.
    pub fn over_minutes(id: &str, title: String, y_label: &str, series: Vec<Series>) -> LineChart {
        LineChart {
            id: id.into(),
            title,
            x_label: "minutes".into(),
            y_label: y_label.into(),
            series,
            references: Vec::new(),
            marks: Vec::new(),
            log_y: false,
            bands: Vec::new(),
            window: None,
            end_labels: false,
        }
    }

    pub fn render(&self) -> String {
        let points: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect();
        let drawn = points.len();
        let scale = self.fit(&points);
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
        self.grid(&mut svg, &scale);
        self.bands_and_marks(&mut svg, &scale);
        let references = self.reference_lines(&mut svg, &scale);
        self.series_and_legend(&mut svg, &scale, references);
        svg.push_str("</svg>");
        svg
    }

    /// The axes' ranges fitted to the finite `points` and the references (or the window),
    /// and the plot's size once the legend's column takes its room.
    fn fit(&self, points: &[(f64, f64)]) -> Scale {
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
        // The legend's column is as wide as its longest name.
        let longest = self
            .series
            .iter()
            .map(|s| s.name.chars().count())
            .max()
            .unwrap_or(0);
        let right = RIGHT.max(36.0 + CHAR_WIDTH * longest as f64);
        Scale {
            x_min,
            x_max,
            y_min,
            y_max,
            log_y: self.log_y,
            plot_w: WIDTH - LEFT - right,
            plot_h: HEIGHT - TOP - BOTTOM,
        }
    }

    /// The grid with its ticks (on a log axis, 1, 2 and 5 of each decade), the frame and
    /// the axis labels.
    fn grid(&self, svg: &mut String, scale: &Scale) {
        let (y_min, y_max) = (scale.y_min, scale.y_max);
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
        let y_ticks: Vec<(f64, f64)> = y_ticks.iter().map(|t| (scale.y(*t), *t)).collect();
        let x_ticks: Vec<(f64, f64)> = ticks(scale.x_min, scale.x_max, 8)
            .into_iter()
            .map(|t| (scale.x(t), t))
            .collect();
        axes(
            svg,
            &Axes {
                y_ticks: &y_ticks,
                x_ticks: &x_ticks,
                plot_w: scale.plot_w,
                plot_h: scale.plot_h,
                height: HEIGHT,
                x_label: &self.x_label,
                y_label: &self.y_label,
            },
        );
    }

    /// The shaded bands, with their labels as tooltips, and the marks along the x axis.
    fn bands_and_marks(&self, svg: &mut String, scale: &Scale) {
        let plot_h = scale.plot_h;
        for (x0, x1, label) in &self.bands {
            let (a, b) = (scale.x(x0.max(0.0)), scale.x(x1.min(scale.x_max).max(*x0)));
            let _ = write!(
                svg,
                r#"<rect x="{a:.1}" y="{TOP}" width="{w:.1}" height="{plot_h}" class="band"><title>{t}</title></rect>"#,
                w = (b - a).max(1.5),
                t = escape(label),
            );
        }
        for (x, colour) in &self.marks {
            let x = scale.x(*x);
            let _ = write!(
                svg,
                r#"<line x1="{x:.1}" x2="{x:.1}" y1="{y1}" y2="{y2}" stroke="{colour}" class="mark"/>"#,
                y1 = TOP + plot_h - 8.0,
                y2 = TOP + plot_h,
            );
        }
    }

    /// The horizontal reference lines with their labels; the areas the labels take.
    fn reference_lines(&self, svg: &mut String, scale: &Scale) -> Vec<Area> {
        // Reference labels sit above their line, pushed down from the top one by one so
        // close lines' labels do not overlap.
        let mut references: Vec<(&String, f64)> = self
            .references
            .iter()
            .map(|(l, v)| (l, scale.y(*v)))
            .collect();
        references.sort_by(|a, b| a.1.total_cmp(&b.1));
        let mut next_free = TOP + 10.0;
        let mut taken = Vec::new();
        for (label, y) in references {
            let ty = (y - 4.0).max(next_free);
            next_free = ty + LINE;
            taken.push(label_area(
                LEFT + 6.0,
                CHAR_WIDTH * label.chars().count() as f64,
                ty,
            ));
            let _ = write!(
                svg,
                r#"<line x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" class="reference"/><text x="{tx}" y="{ty:.1}" class="tick reference-label">{}</text>"#,
                escape(label),
                x2 = LEFT + scale.plot_w,
                tx = LEFT + 6.0,
            );
        }
        taken
    }

    /// Each series' line, and its entry in the legend's column; names at the lines' ends
    /// keep clear of the areas `taken` (the reference labels).
    fn series_and_legend(&self, svg: &mut String, scale: &Scale, taken: Vec<Area>) {
        // Legend rows fit the chart's height however many series there are.
        let row = (16.0_f64)
            .min((HEIGHT - TOP - 10.0) / self.series.len().max(1) as f64)
            .max(LINE);
        let mut ends = Labels {
            taken,
            x: (LEFT, LEFT + scale.plot_w),
            baseline: (TOP + LINE, TOP + scale.plot_h),
        };
        for (i, s) in self.series.iter().enumerate() {
            let d = path(s, scale);
            let dash = if s.dash.is_empty() {
                String::new()
            } else {
                format!(r#" stroke-dasharray="{}""#, s.dash)
            };
            if d.contains(['L', 'H']) {
                let _ = write!(
                    svg,
                    r#"<path d="{d}" fill="none" stroke="{c}" stroke-width="1.6"{dash} class="series"/>"#,
                    c = s.colour,
                );
            } else if let Some((x, y)) = d.strip_prefix('M').and_then(|p| p.split_once(',')) {
                // One point joins nothing: a dot shows where it is.
                let _ = write!(
                    svg,
                    r#"<circle cx="{x}" cy="{y}" r="2.5" fill="{c}" class="series"/>"#,
                    c = s.colour,
                );
            }
            if self.end_labels {
                end_label(svg, &mut ends, s, scale);
            }
            let ly = TOP + 10.0 + row * i as f64;
            let lx = LEFT + scale.plot_w + 8.0;
            let _ = write!(
                svg,
                r#"<line x1="{lx}" x2="{x2}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="2"{dash} class="key"/><text x="{tx}" y="{ty}" class="legend">{name}</text>"#,
                x2 = lx + 18.0,
                c = s.colour,
                tx = lx + 22.0,
                ty = ly + 4.0,
                name = escape(&s.name),
            );
        }
    }
}

/// A series' name beside its last drawn point, in its colour, where there is room clear of
/// the other names (a name left out still has its legend row).
fn end_label(svg: &mut String, ends: &mut Labels, s: &Series, scale: &Scale) {
    let Some(&(x, y)) = s
        .points
        .iter()
        .rev()
        .find(|(x, y)| x.is_finite() && y.is_finite())
    else {
        return;
    };
    let width = CHAR_WIDTH * s.name.chars().count() as f64;
    if let Some((x0, ty)) = ends.place(scale.x(x), scale.y(y), width) {
        let _ = write!(
            svg,
            r#"<text x="{x0:.1}" y="{ty:.1}" class="label end-label" style="fill:{c}">{}</text>"#,
            escape(&s.name),
            c = s.colour,
        );
    }
}

/// A line chart's axes in pixels: the ranges drawn and the plot's size.
struct Scale {
    x_min: f64,
    x_max: f64,
    y_min: f64,
    y_max: f64,
    log_y: bool,
    plot_w: f64,
    plot_h: f64,
}

impl Scale {
    /// The pixel column of `x`, held inside the plot.
    fn x(&self, x: f64) -> f64 {
        LEFT + ((x - self.x_min) / (self.x_max - self.x_min).max(1e-12)).clamp(0.0, 1.0)
            * self.plot_w
    }

    /// The pixel row of `y`, held inside the plot.
    fn y(&self, y: f64) -> f64 {
        let (y_min, y_max) = (self.y_min, self.y_max);
        let f = if self.log_y {
            (y.max(y_min).ln() - y_min.ln()) / (y_max.ln() - y_min.ln())
        } else {
            (y - y_min) / (y_max - y_min)
        };
        TOP + self.plot_h * (1.0 - f.clamp(0.0, 1.0))
    }
}

/// A series' finite points as an SVG path: joined, or held as steps; empty when none is.
fn path(s: &Series, scale: &Scale) -> String {
    let mut d = String::new();
    let mut last: Option<(f64, f64)> = None;
    for &(x, y) in s
        .points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
    {
        let (px, py) = (scale.x(x), scale.y(y));
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
    d
}

/// A box on a chart in pixels: x from, x to, y from, y to.
type Area = (f64, f64, f64, f64);

/// The area a label `width` wide takes with its baseline at `baseline`.
fn label_area(x0: f64, width: f64, baseline: f64) -> Area {
    (x0, x0 + width, baseline - 10.0, baseline + 2.0)
}

/// Where a scatter's labels may go: left edges and right edges within `x`, baselines within
/// `baseline`, clear of every area `taken`.
struct Labels {
    taken: Vec<Area>,
    x: (f64, f64),
    baseline: (f64, f64),
}

impl Labels {
    /// A spot (left edge, baseline) for a label `width` wide beside the dot at (cx, cy):
    /// right of it, else left, moving a line up or down at a time until it is clear. The
    /// spot is taken; `None` when the dot sits in a crowd with no room left.
    fn place(&mut self, cx: f64, cy: f64, width: f64) -> Option<(f64, f64)> {
        let overlaps = |a: Area, b: &Area| a.0 < b.1 && b.0 < a.1 && a.2 < b.3 && b.2 < a.3;
        let spot = (0..24)
            .flat_map(|k| {
                let step = LINE * f64::from((k + 1) / 2);
                let ty = cy + 4.0 + if k % 2 == 0 { step } else { -step };
                [(cx + 7.0, ty), (cx - 7.0 - width, ty)]
            })
            .filter(|(x0, ty)| {
                *x0 >= self.x.0
                    && x0 + width <= self.x.1
                    && *ty > self.baseline.0
                    && *ty < self.baseline.1
            })
            .find(|(x0, ty)| {
                let area = label_area(*x0, width, *ty);
                !self.taken.iter().any(|t| overlaps(area, t))
            })?;
        self.taken.push(label_area(spot.0, width, spot.1));
        Some(spot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers after `attr="` in each element of `svg` that has `class`.
    fn attrs(svg: &str, class: &str, attr: &str) -> Vec<f64> {
        svg.split('<')
            .filter(|e| e.contains(&format!("class=\"{class}\"")))
            .filter_map(|e| {
                let v = e.split(&format!(" {attr}=\"")).nth(1)?.split('"').next()?;
                v.parse().ok()
            })
            .collect()
    }

    fn dot(name: &str, x: f64, y: f64) -> Dot {
        Dot {
            colour: PALETTE[0],
            name: name.into(),
            x,
            y,
            ours: false,
        }
    }

    #[test]
    fn the_attainment_axis_starts_a_little_under_the_lowest_dot() {
        let (svg, _) = scatter("p", "t", &[dot("a", 1.0, 99.2), dot("b", 2.0, 100.0)], None);
        let ticks: Vec<f64> = svg
            .split("class=\"tick\" text-anchor=\"end\">")
            .skip(1)
            .filter_map(|t| t.split('<').next()?.parse().ok())
            .collect();
        let lowest = ticks.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            (98.0..99.2).contains(&lowest),
            "the axis starts at {lowest}: {ticks:?}"
        );
        // A spread of dots reaches down to them.
        let (svg, _) = scatter("p", "t", &[dot("a", 1.0, 62.0), dot("b", 2.0, 99.0)], None);
        assert!(
            svg.contains(">50</text>") && !svg.contains(">40</text>"),
            "{svg}"
        );
    }

    #[test]
    fn labels_in_a_crowd_do_not_overlap_and_the_unplaced_are_named() {
        let dots: Vec<Dot> = (0..40)
            .map(|i| dot(&format!("policy-{i}"), 1.0 + f64::from(i % 4) * 0.01, 97.0))
            .collect();
        let (svg, unlabelled) = scatter("p", "t", &dots, Some(("Oracle B 1.00".into(), 1.0)));
        let xs = attrs(&svg, "label", "x");
        let ys = attrs(&svg, "label", "y");
        let names: Vec<&str> = svg
            .split("class=\"label\">")
            .skip(1)
            .filter_map(|t| t.split('<').next())
            .collect();
        assert_eq!(xs.len(), names.len());
        assert_eq!(
            names.len() + unlabelled.len(),
            40,
            "every name shows somewhere"
        );
        for i in 0..names.len() {
            for j in i + 1..names.len() {
                let wi = CHAR_WIDTH * names[i].len() as f64;
                let wj = CHAR_WIDTH * names[j].len() as f64;
                let apart_x = xs[i] + wi <= xs[j] || xs[j] + wj <= xs[i];
                let apart_y = (ys[i] - ys[j]).abs() >= LINE;
                assert!(apart_x || apart_y, "{} over {}", names[i], names[j]);
            }
        }
    }

    #[test]
    fn close_reference_lines_keep_their_labels_apart() {
        let chart = LineChart {
            id: "c".into(),
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series {
                name: "s".into(),
                colour: PALETTE[0],
                dash: crate::html::styles::SOLID,
                steps: false,
                points: vec![(0.0, 90.0), (1.0, 100.0)],
            }],
            references: vec![("99 %".into(), 99.0), ("99.9 %".into(), 99.9)],
            marks: Vec::new(),
            log_y: false,
            bands: Vec::new(),
            window: Some(((0.0, 1.0), (90.0, 100.0))),
            end_labels: false,
        };
        let ys = attrs(&chart.render(), "tick reference-label", "y");
        assert_eq!(ys.len(), 2);
        assert!((ys[0] - ys[1]).abs() >= LINE, "{ys:?}");
    }
}
