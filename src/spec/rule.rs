//! Where one configuration, valid at the shape it was tuned at, is the same valid kernel at
//! another shape: the spec's defines, constraints and launch rules, with the configuration's
//! parameters and the device limits folded in, as expressions of the shape alone. The
//! exports check a shape with it without the tuner: `TunedDb::select` evaluates it, and the
//! header of `tune export --format cuda` carries it as one C function per entry
//! ([`Rule::c_function`]), which computes the same thing.
//!
//! A kernel is rendered from the parameters and the defines, never the exact shape, so it
//! serves a shape exactly where the tuner would have kept the configuration there (every
//! define defined, every constraint true, the launch within the device's limits, the same
//! first kernels) and every define has the value it was compiled with. Evaluation follows
//! the expression crate's: every operand is evaluated (no short cut through `&&`, `||` or
//! `if`), and any division by zero, `ceil_div` by a divisor under 1 or 64-bit overflow
//! anywhere rules the shape out, as it prunes the configuration in the space.

use crate::model::limits::{DeviceLimits, LaunchDims};
use crate::model::shape::Shape;
use crate::spec::expr::{eval_node, parse_tree, Value, Vars};
use crate::spec::ops::Op;
use crate::spec::space::{base_vars, Candidate};
use evalexpr::{Node, Operator};
use std::fmt::Write;

/// Hardware limits of a launch, as [`crate::spec::space::eval_launch`] checks them: block x,
/// y, z, then grid x, y, z.
const LAUNCH_MAX: [i64; 6] = [1024, 1024, 64, i32::MAX as i64, 65535, 65535];

/// A configuration's validity at any shape of its op (see the module's text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The defines that depend on the shape, in spec order: (name, expression).
    locals: Vec<(String, Ir)>,
    /// Conditions that must all hold (booleans).
    checks: Vec<Ir>,
    /// The launch at the shape: block x, y, z, grid x, y, z and dynamic shared bytes.
    launch: Vec<Ir>,
    /// The first kernel's (prologue's) block and grid, where one runs.
    before: Option<Vec<Ir>>,
}

/// An expression of the shape: the dimensions (`Dim`, by index) and the shape-dependent
/// defines before it (`Local`, by index), everything else folded into constants. Booleans
/// are 0 and 1.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ir {
    Int(i64),
    Dim(usize),
    Local(usize),
    Bin(Bin, Box<Ir>, Box<Ir>),
    Not(Box<Ir>),
    If(Box<Ir>, Box<Ir>, Box<Ir>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    CeilDiv,
    Min,
    Max,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    Int,
    Bool,
}

impl Rule {
    /// The rule of `candidate` (valid at `shape` on `limits`), whose defines named by
    /// `compare` must keep their values (the others may change: a safe default's kernel was
    /// shown not to read them). Checks the same constraints as the space does when every
    /// parameter is given (a prune kept for speed gives way to a parameter it names).
    /// `Err(why)` where an expression that depends on the shape is one this rule cannot
    /// follow (a float, a string, a function other than `ceil_div`, `min`, `max` and `if`):
    /// the kernel then serves its own shape only.
    pub fn of(
        op: &Op,
        candidate: &Candidate,
        shape: &Shape,
        limits: &DeviceLimits,
        compare: &dyn Fn(&str) -> bool,
    ) -> std::result::Result<Rule, String> {
        let vars = candidate.vars(&base_vars(op, shape, limits));
        let mut b = Builder {
            vars,
            dims: op.spec.dims.clone(),
            locals: Vec::new(),
            local_types: Vec::new(),
        };
        let mut checks = Vec::new();
        for (name, expr) in &op.spec.defines {
            let expr = expr
                .as_str()
                .ok_or_else(|| format!("defines.{name} is not a string"))?;
            let tree = parse_tree(expr)?;
            if !b.depends(&tree) {
                continue;
            }
            let (ir, ty) = b
                .tr(&tree)
                .map_err(|why| format!("defines.{name}: {why}"))?;
            let compiled = match (candidate.var(name), ty) {
                (Some(Value::Int(i)), Ty::Int) => *i,
                (Some(Value::Bool(v)), Ty::Bool) => i64::from(*v),
                (other, _) => {
                    return Err(format!(
                        "defines.{name} depends on the shape and is {other:?} here"
                    ))
                }
            };
            let k = b.locals.len();
            b.locals.push((name.clone(), ir));
            b.local_types.push(ty);
            if compare(name) {
                checks.push(bin(Bin::Eq, Ir::Local(k), Ir::Int(compiled)));
            }
        }
        let given = |n: &String| candidate.config.values().any(|(p, _)| p == n);
        for c in &op.spec.constraints {
            if c.lifted_by.iter().any(given) {
                continue;
            }
            if let Some(ir) = b.condition(&c.expr)? {
                checks.push(ir);
            }
        }
        let spec = &op.spec.launch;
        let mut launch = b.launch(&spec.block, &spec.grid, limits, &mut checks)?;
        launch.push(match &spec.shared {
            None => Ir::Int(0),
            Some(shared) => match b.int(shared)? {
                Some(s) => {
                    checks.push(bin(Bin::Ge, s.clone(), Ir::Int(0)));
                    checks.push(bin(Bin::Le, s.clone(), Ir::Int(limits.max_shared_optin)));
                    s
                }
                None => b.constant(shared)?,
            },
        });
        let mut before = None;
        for p in &op.spec.prologue {
            let applies = candidate.prologue.iter().any(|(k, _)| *k == p.kernel);
            if let Some(when) = &p.when {
                if let Some(ir) = b.condition(when)? {
                    checks.push(bin(Bin::Eq, ir, Ir::Int(i64::from(applies))));
                }
            }
            if applies {
                before = Some(b.launch(&p.block, &p.grid, limits, &mut checks)?);
            }
        }
        Ok(Rule {
            locals: b.locals,
            checks,
            launch,
            before,
        })
    }

    /// True when the configuration is the same valid kernel at `dims` (one per dimension of
    /// the op; the caller checks their count and range).
    pub fn admits(&self, dims: &[u64]) -> bool {
        let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let mut ok = true;
        let mut locals = Vec::with_capacity(self.locals.len());
        for (_, ir) in &self.locals {
            let v = ir.eval(&dims, &locals, &mut ok);
            locals.push(v);
        }
        // Every check is evaluated, as the space evaluates every expression.
        let mut all = true;
        for c in &self.checks {
            all &= c.eval(&dims, &locals, &mut ok) != 0;
        }
        ok && all
    }

    /// True when the rule holds at every shape (nothing of it depends on the shape).
    pub fn is_always(&self) -> bool {
        self.checks.is_empty()
    }

    /// The launch at `dims` (which the rule admits): block, grid and dynamic shared memory,
    /// and the first kernel's launch where one runs.
    pub fn launch_at(&self, dims: &[u64]) -> (LaunchDims, Option<LaunchDims>) {
        let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let mut ok = true;
        let mut locals = Vec::with_capacity(self.locals.len());
        for (_, ir) in &self.locals {
            let v = ir.eval(&dims, &locals, &mut ok);
            locals.push(v);
        }
        let at = |irs: &[Ir]| -> Vec<u32> {
            irs.iter()
                .map(|ir| ir.eval(&dims, &locals, &mut true) as u32)
                .collect()
        };
        let dims_of = |v: &[u32]| LaunchDims {
            block: (v[0], v[1], v[2]),
            grid: (v[3], v[4], v[5]),
            shared: v.get(6).copied().unwrap_or(0),
        };
        (
            dims_of(&at(&self.launch)),
            self.before.as_ref().map(|b| dims_of(&at(b))),
        )
    }

    /// A C function `static void <name>(const long long* d, unsigned int* l)` that writes
    /// [`Rule::launch_at`] to `l[0..13)`: block x, y, z, grid x, y, z, shared bytes, then the
    /// first kernel's block and grid (zeros where none runs).
    pub fn c_launch_function(&self, name: &str) -> String {
        let mut s = format!(
            "static void {name}(const long long* d, unsigned int* l)\n{{\n    int ok = 1;\n"
        );
        for (k, (define, ir)) in self.locals.iter().enumerate() {
            let _ = writeln!(
                s,
                "    const long long ca_l{k} = {}; /* {define} */",
                ir.c()
            );
        }
        for k in 0..self.locals.len() {
            let _ = writeln!(s, "    (void)ca_l{k};");
        }
        let zeros = vec![Ir::Int(0); 6];
        let all = self
            .launch
            .iter()
            .chain(self.before.as_ref().unwrap_or(&zeros));
        for (i, ir) in all.enumerate() {
            let _ = writeln!(s, "    l[{i}] = (unsigned int){};", ir.c());
        }
        s.push_str("    (void)d;\n    (void)ok;\n}\n");
        s
    }

    /// A C function `static int <name>(const long long* d)` that returns [`Rule::admits`]
    /// at `d[0..ndims)`, with the helpers of [`C_HELPERS`]. Its locals are `ca_l<k>`, not the
    /// defines' names, which a user's code may have as macros.
    pub fn c_function(&self, name: &str, dim_names: &[String]) -> String {
        let mut s = format!("static int {name}(const long long* d)\n{{\n    int ok = 1;\n");
        if self.checks.is_empty() {
            s.push_str("    (void)d;\n    (void)ok;\n    return 1;\n}\n");
            return s;
        }
        let _ = writeln!(
            s,
            "    /* d[]: {} */",
            dim_names
                .iter()
                .enumerate()
                .map(|(i, n)| format!("d[{i}] = {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for (k, (define, ir)) in self.locals.iter().enumerate() {
            let _ = writeln!(
                s,
                "    const long long ca_l{k} = {}; /* {define} */",
                ir.c()
            );
        }
        // A safe default's rule need not compare every define it computes.
        for k in 0..self.locals.len() {
            let _ = writeln!(s, "    (void)ca_l{k};");
        }
        for (i, c) in self.checks.iter().enumerate() {
            let _ = writeln!(s, "    const int ca_c{i} = {};", c.c());
        }
        let all: Vec<String> = (0..self.checks.len()).map(|i| format!("ca_c{i}")).collect();
        let _ = write!(s, "    return ok && {};\n}}\n", all.join(" && "));
        s
    }
}

/// The C helpers every [`Rule::c_function`] calls: 64-bit arithmetic that clears `*ok` where
/// the expression crate fails (overflow, a division by zero, `ceil_div` by a divisor under
/// 1), and `&&`, `||` and `if` as functions so that every operand is evaluated. Needs
/// `<limits.h>`.
pub const C_HELPERS: &str = r#"static inline long long ca_add(long long a, long long b, int* ok)
{
    if ((b > 0 && a > LLONG_MAX - b) || (b < 0 && a < LLONG_MIN - b)) { *ok = 0; return 0; }
    return a + b;
}
static inline long long ca_sub(long long a, long long b, int* ok)
{
    if ((b < 0 && a > LLONG_MAX + b) || (b > 0 && a < LLONG_MIN + b)) { *ok = 0; return 0; }
    return a - b;
}
static inline long long ca_mul(long long a, long long b, int* ok)
{
    if (a > 0 ? (b > 0 ? a > LLONG_MAX / b : b < LLONG_MIN / a)
              : (b > 0 ? a < LLONG_MIN / b : (a != 0 && b < LLONG_MAX / a))) {
        *ok = 0;
        return 0;
    }
    return a * b;
}
static inline long long ca_div(long long a, long long b, int* ok)
{
    if (b == 0 || (a == LLONG_MIN && b == -1)) { *ok = 0; return 0; }
    return a / b;
}
static inline long long ca_mod(long long a, long long b, int* ok)
{
    if (b == 0 || (a == LLONG_MIN && b == -1)) { *ok = 0; return 0; }
    return a % b;
}
static inline long long ca_ceil_div(long long a, long long b, int* ok)
{
    long long q, r;
    if (b <= 0) { *ok = 0; return 0; }
    q = a / b;
    r = a % b;
    if (r < 0) { q -= 1; r += b; }
    return q + (r != 0);
}
static inline long long ca_min(long long a, long long b) { return a < b ? a : b; }
static inline long long ca_max(long long a, long long b) { return a > b ? a : b; }
static inline long long ca_and(long long a, long long b) { return a && b; }
static inline long long ca_or(long long a, long long b) { return a || b; }
static inline long long ca_if(long long c, long long a, long long b) { return c ? a : b; }
"#;

fn bin(op: Bin, a: Ir, b: Ir) -> Ir {
    Ir::Bin(op, Box::new(a), Box::new(b))
}

struct Builder {
    /// The configuration's variables at its tuned shape: what the folded parts evaluate over.
    vars: Vars,
    dims: Vec<String>,
    locals: Vec<(String, Ir)>,
    local_types: Vec<Ty>,
}

impl Builder {
    /// Whether `node` reads a dimension or a define that depends on one.
    fn depends(&self, node: &Node) -> bool {
        let shaped =
            |n: &str| self.dims.iter().any(|d| d == n) || self.locals.iter().any(|(l, _)| l == n);
        // The tree's walk leaves out the node it starts from.
        let own = match node.operator() {
            Operator::VariableIdentifierRead { identifier } => shaped(identifier),
            _ => false,
        };
        own || node.iter_variable_identifiers().any(shaped)
    }

    /// The boolean expression `expr`, or `None` where it does not depend on the shape (it
    /// holds, as at the tuned shape).
    fn condition(&self, expr: &str) -> std::result::Result<Option<Ir>, String> {
        let tree = parse_tree(expr)?;
        if !self.depends(&tree) {
            return Ok(None);
        }
        match self.tr(&tree).map_err(|why| format!("'{expr}': {why}"))? {
            (ir, Ty::Bool) => Ok(Some(ir)),
            _ => Err(format!("'{expr}' is not a condition")),
        }
    }

    /// The integer expression `expr`, or `None` where it does not depend on the shape.
    fn int(&self, expr: &str) -> std::result::Result<Option<Ir>, String> {
        let tree = parse_tree(expr)?;
        if !self.depends(&tree) {
            return Ok(None);
        }
        match self.tr(&tree).map_err(|why| format!("'{expr}': {why}"))? {
            (ir, Ty::Int) => Ok(Some(ir)),
            _ => Err(format!("'{expr}' is not an integer")),
        }
    }

    /// The integer expression `expr`, which does not depend on the shape, as a constant.
    fn constant(&self, expr: &str) -> std::result::Result<Ir, String> {
        match eval_node(&parse_tree(expr)?, &self.vars)? {
            Value::Int(v) => Ok(Ir::Int(v)),
            other => Err(format!("'{expr}' is {other}, not an integer")),
        }
    }

    /// One launch's block x, y, z and grid x, y, z, with the checks (block and grid within
    /// the hardware's limits, the threads of a block within the device's) of what of it
    /// depends on the shape.
    fn launch(
        &self,
        block: &[String; 3],
        grid: &[String; 3],
        limits: &DeviceLimits,
        checks: &mut Vec<Ir>,
    ) -> std::result::Result<Vec<Ir>, String> {
        let mut sizes = Vec::new();
        let mut any_block = false;
        for (i, expr) in block.iter().chain(grid.iter()).enumerate() {
            let ir = match self.int(expr)? {
                Some(ir) => {
                    checks.push(bin(Bin::Ge, ir.clone(), Ir::Int(1)));
                    checks.push(bin(Bin::Le, ir.clone(), Ir::Int(LAUNCH_MAX[i])));
                    any_block |= i < 3;
                    ir
                }
                None => self.constant(expr)?,
            };
            sizes.push(ir);
        }
        if any_block {
            let threads = bin(
                Bin::Mul,
                bin(Bin::Mul, sizes[0].clone(), sizes[1].clone()),
                sizes[2].clone(),
            );
            checks.push(bin(Bin::Le, threads, Ir::Int(limits.max_threads_per_block)));
        }
        Ok(sizes)
    }

    /// `node` as an expression of the shape, with its type.
    fn tr(&self, node: &Node) -> std::result::Result<(Ir, Ty), String> {
        if !self.depends(node) {
            return match eval_node(node, &self.vars)? {
                Value::Int(i) => Ok((Ir::Int(i), Ty::Int)),
                Value::Bool(v) => Ok((Ir::Int(i64::from(v)), Ty::Bool)),
                Value::Str(s) => Err(format!("the string \"{s}\" in an expression of the shape")),
            };
        }
        let kids = node.children();
        let two = |want: Ty| -> std::result::Result<(Ir, Ir), String> {
            match kids {
                [a, b] => {
                    let (a, ta) = self.tr(a)?;
                    let (b, tb) = self.tr(b)?;
                    if ta == want && tb == want {
                        Ok((a, b))
                    } else {
                        Err(format!("{:?} of a {ta:?} and a {tb:?}", node.operator()))
                    }
                }
                _ => Err(format!(
                    "{:?} with {} operands",
                    node.operator(),
                    kids.len()
                )),
            }
        };
        let arith = |op: Bin| -> std::result::Result<(Ir, Ty), String> {
            let (a, b) = two(Ty::Int)?;
            Ok((bin(op, a, b), Ty::Int))
        };
        let compare = |op: Bin| -> std::result::Result<(Ir, Ty), String> {
            let (a, b) = two(Ty::Int)?;
            Ok((bin(op, a, b), Ty::Bool))
        };
        let logic = |op: Bin| -> std::result::Result<(Ir, Ty), String> {
            let (a, b) = two(Ty::Bool)?;
            Ok((bin(op, a, b), Ty::Bool))
        };
        match node.operator() {
            Operator::RootNode if kids.len() == 1 => self.tr(&kids[0]),
            Operator::Add => arith(Bin::Add),
            Operator::Sub => arith(Bin::Sub),
            Operator::Mul => arith(Bin::Mul),
            Operator::Div => arith(Bin::Div),
            Operator::Mod => arith(Bin::Mod),
            Operator::Neg if kids.len() == 1 => match self.tr(&kids[0])? {
                (a, Ty::Int) => Ok((bin(Bin::Sub, Ir::Int(0), a), Ty::Int)),
                _ => Err("the negation of a boolean".into()),
            },
            Operator::Eq | Operator::Neq if kids.len() == 2 => {
                let (a, ta) = self.tr(&kids[0])?;
                let (b, tb) = self.tr(&kids[1])?;
                if ta != tb {
                    return Err(format!("comparing a {ta:?} with a {tb:?}"));
                }
                let op = if matches!(node.operator(), Operator::Eq) {
                    Bin::Eq
                } else {
                    Bin::Ne
                };
                Ok((bin(op, a, b), Ty::Bool))
            }
            Operator::Lt => compare(Bin::Lt),
            Operator::Leq => compare(Bin::Le),
            Operator::Gt => compare(Bin::Gt),
            Operator::Geq => compare(Bin::Ge),
            Operator::And => logic(Bin::And),
            Operator::Or => logic(Bin::Or),
            Operator::Not if kids.len() == 1 => match self.tr(&kids[0])? {
                (a, Ty::Bool) => Ok((Ir::Not(Box::new(a)), Ty::Bool)),
                _ => Err("the negation of an integer".into()),
            },
            Operator::VariableIdentifierRead { identifier } => {
                if let Some(i) = self.dims.iter().position(|d| d == identifier) {
                    return Ok((Ir::Dim(i), Ty::Int));
                }
                match self.locals.iter().position(|(l, _)| l == identifier) {
                    Some(k) => Ok((Ir::Local(k), self.local_types[k])),
                    None => Err(format!("{identifier} is not known here")),
                }
            }
            Operator::FunctionIdentifier { identifier } if kids.len() == 1 => {
                self.call(identifier, &kids[0])
            }
            other => Err(format!("the operator {other:?}")),
        }
    }

    /// A call of `name` with the argument node `arg` (a tuple for several arguments).
    fn call(&self, name: &str, arg: &Node) -> std::result::Result<(Ir, Ty), String> {
        let mut at = arg;
        while matches!(at.operator(), Operator::RootNode) && at.children().len() == 1 {
            at = &at.children()[0];
        }
        let args: Vec<(Ir, Ty)> = match at.operator() {
            Operator::Tuple => at
                .children()
                .iter()
                .map(|c| self.tr(c))
                .collect::<std::result::Result<_, _>>()?,
            _ => vec![self.tr(at)?],
        };
        let types: Vec<Ty> = args.iter().map(|(_, t)| *t).collect();
        let mut irs = args.into_iter().map(|(ir, _)| ir);
        match (name, types.as_slice()) {
            ("ceil_div", [Ty::Int, Ty::Int]) => {
                let (a, b) = (irs.next().expect("two"), irs.next().expect("two"));
                Ok((bin(Bin::CeilDiv, a, b), Ty::Int))
            }
            ("min" | "max", t) if t.len() >= 2 && t.iter().all(|&t| t == Ty::Int) => {
                let op = if name == "min" { Bin::Min } else { Bin::Max };
                let first = irs.next().expect("two or more");
                Ok((irs.fold(first, |acc, x| bin(op, acc, x)), Ty::Int))
            }
            ("if", [Ty::Bool, a, b]) if a == b => {
                let (c, x, y) = (
                    irs.next().expect("three"),
                    irs.next().expect("three"),
                    irs.next().expect("three"),
                );
                Ok((Ir::If(Box::new(c), Box::new(x), Box::new(y)), *a))
            }
            _ => Err(format!("the call {name} of {types:?}")),
        }
    }
}

impl Ir {
    /// The value at `dims`, the shape-dependent defines before it in `locals`; clears `ok`
    /// where the expression crate would fail.
    fn eval(&self, dims: &[i64], locals: &[i64], ok: &mut bool) -> i64 {
        let fail = |ok: &mut bool| {
            *ok = false;
            0
        };
        match self {
            Ir::Int(v) => *v,
            Ir::Dim(i) => dims[*i],
            Ir::Local(k) => locals[*k],
            Ir::Not(a) => i64::from(a.eval(dims, locals, ok) == 0),
            Ir::If(c, a, b) => {
                let (c, a, b) = (
                    c.eval(dims, locals, ok),
                    a.eval(dims, locals, ok),
                    b.eval(dims, locals, ok),
                );
                if c != 0 {
                    a
                } else {
                    b
                }
            }
            Ir::Bin(op, a, b) => {
                let (a, b) = (a.eval(dims, locals, ok), b.eval(dims, locals, ok));
                let checked = |v: Option<i64>, ok: &mut bool| v.unwrap_or_else(|| fail(ok));
                match op {
                    Bin::Add => checked(a.checked_add(b), ok),
                    Bin::Sub => checked(a.checked_sub(b), ok),
                    Bin::Mul => checked(a.checked_mul(b), ok),
                    Bin::Div => checked(a.checked_div(b), ok),
                    Bin::Mod => checked(a.checked_rem(b), ok),
                    Bin::CeilDiv if b <= 0 => fail(ok),
                    Bin::CeilDiv => a.div_euclid(b) + i64::from(a.rem_euclid(b) != 0),
                    Bin::Min => a.min(b),
                    Bin::Max => a.max(b),
                    Bin::Eq => i64::from(a == b),
                    Bin::Ne => i64::from(a != b),
                    Bin::Lt => i64::from(a < b),
                    Bin::Le => i64::from(a <= b),
                    Bin::Gt => i64::from(a > b),
                    Bin::Ge => i64::from(a >= b),
                    Bin::And => i64::from(a != 0 && b != 0),
                    Bin::Or => i64::from(a != 0 || b != 0),
                }
            }
        }
    }

    /// The C expression of [`Ir::eval`] (inside a [`Rule::c_function`]).
    fn c(&self) -> String {
        match self {
            Ir::Int(i64::MIN) => "(-9223372036854775807LL - 1)".into(),
            Ir::Int(v) => format!("{v}LL"),
            Ir::Dim(i) => format!("d[{i}]"),
            Ir::Local(k) => format!("ca_l{k}"),
            Ir::Not(a) => format!("(!{})", a.c()),
            Ir::If(c, a, b) => format!("ca_if({}, {}, {})", c.c(), a.c(), b.c()),
            Ir::Bin(op, a, b) => {
                let (a, b) = (a.c(), b.c());
                let call = |f: &str| format!("ca_{f}({a}, {b}, &ok)");
                let pure = |f: &str| format!("ca_{f}({a}, {b})");
                let infix = |o: &str| format!("({a} {o} {b})");
                match op {
                    Bin::Add => call("add"),
                    Bin::Sub => call("sub"),
                    Bin::Mul => call("mul"),
                    Bin::Div => call("div"),
                    Bin::Mod => call("mod"),
                    Bin::CeilDiv => call("ceil_div"),
                    Bin::Min => pure("min"),
                    Bin::Max => pure("max"),
                    Bin::And => pure("and"),
                    Bin::Or => pure("or"),
                    Bin::Eq => infix("=="),
                    Bin::Ne => infix("!="),
                    Bin::Lt => infix("<"),
                    Bin::Le => infix("<="),
                    Bin::Gt => infix(">"),
                    Bin::Ge => infix(">="),
                }
            }
        }
    }
}
