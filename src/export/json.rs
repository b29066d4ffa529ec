//! `tune export --format json`: an array with one object per row. Each object has every
//! `best.csv` column under its name (so it deserializes as a [`BestRow`]) plus `dims` (the
//! shape as numbers) and `parameters` (the configuration as an object, integers as numbers).

use super::db::row_dims;
use super::{ExportFormat, Exporter, Writes};
use crate::error::{Error, Result};
use crate::spec::expr::Value;
use crate::store::best::{parse_params, BestRow};
use serde::ser::{Serialize, SerializeMap, Serializer};

pub struct JsonExporter;

pub const INFO: ExportFormat = ExportFormat {
    name: "json",
    about: "",
    writes: Writes::File(&JsonExporter),
};

#[derive(serde::Serialize)]
struct JsonRow<'a> {
    #[serde(flatten)]
    row: &'a BestRow,
    dims: Vec<u64>,
    parameters: Parameters,
}

/// Parameters in their tuned order, typed.
struct Parameters(Vec<(String, Value)>);

impl Serialize for Parameters {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl Exporter for JsonExporter {
    fn serialize(&self, rows: &[&BestRow]) -> Result<Vec<u8>> {
        let rows: Vec<JsonRow> = rows
            .iter()
            .map(|r| JsonRow {
                row: r,
                dims: row_dims(r).unwrap_or_default(),
                parameters: Parameters(
                    parse_params(&r.params)
                        .into_iter()
                        .map(|(k, v)| (k, Value::parse(&v)))
                        .collect(),
                ),
            })
            .collect();
        let mut bytes =
            serde_json::to_vec_pretty(&rows).map_err(|e| Error::Usage(e.to_string()))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}
