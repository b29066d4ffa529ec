//! `tune report`: one self-contained HTML file (inline CSS and SVG, nothing fetched) about one
//! run CSV: (a) the throughput of every verified configuration, fastest first, against the
//! roof and the baselines; (b) the fraction of the roof per configuration, coloured by a
//! parameter; (c) a heat map of the best throughput over two parameters; (d) the top ten and
//! the counts of verified, failed and pruned configurations with their reasons.
//!
//! Plots are drawn with `plotters` on its SVG backend (no fonts needed: the browser draws
//! the text).

use super::format_ms;
use crate::error::{Error, Result};
use crate::store::record::{Kind, Record, Status};
use crate::store::run_csv::{read_run_file, RunLabels};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// A run CSV read back: what it says about its run, its parameter columns and every row.
#[derive(Debug, Clone)]
pub struct Run {
    pub meta: RunLabels,
    /// Parameter columns, in the CSV's order.
    pub params: Vec<String>,
    pub records: Vec<Record>,
}

impl Run {
    /// Reads a run CSV; a number it would show that cannot be one (text, NaN, an infinity, a
    /// negative time) fails with its line and column ([`read_run_file`]).
    pub fn load(path: &Path) -> Result<Run> {
        let file = read_run_file(path)?;
        if file.records.is_empty() {
            return Err(Error::Csv {
                path: path.to_path_buf(),
                why: "no rows: not a run CSV written by tune".into(),
            });
        }
        if file.labels.is_compile_only() {
            return Err(Error::Csv {
                path: path.to_path_buf(),
                why: format!(
                    "a --compile-only run's CSV ({}): nothing in it ran, so there is nothing \
                     to plot; the CSV lists what compiled and why the rest failed",
                    file.labels.gpu
                ),
            });
        }
        Ok(Run {
            meta: file.labels,
            params: file.params,
            records: file.records,
        })
    }

    fn variants(&self) -> impl Iterator<Item = &Record> {
        self.records.iter().filter(|r| r.kind == Kind::Variant)
    }

    /// Verified variants, fastest first.
    fn ok_sorted(&self) -> Vec<&Record> {
        let mut ok: Vec<&Record> = self
            .variants()
            .filter(|r| r.status == Status::Ok && r.throughput.is_some())
            .collect();
        ok.sort_by(|a, b| b.throughput.unwrap().total_cmp(&a.throughput.unwrap()));
        ok
    }

    /// Verified baselines, fastest first.
    fn baselines(&self) -> Vec<&Record> {
        let mut b: Vec<&Record> = self
            .records
            .iter()
            .filter(|r| {
                r.kind == Kind::Baseline && r.status == Status::Ok && r.throughput.is_some()
            })
            .collect();
        b.sort_by(|a, b| b.throughput.unwrap().total_cmp(&a.throughput.unwrap()));
        b
    }

    /// The configuration the run chose: the winner of the interleaved re-timing when the
    /// CSV has one, else the fastest verified one.
    fn winner(&self) -> Option<&Record> {
        self.variants()
            .find(|r| r.status == Status::Ok && r.confirm.is_some_and(|c| c.winner))
            .or_else(|| self.ok_sorted().first().copied())
    }

    /// The winner's rank (1 = highest throughput) among the verified configurations, the
    /// order of plot (a).
    pub fn winner_rank(&self) -> Option<usize> {
        let winner = self.winner()?;
        self.ok_sorted()
            .iter()
            .position(|r| std::ptr::eq(*r, winner))
            .map(|i| i + 1)
    }

    /// The name of the configuration the report highlights everywhere (the "Best:" line, the
    /// circled dot of (a), the outlined cell of (c) and the marked row of (d)).
    pub fn winner_name(&self) -> Option<&str> {
        self.winner().map(|r| r.name.as_str())
    }

    /// The parameters that take more than one value among the verified configurations, in
    /// the CSV's order, with their number of values.
    fn varying(&self) -> Vec<(&str, usize)> {
        let ok = self.ok_sorted();
        self.params
            .iter()
            .filter_map(|p| {
                let mut values: Vec<String> = Vec::new();
                for r in &ok {
                    let v = Run::param(r, p);
                    if !values.contains(&v) {
                        values.push(v);
                    }
                }
                (values.len() > 1).then_some((p.as_str(), values.len()))
            })
            .collect()
    }

    /// The parameter plot (b) is coloured by: of those that vary among the verified
    /// configurations, the one with the most distinct values (the first in the CSV on a tie);
    /// `None` when none varies (a colour per value would say nothing).
    pub fn color_parameter(&self) -> Option<&str> {
        let varying = self.varying();
        let most = varying.iter().map(|(_, n)| *n).max()?;
        varying
            .into_iter()
            .find(|(_, n)| *n == most)
            .map(|(p, _)| p)
    }

    /// The two parameters of the heat map (c): the first two that vary (one row when only one
    /// does), else the first two of the CSV.
    pub fn heatmap_axes(&self) -> Option<(&str, Option<&str>)> {
        let varying: Vec<&str> = self.varying().into_iter().map(|(p, _)| p).collect();
        let pick: Vec<&str> = if varying.is_empty() {
            self.params.iter().map(String::as_str).take(2).collect()
        } else {
            varying.into_iter().take(2).collect()
        };
        pick.first().map(|&x| (x, pick.get(1).copied()))
    }

    /// The heat-map cell (x value, y value) that holds the winner.
    pub fn winner_cell(&self) -> Option<(String, Option<String>)> {
        let (x, y) = self.heatmap_axes()?;
        let w = self.winner()?;
        Some((Run::param(w, x), y.map(|y| Run::param(w, y))))
    }

    fn roof(&self) -> Option<&Record> {
        self.baselines()
            .into_iter()
            .find(|b| b.name == self.meta.roof)
    }

    /// The value of parameter `name` in a record ("" when it has none).
    pub fn param_of(r: &Record, name: &str) -> String {
        Run::param(r, name)
    }

    fn param(r: &Record, name: &str) -> String {
        r.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    }

    /// The values a parameter takes among the variants: numbers sorted, words in the order
    /// they first appear (the spec's order).
    fn values_of(&self, name: &str) -> Vec<String> {
        let mut values: Vec<String> = Vec::new();
        for r in self.variants() {
            let v = Run::param(r, name);
            if !v.is_empty() && !values.contains(&v) {
                values.push(v);
            }
        }
        if values.iter().all(|v| v.parse::<i64>().is_ok()) {
            values.sort_by_key(|v| v.parse::<i64>().unwrap_or(0));
        }
        values
    }
}

fn plot_err(e: impl std::fmt::Display) -> Error {
    Error::Usage(format!("cannot draw the plot: {e}"))
}

/// Tableau 10: distinguishable, also in grey scale.
const PALETTE: [(u8, u8, u8); 10] = [
    (78, 121, 167),
    (242, 142, 43),
    (225, 87, 89),
    (118, 183, 178),
    (89, 161, 79),
    (237, 201, 72),
    (176, 122, 161),
    (255, 157, 167),
    (156, 117, 95),
    (186, 176, 172),
];

fn pick(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

/// Viridis, from low (dark purple) to high (yellow).
fn viridis(t: f64) -> RGBColor {
    const STOPS: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let t = t.clamp(0.0, 1.0) * (STOPS.len() - 1) as f64;
    let i = (t.floor() as usize).min(STOPS.len() - 2);
    let f = t - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

fn is_dark(c: RGBColor) -> bool {
    0.299 * c.0 as f64 + 0.587 * c.1 as f64 + 0.114 * c.2 as f64 <= 140.0
}

const WIDTH: u32 = 1100;
const FONT: &str = "sans-serif";

/// The axes both rank charts share: ranks 1..n along x, 0..top along y (described by
/// `y_desc`, labelled by `y_label`), a light mesh (its vertical lines too when `x_mesh`) and
/// the right margin kept for the labels drawn beside the plot.
fn rank_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    n: f64,
    top: f64,
    y_desc: &str,
    y_label: &dyn Fn(&f64) -> String,
    x_mesh: bool,
) -> Result<ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>> {
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(root)
        .margin(12)
        .margin_right(200)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..n + 1.0, 0.0..top)
        .map_err(plot_err)?;
    let mut mesh = chart.configure_mesh();
    if !x_mesh {
        mesh.disable_x_mesh();
    }
    mesh.light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(220, 220, 220))
        .x_desc("verified configurations, fastest first (rank)")
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(y_label)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(plot_err)?;
    Ok(chart)
}

/// Text of the right margin: size 13, left-aligned at its point, vertically centred.
fn margin_text(color: &RGBColor, bold: bool) -> TextStyle<'static> {
    (FONT, 13)
        .into_font()
        .style(if bold {
            FontStyle::Bold
        } else {
            FontStyle::Normal
        })
        .color(color)
        .pos(Pos::new(HPos::Left, VPos::Center))
}

/// (a) Throughput of every verified configuration, fastest first; the baselines as dashed
/// lines, the roof solid red, each labelled in the right margin.
fn throughput_svg(run: &Run) -> Result<String> {
    let ok = run.ok_sorted();
    let baselines = run.baselines();
    let unit = &run.meta.unit;
    let top = ok
        .iter()
        .chain(&baselines)
        .filter_map(|r| r.throughput)
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.08;
    let n = ok.len().max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 440)).into_drawing_area();
        let mut chart = rank_chart(&root, n, top, unit, &|y| format!("{y:.0}"), true)?;
        let points: Vec<(f64, f64)> = ok
            .iter()
            .enumerate()
            .map(|(i, r)| ((i + 1) as f64, r.throughput.unwrap()))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), pick(0).stroke_width(2)))
            .map_err(plot_err)?;
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 2, pick(0).filled())))
            .map_err(plot_err)?;
        // The winner (the same configuration the rest of the report names), which need not be
        // the highest median of the search.
        if let Some(&best) = run.winner_rank().and_then(|rank| points.get(rank - 1)) {
            chart
                .draw_series(std::iter::once(Circle::new(
                    best,
                    5,
                    pick(0).stroke_width(2),
                )))
                .map_err(plot_err)?;
        }
        // Baselines: lines across the plot, labels in the right margin pushed apart.
        let mut labels: Vec<(i32, i32, String, RGBColor, bool)> = Vec::new();
        for b in &baselines {
            let tp = b.throughput.unwrap();
            let is_roof = b.name == run.meta.roof;
            let color = if is_roof {
                RGBColor(200, 30, 30)
            } else {
                RGBColor(110, 110, 110)
            };
            let line = vec![(0.0, tp), (n + 1.0, tp)];
            if is_roof {
                chart
                    .draw_series(LineSeries::new(line, color.stroke_width(2)))
                    .map_err(plot_err)?;
            } else {
                chart
                    .draw_series(DashedLineSeries::new(line, 6, 4, color.stroke_width(1)))
                    .map_err(plot_err)?;
            }
            let (px, py) = chart.backend_coord(&(n + 1.0, tp));
            let text = if is_roof {
                format!("roof: {} {tp:.0}", b.name)
            } else {
                format!("{} {tp:.0}", b.name)
            };
            labels.push((px, py, text, color, is_roof));
        }
        labels.sort_by_key(|l| l.1);
        let mut last = i32::MIN;
        for (px, py, text, color, is_roof) in labels {
            let y = py.max(last + 15);
            last = y;
            root.draw(&PathElement::new(
                vec![(px, py), (px + 8, y)],
                color.stroke_width(1),
            ))
            .map_err(plot_err)?;
            root.draw(&Text::new(text, (px + 11, y), margin_text(&color, is_roof)))
                .map_err(plot_err)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// (b) Fraction of the roof of every verified configuration (the same order), one bar each,
/// coloured by the value of `color_by` (one colour when `None`).
fn fraction_svg(run: &Run, color_by: Option<&str>) -> Result<String> {
    let mut ok: Vec<&Record> = run.ok_sorted();
    ok.retain(|r| r.frac_of_roof.is_some());
    let groups = match color_by {
        Some(p) => run.values_of(p),
        None => vec![String::new()],
    };
    let top = ok
        .iter()
        .filter_map(|r| r.frac_of_roof)
        .fold(1.0f64, f64::max)
        * 105.0;
    let n = ok.len().max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 400)).into_drawing_area();
        let mut chart = rank_chart(
            &root,
            n,
            top,
            "% of the roof",
            &|y| format!("{y:.0} %"),
            false,
        )?;
        let half = 0.42;
        for (g, value) in groups.iter().enumerate() {
            let color = pick(g);
            let bars: Vec<Rectangle<(f64, f64)>> = ok
                .iter()
                .enumerate()
                .filter(|(_, r)| color_by.is_none_or(|p| Run::param(r, p) == *value))
                .map(|(i, r)| {
                    let x = (i + 1) as f64;
                    Rectangle::new(
                        [(x - half, 0.0), (x + half, r.frac_of_roof.unwrap() * 100.0)],
                        color.filled(),
                    )
                })
                .collect();
            if bars.is_empty() {
                continue;
            }
            chart.draw_series(bars).map_err(plot_err)?;
        }
        let red = RGBColor(200, 30, 30);
        chart
            .draw_series(LineSeries::new(
                vec![(0.0, 100.0), (n + 1.0, 100.0)],
                red.stroke_width(2),
            ))
            .map_err(plot_err)?;
        let (px, py) = chart.backend_coord(&(n + 1.0, 100.0));
        root.draw(&Text::new(
            format!("100 % = roof ({})", run.meta.roof),
            (px + 11, py),
            margin_text(&red, true),
        ))
        .map_err(plot_err)?;
        // The legend in the right margin, below the roof's label: over the plot it would hide
        // bars. Drawn on the whole image, as the chart's own legend is cut at the plot's edge.
        if let Some(p) = color_by {
            for (g, value) in groups.iter().enumerate() {
                let y = py + 24 + 18 * g as i32;
                root.draw(&Rectangle::new(
                    [(px + 11, y - 5), (px + 23, y + 5)],
                    pick(g).filled(),
                ))
                .map_err(plot_err)?;
                root.draw(&Text::new(
                    format!("{p}={value}"),
                    (px + 28, y),
                    margin_text(&BLACK, false),
                ))
                .map_err(plot_err)?;
            }
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// One cell of the heat map.
#[derive(Debug, Clone, Default)]
struct Cell {
    best: Option<(f64, Option<f64>)>,
    failed: usize,
    pruned: usize,
}

/// (c) Best throughput over the other parameters for each pair of values of `x` and `y`
/// (`y` absent: one row), with the value in each cell.
fn heatmap_svg(run: &Run, x: &str, y: Option<&str>) -> Result<String> {
    let xs = run.values_of(x);
    let ys = match y {
        Some(y) => run.values_of(y),
        None => vec![String::new()],
    };
    let cells = heat_cells(run, x, y, &xs, &ys);
    let values: Vec<f64> = cells.values().filter_map(|c| c.best.map(|b| b.0)).collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    // The winner's cell, outlined: the configuration the rest of the report names.
    let best_cell = winner_cell_at(run, &xs, &ys);
    let (nx, ny) = (xs.len() as i32, ys.len() as i32);
    let height = (90 + 62 * ny.max(1)).clamp(200, 560) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .margin_right(260)
            .x_label_area_size(44)
            .y_label_area_size(90)
            .build_cartesian_2d((0..nx - 1).into_segmented(), (0..ny - 1).into_segmented())
            .map_err(plot_err)?;
        let label = |v: &SegmentValue<i32>, names: &[String]| match v {
            SegmentValue::CenterOf(i) => names.get(*i as usize).cloned().unwrap_or_default(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(xs.len() + 1)
            .y_labels(ys.len() + 1)
            .x_label_formatter(&|v| label(v, &xs))
            .y_label_formatter(&|v| label(v, &ys))
            .x_label_style((FONT, 14))
            .y_label_style((FONT, 14))
            .x_desc(x)
            .y_desc(y.unwrap_or(""))
            .axis_desc_style((FONT, 15))
            .draw()
            .map_err(plot_err)?;
        let grey = RGBColor(235, 235, 235);
        for i in 0..nx {
            for j in 0..ny {
                let cell = cells
                    .get(&(i as usize, j as usize))
                    .cloned()
                    .unwrap_or_default();
                let color = match cell.best {
                    Some((tp, _)) if hi > lo => viridis((tp - lo) / (hi - lo)),
                    Some(_) => viridis(1.0),
                    None => grey,
                };
                let corners = [
                    (SegmentValue::Exact(i), SegmentValue::Exact(j)),
                    (SegmentValue::Exact(i + 1), SegmentValue::Exact(j + 1)),
                ];
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        corners.clone(),
                        color.filled(),
                    )))
                    .map_err(plot_err)?;
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        corners.clone(),
                        WHITE.stroke_width(2),
                    )))
                    .map_err(plot_err)?;
                let (cx, cy) =
                    chart.backend_coord(&(SegmentValue::CenterOf(i), SegmentValue::CenterOf(j)));
                draw_cell_text(&root, &cell, color, (cx, cy))?;
            }
        }
        // The winner's cell, outlined last so no neighbour's border covers the outline (as a
        // path: the SVG backend draws rectangles with a 1 px stroke whatever the style says).
        if let Some((i, j)) = best_cell {
            let (i, j) = (i as i32, j as i32);
            let (x0, y0) =
                chart.backend_coord(&(SegmentValue::Exact(i), SegmentValue::Exact(j + 1)));
            let (x1, y1) =
                chart.backend_coord(&(SegmentValue::Exact(i + 1), SegmentValue::Exact(j)));
            let (x0, y0, x1, y1) = (x0 + 2, y0 + 2, x1 - 2, y1 - 2);
            root.draw(&PathElement::new(
                vec![(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)],
                RGBColor(200, 30, 30).stroke_width(4),
            ))
            .map_err(plot_err)?;
        }
        // Colour scale in the right margin.
        if hi.is_finite() {
            let (x0, y_top) =
                chart.backend_coord(&(SegmentValue::Exact(nx), SegmentValue::Exact(ny)));
            let (_, y_bottom) =
                chart.backend_coord(&(SegmentValue::Exact(nx), SegmentValue::Exact(0)));
            draw_scale(&root, x0, (y_top, y_bottom), (lo, hi), &run.meta.unit)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

/// The heatmap's cells: per (x value, y value), the best verified throughput (with its fraction
/// of the roof) and how many configurations failed or were pruned.
fn heat_cells(
    run: &Run,
    x: &str,
    y: Option<&str>,
    xs: &[String],
    ys: &[String],
) -> BTreeMap<(usize, usize), Cell> {
    let mut cells: BTreeMap<(usize, usize), Cell> = BTreeMap::new();
    for r in run.variants() {
        let Some(i) = xs.iter().position(|v| *v == Run::param(r, x)) else {
            continue;
        };
        let j = match y {
            Some(y) => match ys.iter().position(|v| *v == Run::param(r, y)) {
                Some(j) => j,
                None => continue,
            },
            None => 0,
        };
        let cell = cells.entry((i, j)).or_default();
        match r.status {
            Status::Ok => {
                if let Some(tp) = r.throughput {
                    if cell.best.is_none_or(|(b, _)| tp > b) {
                        cell.best = Some((tp, r.frac_of_roof));
                    }
                }
            }
            Status::Failed => cell.failed += 1,
            Status::Pruned | Status::Skipped => cell.pruned += 1,
            // Neither measured nor ruled out: the cell says "not run" when nothing else is there.
            Status::NotRun => {}
        }
    }
    cells
}

/// The (x, y) indices of the winner's cell, when it has one.
fn winner_cell_at(run: &Run, xs: &[String], ys: &[String]) -> Option<(usize, usize)> {
    run.winner_cell().and_then(|(wx, wy)| {
        let i = xs.iter().position(|v| *v == wx)?;
        let j = match wy {
            Some(wy) => ys.iter().position(|v| *v == wy)?,
            None => 0,
        };
        Some((i, j))
    })
}

/// A cell's text, centred at `(cx, cy)` in ink that reads on `color`: its throughput and
/// fraction of the roof, or why it has none.
fn draw_cell_text(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    cell: &Cell,
    color: RGBColor,
    (cx, cy): (i32, i32),
) -> Result<()> {
    let ink = if is_dark(color) { WHITE } else { BLACK };
    let centered = |size: u32, bold: bool| {
        (FONT, size)
            .into_font()
            .style(if bold {
                FontStyle::Bold
            } else {
                FontStyle::Normal
            })
            .color(&ink)
            .pos(Pos::new(HPos::Center, VPos::Center))
    };
    match cell.best {
        Some((tp, frac)) => {
            root.draw(&Text::new(
                format!("{tp:.0}"),
                (cx, cy - 8),
                centered(15, true),
            ))
            .map_err(plot_err)?;
            if let Some(f) = frac {
                root.draw(&Text::new(
                    format!("{:.1} %", f * 100.0),
                    (cx, cy + 10),
                    centered(12, false),
                ))
                .map_err(plot_err)?;
            }
        }
        None => {
            let why = if cell.failed > 0 {
                "failed"
            } else if cell.pruned > 0 {
                "pruned"
            } else {
                "not run"
            };
            root.draw(&Text::new(why, (cx, cy), centered(12, false)))
                .map_err(plot_err)?;
        }
    }
    Ok(())
}

/// The colour scale in the right margin, from `x0` between `y_top` and `y_bottom`, labelled
/// with `lo` and `hi` in `unit`.
fn draw_scale(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    x0: i32,
    (y_top, y_bottom): (i32, i32),
    (lo, hi): (f64, f64),
    unit: &str,
) -> Result<()> {
    let (x0, x1) = (x0 + 40, x0 + 60);
    let steps = 40;
    for s in 0..steps {
        let t0 = s as f64 / steps as f64;
        let ya = y_bottom - ((y_bottom - y_top) as f64 * t0) as i32;
        let yb = y_bottom - ((y_bottom - y_top) as f64 * (t0 + 1.0 / steps as f64)) as i32;
        root.draw(&Rectangle::new(
            [(x0, yb), (x1, ya)],
            viridis(t0 + 0.5 / steps as f64).filled(),
        ))
        .map_err(plot_err)?;
    }
    let style = (FONT, 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    root.draw(&Text::new(
        format!("{hi:.0} {}", unit),
        (x1 + 6, y_top),
        style.clone(),
    ))
    .map_err(plot_err)?;
    root.draw(&Text::new(
        format!("{lo:.0} {}", unit),
        (x1 + 6, y_bottom),
        style,
    ))
    .map_err(plot_err)?;
    Ok(())
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn pct(x: Option<f64>) -> String {
    x.map(|f| format!("{:.1} %", f * 100.0))
        .unwrap_or_else(|| "–".into())
}

const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; color: #222; margin: 24px auto; max-width: 1140px; padding: 0 16px; }
h1 { font-size: 24px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.meta { color: #555; margin-top: 0; }
p.caption { color: #555; font-size: 14px; margin-top: 4px; }
figure { margin: 0; }
figure svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 14px; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 4px 6px; text-align: left; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.nowrap { white-space: nowrap; }
tr.best td { background: #fff4e5; font-weight: 600; }
.counts td { min-width: 60px; }
footer { color: #888; font-size: 12px; margin: 32px 0; }
";

/// When the configuration with the highest search median is not the winner, sentences
/// saying why: the search times each configuration once, at its own moment; the leaders were
/// then re-timed interleaved, and the fastest of that re-timing won unless others were
/// statistically tied with it, where the tie rule (fewest registers, then the first in the
/// space) chose.
fn why_not_first(run: &Run, winner: &Record) -> Option<String> {
    let first = *run.ok_sorted().first()?;
    if std::ptr::eq(first, winner) {
        return None;
    }
    let code = |r: &Record| format!("<code>{}</code>", esc(&r.name));
    let regs = |r: &Record| r.registers.map_or("?".to_string(), |n| n.to_string());
    let interval = |c: &crate::store::record::Confirmed| {
        format!(
            "{:+.1} % [{:+.1}, {:+.1}]",
            c.vs_winner_pct, c.ci_low_pct, c.ci_high_pct
        )
    };
    let retimed: Vec<&Record> = run.variants().filter(|r| r.confirm.is_some()).collect();
    let mut text = format!(
        "Why not {}, rank 1 in (a) with the highest search median ({:.1} {} against {:.1})? \
         The search times each configuration once, at its own moment, so medians a few \
         percent apart can swap from one run to the next; the {} leaders were then re-timed \
         interleaved, under the same conditions.",
        code(first),
        first.throughput.unwrap_or(0.0),
        esc(&run.meta.unit),
        winner.throughput.unwrap_or(0.0),
        retimed.len(),
    );
    let fastest = retimed.iter().copied().min_by(|a, b| {
        let m = |r: &Record| r.confirm.map_or(f64::INFINITY, |c| c.median_ms);
        m(a).total_cmp(&m(b))
    });
    let Some(fastest) = fastest else {
        return Some(text);
    };
    match first.confirm {
        None => text.push_str(&format!(" {} was not among them.", code(first))),
        Some(_) if std::ptr::eq(first, fastest) => {
            text.push_str(&format!(" {} was the fastest there.", code(first)))
        }
        Some(c) if c.tied => text.push_str(&format!(
            " There the fastest was {}; {} was statistically tied with it ({} against {}).",
            code(fastest),
            code(first),
            interval(&c),
            code(winner)
        )),
        Some(c) => text.push_str(&format!(
            " There the fastest was {}, and {} was measurably slower than it ({} against {}).",
            code(fastest),
            code(first),
            interval(&c),
            code(winner)
        )),
    }
    if std::ptr::eq(winner, fastest) {
        text.push_str(&format!(
            " {} was the fastest of the re-timing.",
            code(winner)
        ));
    } else {
        let tied: Vec<String> = retimed
            .iter()
            .filter(|r| r.confirm.is_some_and(|c| c.tied))
            .map(|r| format!("{} ({} registers)", code(r), regs(r)))
            .collect();
        text.push_str(&format!(
            " {} was statistically tied with {} ({} against {}: {}); among the tied \
             configuration(s) {} the one with the fewest registers, then the first in the \
             space, wins, so that repeated runs choose the same kernel.",
            code(winner),
            code(fastest),
            code(fastest),
            code(winner),
            fastest.confirm.map(|c| interval(&c)).unwrap_or_default(),
            tied.join(", "),
        ));
    }
    Some(text)
}

/// The HTML report of the run CSV at `csv`.
pub fn render_html(csv: &Path) -> Result<String> {
    let run = Run::load(csv)?;
    render_run(&run, &csv.display().to_string())
}

/// The HTML report of a run; `source` names the CSV in the page.
pub fn render_run(run: &Run, source: &str) -> Result<String> {
    let ok = run.ok_sorted();
    let mut h = String::new();
    write_head(&mut h, run, source);
    write_charts(&mut h, run, &ok)?;
    write_top(&mut h, run, &ok);
    write_counts(&mut h, run);
    write_baselines(&mut h, run);
    Ok(h)
}

/// The variants' counts: (all, verified, failed, pruned).
fn variant_counts(run: &Run) -> (usize, usize, usize, usize) {
    let count = |s: Status| run.variants().filter(|r| r.status == s).count();
    (
        run.variants().count(),
        count(Status::Ok),
        count(Status::Failed),
        count(Status::Pruned),
    )
}

/// The page's head, title, summary line and the best configuration.
fn write_head(h: &mut String, run: &Run, source: &str) {
    let m = &run.meta;
    let (total, n_ok, n_failed, n_pruned) = variant_counts(run);
    let roof = run.roof();
    let title = format!("{} {} {} on {}", m.op, m.shape, m.dtype, m.gpu);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{} – cuda-autotune report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>{}</h1>\n<p class=\"meta\">L2 {} · roof: {} · {total} configurations: {n_ok} verified, \
         {n_failed} failed, {n_pruned} pruned · from <code>{}</code></p>\n",
        esc(&title),
        esc(&title),
        esc(&m.cache),
        match roof {
            Some(r) => format!(
                "{} at {:.1} {}",
                esc(&r.name),
                r.throughput.unwrap_or(0.0),
                esc(&m.unit)
            ),
            None => "none verified".into(),
        },
        esc(source),
    );
    let winner = run.winner();
    if let Some(best) = winner {
        let _ = writeln!(
            h,
            "<p><b>Best:</b> <code>{}</code> — {:.1} {}, {} of the roof, {} median{}.</p>",
            esc(&best.label()),
            best.throughput.unwrap_or(0.0),
            esc(&m.unit),
            pct(best.frac_of_roof),
            best.stats
                .map(|s| format_ms(s.median_ms))
                .unwrap_or_default(),
            if best.confirm.is_some_and(|c| c.winner) {
                " (the winner of the interleaved re-timing of the leaders)"
            } else {
                ""
            },
        );
        if let Some(why) = why_not_first(run, best) {
            let _ = writeln!(h, "<p>{why}</p>");
        }
    }
}

/// Charts (a) throughput, (b) fraction of the roof and, when the space has axes for it,
/// (c) the heatmap.
fn write_charts(h: &mut String, run: &Run, ok: &[&Record]) -> Result<()> {
    let m = &run.meta;
    h.push_str("<h2 id=\"throughput\">(a) Throughput of every verified configuration</h2>\n");
    if ok.is_empty() {
        h.push_str("<p>No configuration was verified.</p>\n");
    } else {
        let _ = write!(
            h,
            "<figure>{}</figure>\n<p class=\"caption\">Each dot is one verified configuration, \
             fastest first (median of the timed launches). The circled dot is the best, {}{}. \
             The roof (solid red) is the fastest verified baseline marked as a roof; dashed \
             lines are the other baselines.</p>\n",
            throughput_svg(run)?,
            esc(run.winner_name().unwrap_or("")),
            run.winner_rank()
                .map(|r| format!(" (rank {r})"))
                .unwrap_or_default(),
        );
    }

    let color_by = run.color_parameter();
    h.push_str("<h2 id=\"fraction\">(b) Fraction of the roof per configuration</h2>\n");
    if ok.iter().any(|r| r.frac_of_roof.is_some()) {
        let _ = write!(
            h,
            "<figure>{}</figure>\n<p class=\"caption\">One bar per verified configuration, in \
             the order of (a), {}.</p>\n",
            fraction_svg(run, color_by)?,
            match color_by {
                Some(p) => format!(
                    "coloured by {}, the parameter with the most values among them",
                    esc(p)
                ),
                None => "in one colour: every parameter has one value among them".into(),
            }
        );
    } else {
        h.push_str("<p>No configuration has a fraction of the roof.</p>\n");
    }

    if let Some((x, y)) = run.heatmap_axes() {
        let _ = write!(
            h,
            "<h2 id=\"heatmap\">(c) {}{}: best throughput over the other parameters</h2>\n\
             <figure>{}</figure>\n<p class=\"caption\">Each cell: the fastest verified \
             configuration with these values ({} and % of the roof); the cell of the best \
             configuration (above) is outlined in red. Grey: none verified (failed or pruned by \
             a constraint).</p>\n",
            esc(x),
            y.map(|y| format!(" × {}", esc(y))).unwrap_or_default(),
            heatmap_svg(run, x, y)?,
            esc(&m.unit),
        );
    }

    Ok(())
}

/// (d) The ten fastest verified configurations.
fn write_top(h: &mut String, run: &Run, ok: &[&Record]) {
    let m = &run.meta;
    let confirmed = run.variants().any(|r| r.confirm.is_some());
    let winner = run.winner();
    // Parameters with one value in all ten rows are said once above the table, not repeated
    // in a column each: the table stays within a 1400 px window.
    let top: Vec<&Record> = ok.iter().take(10).copied().collect();
    let (columns, same): (Vec<&String>, Vec<&String>) = run.params.iter().partition(|p| {
        top.iter()
            .any(|r| Run::param(r, p) != Run::param(top[0], p))
    });
    h.push_str("<h2 id=\"top\">(d) Top 10</h2>\n");
    if !same.is_empty() && !top.is_empty() {
        let list: Vec<String> = same
            .iter()
            .map(|p| format!("{}={}", esc(p), esc(&Run::param(top[0], p))))
            .collect();
        let _ = writeln!(
            h,
            "<p class=\"caption\">The same in all of them: <code>{}</code>.</p>",
            list.join(" ")
        );
    }
    h.push_str("<table>\n<tr><th>#</th><th>variant</th>");
    for p in &columns {
        let _ = write!(h, "<th>{}</th>", esc(p));
    }
    let _ = writeln!(
        h,
        "<th>median</th><th>min</th><th>spread</th><th>{}</th><th>of roof</th><th>registers</th>{}</tr>",
        esc(&m.unit),
        if confirmed {
            "<th>re-timed vs winner (95 % interval)</th>"
        } else {
            ""
        }
    );
    for (i, r) in ok.iter().take(10).enumerate() {
        let _ = write!(
            h,
            "<tr{}><td class=\"num\">{}</td><td>{}</td>",
            if winner.is_some_and(|w| std::ptr::eq(w, *r)) {
                " class=\"best\""
            } else {
                ""
            },
            i + 1,
            esc(&r.name)
        );
        for p in &columns {
            let _ = write!(h, "<td>{}</td>", esc(&Run::param(r, p)));
        }
        let s = r.stats;
        let _ = write!(
            h,
            "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{:.1}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
            s.map(|s| format_ms(s.median_ms)).unwrap_or_default(),
            s.map(|s| format_ms(s.min_ms)).unwrap_or_default(),
            s.map(|s| format!("{:.1} %", s.spread_pct))
                .unwrap_or_default(),
            r.throughput.unwrap_or(0.0),
            pct(r.frac_of_roof),
            r.registers.map(|x| x.to_string()).unwrap_or_default(),
        );
        if confirmed {
            let _ = write!(
                h,
                "<td>{}</td>",
                match r.confirm {
                    Some(c) if c.winner => "winner".to_string(),
                    Some(c) => format!(
                        "{:+.1} % [{:+.1}, {:+.1}]{}",
                        c.vs_winner_pct,
                        c.ci_low_pct,
                        c.ci_high_pct,
                        if c.tied { " tied" } else { "" }
                    ),
                    None => String::new(),
                }
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

/// The counts by status and the most common reasons of the others.
fn write_counts(h: &mut String, run: &Run) {
    let (total, n_ok, n_failed, n_pruned) = variant_counts(run);
    let _ = write!(
        h,
        "<h2 id=\"counts\">Counts</h2>\n<table class=\"counts\">\n<tr><th>configurations</th><th>ok</th>\
         <th>failed</th><th>pruned</th></tr>\n<tr><td class=\"num\">{total}</td>\
         <td class=\"num\">{n_ok}</td><td class=\"num\">{n_failed}</td>\
         <td class=\"num\">{n_pruned}</td></tr>\n</table>\n"
    );
    let mut reasons: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in run.variants().filter(|r| r.status != Status::Ok) {
        let reason: String = r
            .reason()
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(160)
            .collect();
        *reasons
            .entry((r.status.as_str().to_string(), reason))
            .or_default() += 1;
    }
    if !reasons.is_empty() {
        let mut list: Vec<_> = reasons.into_iter().collect();
        list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        h.push_str("<table>\n<tr><th>status</th><th>reason</th><th>count</th></tr>\n");
        for ((status, reason), n) in list.iter().take(12) {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{n}</td></tr>",
                esc(status),
                esc(reason)
            );
        }
        h.push_str("</table>\n");
    }
}

/// The baselines' table and the footer.
fn write_baselines(h: &mut String, run: &Run) {
    let m = &run.meta;
    let all_baselines: Vec<&Record> = run
        .records
        .iter()
        .filter(|r| r.kind == Kind::Baseline)
        .collect();
    if !all_baselines.is_empty() {
        let _ = writeln!(
            h,
            "<h2 id=\"baselines\">Baselines</h2>\n<table>\n<tr><th>baseline</th><th>status</th><th>median</th>\
             <th>{}</th><th>of roof</th></tr>",
            esc(&m.unit)
        );
        for b in all_baselines {
            let _ = writeln!(
                h,
                "<tr><td>{}{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td></tr>",
                esc(&b.name),
                if b.name == m.roof { " (roof)" } else { "" },
                esc(b.status.as_str()),
                b.stats.map(|s| format_ms(s.median_ms)).unwrap_or_default(),
                b.throughput.map(|t| format!("{t:.1}")).unwrap_or_default(),
                pct(b.frac_of_roof),
            );
        }
        h.push_str("</table>\n");
    }
    let _ = write!(
        h,
        "<footer>Generated by cuda-autotune {} (<code>tune report</code>).</footer>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION")
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::bench::Stats;
    use crate::store::record::RunInfo;
    use crate::store::run_csv::run_csv;

    #[test]
    fn a_negative_median_is_refused_not_drawn() {
        let info = RunInfo {
            op: "transpose".into(),
            shape: "64x64".into(),
            dtype: "f32".into(),
            gpu: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: "9.0".into(),
            cache: "cold".into(),
            reps: 30,
            unit: "GB/s".into(),
            roof: "memcpy".into(),
            driver: "13.0".into(),
            nvrtc: "13.0".into(),
        };
        let record = Record {
            kind: Kind::Variant,
            note: None,
            name: "v0000".into(),
            params: vec![("TILE_DIM".into(), "32".into())],
            status: Status::Ok,
            error: String::new(),
            stats: Some(Stats {
                median_ms: -5.0,
                min_ms: 0.004,
                max_ms: 0.006,
                spread_pct: 1.0,
                samples: 30,
                batch: 1,
            }),
            throughput: Some(3.2),
            frac_of_roof: None,
            compile_ms: None,
            registers: None,
            confirm: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.csv");
        let csv = run_csv(&info, &["TILE_DIM".into()], &[record]).unwrap();
        std::fs::write(&path, csv).unwrap();
        let e = Run::load(&path).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(
            e.to_string()
                .contains("line 2, column median_ms: '-5' is negative"),
            "{e}"
        );
    }
}
