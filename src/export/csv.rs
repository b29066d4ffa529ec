//! `tune export --format csv`: the rows with the columns of `best.csv`, so the output is itself
//! a database that `--db` accepts.

use super::{ExportFormat, Exporter, Writes};
use crate::error::{Error, Result};
use crate::store::best::BestRow;

pub struct CsvExporter;

pub const INFO: ExportFormat = ExportFormat {
    name: "csv",
    about: "",
    writes: Writes::File(&CsvExporter),
};

impl Exporter for CsvExporter {
    fn serialize(&self, rows: &[&BestRow]) -> Result<Vec<u8>> {
        let err = |e: ::csv::Error| Error::Csv {
            path: "<export>".into(),
            why: e.to_string(),
        };
        let mut w = ::csv::Writer::from_writer(Vec::new());
        for r in rows {
            w.serialize(r).map_err(err)?;
        }
        w.into_inner().map_err(|e| Error::Csv {
            path: "<export>".into(),
            why: e.to_string(),
        })
    }
}
