//! `tune params`: an op's parameters as its spec declares them, so the space can be seen
//! before it is tuned. Every parameter gets its default sweep (`values`), what `--param`
//! accepts beyond it (`choices` for words; any integer for numbers), the value stored rows
//! from before it existed stand for (`missing`), and its help text.

use crate::spec::expr::Value;
use crate::spec::ops::{toml_to_value, Op};
use serde::Serialize;

/// Width the help text is wrapped to.
const WIDTH: usize = 92;
/// Indent of the help text under its parameter.
const INDENT: &str = "    ";

/// The text `tune params` prints for `op`: [`params_doc`]'s facts, with the spec's origin and
/// the size of the default sweep.
pub fn params_text(op: &Op) -> String {
    let doc = params_doc(op);
    let mut s = String::new();
    s.push_str(&format!("{}: {}\n", doc.op, doc.summary));
    let dtypes: Vec<String> = doc
        .dtypes
        .iter()
        .map(|d| {
            if *d == doc.default_dtype {
                format!("{d} (default)")
            } else {
                d.clone()
            }
        })
        .collect();
    s.push_str(&format!(
        "spec {}\n--shape {}; --dtype {}\n",
        op.origin,
        doc.dims.join("x"),
        dtypes.join(", ")
    ));
    let points: usize = doc
        .params
        .iter()
        .map(|p| (p.values.len() + p.finish.len()).max(1))
        .product();
    s.push_str(&format!(
        "default sweep: {points} configurations before the constraints\n\
         --param NAME=v1,v2 replaces a parameter's values with others it accepts\n"
    ));
    let list = |values: &[Value]| {
        values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    for p in &doc.params {
        s.push('\n');
        s.push_str(&p.name);
        s.push('\n');
        let mut facts = vec![format!("default sweep: {}", list(&p.values))];
        if !p.finish.is_empty() {
            facts.push(format!(
                "and on the search's leaders only: {}",
                list(&p.finish)
            ));
        }
        facts.push(match &p.accepts {
            Some(words) if *words == p.values => "accepts: these words only".to_string(),
            Some(words) => format!("accepts: {}", list(words)),
            None => "accepts: any integer".to_string(),
        });
        if let Some(missing) = &p.missing {
            facts.push(format!("rows stored before it existed: {missing}"));
        }
        s.push_str(&wrap(&facts.join("; ")));
        let help = if p.help.is_empty() {
            "(the spec gives no help text)"
        } else {
            &p.help
        };
        s.push_str(&wrap(help));
    }
    s
}

/// What `tune params --json` prints: the same facts as [`params_text`], for scripts (a
/// stored row's parameters completed with the values its older rows stand for, say).
#[derive(Debug, Serialize)]
pub struct ParamsDoc {
    pub op: String,
    pub summary: String,
    pub dims: Vec<String>,
    pub dtypes: Vec<String>,
    pub default_dtype: String,
    pub params: Vec<ParamDoc>,
}

/// One parameter of [`ParamsDoc`].
#[derive(Debug, Serialize)]
pub struct ParamDoc {
    pub name: String,
    /// The default sweep.
    pub values: Vec<Value>,
    /// Values of the default sweep that only a search's leaders try.
    pub finish: Vec<Value>,
    /// What `--param` accepts: these words, or `None` for any integer.
    pub accepts: Option<Vec<Value>>,
    /// The value rows stored before the parameter existed stand for.
    pub missing: Option<Value>,
    pub help: String,
}

/// The facts `tune params --json` prints for `op`.
pub fn params_doc(op: &Op) -> ParamsDoc {
    let spec = &op.spec;
    ParamsDoc {
        op: spec.name.clone(),
        summary: spec.summary.clone(),
        dims: spec.dims.clone(),
        dtypes: spec
            .supported_dtypes()
            .iter()
            .map(ToString::to_string)
            .collect(),
        default_dtype: spec.default_dtype().to_string(),
        params: spec
            .params
            .iter()
            .map(|p| ParamDoc {
                name: p.name.clone(),
                values: p.default_values(),
                finish: p.finish_values(),
                accepts: p.is_text().then(|| p.accepted_values()),
                missing: p.missing.as_ref().map(toml_to_value),
                help: p.help.trim().to_string(),
            })
            .collect(),
    }
}

/// `text` as lines of at most [`WIDTH`] characters (a longer word stays whole), each
/// indented by [`INDENT`] and ended by a newline.
fn wrap(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && INDENT.len() + line.len() + 1 + word.len() > WIDTH {
            out.push_str(&format!("{INDENT}{line}\n"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&format!("{INDENT}{line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every transpose parameter is listed with its sweep, what it accepts and its help; a
    /// word parameter with choices names them, one added later names its stored value.
    #[test]
    fn every_parameter_of_the_transpose_is_described() {
        let op = Op::load("transpose", None).unwrap();
        let text = params_text(&op);
        assert!(text.starts_with("transpose: out = transpose(in)"), "{text}");
        assert!(
            text.contains("--shape ROWSxCOLS; --dtype f32 (default), f64, f16, bf16"),
            "{text}"
        );
        for p in &op.spec.params {
            assert!(
                text.lines().any(|l| l == p.name),
                "{} has no heading line:\n{text}",
                p.name
            );
        }
        let section = |name: &str| -> String {
            text.split(&format!("\n{name}\n"))
                .nth(1)
                .and_then(|rest| rest.split("\n\n").next())
                .unwrap_or_else(|| panic!("no section {name}"))
                .to_string()
        };
        let tile = section("TILE_DIM");
        assert!(
            tile.contains("default sweep: 16, 32, 64; accepts: any integer"),
            "{tile}"
        );
        assert!(tile.contains("side of the tile"), "{tile}");
        let unroll = section("UNROLL");
        assert!(
            unroll.contains("default sweep: on; accepts: off, on"),
            "{unroll}"
        );
        let vec = section("VEC");
        assert!(vec.contains("rows stored before it existed: 1"), "{vec}");
        let bounds = section("BOUNDS");
        assert!(
            bounds.contains(
                "default sweep: none, always, specialized, edge; accepts: these words only"
            ),
            "{bounds}"
        );
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
    }

    /// The JSON form holds every parameter with the same facts as the text: VEC's sweep and
    /// the value its older rows stand for, BOUNDS' accepted words, TILE_DIM any integer.
    #[test]
    fn the_json_form_gives_each_parameter_its_sweep_accepted_values_and_stored_value() {
        let op = Op::load("transpose", None).unwrap();
        let doc = serde_json::to_value(params_doc(&op)).unwrap();
        assert_eq!(doc["op"], "transpose");
        assert_eq!(doc["dims"], serde_json::json!(["ROWS", "COLS"]));
        assert_eq!(doc["default_dtype"], "f32");
        let params = doc["params"].as_array().unwrap();
        assert_eq!(params.len(), op.spec.params.len());
        let param = |name: &str| params.iter().find(|p| p["name"] == name).unwrap().clone();
        let vec = param("VEC");
        assert_eq!(vec["values"], serde_json::json!([1, 2, 4, 8]));
        assert_eq!(vec["missing"], 1);
        assert!(vec["accepts"].is_null(), "any integer: {vec}");
        let bounds = param("BOUNDS");
        assert_eq!(
            bounds["accepts"],
            serde_json::json!(["none", "always", "specialized", "edge"])
        );
        assert!(param("TILE_DIM")["missing"].is_null());
        assert!(param("TILE_DIM")["help"]
            .as_str()
            .unwrap()
            .contains("side of the tile"));
        assert_eq!(param("VEC")["finish"], serde_json::json!([]));
    }

    /// A finishing value is shown apart from the default sweep, in both forms, and counts in
    /// the sweep's size: sgemm's TAIL sweeps 0, and its search's leaders try 1.
    #[test]
    fn finishing_values_are_shown_apart_from_the_default_sweep() {
        let op = Op::load("sgemm", None).unwrap();
        let doc = serde_json::to_value(params_doc(&op)).unwrap();
        let tail = doc["params"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "TAIL")
            .unwrap()
            .clone();
        assert_eq!(tail["values"], serde_json::json!([0]));
        assert_eq!(tail["finish"], serde_json::json!([1]));
        let text = params_text(&op);
        assert!(
            text.contains("default sweep: 0; and on the search's leaders only: 1;"),
            "{text}"
        );
        // The points enumeration visits at every shape: TAIL's two values double them.
        assert!(
            text.contains("default sweep: 5308416 configurations"),
            "{text}"
        );
    }

    #[test]
    fn wrapping_keeps_every_word_and_the_indent() {
        let text = "word ".repeat(50);
        let wrapped = wrap(&text);
        assert!(wrapped.lines().count() > 1);
        assert!(wrapped
            .lines()
            .all(|l| l.starts_with(INDENT) && l.len() <= WIDTH));
        assert_eq!(wrapped.split_whitespace().count(), 50);
    }
}
