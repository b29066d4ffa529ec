//! Value parsers of the numeric options: each reads the text clap hands over and checks it
//! against the option's domain ([`crate::model::domain`]), so a value out of its domain is
//! clap's usage error (exit 2) naming the option, before anything runs. The options that use
//! them accept a leading `-` (whole-number options a negative number, the others any text), so
//! `--jobs -1` or `--rtol -inf` is answered about its value rather than as an unknown
//! argument.

use crate::model::domain;

/// Whether `text` is a negative whole number (`-1`).
fn negative_whole(text: &str) -> bool {
    text.trim()
        .strip_prefix('-')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// A whole number (`u64`): a negative one, or text that is not one, is named as such.
fn whole(text: &str) -> Result<u64, String> {
    if negative_whole(text) {
        return Err("must not be negative".into());
    }
    text.trim().parse::<u64>().map_err(|e| match e.kind() {
        std::num::IntErrorKind::PosOverflow => format!("must be at most {}", u64::MAX),
        _ => "is not a whole number".into(),
    })
}

/// A count that may be 0 (`--warmup`, `--top`, `--device`).
pub fn count(text: &str) -> Result<usize, String> {
    let n = whole(text)?;
    usize::try_from(n).map_err(|_| format!("must be at most {}", usize::MAX))
}

/// `--confirm-rounds`: 0, or at least 2.
pub fn confirm_rounds(text: &str) -> Result<usize, String> {
    count(text).and_then(domain::confirm_rounds)
}

/// A count of at least 1 (`--reps`, `--jobs`).
pub fn at_least_one(text: &str) -> Result<usize, String> {
    // A negative count is below 1 like 0 is: the same answer.
    let n = if negative_whole(text) {
        0
    } else {
        count(text)?
    };
    domain::at_least_one(n)
}

/// Timed launches (`--reps`): 1 to [`domain::MAX_LAUNCHES`].
pub fn reps(text: &str) -> Result<usize, String> {
    at_least_one(text).and_then(domain::launches)
}

/// Untimed launches (`--warmup`): 0 to [`domain::MAX_LAUNCHES`].
pub fn warmup(text: &str) -> Result<usize, String> {
    count(text).and_then(domain::launches)
}

/// Any whole number from 0 (`--seed`).
pub fn seed(text: &str) -> Result<u64, String> {
    whole(text)
}

/// A number as Rust reads it (`nan` and `inf` included: the domains refuse them by name).
fn number(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .map_err(|_| "is not a number".into())
}

/// A time limit in seconds (`--watchdog`).
pub fn seconds(text: &str) -> Result<f64, String> {
    domain::seconds(number(text)?)
}

/// A time limit in seconds, 0 for none (`--compile-timeout`).
pub fn seconds_or_zero(text: &str) -> Result<f64, String> {
    domain::seconds_or_zero(number(text)?)
}

/// A tolerance or a margin in percent (`--rtol`, `--margin`).
pub fn non_negative(text: &str) -> Result<f64, String> {
    domain::non_negative(number(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_name_negative_and_malformed_values() {
        assert_eq!(count("0"), Ok(0));
        assert_eq!(count(" 12 "), Ok(12));
        assert_eq!(count("-1").unwrap_err(), "must not be negative");
        for bad in ["", "-", "1.5", "x", "1e3", "--1"] {
            assert_eq!(count(bad).unwrap_err(), "is not a whole number", "{bad:?}");
        }
        assert!(count("99999999999999999999999")
            .unwrap_err()
            .contains("at most"));
        assert_eq!(at_least_one("3"), Ok(3));
        assert!(at_least_one("0").unwrap_err().contains("at least 1"));
        assert!(at_least_one("-2").unwrap_err().contains("at least 1"));
        assert_eq!(reps("30"), Ok(30));
        assert!(reps("0").unwrap_err().contains("at least 1"));
        assert!(reps("18446744073709551615")
            .unwrap_err()
            .contains("at most"));
        assert_eq!(warmup("0"), Ok(0));
        assert!(warmup("1000001").unwrap_err().contains("at most"));
        assert_eq!(seed("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(seed("-1").unwrap_err(), "must not be negative");
    }

    #[test]
    fn numbers_are_checked_against_their_domain() {
        assert_eq!(non_negative("5"), Ok(5.0));
        assert_eq!(non_negative("0"), Ok(0.0));
        for bad in ["nan", "NaN", "inf", "-inf", "-5", "-1"] {
            assert!(non_negative(bad).unwrap_err().contains("finite"), "{bad}");
        }
        assert_eq!(non_negative("five").unwrap_err(), "is not a number");
        assert_eq!(seconds("2.5"), Ok(2.5));
        for bad in ["0", "-1", "nan", "inf", "1e30"] {
            assert!(seconds(bad).unwrap_err().contains("positive"), "{bad}");
        }
        assert_eq!(seconds_or_zero("0"), Ok(0.0));
        assert!(seconds_or_zero("-0.5").unwrap_err().contains("0: no limit"));
    }
}
