//! Rendering a configuration into CUDA source with Tera. The template sees the op's
//! parameters and defines (never the exact shape) plus the element type (`dtype` = f32, `T` =
//! float, `ELEM_BYTES` = 4, `T_DECL`: the declaration of `T` where it is not built in), so
//! the same configuration renders the same source for every shape that shares its defines,
//! and compiled cubins can be reused across shapes. Another element type renders another
//! source, hence another cubin cache key and journal key.

use crate::error::{Error, Result};
use crate::spec::expr::Value;
use crate::spec::ops::{one_line, Op};
use crate::spec::space::Candidate;
use tera::{Context, Tera};

/// Tera with the op's variant template and, when it has one, its baseline template.
pub struct Renderer {
    tera: Tera,
    variant: String,
    baseline: Option<String>,
    dtype: crate::model::dtype::Dtype,
}

impl Renderer {
    /// Parses the op's templates; a syntax error is reported once, for the op, not per variant.
    pub fn new(op: &Op) -> Result<Renderer> {
        let mut tera = Tera::new();
        let variant = op.template_name.clone();
        let add = |tera: &mut Tera, name: &str, text: &str| {
            tera.add_raw_template(name, text)
                .map_err(|e| Error::Template {
                    template: name.to_string(),
                    why: one_line(&format!("{e:#}")),
                })
        };
        add(&mut tera, &variant, &op.template)?;
        let baseline = match (&op.spec.baseline_source, &op.baseline_template) {
            (Some(src), Some(text)) => {
                add(&mut tera, &src.template, text)?;
                Some(src.template.clone())
            }
            _ => None,
        };
        Ok(Renderer {
            tera,
            variant,
            baseline,
            dtype: op.dtype,
        })
    }

    /// What every template sees of the element type.
    fn element(&self) -> Context {
        let mut ctx = Context::new();
        ctx.insert("dtype", self.dtype.name());
        ctx.insert("T", self.dtype.c_type());
        ctx.insert("T_DECL", self.dtype.c_decl());
        ctx.insert("ELEM_BYTES", &self.dtype.bytes());
        ctx
    }

    /// CUDA source of one configuration. An error (say, an undefined variable) is returned
    /// as text so the tuner can record it against this variant and go on.
    pub fn render(&self, candidate: &Candidate) -> std::result::Result<String, String> {
        let mut ctx = self.element();
        for (name, value) in candidate.config.values() {
            ctx.insert(name.to_string(), value);
        }
        for (name, value) in candidate.defines() {
            ctx.insert(name.to_string(), value);
        }
        self.tera
            .render(&self.variant, &ctx)
            .map_err(|e| format!("render {}: {}", self.variant, one_line(&format!("{e:#}"))))
    }

    /// CUDA source of the op's baseline kernels, rendered with the spec's fixed values.
    pub fn render_baselines(&self, op: &Op) -> Result<Option<String>> {
        let (Some(name), Some(src)) = (&self.baseline, &op.spec.baseline_source) else {
            return Ok(None);
        };
        let mut ctx = self.element();
        for (key, value) in &src.values {
            let v = match value {
                toml::Value::Integer(i) => Value::Int(*i),
                toml::Value::Boolean(b) => Value::Bool(*b),
                other => Value::Str(
                    other
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| other.to_string()),
                ),
            };
            ctx.insert(key.clone(), &v);
        }
        self.tera
            .render(name, &ctx)
            .map(Some)
            .map_err(|e| Error::Template {
                template: name.clone(),
                why: one_line(&format!("{e:#}")),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::limits::DeviceLimits;
    use crate::model::shape::Shape;
    use crate::spec::space::enumerate;

    #[test]
    fn the_reserved_names_are_the_ones_templates_and_expressions_are_given() {
        use crate::spec::ops::RESERVED_NAMES;
        let op = Op::load("transpose", None).unwrap();
        let r = Renderer::new(&op).unwrap();
        // Each reserved name is one the templates (the element type) or the expressions (the
        // base variables) are given.
        let ctx = r.element();
        let shape = Shape::parse("64x64", &op.spec.dims).unwrap();
        let vars = crate::spec::space::base_vars(&op, &shape, &DeviceLimits::SM90_DEFAULT);
        for name in RESERVED_NAMES {
            assert!(
                ctx.contains_key(name) || vars.get(name).is_some(),
                "{name} is reserved but set nowhere"
            );
        }
        for name in ["T", "T_DECL", "dtype", "ELEM_BYTES"] {
            assert!(ctx.contains_key(name), "{name}");
        }
    }

    #[test]
    fn renders_each_parameter_into_the_source() {
        let op = Op::load("transpose", None).unwrap();
        let r = Renderer::new(&op).unwrap();
        let shape = Shape::parse("1024x1024", &op.spec.dims).unwrap();
        let all = enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
        let c = all
            .iter()
            .find(|c| {
                c.pruned.is_none()
                    && c.config
                        .label()
                        .contains("TILE_DIM=32 BLOCK_ROWS=8 PAD=1 UNROLL=on BOUNDS=edge")
            })
            .unwrap();
        assert!(c.config.label().ends_with(
            "VEC=1 TILES_PER_BLOCK=1 ASPECT=square CACHE=default RUNS=tile OCCUPANCY=0 READ=elem \
             LAYOUT=tile STAGE=none BLOCK_ORDER=rows"
        ));
        let src = r.render(c).unwrap();
        assert!(src.contains("#define TILE_W 32") && src.contains("#define TILE_H 32"));
        assert!(src.contains("#define BLOCK_ROWS 8"));
        assert!(src.contains("#define PAD 1"));
        assert!(src.contains("_Pragma(\"unroll\")"));
        assert!(src.contains("#define EVEN_TILES true"));
        assert!(src.contains("const bool edge"));
        // The row order takes the tile column from blockIdx.x; its twin in the column order
        // (the same configuration but BLOCK_ORDER) numbers the blocks down the columns and
        // says so in its header.
        assert!(src.contains("const long long tile_col = blockIdx.x;"));
        assert!(!src.contains("BLOCK_ORDER"));
        let label = c
            .config
            .label()
            .replace("BLOCK_ORDER=rows", "BLOCK_ORDER=columns");
        let twin = all.iter().find(|t| t.config.label() == label).unwrap();
        let columns = r.render(twin).unwrap();
        assert!(columns.contains("const long long tile_col = launched / groups;"));
        assert!(columns
            .lines()
            .next()
            .unwrap()
            .ends_with(" BLOCK_ORDER=columns"));
        assert!(!columns.contains("tile_col = blockIdx.x"));
        let baseline = r.render_baselines(&op).unwrap().unwrap();
        assert!(baseline.contains("transpose_no_bank_conflicts"));
    }

    #[test]
    fn the_element_type_reaches_the_template() {
        let shape = Shape::parse("64x64", &["ROWS".into(), "COLS".into()]).unwrap();
        let mut sources = Vec::new();
        for (dtype, c_type, bits) in [
            ("f32", "float", "unsigned int"),
            ("f64", "double", "unsigned long long"),
            ("f16", "ca_half", "unsigned short"),
        ] {
            let op = Op::load("transpose", None)
                .unwrap()
                .with_dtype(Some(dtype))
                .unwrap();
            let r = Renderer::new(&op).unwrap();
            let all = enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
            let c = all.iter().find(|c| c.pruned.is_none()).unwrap();
            let src = r.render(c).unwrap();
            assert!(
                src.contains(&format!("transpose({c_type}* __restrict__ out_")),
                "{dtype}"
            );
            assert!(src.contains(&format!("typedef {bits} bits_t;")), "{dtype}");
            assert!(src.contains(&format!("variant ({dtype})")), "{dtype}");
            assert_eq!(src.contains("struct __align__(2) ca_half"), dtype == "f16");
            assert!(!src.contains("cuda_fp16.h\n#include") && !src.contains("#include"));
            let baseline = r.render_baselines(&op).unwrap().unwrap();
            assert!(
                baseline.contains(&format!("copy_vec4({c_type}* __restrict__ out_")),
                "{dtype}"
            );
            sources.push(src);
        }
        // Another element type is another source: another cubin cache and journal key.
        assert!(sources[0] != sources[1] && sources[1] != sources[2] && sources[0] != sources[2]);
    }

    #[test]
    fn undefined_variable_is_a_per_variant_error() {
        let mut op = Op::load("transpose", None).unwrap();
        op.template = "{{ NOT_A_PARAM }}".into();
        let r = Renderer::new(&op).unwrap();
        let shape = Shape::parse("64x64", &op.spec.dims).unwrap();
        let all = enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
        let e = r.render(&all[0]).unwrap_err();
        assert!(e.contains("NOT_A_PARAM"), "{e}");
    }

    #[test]
    fn template_syntax_error_is_reported_for_the_op() {
        let mut op = Op::load("transpose", None).unwrap();
        op.template = "{% if %}".into();
        assert!(matches!(Renderer::new(&op), Err(Error::Template { .. })));
    }

    #[test]
    fn errors_name_the_template_file_that_replaces_the_specs() {
        let mut op = Op::load("transpose", None).unwrap();
        op.template_name = "mine/override.cu.tera".into();
        op.template = "{{ NOT_A_PARAM }}".into();
        let r = Renderer::new(&op).unwrap();
        let shape = Shape::parse("64x64", &op.spec.dims).unwrap();
        let all = enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
        let e = r.render(&all[0]).unwrap_err();
        assert!(e.contains("mine/override.cu.tera"), "{e}");
        op.template = "{% if %}".into();
        let e = Renderer::new(&op)
            .err()
            .expect("a syntax error")
            .to_string();
        assert!(e.starts_with("template mine/override.cu.tera: "), "{e}");
        assert!(!e.contains("transpose.cu.tera"), "{e}");
    }
}
