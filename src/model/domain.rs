//! The domains of the numeric settings: counts, seconds, tolerances and margins. Each check
//! takes a value and returns it, or says what it must be (a phrase that follows the option's
//! name: "--reps must be at least 1"). The command line's value parsers and the library's
//! own checks of [`crate::pipeline::options::TuneOptions`] and `tune check` use these, so an
//! option has one domain wherever it is checked.

/// The most seconds a time limit may be: a day. Far beyond any useful limit, and far below
/// what a `Duration` holds, so a typo such as `1e30` is refused instead of overflowing.
pub const MAX_SECONDS: f64 = 86_400.0;

/// The most launches of one variant, timed (`--reps`) or not (`--warmup`): a million, hours
/// of a millisecond kernel, far beyond any useful count, and far below what the watchdog's
/// arithmetic (launches x the fastest launch x 100) holds.
pub const MAX_LAUNCHES: usize = 1_000_000;

/// A count of launches: at most [`MAX_LAUNCHES`].
pub fn launches(n: usize) -> Result<usize, String> {
    if n <= MAX_LAUNCHES {
        Ok(n)
    } else {
        Err(format!("must be at most {MAX_LAUNCHES}"))
    }
}

/// A count of timed launches: at least 1 and at most [`MAX_LAUNCHES`].
pub fn timed_launches(n: usize) -> Result<usize, String> {
    at_least_one(n).and_then(launches)
}

/// Interleaved confirmation rounds: 0 (none) or at least 2, since one round gives each
/// leader one time, which compares with nothing.
pub fn confirm_rounds(n: usize) -> Result<usize, String> {
    if n == 1 {
        Err("must be 0 (no confirmation) or at least 2".into())
    } else {
        Ok(n)
    }
}

/// A count that must be at least 1 (timed launches, compile workers).
pub fn at_least_one(n: usize) -> Result<usize, String> {
    if n >= 1 {
        Ok(n)
    } else {
        Err("must be at least 1".into())
    }
}

/// A time limit in seconds: finite, above 0 and at most [`MAX_SECONDS`].
pub fn seconds(s: f64) -> Result<f64, String> {
    if s.is_finite() && s > 0.0 && s <= MAX_SECONDS {
        Ok(s)
    } else {
        Err(format!(
            "must be a positive number of seconds, at most {MAX_SECONDS}"
        ))
    }
}

/// A time limit in seconds where 0 means no limit: 0, or as [`seconds`].
pub fn seconds_or_zero(s: f64) -> Result<f64, String> {
    if s == 0.0 {
        return Ok(0.0);
    }
    seconds(s).map_err(|_| {
        format!("must be a positive number of seconds, at most {MAX_SECONDS} (0: no limit)")
    })
}

/// A tolerance or a margin: finite and not negative. NaN and infinity would switch off the
/// comparison they bound (every error or slowdown is within an infinite margin, and none
/// compares above NaN).
pub fn non_negative(x: f64) -> Result<f64, String> {
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err("must be a finite number, 0 or more".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_start_at_one() {
        assert_eq!(at_least_one(1), Ok(1));
        assert_eq!(at_least_one(usize::MAX), Ok(usize::MAX));
        assert!(at_least_one(0).unwrap_err().contains("at least 1"));
    }

    #[test]
    fn launch_counts_are_bounded() {
        assert_eq!(launches(0), Ok(0));
        assert_eq!(launches(MAX_LAUNCHES), Ok(MAX_LAUNCHES));
        assert!(launches(MAX_LAUNCHES + 1).unwrap_err().contains("at most"));
        assert_eq!(timed_launches(30), Ok(30));
        assert!(timed_launches(0).unwrap_err().contains("at least 1"));
        assert!(timed_launches(usize::MAX).unwrap_err().contains("at most"));
    }

    #[test]
    fn seconds_are_finite_positive_and_bounded() {
        assert_eq!(seconds(0.01), Ok(0.01));
        assert_eq!(seconds(MAX_SECONDS), Ok(MAX_SECONDS));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, MAX_SECONDS * 2.0, 1e30] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds_or_zero(0.0), Ok(0.0));
        assert_eq!(seconds_or_zero(2.5), Ok(2.5));
        for bad in [-0.5, f64::NAN, f64::NEG_INFINITY, 1e300] {
            let why = seconds_or_zero(bad).unwrap_err();
            assert!(why.contains("0: no limit"), "{bad}: {why}");
        }
    }

    #[test]
    fn tolerances_are_finite_and_not_negative() {
        assert_eq!(non_negative(0.0), Ok(0.0));
        assert_eq!(non_negative(1e-4), Ok(1e-4));
        for bad in [-5.0, -1e-9, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(non_negative(bad).is_err(), "{bad}");
        }
    }
}
