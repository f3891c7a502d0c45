//! Benchmark rows, rendered as a markdown table and as JSON, and spliced into README.md between
//! `<!-- bench:begin -->` and `<!-- bench:end -->`.

use serde::Serialize;

/// One measured quantity, with its same-run baseline and target when it has them.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Section, e.g. "filesystem".
    pub section: &'static str,
    /// What was measured.
    pub name: String,
    /// The measurement.
    pub value: f64,
    /// Unit of `value` (and of `baseline`).
    pub unit: &'static str,
    /// Baseline measured side by side in the same run, with its name.
    pub baseline: Option<(String, f64)>,
    /// The target, in words, e.g. "<= 2 RTT + 10%".
    pub target: Option<String>,
    /// Whether the target was met (`None` without a target).
    pub pass: Option<bool>,
}

impl Row {
    /// A row without baseline or target.
    pub fn new(
        section: &'static str,
        name: impl Into<String>,
        value: f64,
        unit: &'static str,
    ) -> Self {
        Self {
            section,
            name: name.into(),
            value,
            unit,
            baseline: None,
            target: None,
            pass: None,
        }
    }

    /// Adds the baseline measured in the same run.
    pub fn baseline(mut self, name: impl Into<String>, value: f64) -> Self {
        self.baseline = Some((name.into(), value));
        self
    }

    /// Adds a target and whether it was met.
    pub fn target(mut self, target: impl Into<String>, pass: bool) -> Self {
        self.target = Some(target.into());
        self.pass = Some(pass);
        self
    }
}

/// The markdown table of `rows`.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| section | measurement | value | baseline (same run) | ratio | target | met |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|\n");
    for row in rows {
        let (baseline, ratio) = match &row.baseline {
            Some((name, b)) if *b > 0.0 => (
                format!("{name}: {} {}", fmt(*b), row.unit),
                format!("{:.2}x", row.value / b),
            ),
            Some((name, b)) => (format!("{name}: {} {}", fmt(*b), row.unit), "-".into()),
            None => ("-".into(), "-".into()),
        };
        let met = match row.pass {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "-",
        };
        out.push_str(&format!(
            "| {} | {} | {} {} | {} | {} | {} | {} |\n",
            row.section,
            row.name,
            fmt(row.value),
            row.unit,
            baseline,
            ratio,
            row.target.as_deref().unwrap_or("-"),
            met
        ));
    }
    out
}

fn fmt(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Replaces the text between the bench markers in `readme` with `table`.
///
/// # Errors
/// When the markers are missing.
pub fn splice_readme(readme: &str, table: &str) -> anyhow::Result<String> {
    const BEGIN: &str = "<!-- bench:begin -->";
    const END: &str = "<!-- bench:end -->";
    let start = readme
        .find(BEGIN)
        .ok_or_else(|| anyhow::anyhow!("README.md has no {BEGIN} marker"))?;
    let end = readme
        .find(END)
        .ok_or_else(|| anyhow::anyhow!("README.md has no {END} marker"))?;
    anyhow::ensure!(start < end, "README.md bench markers are out of order");
    Ok(format!(
        "{}{BEGIN}\n{table}{}",
        &readme[..start],
        &readme[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_ratio_and_verdict() {
        let rows = [Row::new("fs", "x", 2.0, "ms")
            .baseline("rtt", 1.0)
            .target("<= 2x", true)];
        let table = markdown(&rows);
        assert!(
            table.contains("| fs | x | 2.00 ms | rtt: 1.00 ms | 2.00x | <= 2x | yes |"),
            "{table}"
        );
    }

    #[test]
    fn splice_replaces_between_markers() {
        let readme = "a\n<!-- bench:begin -->\nold\n<!-- bench:end -->\nb\n";
        let out = splice_readme(readme, "new\n").unwrap();
        assert_eq!(out, "a\n<!-- bench:begin -->\nnew\n<!-- bench:end -->\nb\n");
        assert!(splice_readme("nothing", "t").is_err());
    }
}
