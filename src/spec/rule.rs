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
use crate::model::shape::{Shape, MAX_DIM};
use crate::spec::expr::{eval_node, parse_tree, Value, Vars};
use crate::spec::ops::Op;
use crate::spec::space::{base_vars, prologues_applying, Candidate, LAUNCH_MAX};
use evalexpr::{Node, Operator};
use std::fmt::Write;

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
    /// An expression that cannot fail for dimensions of 1 to [`MAX_DIM`]: C evaluates it
    /// with its plain operators.
    Safe(Box<Ir>),
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
        // Those that ran at the tuned shape (by index: two may share a kernel).
        let applying = prologues_applying(op, &b.vars);
        for (i, p) in op.spec.prologue.iter().enumerate() {
            let applies = applying.contains(&i);
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
        }
        .simplified())
    }

    /// True when the configuration is the same valid kernel at `dims` (one per dimension of
    /// the op; the caller checks their count and range).
    pub fn admits(&self, dims: &[u64]) -> bool {
        let (dims, locals, mut ok) = self.at(dims);
        // Every check is evaluated, as the space evaluates every expression.
        let mut all = true;
        for c in &self.checks {
            all &= c.eval(&dims, &locals, &mut ok) != 0;
        }
        ok && all
    }

    /// The dimensions as the expressions see them, the shape-dependent defines at them, and
    /// whether evaluating those went without a failure.
    fn at(&self, dims: &[u64]) -> (Vec<i64>, Vec<i64>, bool) {
        let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let mut ok = true;
        let mut locals = Vec::with_capacity(self.locals.len());
        for (_, ir) in &self.locals {
            let v = ir.eval(&dims, &locals, &mut ok);
            locals.push(v);
        }
        (dims, locals, ok)
    }

    /// True when the rule holds at every shape (nothing of it depends on the shape).
    pub fn is_always(&self) -> bool {
        self.checks.is_empty() && !self.live(&[], true).contains(&true)
    }

    /// The launch at `dims` (which the rule admits): block, grid and dynamic shared memory,
    /// and the first kernel's launch where one runs.
    pub fn launch_at(&self, dims: &[u64]) -> (LaunchDims, Option<LaunchDims>) {
        let (dims, locals, _) = self.at(dims);
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
        let zeros = vec![Ir::Int(0); 6];
        let all: Vec<Ir> = self
            .launch
            .iter()
            .chain(self.before.as_ref().unwrap_or(&zeros))
            .cloned()
            .collect();
        self.c_locals(&mut s, &self.live(&all, false), &all);
        for (i, ir) in all.iter().enumerate() {
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
        let live = self.live(&self.checks, true);
        if self.checks.is_empty() && !live.contains(&true) {
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
        self.c_locals(&mut s, &live, &self.checks);
        for (i, c) in self.checks.iter().enumerate() {
            let _ = writeln!(s, "    const int ca_c{i} = {};", c.c());
        }
        let all: Vec<String> = std::iter::once("ok".to_string())
            .chain((0..self.checks.len()).map(|i| format!("ca_c{i}")))
            .collect();
        let _ = write!(s, "    (void)d;\n    return {};\n}}\n", all.join(" && "));
        s
    }

    /// Which locals the C function of `exprs` computes: those they read, the locals those
    /// read, and (`failing`) every local whose evaluation may fail.
    fn live(&self, exprs: &[Ir], failing: bool) -> Vec<bool> {
        let mut live = vec![false; self.locals.len()];
        for e in exprs {
            e.mark_reads(&mut live);
        }
        for k in (0..self.locals.len()).rev() {
            let ir = &self.locals[k].1;
            let fails = !matches!(ir, Ir::Int(_) | Ir::Dim(_) | Ir::Local(_) | Ir::Safe(_));
            if live[k] || (failing && fails) {
                live[k] = true;
                ir.mark_reads(&mut live);
            }
        }
        live
    }

    /// The `const long long ca_l<k>` lines of the locals `live` names, for `exprs`.
    fn c_locals(&self, s: &mut String, live: &[bool], exprs: &[Ir]) {
        let mut read = vec![false; self.locals.len()];
        for e in exprs {
            e.mark_reads(&mut read);
        }
        for (k, (_, ir)) in self.locals.iter().enumerate() {
            if live[k] {
                ir.mark_reads(&mut read);
            }
        }
        for (k, (define, ir)) in self.locals.iter().enumerate() {
            if live[k] {
                // The define's name, unable to end the comment.
                let name = define.replace("*/", "* /").replace(['\n', '\r'], " ");
                let _ = writeln!(s, "    const long long ca_l{k} = {}; /* {name} */", ir.c());
                if !read[k] {
                    // Computed only for what its evaluation may rule out.
                    let _ = writeln!(s, "    (void)ca_l{k};");
                }
            }
        }
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
static inline long long ca_cdiv(long long a, long long b)
{
    long long q = a / b, r = a % b;
    if (r < 0) { q -= 1; r += b; }
    return q + (r != 0);
}
static inline long long ca_ceil_div(long long a, long long b, int* ok)
{
    if (b <= 0) { *ok = 0; return 0; }
    return ca_cdiv(a, b);
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
        self.of_type(expr, Ty::Bool)
    }

    /// The integer expression `expr`, or `None` where it does not depend on the shape.
    fn int(&self, expr: &str) -> std::result::Result<Option<Ir>, String> {
        self.of_type(expr, Ty::Int)
    }

    /// The expression `expr` of type `want`, or `None` where it does not depend on the shape.
    fn of_type(&self, expr: &str, want: Ty) -> std::result::Result<Option<Ir>, String> {
        let tree = parse_tree(expr)?;
        if !self.depends(&tree) {
            return Ok(None);
        }
        match self.tr(&tree).map_err(|why| format!("'{expr}': {why}"))? {
            (ir, ty) if ty == want => Ok(Some(ir)),
            (_, ty) => Err(format!("'{expr}' is a {ty:?}, expected a {want:?}")),
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
            Ir::Safe(a) => a.eval(dims, locals, ok),
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

    /// Marks in `live` the locals this expression reads.
    fn mark_reads(&self, live: &mut [bool]) {
        match self {
            Ir::Int(_) | Ir::Dim(_) => {}
            Ir::Local(k) => live[*k] = true,
            Ir::Safe(a) | Ir::Not(a) => a.mark_reads(live),
            Ir::If(c, a, b) => {
                c.mark_reads(live);
                a.mark_reads(live);
                b.mark_reads(live);
            }
            Ir::Bin(_, a, b) => {
                a.mark_reads(live);
                b.mark_reads(live);
            }
        }
    }

    /// The C expression of [`Ir::eval`] (inside a [`Rule::c_function`]).
    fn c(&self) -> String {
        self.c_text(false)
    }

    /// The C text; `plain` inside an [`Ir::Safe`] part, where nothing can fail: C's own
    /// operators, which need not evaluate every operand.
    fn c_text(&self, plain: bool) -> String {
        match self {
            Ir::Int(i64::MIN) => "(-9223372036854775807LL - 1)".into(),
            Ir::Int(v) => format!("{v}LL"),
            Ir::Dim(i) => format!("d[{i}]"),
            Ir::Local(k) => format!("ca_l{k}"),
            Ir::Safe(a) => a.c_text(true),
            Ir::Not(a) => format!("(!{})", a.c_text(plain)),
            Ir::If(c, a, b) => {
                let (c, a, b) = (c.c_text(plain), a.c_text(plain), b.c_text(plain));
                if plain {
                    format!("({c} ? {a} : {b})")
                } else {
                    format!("ca_if({c}, {a}, {b})")
                }
            }
            Ir::Bin(op, a, b) => {
                let (a, b) = (a.c_text(plain), b.c_text(plain));
                let infix = |o: &str| format!("({a} {o} {b})");
                let pure = |f: &str| format!("ca_{f}({a}, {b})");
                // Checked arithmetic outside a safe part, C's operator inside.
                let arith = |f: &str, o: &str| {
                    if plain {
                        infix(o)
                    } else {
                        format!("ca_{f}({a}, {b}, &ok)")
                    }
                };
                match op {
                    Bin::Add => arith("add", "+"),
                    Bin::Sub => arith("sub", "-"),
                    Bin::Mul => arith("mul", "*"),
                    Bin::Div => arith("div", "/"),
                    Bin::Mod => arith("mod", "%"),
                    Bin::CeilDiv if plain => pure("cdiv"),
                    Bin::CeilDiv => format!("ca_ceil_div({a}, {b}, &ok)"),
                    Bin::Min => pure("min"),
                    Bin::Max => pure("max"),
                    Bin::And if plain => infix("&&"),
                    Bin::Or if plain => infix("||"),
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

/// What is known of an expression's value where every dimension is 1 to [`MAX_DIM`] (the
/// header checks that first): its bounds, and whether evaluating it may fail.
#[derive(Debug, Clone, Copy)]
struct Known {
    lo: i128,
    hi: i128,
    fails: bool,
}

impl Known {
    fn exactly(v: i64) -> Known {
        Known {
            lo: v.into(),
            hi: v.into(),
            fails: false,
        }
    }

    fn boolean(fails: bool) -> Known {
        Known {
            lo: 0,
            hi: 1,
            fails,
        }
    }
}

impl Rule {
    /// The same rule with what the bounds of the dimensions decide folded away: constant
    /// parts computed, `if`, `&&` and `||` whose outcome is known taken (where what they
    /// leave out cannot fail), comparisons the bounds decide (a grid of `ceil_div(N, 32)`
    /// blocks is at least 1) dropped, and every part that cannot fail marked [`Ir::Safe`].
    /// It admits the same shapes of 1 to [`MAX_DIM`] per dimension; the header's C is then
    /// short and plain.
    fn simplified(self) -> Rule {
        let mut known: Vec<Known> = Vec::new();
        let mut locals = Vec::new();
        for (name, ir) in self.locals {
            let (ir, k) = simplify(ir, &known);
            known.push(k);
            locals.push((name, ir));
        }
        let checks = self
            .checks
            .into_iter()
            .map(|c| simplify(c, &known).0)
            .filter(|c| *c != Ir::Int(1))
            .collect();
        let launch = self
            .launch
            .into_iter()
            .map(|l| simplify(l, &known).0)
            .collect();
        let before = self
            .before
            .map(|b| b.into_iter().map(|l| simplify(l, &known).0).collect());
        Rule {
            locals,
            checks,
            launch,
            before,
        }
    }
}

/// `ir` simplified (see [`Rule::simplified`]), with what is known of it; `locals`: what is
/// known of the shape-dependent defines before it.
fn simplify(ir: Ir, locals: &[Known]) -> (Ir, Known) {
    let safe = |ir: Ir, k: Known| -> (Ir, Known) {
        let ir = match ir {
            Ir::Int(_) | Ir::Dim(_) | Ir::Local(_) | Ir::Safe(_) => ir,
            _ if !k.fails => Ir::Safe(Box::new(strip(ir))),
            _ => ir,
        };
        (ir, k)
    };
    match ir {
        Ir::Int(v) => (ir, Known::exactly(v)),
        Ir::Dim(_) => (
            ir,
            Known {
                lo: 1,
                hi: MAX_DIM.into(),
                fails: false,
            },
        ),
        // A define of one value at every shape is that value.
        Ir::Local(k) if locals[k].lo == locals[k].hi => {
            let v = locals[k].lo as i64;
            (Ir::Int(v), Known::exactly(v))
        }
        Ir::Local(k) => (
            ir,
            Known {
                fails: false,
                ..locals[k]
            },
        ),
        Ir::Safe(a) => simplify(*a, locals),
        Ir::Not(a) => {
            let (a, ka) = simplify(*a, locals);
            match a {
                Ir::Int(v) => (
                    Ir::Int(i64::from(v == 0)),
                    Known::exactly(i64::from(v == 0)),
                ),
                a => safe(Ir::Not(Box::new(a)), Known::boolean(ka.fails)),
            }
        }
        Ir::If(c, a, b) => {
            let (c, kc) = simplify(*c, locals);
            let (a, ka) = simplify(*a, locals);
            let (b, kb) = simplify(*b, locals);
            if let Ir::Int(v) = c {
                if v != 0 && !kb.fails {
                    return (a, ka);
                }
                if v == 0 && !ka.fails {
                    return (b, kb);
                }
            }
            if a == b && !kc.fails {
                return (a, ka);
            }
            let k = Known {
                lo: ka.lo.min(kb.lo),
                hi: ka.hi.max(kb.hi),
                fails: kc.fails || ka.fails || kb.fails,
            };
            safe(Ir::If(Box::new(c), Box::new(a), Box::new(b)), k)
        }
        Ir::Bin(op, a, b) => {
            let (a, ka) = simplify(*a, locals);
            let (b, kb) = simplify(*b, locals);
            // A known operand of && and || decides it, or leaves the other (0 or 1).
            let decided = match (op, &a, &b) {
                (Bin::And, Ir::Int(0), _) if !kb.fails => Some((Ir::Int(0), Known::exactly(0))),
                (Bin::And, _, Ir::Int(0)) if !ka.fails => Some((Ir::Int(0), Known::exactly(0))),
                (Bin::Or, Ir::Int(1), _) if !kb.fails => Some((Ir::Int(1), Known::exactly(1))),
                (Bin::Or, _, Ir::Int(1)) if !ka.fails => Some((Ir::Int(1), Known::exactly(1))),
                (Bin::And, Ir::Int(1), _) | (Bin::Or, Ir::Int(0), _) => Some((b.clone(), kb)),
                (Bin::And, _, Ir::Int(1)) | (Bin::Or, _, Ir::Int(0)) => Some((a.clone(), ka)),
                // x + 0, x - 0, x * 1, x / 1 and ceil_div(x, 1) are x.
                (Bin::Add | Bin::Sub, _, Ir::Int(0))
                | (Bin::Mul | Bin::Div | Bin::CeilDiv, _, Ir::Int(1)) => Some((a.clone(), ka)),
                (Bin::Add, Ir::Int(0), _) | (Bin::Mul, Ir::Int(1), _) => Some((b.clone(), kb)),
                // min and max that the bounds decide.
                (Bin::Min, _, _) if ka.hi <= kb.lo && !kb.fails => Some((a.clone(), ka)),
                (Bin::Min, _, _) if kb.hi <= ka.lo && !ka.fails => Some((b.clone(), kb)),
                (Bin::Max, _, _) if ka.lo >= kb.hi && !kb.fails => Some((a.clone(), ka)),
                (Bin::Max, _, _) if kb.lo >= ka.hi && !ka.fails => Some((b.clone(), kb)),
                _ => None,
            };
            if let Some(done) = decided {
                return done;
            }
            if let (Ir::Int(_), Ir::Int(_)) = (&a, &b) {
                let mut ok = true;
                let v = bin(op, a.clone(), b.clone()).eval(&[], &[], &mut ok);
                if ok {
                    return (Ir::Int(v), Known::exactly(v));
                }
            }
            let (lo, hi, own) = bounds(op, ka, kb);
            let fails = own || ka.fails || kb.fails;
            if !fails && lo == hi {
                let v = lo as i64;
                return (Ir::Int(v), Known::exactly(v));
            }
            safe(bin(op, a, b), Known { lo, hi, fails })
        }
    }
}

/// `ir` without an outer [`Ir::Safe`] (inside another, where it is implied).
fn strip(ir: Ir) -> Ir {
    match ir {
        Ir::Safe(a) => strip(*a),
        Ir::Not(a) => Ir::Not(Box::new(strip(*a))),
        Ir::If(c, a, b) => Ir::If(
            Box::new(strip(*c)),
            Box::new(strip(*a)),
            Box::new(strip(*b)),
        ),
        Ir::Bin(op, a, b) => bin(op, strip(*a), strip(*b)),
        other => other,
    }
}

/// The bounds of `op` of values within `a` and `b`, and whether the operation itself may
/// fail there (leave 64 bits, divide by zero).
fn bounds(op: Bin, a: Known, b: Known) -> (i128, i128, bool) {
    let (min64, max64) = (i128::from(i64::MIN), i128::from(i64::MAX));
    let corners = |f: &dyn Fn(i128, i128) -> i128| -> (i128, i128) {
        let v = [f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)];
        (
            *v.iter().min().expect("four"),
            *v.iter().max().expect("four"),
        )
    };
    let out = |(lo, hi): (i128, i128)| (lo, hi, lo < min64 || hi > max64);
    let zero_divisor = b.lo <= 0 && b.hi >= 0;
    match op {
        // Saturated: bounds past 64 bits only say that the operation may fail.
        Bin::Add => out((a.lo.saturating_add(b.lo), a.hi.saturating_add(b.hi))),
        Bin::Sub => out((a.lo.saturating_sub(b.hi), a.hi.saturating_sub(b.lo))),
        Bin::Mul => out(corners(&|x, y| x.saturating_mul(y))),
        Bin::Div if zero_divisor => (min64, max64, true),
        Bin::Div => out(corners(&|x, y| x.checked_div(y).unwrap_or(i128::MAX))),
        Bin::Mod if zero_divisor => (min64, max64, true),
        Bin::Mod => {
            let m = b.lo.saturating_abs().max(b.hi.saturating_abs()) - 1;
            let overflow = a.lo <= min64 && b.lo <= -1 && b.hi >= -1;
            let (lo, hi) = if a.lo >= 0 {
                (0, a.hi.min(m))
            } else if a.hi <= 0 {
                (a.lo.max(-m), 0)
            } else {
                (-m, m)
            };
            (lo, hi, overflow)
        }
        Bin::CeilDiv if b.lo <= 0 => (min64, max64, true),
        Bin::CeilDiv => {
            let cd = |x: i128, y: i128| x.div_euclid(y) + i128::from(x.rem_euclid(y) != 0);
            out(corners(&cd))
        }
        Bin::Min => (a.lo.min(b.lo), a.hi.min(b.hi), false),
        Bin::Max => (a.lo.max(b.lo), a.hi.max(b.hi), false),
        Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge | Bin::Eq | Bin::Ne => {
            // What the bounds decide: 0 or 1 exactly, else either.
            let (x, y) = (a, b);
            let known = match op {
                Bin::Lt if x.hi < y.lo => Some(1),
                Bin::Lt if x.lo >= y.hi => Some(0),
                Bin::Le if x.hi <= y.lo => Some(1),
                Bin::Le if x.lo > y.hi => Some(0),
                Bin::Gt if x.lo > y.hi => Some(1),
                Bin::Gt if x.hi <= y.lo => Some(0),
                Bin::Ge if x.lo >= y.hi => Some(1),
                Bin::Ge if x.hi < y.lo => Some(0),
                Bin::Eq if x.hi < y.lo || y.hi < x.lo => Some(0),
                Bin::Ne if x.hi < y.lo || y.hi < x.lo => Some(1),
                _ => None,
            };
            match known {
                Some(v) => (v, v, false),
                None => (0, 1, false),
            }
        }
        Bin::And | Bin::Or => (0, 1, false),
    }
}
