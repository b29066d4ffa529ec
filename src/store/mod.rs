//! What a run leaves on disk: one CSV per run (every configuration, baselines included, with
//! its status and reason), the best-configuration database (`best.csv`, one row per op,
//! shape, dtype and GPU) and the journal a resumed run reads. Every file is written to a
//! temporary name and renamed into place, so a crash never leaves a truncated CSV.
//!
//! The parts: [`record`] (one configuration's result and the run it belongs to), [`run_csv`],
//! [`best`], [`journal`], [`files`] (atomic writes, file names) and [`tuned`] (a stored row
//! rendered back into its kernel).

pub mod best;
pub mod files;
pub mod journal;
pub mod record;
pub mod run_csv;
pub mod tuned;
