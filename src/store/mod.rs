//! What a run leaves on disk: run CSVs, the best-configuration database (best.csv) and the
//! journal a resumed run reads. [`results`] gathers them for the layers above.

pub mod best;
pub mod files;
pub mod journal;
pub mod record;
pub mod results;
pub mod run_csv;
