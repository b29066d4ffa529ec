//! Tuned configurations out of the database and into users' builds: `tune best`,
//! `tune export`, `tune report`.

use crate::cli::{BestArgs, ExportArgs, ReportArgs};
use crate::error::{Error, Result};

/// `tune best`: prints the stored best configuration of an op and shape.
pub fn best(_args: &BestArgs) -> Result<()> {
    Err(Error::Usage("tune best is not implemented yet".into()))
}

/// `tune export`: writes the database in the requested format.
pub fn export(_args: &ExportArgs) -> Result<()> {
    Err(Error::Usage("tune export is not implemented yet".into()))
}

/// `tune report`: writes an HTML report of a run CSV.
pub fn report(_args: &ReportArgs) -> Result<()> {
    Err(Error::Usage("tune report is not implemented yet".into()))
}
