//! `reference = "copy"`: the output is the op's one input, element for element, in every
//! element type and at any shape (copies, casts to the same type, identity kernels).

use super::Reference;
use crate::model::dtype::Dtype;
use crate::model::shape::Shape;

pub const INFO: Reference = Reference {
    name: "copy",
    about: "the output equals the one input, element for element (any dtype)",
    dtypes: &[],
    compute,
    spot_check: None,
};

fn compute(_: &Shape, _: Dtype, inputs: &[&[u8]]) -> Option<Vec<u8>> {
    match inputs {
        [input] => Some(input.to_vec()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::model::dtype::Dtype;
    use crate::model::shape::Shape;

    #[test]
    fn the_output_is_the_input() {
        let shape = Shape { dims: vec![3, 2] };
        let input: Vec<u8> = (0..24).collect();
        let out = super::super::compute("copy", &shape, Dtype::F32, &[&input]).unwrap();
        assert_eq!(out, input);
        assert!(super::super::compute("copy", &shape, Dtype::F32, &[&input, &input]).is_err());
    }
}
