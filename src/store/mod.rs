//! What a run leaves on disk: run CSVs, the best-configuration database (best.csv) and the
//! journal a resumed run reads.

pub mod results;
