//! Expressions over parameters, shape and device limits (constraints, defines, launch
//! dimensions, buffer sizes). Evaluation is delegated to the `evalexpr` crate; this module only
//! maps its values onto ours and its errors onto one-line messages that name the expression
//! and where it came from.

use crate::error::{Error, Result};
use evalexpr::{
    ContextWithMutableFunctions, ContextWithMutableVariables, EvalexprError, Function,
    HashMapContext, Value as EValue,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// `ceil_div(a, b)`: the number of size-`b` tiles that cover `a`.
fn ceil_div(arg: &EValue) -> evalexpr::EvalexprResult<EValue> {
    let args = arg.as_fixed_len_tuple(2)?;
    let (a, b) = (args[0].as_int()?, args[1].as_int()?);
    if b <= 0 {
        return Err(EvalexprError::CustomMessage(format!(
            "ceil_div divisor must be positive, got {b}"
        )));
    }
    Ok(EValue::Int(
        a.div_euclid(b) + i64::from(a.rem_euclid(b) != 0),
    ))
}

/// A value a parameter, define or expression can take.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum Value {
    Int(i64),
    Bool(bool),
    Str(String),
}

impl Value {
    /// Parses command-line or CSV text: integers and true/false are typed, the rest is text.
    pub fn parse(text: &str) -> Value {
        let t = text.trim();
        if let Ok(i) = t.parse::<i64>() {
            Value::Int(i)
        } else if t == "true" || t == "false" {
            Value::Bool(t == "true")
        } else {
            Value::Str(t.to_string())
        }
    }

    fn to_evalexpr(&self) -> EValue {
        match self {
            Value::Int(i) => EValue::Int(*i),
            Value::Bool(b) => EValue::Boolean(*b),
            Value::Str(s) => EValue::String(s.clone()),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => f.write_str(s),
        }
    }
}

/// Named values that expressions can read, plus the helper functions we add (`ceil_div`).
#[derive(Debug, Clone, Default)]
pub struct Vars {
    values: BTreeMap<String, Value>,
}

impl Vars {
    pub fn new() -> Self {
        Vars::default()
    }

    pub fn set(&mut self, name: &str, value: &Value) {
        self.values.insert(name.to_string(), value.clone());
    }

    pub fn set_int(&mut self, name: &str, value: i64) {
        self.set(name, &Value::Int(value));
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    fn context(&self) -> HashMapContext {
        let mut ctx = HashMapContext::new();
        for (name, value) in &self.values {
            // A fresh context has no variable whose type could clash.
            let _ = ctx.set_value(name.clone(), value.to_evalexpr());
        }
        let _ = ctx.set_function("ceil_div".into(), Function::new(ceil_div));
        ctx
    }

    /// Evaluates `expr`; `context` says where it came from (e.g. "constraint 3 of transpose").
    pub fn eval(&self, expr: &str, context: &str) -> Result<Value> {
        let err = |why: String| Error::Expr {
            expr: expr.to_string(),
            context: context.to_string(),
            why,
        };
        match evalexpr::eval_with_context(expr, &self.context()).map_err(|e| err(e.to_string()))? {
            EValue::Int(i) => Ok(Value::Int(i)),
            EValue::Boolean(b) => Ok(Value::Bool(b)),
            EValue::String(s) => Ok(Value::Str(s)),
            EValue::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Value::Int(f as i64)),
            other => Err(err(format!(
                "gives {other:?}, expected an integer, boolean or string"
            ))),
        }
    }

    pub fn eval_int(&self, expr: &str, context: &str) -> Result<i64> {
        match self.eval(expr, context)? {
            Value::Int(i) => Ok(i),
            other => Err(Error::Expr {
                expr: expr.into(),
                context: context.into(),
                why: format!("expected an integer, got {other}"),
            }),
        }
    }

    pub fn eval_bool(&self, expr: &str, context: &str) -> Result<bool> {
        match self.eval(expr, context)? {
            Value::Bool(b) => Ok(b),
            other => Err(Error::Expr {
                expr: expr.into(),
                context: context.into(),
                why: format!("expected true or false, got {other}"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_constraints_and_helpers() {
        let mut v = Vars::new();
        v.set_int("TILE_DIM", 32);
        v.set_int("BLOCK_ROWS", 8);
        v.set("BOUNDS", &Value::Str("none".into()));
        assert!(v.eval_bool("TILE_DIM % BLOCK_ROWS == 0", "t").unwrap());
        assert!(!v.eval_bool(r#"BOUNDS != "none""#, "t").unwrap());
        assert_eq!(v.eval_int("ceil_div(1000, TILE_DIM)", "t").unwrap(), 32);
        assert_eq!(
            v.eval_int("min(ceil_div(1024, 32), 65535)", "t").unwrap(),
            32
        );
    }

    #[test]
    fn reports_unknown_names_and_overflow() {
        let v = Vars::new();
        let e = v
            .eval_bool("NOPE < 3", "constraint 1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("NOPE") && e.contains("constraint 1"), "{e}");
        let e = v
            .eval_int("9223372036854775807 * 2", "buffer size")
            .unwrap_err();
        assert!(matches!(e, Error::Expr { .. }));
    }

    #[test]
    fn parses_text_values() {
        assert_eq!(Value::parse("16"), Value::Int(16));
        assert_eq!(Value::parse("on"), Value::Str("on".into()));
        assert_eq!(Value::parse("true"), Value::Bool(true));
    }
}
