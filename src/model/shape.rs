//! Problem shapes such as `1000x1000` (transpose) or `1024x1024x512` (matmul).
//!
//! Every dimension is passed to kernels as a 32-bit `int`, so each must lie in
//! 1..=i32::MAX; kernels index with 64-bit offsets, so the product may be larger.

use crate::error::{Error, Result};
use std::fmt;

/// The largest single dimension a kernel argument can carry.
pub const MAX_DIM: u64 = i32::MAX as u64;

/// A parsed shape: one positive size per dimension the op names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    pub dims: Vec<u64>,
}

impl Shape {
    /// Parses `AxB[xC...]`, expecting exactly `names.len()` dimensions.
    pub fn parse(input: &str, names: &[String]) -> Result<Shape> {
        let bad = |why: String| Error::Shape {
            input: input.to_string(),
            why,
        };
        let expected = names.join("x");
        if input.trim().is_empty() {
            return Err(bad(format!("no shape given (expected {expected})")));
        }
        let parts: Vec<&str> = input.trim().split(['x', 'X']).collect();
        if parts.len() != names.len() {
            return Err(bad(format!(
                "expected {} dimensions as {expected}, got {}",
                names.len(),
                parts.len()
            )));
        }
        let mut dims = Vec::with_capacity(parts.len());
        for (part, name) in parts.iter().zip(names) {
            let part = part.trim();
            if part.is_empty() {
                return Err(bad(format!("{name} is empty (expected {expected})")));
            }
            if part.starts_with('-') {
                return Err(bad(format!("{name} must be positive, got {part}")));
            }
            let value: u64 = part
                .parse()
                .map_err(|_| bad(format!("{name} must be a positive integer, got '{part}'")))?;
            if value == 0 {
                return Err(bad(format!("{name} must be at least 1")));
            }
            if value > MAX_DIM {
                return Err(bad(format!(
                    "{name}={value} exceeds the 32-bit kernel limit {MAX_DIM}"
                )));
            }
            dims.push(value);
        }
        let shape = Shape { dims };
        if shape.elements().is_none() {
            return Err(bad("the element count overflows 64 bits".into()));
        }
        Ok(shape)
    }

    /// Product of the dimensions, `None` on overflow.
    pub fn elements(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
    }
}

/// Splits `--shape A,B,C` into shapes, each checked against the op's dimensions. An empty
/// entry of a list (`10x10,`) is named as such rather than as a shape without dimensions.
pub fn parse_list(input: &str, names: &[String]) -> Result<Vec<Shape>> {
    let items: Vec<&str> = input.split(',').collect();
    if items.len() > 1 && items.iter().any(|s| s.trim().is_empty()) {
        return Err(Error::Shape {
            input: input.to_string(),
            why: "the list has an empty entry (a comma too many?)".into(),
        });
    }
    items.iter().map(|s| Shape::parse(s, names)).collect()
}

/// Reads `--shapes FILE`: one shape per line, `#` comments and blank lines allowed. Every line
/// is checked before anything is tuned; a bad line is reported with its number.
pub fn read_file(path: &std::path::Path, names: &[String]) -> Result<Vec<Shape>> {
    let text = crate::error::read_user_text("--shapes", path)?;
    // A byte order mark, as some Windows editors save UTF-8, is no part of the first shape.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut shapes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let shape = Shape::parse(line, names)
            .map_err(|e| Error::Usage(format!("--shapes {}:{}: {e}", path.display(), i + 1)))?;
        shapes.push(shape);
    }
    if shapes.is_empty() {
        return Err(Error::Usage(format!(
            "--shapes {}: the file lists no shape",
            path.display()
        )));
    }
    Ok(shapes)
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.dims.iter().map(u64::to_string).collect();
        f.write_str(&parts.join("x"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names2() -> Vec<String> {
        vec!["ROWS".into(), "COLS".into()]
    }

    #[test]
    fn parses_valid_shapes() {
        assert_eq!(
            Shape::parse("1000x1000", &names2()).unwrap().dims,
            vec![1000, 1000]
        );
        assert_eq!(Shape::parse("1X7", &names2()).unwrap().dims, vec![1, 7]);
        assert_eq!(
            Shape::parse("8191x8191", &names2()).unwrap().to_string(),
            "8191x8191"
        );
    }

    #[test]
    fn shape_lists_and_files() {
        let list = parse_list("1000x1000,4096x512,8191x8191", &names2()).unwrap();
        assert_eq!(list.len(), 3);
        assert_eq!(list[1].dims, vec![4096, 512]);
        assert!(parse_list("1000x1000,,8x8", &names2()).is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shapes.txt");
        std::fs::write(
            &path,
            "# model shapes\n1000x1000\n\n  4096x512  # attention\n",
        )
        .unwrap();
        let shapes = read_file(&path, &names2()).unwrap();
        assert_eq!(
            shapes.iter().map(Shape::to_string).collect::<Vec<_>>(),
            vec!["1000x1000", "4096x512"]
        );
        std::fs::write(&path, "1000x1000\n12x\n").unwrap();
        let e = read_file(&path, &names2()).unwrap_err().to_string();
        assert!(e.contains("shapes.txt:2: invalid shape '12x'"), "{e}");
        assert_eq!(e.matches("invalid shape").count(), 1, "{e}");
        std::fs::write(&path, "\u{feff}1000x1000\r\n512x512\r\n").unwrap();
        assert_eq!(
            read_file(&path, &names2()).unwrap().len(),
            2,
            "a BOM and CRLF"
        );
        std::fs::write(&path, "# nothing\n\n").unwrap();
        assert!(read_file(&path, &names2())
            .unwrap_err()
            .to_string()
            .contains("no shape"));
        assert!(read_file(&dir.path().join("missing.txt"), &names2()).is_err());
    }

    #[test]
    fn rejects_malformed_shapes() {
        for bad in [
            "1000",
            "0x10",
            "-5x3",
            "axb",
            "1000x1000x5",
            "x10",
            "10x",
            "",
            "2147483648x1",
        ] {
            let err = Shape::parse(bad, &names2()).unwrap_err();
            assert!(matches!(err, Error::Shape { .. }), "{bad}: {err}");
        }
    }
}
