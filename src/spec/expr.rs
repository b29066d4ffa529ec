//! Expressions over parameters, shape and device limits (constraints, defines, launch
//! dimensions, buffer sizes). Evaluation is delegated to the `evalexpr` crate; this module only
//! maps its values onto ours and its errors onto one-line messages that name the expression
//! and where it came from.

use crate::error::{Error, Result};
use evalexpr::{Context, EvalexprError, EvalexprResult, Node, Value as EValue};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// The start of `ceil_div`'s error for a divisor under 1.
const CEIL_DIV_DIVISOR: &str = "ceil_div divisor must be positive";

/// Why an evaluation failed at these values although the expression is sound: a division or
/// remainder by zero, or a `ceil_div` by a divisor under 1 (a `--param TILE_DIM=0` does
/// that). `None` for every other failure (a name that is not there, a type mismatch, an
/// overflow), which is the expression's fault.
fn undefined_here(e: &EvalexprError) -> Option<String> {
    match e {
        EvalexprError::DivisionError { divisor, .. }
        | EvalexprError::ModulationError { divisor, .. }
            if *divisor == EValue::Int(0) =>
        {
            Some("divides by zero".into())
        }
        EvalexprError::CustomMessage(m) if m.starts_with(CEIL_DIV_DIVISOR) => {
            Some("ceil_div by a divisor below 1".into())
        }
        _ => None,
    }
}

/// `ceil_div(a, b)`: the number of size-`b` tiles that cover `a`.
fn ceil_div(arg: &EValue) -> evalexpr::EvalexprResult<EValue> {
    let args = arg.as_fixed_len_tuple(2)?;
    let (a, b) = (args[0].as_int()?, args[1].as_int()?);
    if b <= 0 {
        return Err(EvalexprError::CustomMessage(format!(
            "{CEIL_DIV_DIVISOR}, got {b}"
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
/// Each value is kept twice, ours and evalexpr's, so that an expression reads the variables
/// in place: building evalexpr's own context (every variable copied) for each of the many
/// evaluations a space needs would cost more than the evaluations themselves. Names are
/// shared (`Arc<str>`), so a copy of a set of variables allocates no name: every valid
/// configuration of a space holds one, with the same names.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    values: BTreeMap<std::sync::Arc<str>, Value>,
    evals: HashMap<std::sync::Arc<str>, EValue>,
}

/// evalexpr's view of [`Vars`]: variables by reference, `ceil_div`, then the builtins.
struct VarsContext<'a>(&'a Vars);

impl Context for VarsContext<'_> {
    fn get_value(&self, identifier: &str) -> Option<&EValue> {
        self.0.evals.get(identifier)
    }

    fn call_function(&self, identifier: &str, argument: &EValue) -> EvalexprResult<EValue> {
        match identifier {
            "ceil_div" => ceil_div(argument),
            _ => Err(EvalexprError::FunctionIdentifierNotFound(
                identifier.to_string(),
            )),
        }
    }

    fn are_builtin_functions_disabled(&self) -> bool {
        false
    }

    fn set_builtin_functions_disabled(&mut self, _: bool) -> EvalexprResult<()> {
        Err(EvalexprError::ContextNotMutable)
    }
}

thread_local! {
    /// Parsed expressions by their text: a spec has a few dozen, each evaluated once per point.
    static TREES: RefCell<HashMap<String, Node>> = RefCell::new(HashMap::new());
}

/// Evaluates `expr` over `vars`, parsing it only the first time this thread sees it.
fn eval_cached(expr: &str, vars: &Vars) -> EvalexprResult<EValue> {
    TREES.with(|trees| {
        let mut trees = trees.borrow_mut();
        // One lookup per evaluation once parsed: this runs for every expression at every point.
        if let Some(tree) = trees.get(expr) {
            return tree.eval_with_context(&VarsContext(vars));
        }
        let tree = evalexpr::build_operator_tree(expr)?;
        let value = tree.eval_with_context(&VarsContext(vars));
        trees.insert(expr.to_string(), tree);
        value
    })
}

/// The variables `expr` reads, or `None` when it does not parse (evaluating it then reports
/// the parse error with its context). The space uses them to tell which parameters decide an
/// expression, so that it evaluates each expression once per combination of those.
pub fn variables(expr: &str) -> Option<Vec<String>> {
    parse_variables(expr).ok()
}

/// [`variables`], or why `expr` does not parse.
pub fn parse_variables(expr: &str) -> std::result::Result<Vec<String>, String> {
    let tree = evalexpr::build_operator_tree(expr).map_err(|e| e.to_string())?;
    let mut names: Vec<String> = tree
        .iter_variable_identifiers()
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// `expr` parsed into evalexpr's tree, for [`crate::spec::rule`], which walks it.
pub fn parse_tree(expr: &str) -> std::result::Result<Node, String> {
    evalexpr::build_operator_tree(expr).map_err(|e| e.to_string())
}

/// `node` (a whole expression or a part of one) evaluated over `vars` as one of our values:
/// why not where it fails, or where it gives a float or a tuple.
pub fn eval_node(node: &Node, vars: &Vars) -> std::result::Result<Value, String> {
    match node
        .eval_with_context(&VarsContext(vars))
        .map_err(|e| e.to_string())?
    {
        EValue::Int(i) => Ok(Value::Int(i)),
        EValue::Boolean(b) => Ok(Value::Bool(b)),
        EValue::String(s) => Ok(Value::Str(s)),
        other => Err(format!(
            "gives {other:?}, expected an integer, boolean or string"
        )),
    }
}

impl Vars {
    pub fn new() -> Self {
        Vars::default()
    }

    pub fn set(&mut self, name: &str, value: &Value) {
        // Overwrites in place when the name is there: the space sets every parameter anew at
        // each point it evaluates.
        match self.values.get_mut(name) {
            Some(slot) => {
                *slot = value.clone();
                let eval = self.evals.get_mut(name).expect("both maps hold every name");
                *eval = value.to_evalexpr();
            }
            None => {
                let name: std::sync::Arc<str> = name.into();
                self.values.insert(name.clone(), value.clone());
                self.evals.insert(name, value.to_evalexpr());
            }
        }
    }

    pub fn set_int(&mut self, name: &str, value: i64) {
        self.set(name, &Value::Int(value));
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    /// Evaluates `expr`; `context` says where it came from (e.g. "constraint 3 of transpose").
    pub fn eval(&self, expr: &str, context: &(impl Site + ?Sized)) -> Result<Value> {
        our_value(expr, context, eval_cached(expr, self))
    }

    /// Evaluates `expr` at one point of a space: `Ok(Err(why))` when it is undefined at these
    /// values (a division by zero; see [`undefined_here`]), which rules the point out rather
    /// than the run. Every other failure is an [`Error::Expr`], as with [`Vars::eval`].
    pub fn eval_here(
        &self,
        expr: &str,
        context: &(impl Site + ?Sized),
    ) -> Result<std::result::Result<Value, String>> {
        match eval_cached(expr, self) {
            Err(e) => match undefined_here(&e) {
                Some(why) => Ok(Err(why)),
                None => our_value(expr, context, Err(e)).map(Ok),
            },
            done => our_value(expr, context, done).map(Ok),
        }
    }

    /// [`Vars::eval_here`] of an integer expression.
    pub fn eval_int_here(
        &self,
        expr: &str,
        context: &(impl Site + ?Sized),
    ) -> Result<std::result::Result<i64, String>> {
        match self.eval_here(expr, context)? {
            Ok(Value::Int(i)) => Ok(Ok(i)),
            Ok(other) => Err(Error::Expr {
                expr: expr.into(),
                context: context.text(),
                why: format!("expected an integer, got {other}"),
            }),
            Err(why) => Ok(Err(why)),
        }
    }

    /// [`Vars::eval_here`] of a boolean expression.
    pub fn eval_bool_here(
        &self,
        expr: &str,
        context: &(impl Site + ?Sized),
    ) -> Result<std::result::Result<bool, String>> {
        match self.eval_here(expr, context)? {
            Ok(Value::Bool(b)) => Ok(Ok(b)),
            Ok(other) => Err(Error::Expr {
                expr: expr.into(),
                context: context.text(),
                why: format!("expected true or false, got {other}"),
            }),
            Err(why) => Ok(Err(why)),
        }
    }

    pub fn eval_int(&self, expr: &str, context: &(impl Site + ?Sized)) -> Result<i64> {
        match self.eval(expr, context)? {
            Value::Int(i) => Ok(i),
            other => Err(Error::Expr {
                expr: expr.into(),
                context: context.text(),
                why: format!("expected an integer, got {other}"),
            }),
        }
    }

    pub fn eval_bool(&self, expr: &str, context: &(impl Site + ?Sized)) -> Result<bool> {
        match self.eval(expr, context)? {
            Value::Bool(b) => Ok(b),
            other => Err(Error::Expr {
                expr: expr.into(),
                context: context.text(),
                why: format!("expected true or false, got {other}"),
            }),
        }
    }
}

/// Our value of what evaluating `expr` gave, or the error naming it and its context.
fn our_value(
    expr: &str,
    context: &(impl Site + ?Sized),
    done: EvalexprResult<EValue>,
) -> Result<Value> {
    let err = |why: String| Error::Expr {
        expr: expr.to_string(),
        context: context.text(),
        why,
    };
    match done.map_err(|e| err(e.to_string()))? {
        EValue::Int(i) => Ok(Value::Int(i)),
        EValue::Boolean(b) => Ok(Value::Bool(b)),
        EValue::String(s) => Ok(Value::Str(s)),
        EValue::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Value::Int(f as i64)),
        other => Err(err(format!(
            "gives {other:?}, expected an integer, boolean or string"
        ))),
    }
}

/// Where an expression comes from, for its error messages: text, or [`Lazy`] text made only
/// when an error needs it (naming a spec line means searching the spec's text, and the space
/// evaluates millions of expressions).
pub trait Site {
    fn text(&self) -> String;
}

impl Site for str {
    fn text(&self) -> String {
        self.to_string()
    }
}

impl Site for String {
    fn text(&self) -> String {
        self.clone()
    }
}

/// A [`Site`] made on demand.
pub struct Lazy<F>(pub F);

impl<F: Fn() -> String> Site for Lazy<F> {
    fn text(&self) -> String {
        (self.0)()
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

    /// A division by zero, or a `ceil_div` by a divisor below 1, makes an expression
    /// undefined at these values (the point is pruned); a missing name, a type mismatch or an
    /// overflow stays an error of the expression.
    #[test]
    fn undefined_at_a_point_is_told_from_an_error_of_the_expression() {
        let mut v = Vars::new();
        v.set_int("T", 0);
        v.set_int("N", 64);
        assert_eq!(
            v.eval_int_here("N / T", "t").unwrap(),
            Err("divides by zero".into())
        );
        assert_eq!(
            v.eval_bool_here("N % T == 0", "t").unwrap(),
            Err("divides by zero".into())
        );
        assert_eq!(
            v.eval_int_here("ceil_div(N, T)", "t").unwrap(),
            Err("ceil_div by a divisor below 1".into())
        );
        assert_eq!(v.eval_int_here("N / 4", "t").unwrap(), Ok(16));
        assert!(v.eval_int_here("N / NOPE", "t").is_err());
        assert!(v.eval_bool_here("N / 2", "t").is_err());
        assert!(v.eval_int_here("9223372036854775807 * 2", "t").is_err());
    }

    /// A parsed expression is reused (one parse per text and thread) yet reads each call's
    /// own variables, a later `set` replaces a value everywhere it is read, and a `Lazy` site
    /// is made only when an error needs it.
    #[test]
    fn cached_expressions_read_the_current_variables_and_lazy_sites_only_on_error() {
        let never = Lazy(|| -> String { panic!("a site made without an error") });
        let mut a = Vars::new();
        a.set_int("BM", 64);
        let mut b = a.clone();
        b.set_int("BM", 128);
        assert_eq!(a.eval_int("ceil_div(1000, BM)", &never).unwrap(), 16);
        assert_eq!(b.eval_int("ceil_div(1000, BM)", &never).unwrap(), 8);
        a.set("BM", &Value::Str("x".into()));
        assert_eq!(
            a.eval("BM", &never).unwrap(),
            Value::Str("x".into()),
            "a set replaces what expressions read"
        );
        let e = b
            .eval_bool(
                "BM > NOPE",
                &Lazy(|| "sgemm.toml:7 constraints[2]".to_string()),
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("NOPE") && e.contains("sgemm.toml:7 constraints[2]"),
            "{e}"
        );
        // A text that does not parse is an error each time, never a cached tree.
        for _ in 0..2 {
            assert!(b.eval("BM +", "t").is_err());
        }
    }

    #[test]
    fn parses_text_values() {
        assert_eq!(Value::parse("16"), Value::Int(16));
        assert_eq!(Value::parse("on"), Value::Str("on".into()));
        assert_eq!(Value::parse("true"), Value::Bool(true));
    }
}
