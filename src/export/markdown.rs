//! `tune export --format markdown`: a plain GitHub-flavoured Markdown table.

use super::{format_ms, ExportFormat, Exporter, Writes};
use crate::error::Result;
use crate::store::best::{parse_params, BestRow};

pub struct MarkdownExporter;

pub const INFO: ExportFormat = ExportFormat {
    name: "markdown",
    about: "",
    writes: Writes::File(&MarkdownExporter),
};

/// A table cell: pipes escaped, line breaks removed.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

impl Exporter for MarkdownExporter {
    fn serialize(&self, rows: &[&BestRow]) -> Result<Vec<u8>> {
        let mut s = String::from(
            "| op | shape | dtype | GPU | parameters | median | throughput | of roof | roof | L2 | tuned at | versions |\n\
             |---|---|---|---|---|---:|---:|---:|---|---|---|---|\n",
        );
        for r in rows {
            let params: Vec<String> = parse_params(&r.params)
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let frac = r
                .frac_of_roof
                .map(|f| format!("{:.1} %", f * 100.0))
                .unwrap_or_else(|| "-".into());
            s.push_str(&format!(
                "| {} | {} | {} | {} | `{}` | {} | {:.1} {} | {} | {} | {} | {} | tune {}, driver for CUDA {}, NVRTC {} |\n",
                cell(&r.op),
                cell(&r.shape),
                cell(&r.dtype),
                cell(&r.gpu),
                cell(&params.join(" ")),
                format_ms(r.median_ms),
                r.throughput,
                cell(&r.unit),
                frac,
                cell(&r.roof),
                cell(&r.cache),
                cell(&r.tuned_at),
                cell(&r.tool_version),
                cell(&r.driver),
                cell(&r.nvrtc),
            ));
        }
        Ok(s.into_bytes())
    }
}
