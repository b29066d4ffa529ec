//! How much a search may measure: a number of variants or a time.

use crate::error::{Error, Result};

/// The variant budget of a search that gives none, except where its entry says otherwise.
pub const DEFAULT_BUDGET: usize = 256;

/// How much searching a run may do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    /// Measure at most this many configurations.
    Variants(usize),
    /// Stop proposing once this many seconds have passed. [`drive`](super::strategy::drive) counts variants only; with
    /// a time budget the caller runs the same ask/measure/tell loop and stops asking when the
    /// time is up.
    Seconds(f64),
}

/// As `--budget` takes it: `200`, `90s`.
impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Budget::Variants(n) => write!(f, "{n}"),
            Budget::Seconds(s) => write!(f, "{s}s"),
        }
    }
}

/// `200` → 200 variants; `90s`, `2m`, `1.5h` → a time. Zero, negatives and anything else are
/// a usage error that says what is accepted.
pub fn parse_budget(text: &str) -> Result<Budget> {
    let t = text.trim();
    let bad = |why: &str| {
        Error::Usage(format!(
            "invalid budget '{text}': {why} (expected a number of variants such as 200, or a time such as 90s, 2m or 1h)"
        ))
    };
    if t.is_empty() {
        return Err(bad("it is empty"));
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return match t.parse::<usize>() {
            Ok(0) => Err(bad("zero variants measure nothing")),
            Ok(n) => Ok(Budget::Variants(n)),
            Err(_) => Err(bad("the number is too large")),
        };
    }
    let split = t
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(|| bad("it is neither a whole number nor a time"))?;
    let (number, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad("unknown time unit")),
    };
    let number = number.trim();
    let value: f64 = number
        .parse()
        .map_err(|_| bad("it is neither a whole number nor a time"))?;
    if number.starts_with('-') || value <= 0.0 {
        return Err(bad("it must be positive"));
    }
    if !value.is_finite() {
        return Err(bad("it must be finite"));
    }
    Ok(Budget::Seconds(value * scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse() {
        assert_eq!(parse_budget("200").unwrap(), Budget::Variants(200));
        assert_eq!(parse_budget(" 90s ").unwrap(), Budget::Seconds(90.0));
        assert_eq!(parse_budget("2m").unwrap(), Budget::Seconds(120.0));
        assert_eq!(parse_budget("1.5h").unwrap(), Budget::Seconds(5400.0));
        for text in ["200", "90s", "1.5s"] {
            assert_eq!(parse_budget(text).unwrap().to_string(), text);
        }
        for bad in [
            "0",
            "0s",
            "-5",
            "-5s",
            "abc",
            "",
            "10x",
            "1.5",
            "s",
            "inf s",
            "9".repeat(30).as_str(),
        ] {
            let e = parse_budget(bad).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{bad}");
            assert!(e.to_string().contains("invalid budget"), "{e}");
        }
    }
}
