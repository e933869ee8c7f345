//! `real-figures TSV DIR`: the growth pictures of `scripts/bench-scale.sh`
//! (real engines at 5, 20, 63 nodes), drawn from the TSV it wrote, so the
//! shell benchmark gets the same plotters charts as the simulated ones
//! rather than a picture made by hand.

use crate::figures::{self, Chart, Curve};
use crate::stats::median_ms as median;
use std::collections::BTreeMap;
use std::path::Path;

type Error = Box<dyn std::error::Error>;

/// The TSV's rows, each column by its header's name.
struct Table {
    rows: Vec<BTreeMap<String, f64>>,
}

impl Table {
    /// Reads `scale.tsv`: a header line, then one line per size and run.
    /// Non-numeric cells (the waves) are left out.
    fn read(path: &Path) -> Result<Table, Error> {
        let text = std::fs::read_to_string(path)?;
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().ok_or("empty TSV")?.split('\t').collect();
        let rows = lines
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let cells = header.iter().zip(l.split('\t'));
                let numeric = cells.filter_map(|(h, c)| Some((h.to_string(), c.parse().ok()?)));
                numeric.collect()
            })
            .collect();
        Ok(Table { rows })
    }

    /// (nodes, median of `column` over the runs at that size), by nodes.
    fn curve(&self, column: &str) -> Result<Vec<(f64, f64)>, Error> {
        let mut by_nodes: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
        for row in &self.rows {
            let nodes = row.get("nodes").ok_or("no `nodes` column")?;
            let value = row.get(column).ok_or(format!("no `{column}` column"))?;
            by_nodes.entry(*nodes as u64).or_default().push(*value);
        }
        let points = by_nodes.into_iter().map(|(n, v)| (n as f64, median(&v)));
        Ok(points.filter(|(_, v)| v.is_finite() && *v > 0.0).collect())
    }

    /// One named curve per `(legend, column)`.
    fn curves(&self, columns: &[(&str, &str)]) -> Result<Vec<Curve>, Error> {
        columns
            .iter()
            .map(|(name, column)| {
                Ok(Curve {
                    name: (*name).into(),
                    points: self.curve(column)?,
                })
            })
            .collect()
    }
}

/// One picture: its file, title, y caption and curves (legend, column).
struct Picture {
    file: &'static str,
    title: &'static str,
    y_label: &'static str,
    curves: &'static [(&'static str, &'static str)],
}

const PICTURES: [Picture; 3] = [
    Picture {
        file: "real-growth-time.svg",
        title: "Real engines: bootstrap and roll (max_in_flight 10)",
        y_label: "s (median)",
        curves: &[
            ("roll", "roll_s"),
            ("roll's engine-bound minimum", "min_s"),
            ("bootstrap", "boot_s"),
        ],
    },
    Picture {
        file: "real-growth-cpu.svg",
        title: "Acting controller: CPU per pass",
        y_label: "CPU ms per pass (median)",
        curves: &[
            ("during the roll", "roll_cpu_ms_per_pass"),
            ("during the bootstrap", "boot_cpu_ms_per_pass"),
        ],
    },
    Picture {
        file: "real-growth-memory.svg",
        title: "Acting controller: resident memory",
        y_label: "MB (median)",
        curves: &[
            ("peak (VmHWM), roll", "roll_hwm_mb"),
            ("at the roll's end (VmRSS)", "roll_rss_mb"),
            ("peak (VmHWM), bootstrap", "boot_hwm_mb"),
        ],
    },
];

/// Writes `real-growth-time.svg`, `real-growth-cpu.svg` and
/// `real-growth-memory.svg` into `dir` from the TSV at `tsv`.
pub fn draw(tsv: &Path, dir: &Path) -> Result<(), Error> {
    let table = Table::read(tsv)?;
    std::fs::create_dir_all(dir)?;
    for p in &PICTURES {
        let chart = Chart {
            title: p.title,
            x_label: "nodes (3 managers + workers)",
            y_label: p.y_label,
        };
        let curves = table.curves(p.curves)?;
        figures::draw(&dir.join(p.file), &chart, &curves, None)?;
    }
    Ok(())
}
