//! The tuning pipeline: spec → space → compile → measure → search → results, and the text
//! summary it prints.

pub mod summary;
pub mod tuner;

pub use tuner::{
    check_inputs, check_settings, load_op, shape_list, tune, TuneOptions, TuneOutcome,
    DEFAULT_WATCHDOG_S,
};
