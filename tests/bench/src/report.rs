//! The harness's results: rows of figures for mcpbox and the native baseline, their ratio, the
//! target each is held to, and the Markdown table they print as.

use std::fmt::Write as _;

/// What a row is held to.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// mcpbox ÷ native must be at most this (lower is better).
    RatioAtMost(f64),
    /// mcpbox ÷ native must be at least this (higher is better).
    RatioAtLeast(f64),
    /// mcpbox's figure must be at most this, in the row's unit.
    AtMost(f64),
}

/// One measured figure.
#[derive(Clone, Debug)]
pub struct Row {
    /// What was measured.
    pub measure: String,
    /// The unit of both figures.
    pub unit: &'static str,
    /// The native baseline's figure, when it has one.
    pub native: Option<f64>,
    /// mcpbox's figure.
    pub mcpbox: f64,
    /// The target, if the issue sets one.
    pub target: Option<Target>,
}

impl Row {
    /// A row without a target.
    pub fn new(
        measure: impl Into<String>,
        unit: &'static str,
        native: Option<f64>,
        mcpbox: f64,
    ) -> Self {
        Self {
            measure: measure.into(),
            unit,
            native,
            mcpbox,
            target: None,
        }
    }

    /// The same row, held to `target`.
    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    fn ratio(&self) -> Option<f64> {
        self.native.filter(|n| *n > 0.0).map(|n| self.mcpbox / n)
    }

    /// Whether the target is met; `None` without a target.
    pub fn met(&self) -> Option<bool> {
        Some(match self.target? {
            Target::RatioAtMost(max) => self.ratio()? <= max,
            Target::RatioAtLeast(min) => self.ratio()? >= min,
            Target::AtMost(max) => self.mcpbox <= max,
        })
    }
}

/// The report: sections of rows.
#[derive(Default)]
pub struct Report {
    /// Title, the two columns' names, and rows.
    sections: Vec<(String, [String; 2], Vec<Row>)>,
}

impl Report {
    /// Start a new section.
    pub fn section(&mut self, title: impl Into<String>) {
        self.section_between(title, "native (rmcp)", "mcpbox");
    }

    /// Start a new section comparing `value` with `baseline` (the column names).
    pub fn section_between(&mut self, title: impl Into<String>, baseline: &str, value: &str) {
        self.sections.push((
            title.into(),
            [baseline.to_owned(), value.to_owned()],
            Vec::new(),
        ));
    }

    /// Add a row to the current section.
    pub fn push(&mut self, row: Row) {
        if self.sections.is_empty() {
            self.section("Results");
        }
        if let Some((_, _, rows)) = self.sections.last_mut() {
            rows.push(row);
        }
    }

    /// Every row with a target, and whether it was met.
    pub fn verdicts(&self) -> impl Iterator<Item = (&Row, bool)> {
        self.sections
            .iter()
            .flat_map(|(_, _, rows)| rows)
            .filter_map(|row| row.met().map(|met| (row, met)))
    }

    /// The report as Markdown tables.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        for (title, [baseline, value], rows) in &self.sections {
            let _ = writeln!(out, "### {title}\n");
            let _ = writeln!(
                out,
                "| measure | {baseline} | {value} | ratio | target | met |"
            );
            let _ = writeln!(out, "|---|---|---|---|---|---|");
            for row in rows {
                let native = row
                    .native
                    .map_or_else(|| "—".to_owned(), |n| format!("{} {}", number(n), row.unit));
                let ratio = row
                    .ratio()
                    .map_or_else(|| "—".to_owned(), |r| format!("{r:.2}×"));
                let target = match row.target {
                    None => "—".to_owned(),
                    Some(Target::RatioAtMost(max)) => format!("≤ {max}×"),
                    Some(Target::RatioAtLeast(min)) => format!("≥ {min}×"),
                    Some(Target::AtMost(max)) => format!("≤ {} {}", number(max), row.unit),
                };
                let met = match row.met() {
                    None => "",
                    Some(true) => "yes",
                    Some(false) => "**no**",
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} {} | {} | {} | {} |",
                    row.measure,
                    native,
                    number(row.mcpbox),
                    row.unit,
                    ratio,
                    target,
                    met
                );
            }
            out.push('\n');
        }
        out
    }
}

/// A figure with as many decimals as its size deserves.
fn number(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// The `p`th percentile (0–100) of sorted samples, by nearest rank.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a rank between 0 and the number of samples"
)]
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median of unsorted samples.
pub fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile(&sorted, 50.0)
}
