//! `reference = "transpose"`: out (COLS x ROWS) = in (ROWS x COLS) transposed, row-major. It
//! only moves elements, so it serves every element type.

use super::Reference;
use crate::model::dtype::Dtype;
use crate::model::shape::Shape;

pub const INFO: Reference = Reference {
    name: "transpose",
    about: "CPU transpose of a ROWS x COLS input (any dtype)",
    dtypes: &[],
    compute,
    spot_check: None,
};

fn compute(shape: &Shape, dtype: Dtype, inputs: &[&[u8]]) -> Option<Vec<u8>> {
    match (shape.dims.as_slice(), inputs) {
        (&[rows, cols], &[input]) => Some(transpose_bytes(
            input,
            rows as usize,
            cols as usize,
            dtype.bytes(),
        )),
        _ => None,
    }
}

/// out (cols x rows) = in (rows x cols) transposed, row-major, for elements of `elem` bytes
/// (raw bytes in and out: a transpose only moves bits, whatever the type).
pub fn transpose_bytes(input: &[u8], rows: usize, cols: usize, elem: usize) -> Vec<u8> {
    match elem {
        2 => transpose_fixed::<2>(input, rows, cols),
        4 => transpose_fixed::<4>(input, rows, cols),
        8 => transpose_fixed::<8>(input, rows, cols),
        _ => {
            let mut out = vec![0u8; rows * cols * elem];
            for r in 0..rows {
                for c in 0..cols {
                    let (to, from) = ((c * rows + r) * elem, (r * cols + c) * elem);
                    out[to..to + elem].copy_from_slice(&input[from..from + elem]);
                }
            }
            out
        }
    }
}

/// The transpose for one element size, known at compile time so each copy is one move.
fn transpose_fixed<const E: usize>(input: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    let mut out = vec![0u8; rows * cols * E];
    // Blocked so large matrices do not thrash the CPU cache.
    const B: usize = 64;
    for r0 in (0..rows).step_by(B) {
        for c0 in (0..cols).step_by(B) {
            for r in r0..(r0 + B).min(rows) {
                for c in c0..(c0 + B).min(cols) {
                    let (to, from) = ((c * rows + r) * E, (r * cols + c) * E);
                    let elem: [u8; E] = input[from..from + E].try_into().expect("E bytes");
                    out[to..to + E].copy_from_slice(&elem);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{compute, f32_bytes, f32_values};
    use super::*;

    #[test]
    fn transpose_reference_on_a_known_matrix() {
        // 2 x 3 → 3 x 2
        let values = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let out = f32_values(&transpose_bytes(&f32_bytes(&values), 2, 3, 4));
        assert_eq!(out, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let shape = Shape {
            dims: vec![67, 131],
        };
        let input: Vec<u8> = (0..67 * 131 * 4).map(|i| (i * 7 + i / 251) as u8).collect();
        let t = compute("transpose", &shape, Dtype::F32, &[&input]).unwrap();
        assert_eq!(transpose_bytes(&t, 131, 67, 4), input);
    }

    #[test]
    fn transpose_reference_for_every_element_size() {
        // Elements numbered by position, in each size: out[c][r] must be in[r][c].
        let (rows, cols) = (67usize, 131usize);
        for elem in [1usize, 2, 4, 8, 3, 16] {
            let input: Vec<u8> = (0..rows * cols)
                .flat_map(|i| {
                    let mut e = vec![0u8; elem];
                    for (b, slot) in e.iter_mut().enumerate() {
                        *slot = (i >> (8 * (b % 4))) as u8 ^ (b as u8).wrapping_mul(37);
                    }
                    e
                })
                .collect();
            let out = transpose_bytes(&input, rows, cols, elem);
            assert_eq!(out.len(), input.len(), "{elem}-byte elements");
            for r in 0..rows {
                for c in 0..cols {
                    let from = (r * cols + c) * elem;
                    let to = (c * rows + r) * elem;
                    assert_eq!(
                        out[to..to + elem],
                        input[from..from + elem],
                        "{elem} B at {r},{c}"
                    );
                }
            }
            assert_eq!(
                transpose_bytes(&out, cols, rows, elem),
                input,
                "{elem} B round trip"
            );
        }
        for dtype in crate::model::dtype::ALL {
            let shape = Shape { dims: vec![5, 3] };
            let input: Vec<u8> = (0..15 * dtype.bytes()).map(|i| i as u8).collect();
            let out = compute("transpose", &shape, dtype, &[&input]).unwrap();
            assert_eq!(out, transpose_bytes(&input, 5, 3, dtype.bytes()), "{dtype}");
            assert_ne!(out, input, "{dtype}: a 5x3 transpose moves elements");
        }
    }
}
