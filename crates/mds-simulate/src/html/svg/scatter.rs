//! The scatter of policies: attainment against GPU-hours, ours marked, Oracle B as a
//! vertical reference, labels placed where they fit.

use std::fmt::Write as _;

use super::{
    Axes, BOTTOM, CHAR_WIDTH, LEFT, LINE, Labels, PALETTE, RIGHT, TOP, WIDTH, axes, escape,
    label_area, round_step, ticks,
};

/// One policy in the scatter.
pub struct Dot {
    pub name: String,
    pub x: f64,
    pub y: f64,
    pub ours: bool,
    /// Its policy's colour (module `styles`).
    pub colour: &'static str,
}

/// Attainment against GPU-hours across policies, with a vertical reference (Oracle B); and
/// the names of the dots left unlabelled for want of room.
pub fn scatter(
    id: &str,
    title: &str,
    dots: &[Dot],
    reference: Option<(String, f64)>,
) -> (String, Vec<String>) {
    let drawn = dots
        .iter()
        .filter(|d| d.x.is_finite() && d.y.is_finite())
        .count();
    let scale = ScatterScale::fit(dots, reference.as_ref());
    let (w, h) = (WIDTH, SCATTER_HEIGHT);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg id="{id}" class="chart" data-points="{drawn}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg"><text x="{LEFT}" y="16" class="title">{t}</text>"#,
        id = escape(id),
        t = escape(title),
    );
    scale.axes(&mut svg);
    scatter_legend(&mut svg);
    // The labels' room: inside the chart, clear of the reference's label and every dot.
    let mut labels = Labels {
        taken: Vec::new(),
        x: (LEFT + 2.0, w - 2.0),
        baseline: (TOP + 10.0, TOP + scale.plot_h - 2.0),
    };
    if let Some((label, x)) = &reference {
        scatter_reference(&mut svg, &mut labels, &scale, label, *x);
    }
    let unlabelled = scatter_dots(&mut svg, &mut labels, &scale, dots);
    svg.push_str("</svg>");
    (svg, unlabelled)
}

/// The scatter's height (its width is a line chart's).
const SCATTER_HEIGHT: f64 = 340.0;

/// A scatter's axes: GPU-hours from zero, attainment up to 100 % and some headroom.
struct ScatterScale {
    x_max: f64,
    y_min: f64,
    y_top: f64,
    plot_w: f64,
    plot_h: f64,
}

impl ScatterScale {
    /// The axes fitted to the dots and the reference.
    fn fit(dots: &[Dot], reference: Option<&(String, f64)>) -> ScatterScale {
        let x_max = dots
            .iter()
            .map(|d| d.x)
            .chain(reference.map(|r| r.1))
            .fold(0.1, f64::max)
            * 1.1;
        // The y axis fitted to the dots: from a round number a little under the lowest to
        // 100 %.
        let lowest = dots
            .iter()
            .map(|d| d.y)
            .filter(|y| y.is_finite())
            .fold(100.0, f64::min);
        let under = (lowest - ((100.0 - lowest) * 0.15).max(0.5)).max(0.0);
        let step = round_step(100.0 - under, 5);
        let y_min = (under / step).floor() * step;
        ScatterScale {
            x_max,
            y_min,
            // Headroom above 100 % for the labels of the policies that meet every request.
            y_top: 100.0 + (100.0 - y_min) * 0.12,
            plot_w: WIDTH - LEFT - RIGHT,
            plot_h: SCATTER_HEIGHT - TOP - BOTTOM,
        }
    }

    /// The pixel column of `x` GPU-hours.
    fn x(&self, x: f64) -> f64 {
        LEFT + x / self.x_max * self.plot_w
    }

    /// The pixel row of `y` %, held inside the plot.
    fn y(&self, y: f64) -> f64 {
        TOP + self.plot_h * (1.0 - ((y - self.y_min) / (self.y_top - self.y_min)).clamp(0.0, 1.0))
    }

    /// The grid, its ticks, the frame and the axis labels.
    fn axes(&self, svg: &mut String) {
        let y_ticks: Vec<(f64, f64)> = ticks(self.y_min, 100.0, 5)
            .into_iter()
            .map(|t| (self.y(t), t))
            .collect();
        let x_ticks: Vec<(f64, f64)> = ticks(0.0, self.x_max, 8)
            .into_iter()
            .map(|t| (self.x(t), t))
            .collect();
        axes(
            svg,
            &Axes {
                y_ticks: &y_ticks,
                x_ticks: &x_ticks,
                plot_w: self.plot_w,
                plot_h: self.plot_h,
                height: SCATTER_HEIGHT,
                x_label: "GPU-hours",
                y_label: "SLO attainment (%)",
            },
        );
    }
}

/// The colour legend: ours and the peers.
fn scatter_legend(svg: &mut String) {
    let lx = WIDTH - RIGHT - 150.0;
    let _ = write!(
        svg,
        r#"<g class="legend"><circle cx="{c0:.1}" cy="12" r="5" fill="{ours}"/><text x="{t0:.1}" y="16" class="tick">ours (mds)</text><circle cx="{c1:.1}" cy="12" r="4" fill="{peers}"/><text x="{t1:.1}" y="16" class="tick">peers (each its own colour)</text></g>"#,
        c0 = lx,
        t0 = lx + 8.0,
        c1 = lx + 90.0,
        t1 = lx + 98.0,
        ours = crate::html::styles::OURS,
        peers = PALETTE[1],
    );
}

/// The vertical reference at `x` GPU-hours with its label, which the dots' labels avoid.
fn scatter_reference(
    svg: &mut String,
    labels: &mut Labels,
    scale: &ScatterScale,
    label: &str,
    x: f64,
) {
    let px = scale.x(x);
    let (tx, ty) = (px + 4.0, TOP + scale.plot_h - 6.0);
    labels.taken.push(label_area(
        tx,
        CHAR_WIDTH * label.chars().count() as f64,
        ty,
    ));
    let _ = write!(
        svg,
        r#"<line x1="{px:.1}" x2="{px:.1}" y1="{TOP}" y2="{y2}" class="reference"/><text x="{tx:.1}" y="{ty}" class="tick reference-label">{}</text>"#,
        escape(label),
        y2 = TOP + scale.plot_h,
    );
}

/// The finite dots, from the cheapest, each with its name beside it where there is room;
/// the names of those left without.
fn scatter_dots(
    svg: &mut String,
    labels: &mut Labels,
    scale: &ScatterScale,
    dots: &[Dot],
) -> Vec<String> {
    let mut order: Vec<&Dot> = dots
        .iter()
        .filter(|d| d.x.is_finite() && d.y.is_finite())
        .collect();
    order.sort_by(|a, b| a.x.total_cmp(&b.x));
    for d in &order {
        let (cx, cy) = (scale.x(d.x), scale.y(d.y));
        labels.taken.push((cx - 5.0, cx + 5.0, cy - 5.0, cy + 5.0));
    }
    let mut unlabelled = Vec::new();
    for d in order {
        let (cx, cy) = (scale.x(d.x), scale.y(d.y));
        let colour = d.colour;
        let width = CHAR_WIDTH * d.name.chars().count() as f64;
        let spot = labels.place(cx, cy, width);
        let _ = write!(
            svg,
            r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="{r}" fill="{colour}" class="dot"><title>{name}: {y:.1} %, {x:.2} GPU-h</title></circle>"#,
            r = if d.ours { 5 } else { 4 },
            name = escape(&d.name),
            y = d.y,
            x = d.x,
        );
        // Nowhere clear (a crowd of dots): the dot keeps its name in its tooltip, and the
        // caller names it under the chart.
        match spot {
            Some(spot) => dot_label(svg, (cx, cy), spot, width, &d.name),
            None => unlabelled.push(d.name.clone()),
        }
    }
    unlabelled
}

/// A dot's name at `spot` (left edge, baseline), `width` wide, tied to its dot at `(cx, cy)`
/// by a thin line when moved off the dot's line.
fn dot_label(svg: &mut String, (cx, cy): (f64, f64), (x0, ty): (f64, f64), width: f64, name: &str) {
    if (ty - (cy + 4.0)).abs() > LINE / 2.0 {
        let (from, to) = if x0 > cx {
            (cx + 5.0, x0 - 1.0)
        } else {
            (cx - 5.0, x0 + width + 1.0)
        };
        let _ = write!(
            svg,
            r#"<line x1="{from:.1}" y1="{cy:.1}" x2="{to:.1}" y2="{y:.1}" class="leader"/>"#,
            y = ty - 4.0,
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{x0:.1}" y="{ty:.1}" class="label">{}</text>"#,
        escape(name)
    );
}
