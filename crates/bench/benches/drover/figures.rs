//! The growth pictures: a figure against the number of members (or nodes), both axes
//! logarithmic (sizes grow tenfold), drawn as SVG by plotters so
//! BENCHMARKS.md shows how a cost grows, not only its table.

use plotters::prelude::*;
use std::path::Path;

/// One curve: its legend and its points (members, value).
pub struct Curve {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A figure's title and axis captions.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
}

const COLOURS: [RGBColor; 3] = [BLUE, RED, GREEN];

/// Draws `curves` (plus, when given, a dashed target line) into `path`.
pub fn draw(
    path: &Path,
    chart: &Chart,
    curves: &[Curve],
    target: Option<(&str, f64)>,
) -> Result<(), Box<dyn std::error::Error>> {
    let all = curves.iter().flat_map(|c| c.points.iter().copied());
    let (x_max, y_max) = all.fold((1.0f64, 1.0f64), |(x, y), (px, py)| (x.max(px), y.max(py)));
    let y_max = y_max.max(target.map_or(0.0, |t| t.1));
    let x_min = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .fold(x_max, f64::min);
    let y_min = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.1))
        .fold(y_max, f64::min);
    let root = SVGBackend::new(path, (640, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(chart.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (x_min / 2.0..x_max * 2.0).log_scale(),
            (y_min / 2.0..y_max * 2.0).log_scale(),
        )?;
    c.configure_mesh()
        .x_desc(chart.x_label)
        .y_desc(chart.y_label)
        .draw()?;
    for (i, curve) in curves.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        c.draw_series(LineSeries::new(
            curve.points.clone(),
            colour.stroke_width(2),
        ))?
        .label(curve.name.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour));
        c.draw_series(
            curve
                .points
                .iter()
                .map(|&p| Circle::new(p, 3, colour.filled())),
        )?;
    }
    if let Some((name, y)) = target {
        let line = [(x_min / 2.0, y), (x_max * 2.0, y)];
        c.draw_series(DashedLineSeries::new(line, 6, 4, BLACK.into()))?
            .label(name)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}
