//! The tuning pipeline: spec → space → compile → measure → search → results, and the text
//! summary it prints. [`tuner::tune`] runs the stages, each in its own file: [`plan`]
//! (input, device), [`build`], [`job`], [`rounds`] (measuring, settling), [`confirm`] and
//! [`persist`] (ranking, writing); [`search`] picks what a search measures; [`progress`]
//! shows how far a phase is.

mod build;
mod confirm;
mod job;
mod options;
mod outcome;
mod persist;
mod plan;
mod progress;
mod rounds;
mod search;
pub mod summary;
pub mod tuner;

pub use tuner::{
    check_inputs, check_settings, load_op, shape_list, tune, tune_op, TuneOptions, TuneOutcome,
    DEFAULT_WATCHDOG_S,
};
