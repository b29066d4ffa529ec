//! The tuning pipeline: spec → space → compile → measure → search → results, and the text
//! summary it prints. [`tuner::tune`] runs the stages, each in its own file: [`plan`]
//! (input, device), [`build`], [`job`], [`rounds`] (measuring, settling), [`confirm`] and
//! [`persist`] (ranking, writing); [`search`] picks what a search measures; [`progress`]
//! shows how far a phase is.

mod build;
mod confirm;
mod job;
pub mod options;
pub mod outcome;
pub(crate) mod persist;
pub mod plan;
mod progress;
mod rounds;
pub mod search;
pub mod summary;
pub mod tuner;

/// The progress bar of a phase, as the pipeline draws it (`tune check` draws its rows' so).
pub use progress::bar as progress_bar;
