//! The search space of an op for one shape on one device: every combination of parameter
//! values, each either runnable (with its defines and launch geometry evaluated) or pruned
//! with the reason. Pruned configurations are counted by reason, so the summary and
//! `--verbose` can say why configurations were never measured, and kept as candidates only
//! when asked for (`--pruned-rows` gives each a CSV row with its reason).

use crate::error::{Error, Result};
use crate::model::limits::{DeviceLimits, LaunchDims};
use crate::model::shape::Shape;
use crate::spec::expr::{Lazy, Site, Value, Vars};
use crate::spec::ops::{Op, ParamSpec};
use std::collections::HashMap;

/// The parameters of one space and the values each takes, shared by its configurations.
#[derive(Debug)]
pub struct Axes {
    pub names: Vec<String>,
    pub values: Vec<Vec<Value>>,
    /// Each value as text, rendered once: every shown configuration's record spells out its
    /// values, and a sgemm run shows tens of thousands.
    texts: Vec<Vec<String>>,
}

impl Axes {
    /// The op's parameters with their default sweep (finishing values included), or the last
    /// `--param` override's values.
    fn of(op: &Op, overrides: &[ParamOverride]) -> Result<Axes> {
        let mut axes = Axes {
            names: Vec::new(),
            values: Vec::new(),
            texts: Vec::new(),
        };
        for p in &op.spec.params {
            let values = overrides
                .iter()
                .rev()
                .find(|o| o.name == p.name)
                .map(|o| o.values.clone())
                .unwrap_or_else(|| p.sweep_values());
            if values.len() > usize::from(u16::MAX) {
                return Err(Error::Usage(format!(
                    "{}: {} values; a parameter takes at most {}",
                    p.name,
                    values.len(),
                    u16::MAX
                )));
            }
            axes.names.push(p.name.clone());
            axes.texts
                .push(values.iter().map(Value::to_string).collect());
            axes.values.push(values);
        }
        Ok(axes)
    }

    /// Value `value` of parameter `slot` as text (rendered once, when the axes were made).
    pub fn text(&self, slot: usize, value: usize) -> &str {
        &self.texts[slot][value]
    }

    /// The number of points: the product of the value counts.
    fn points(&self) -> usize {
        self.values.iter().map(Vec::len).product()
    }

    /// Each parameter's name and its value at `digits`.
    fn at<'a>(&'a self, digits: &'a [usize]) -> impl Iterator<Item = (&'a str, &'a Value)> {
        self.names
            .iter()
            .zip(&self.values)
            .zip(digits)
            .map(|((n, vs), &d)| (n.as_str(), &vs[d]))
    }
}

/// One point of the space: an index into each parameter's values. The names and values live
/// once, in the space's [`Axes`]; a sgemm space has some 200,000 points of 20 parameters, and
/// a copy of each name and value per point was most of a run's setup time and memory.
#[derive(Debug, Clone)]
pub struct Config {
    axes: std::sync::Arc<Axes>,
    digits: Box<[u16]>,
}

impl Config {
    /// The point `digits` (one index per parameter of `axes`).
    pub fn new(axes: std::sync::Arc<Axes>, digits: &[usize]) -> Config {
        debug_assert_eq!(digits.len(), axes.names.len());
        Config {
            digits: digits.iter().map(|&d| d as u16).collect(),
            axes,
        }
    }

    /// Parameter values in the spec's parameter order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> + '_ {
        self.axes
            .names
            .iter()
            .zip(&self.axes.values)
            .zip(self.digits.iter())
            .map(|((n, vs), &d)| (n.as_str(), &vs[usize::from(d)]))
    }

    /// Parameter names and values as text, in the spec's parameter order.
    pub fn texts(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.axes
            .names
            .iter()
            .zip(self.digits.iter())
            .enumerate()
            .map(|(k, (n, &d))| (n.as_str(), self.axes.text(k, usize::from(d))))
    }

    /// The point as an index into each parameter's values, in the spec's order: equal for
    /// equal configurations of one space, and cheap to compare or hash.
    pub fn digits(&self) -> &[u16] {
        &self.digits
    }

    /// The names and values of the space this configuration is a point of.
    pub fn axes(&self) -> &Axes {
        &self.axes
    }

    /// The digits, in this configuration's space, of the configuration `params` names
    /// (`NAME`, value as text), in any order: `None` unless it gives every parameter of the
    /// space one of its values, and nothing else.
    pub fn digits_of(&self, params: &[(String, String)]) -> Option<Vec<u16>> {
        let names = &self.axes.names;
        if params.len() != names.len() {
            return None;
        }
        let mut digits = vec![u16::MAX; names.len()];
        for (name, text) in params {
            let k = names.iter().position(|n| n == name)?;
            let value = Value::parse(text);
            let d = self.axes.values[k].iter().position(|v| *v == value)?;
            digits[k] = u16::try_from(d).ok()?;
        }
        digits.iter().all(|&d| d != u16::MAX).then_some(digits)
    }

    /// `TILE_DIM=32 BLOCK_ROWS=8 ...`, the form printed in tables.
    pub fn label(&self) -> String {
        let parts: Vec<String> = self.values().map(|(k, v)| format!("{k}={v}")).collect();
        parts.join(" ")
    }
}

/// A configuration with everything the later stages need, or the reason it was pruned.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub index: usize,
    pub config: Config,
    /// Names of the defines, passed to the template with their values (`defines`); one list
    /// shared by the space's candidates.
    pub define_names: std::sync::Arc<[String]>,
    /// Each define's value at this configuration, in `define_names` order (empty when
    /// pruned). Only these are kept: the shape and limits are the space's, the parameters
    /// are in `config`, and a full set of variables per configuration was most of the
    /// setup's memory.
    pub defines: Box<[Value]>,
    pub launch: Option<LaunchDims>,
    /// The spec's prologue kernels this configuration runs first (those whose `when`
    /// holds), with their launch geometry, in order.
    pub prologue: Vec<(String, LaunchDims)>,
    pub pruned: Option<std::sync::Arc<str>>,
}

impl Candidate {
    /// A define's or a parameter's value at this configuration.
    pub fn var(&self, name: &str) -> Option<&Value> {
        match self.define_names.iter().position(|n| n == name) {
            Some(k) => self.defines.get(k),
            None => self
                .config
                .values()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v),
        }
    }

    /// Every variable an expression sees at this configuration: `base` (the space's shape
    /// and limits, [`base_vars`]), the parameters and the defines.
    pub fn vars(&self, base: &Vars) -> Vars {
        let mut vars = base.clone();
        for (name, value) in self.config.values().chain(self.defines()) {
            vars.set(name, value);
        }
        vars
    }

    /// The spec's `compile_cost` at this configuration: 0 without one, or where it is
    /// undefined (a division by zero); `base` as for [`Candidate::vars`].
    pub fn compile_cost(&self, op: &Op, base: &Vars) -> Result<i64> {
        let Some(expr) = op.spec.compile_cost.as_deref() else {
            return Ok(0);
        };
        let site = Lazy(|| format!("{} compile_cost", op.at("compile_cost")));
        Ok(self.vars(base).eval_int_here(expr, &site)?.unwrap_or(0))
    }

    /// The defines with their values, in spec order.
    pub fn defines(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.define_names
            .iter()
            .map(String::as_str)
            .zip(self.defines.iter())
    }
}

/// Values from `--param NAME=v1,v2,...`, replacing the spec's defaults for NAME.
#[derive(Debug, Clone)]
pub struct ParamOverride {
    pub name: String,
    pub values: Vec<Value>,
}

/// The parameters whose finishing values ([`crate::spec::ops::ParamSpec::finish`]) a run
/// tries on its search's leaders only, with those values: every parameter that has some,
/// unless `--param` sweeps it.
pub fn finishing(op: &Op, overrides: &[ParamOverride]) -> Vec<(String, Vec<Value>)> {
    op.spec
        .params
        .iter()
        .filter(|p| !p.finish.is_empty() && !overrides.iter().any(|o| o.name == p.name))
        .map(|p| (p.name.clone(), p.finish_values()))
        .collect()
}

/// Parses one `--param` argument against the op's parameters.
pub fn parse_override(op: &Op, text: &str) -> Result<ParamOverride> {
    let bad = |why: String| Error::ParamSyntax {
        input: text.to_string(),
        why,
    };
    let (name, list) = text
        .split_once('=')
        .ok_or_else(|| bad("expected NAME=v1,v2,...".into()))?;
    let name = name.trim();
    let spec = find_param(op, name)?;
    let mut values: Vec<Value> = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(bad(format!("empty value in the list for {name}")));
        }
        let value = Value::parse(item);
        spec.check(&value).map_err(bad)?;
        if !values.contains(&value) {
            values.push(value);
        }
    }
    Ok(ParamOverride {
        name: name.to_string(),
        values,
    })
}

fn find_param<'a>(op: &'a Op, name: &str) -> Result<&'a ParamSpec> {
    op.spec
        .params
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| Error::UnknownParam {
            op: op.name().to_string(),
            name: name.to_string(),
            known: op
                .spec
                .params
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Shape dimensions, the element size and device limits: the variables every expression of
/// the op sees.
pub fn base_vars(op: &Op, shape: &Shape, limits: &DeviceLimits) -> Vars {
    let mut vars = Vars::new();
    vars.set_int("ELEM_BYTES", op.dtype.bytes() as i64);
    for (name, dim) in op.spec.dims.iter().zip(&shape.dims) {
        vars.set_int(name, *dim as i64);
    }
    vars.set_int("MAX_THREADS_PER_BLOCK", limits.max_threads_per_block);
    vars.set_int("MAX_SHARED_PER_BLOCK", limits.max_shared_per_block);
    vars.set_int("MAX_SHARED_OPTIN", limits.max_shared_optin);
    vars.set_int("NUM_SMS", limits.num_sms);
    vars.set_int("COMPUTE_CAPABILITY", limits.compute_capability);
    vars
}

/// The indices of `op`'s prologues that run first over `vars` (a configuration's variables
/// at a shape): those without a `when` and those whose `when` holds (by index: two may name
/// one kernel).
pub fn prologues_applying(op: &Op, vars: &Vars) -> Vec<usize> {
    op.spec
        .prologue
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            p.when
                .as_ref()
                .is_none_or(|w| matches!(vars.eval(w, "prologue when"), Ok(Value::Bool(true))))
        })
        .map(|(i, _)| i)
        .collect()
}

/// The hardware's limits of a launch: block x, y, z, then grid x, y, z.
pub const LAUNCH_MAX: [i64; 6] = [1024, 1024, 64, i32::MAX as i64, 65535, 65535];

/// Evaluates a `[x, y, z]` launch triple (and the dynamic shared memory expression, if any)
/// and checks them against the hardware's limits. `Ok(Err(why))`: not a launch of this
/// device, or an expression undefined at these values (a division by zero).
pub fn eval_launch(
    vars: &Vars,
    block: &[String; 3],
    grid: &[String; 3],
    shared: Option<&str>,
    limits: &DeviceLimits,
    context: &(impl Site + ?Sized),
) -> Result<std::result::Result<LaunchDims, String>> {
    let mut dims = [0i64; 6];
    for (i, expr) in block.iter().chain(grid.iter()).enumerate() {
        let axis = [
            "block.x", "block.y", "block.z", "grid.x", "grid.y", "grid.z",
        ][i];
        let site = Lazy(|| format!("{} {axis}", context.text()));
        dims[i] = match vars.eval_int_here(expr, &site)? {
            Ok(v) => v,
            Err(why) => return Ok(Err(format!("{axis} {why}"))),
        };
    }
    let names = [
        "block.x", "block.y", "block.z", "grid.x", "grid.y", "grid.z",
    ];
    let max = LAUNCH_MAX;
    for i in 0..6 {
        if dims[i] < 1 {
            return Ok(Err(format!("{} = {} is below 1", names[i], dims[i])));
        }
        if dims[i] > max[i] {
            return Ok(Err(format!(
                "{} = {} exceeds the hardware limit {}",
                names[i], dims[i], max[i]
            )));
        }
    }
    let threads = dims[0] * dims[1] * dims[2];
    if threads > limits.max_threads_per_block {
        return Ok(Err(format!(
            "{threads} threads per block exceed the device limit {}",
            limits.max_threads_per_block
        )));
    }
    let shared = match shared {
        None => 0,
        Some(expr) => {
            match vars.eval_int_here(expr, &Lazy(|| format!("{} shared", context.text())))? {
                Ok(v) => v,
                Err(why) => return Ok(Err(format!("shared {why}"))),
            }
        }
    };
    if shared < 0 {
        return Ok(Err(format!("shared = {shared} bytes is below 0")));
    }
    if shared > limits.max_shared_optin {
        return Ok(Err(format!(
            "{shared} bytes of dynamic shared memory exceed the device limit {}",
            limits.max_shared_optin
        )));
    }
    let d = dims.map(|v| v as u32);
    Ok(Ok(LaunchDims {
        grid: (d[3], d[4], d[5]),
        block: (d[0], d[1], d[2]),
        shared: shared as u32,
    }))
}

/// Enumerates the whole space, pruned configurations included ([`enumerate_space`]).
pub fn enumerate(
    op: &Op,
    shape: &Shape,
    limits: &DeviceLimits,
    overrides: &[ParamOverride],
) -> Result<Vec<Candidate>> {
    Ok(enumerate_space(op, shape, limits, overrides, true)?.candidates)
}

/// A space enumerated: the configurations kept, in space order, and how many of its points
/// each reason pruned.
pub struct Space {
    /// The valid configurations, and the pruned ones when asked for (`keep_pruned`).
    pub candidates: Vec<Candidate>,
    /// Pruned points per reason, most frequent first (as [`prune_summary`] counts them).
    pub prune_reasons: Vec<(String, usize)>,
    /// Every point of the product.
    pub points: usize,
}

/// Enumerates the space (odometer order over the spec's parameters, first one slowest).
///
/// Every point is judged as if evaluated on its own: valid, or pruned by the first
/// constraint (in spec order) it fails. But each define and constraint is evaluated once per
/// combination of the parameters it reads (directly or through other defines), not once per
/// point: a sgemm space has over a million points and 40 expressions, while its expressions
/// read only a few parameters each. Pruned points are counted by reason and, unless
/// `keep_pruned`, never become candidates (most of a space is pruned; a candidate per point
/// was most of the setup's time and memory); nor are they all visited then: where a point's
/// prune reason, and everything judged before it, reads only the first parameters, the
/// points that share those parameters are counted for the same reason in one step. Pruned
/// candidates carry their parameters only (no variables, no define names): nothing
/// downstream renders or launches them.
pub fn enumerate_space(
    op: &Op,
    shape: &Shape,
    limits: &DeviceLimits,
    overrides: &[ParamOverride],
    keep_pruned: bool,
) -> Result<Space> {
    // A prune kept for speed gives way where `--param` sweeps a parameter it names.
    let lifted =
        |c: &crate::spec::ops::Constraint| overrides.iter().any(|o| c.lifted_by.contains(&o.name));
    let unlifted;
    let op = if op.spec.constraints.iter().any(lifted) {
        let mut o = op.clone();
        o.spec.constraints.retain(|c| !lifted(c));
        unlifted = o;
        &unlifted
    } else {
        op
    };
    let axes = std::sync::Arc::new(Axes::of(op, overrides)?);
    let total = axes.points();
    let base = base_vars(op, shape, limits);
    let mut memo = Memo::new(op, &axes)?;
    memo.fill_defines(op, &base, &axes);
    let define_names: std::sync::Arc<[String]> =
        op.spec.defines.iter().map(|(n, _)| n.clone()).collect();
    let mut out = Vec::new();
    let mut pruned_by = ReasonCounts::default();
    let mut digits = vec![0usize; axes.names.len()];
    // The variables of the valid point at hand (for its launch geometry), overwritten at
    // the next: every valid point sets every parameter and define.
    let mut point = base.clone();
    // Points of the subtree that fixes the slots before `s` (slots `s` onwards free).
    let mut span = vec![1usize; digits.len() + 1];
    for s in (0..digits.len()).rev() {
        span[s] = span[s + 1] * axes.values[s].len();
    }
    let mut next = 0;
    while next < total {
        let index = next;
        next += 1;
        if index > 0 {
            // The odometer: the last parameter turns fastest.
            for slot in (0..digits.len()).rev() {
                digits[slot] += 1;
                if digits[slot] < axes.values[slot].len() {
                    memo.step(slot);
                    break;
                }
                digits[slot] = 0;
            }
        }
        if let Some((reason, from)) = memo.judge(op, &base, &axes, &digits)? {
            if !keep_pruned && from < digits.len() {
                // Every point left in the subtree that fixes slots 0 .. from is pruned for
                // the same reason: count them and go on past the subtree.
                let done: usize = (from..digits.len()).map(|s| digits[s] * span[s + 1]).sum();
                let left = span[from] - done;
                pruned_by.add_n(&reason, left);
                memo.jump_to_last(&axes, &mut digits, from);
                next = index + left;
                continue;
            }
            pruned_by.add(&reason);
            if keep_pruned {
                out.push(Candidate {
                    index,
                    config: Config::new(axes.clone(), &digits),
                    define_names: std::sync::Arc::from([]),
                    defines: Box::new([]),
                    launch: None,
                    prologue: Vec::new(),
                    pruned: Some(reason),
                });
            }
            continue;
        }
        let config = Config::new(axes.clone(), &digits);
        let defines: Box<[Value]> = (0..define_names.len())
            .map(|k| memo.define(k).clone())
            .collect();
        let at = memo.launches.pos;
        if memo.launches.table[at].is_none() {
            for (name, value) in config
                .values()
                .chain(define_names.iter().map(String::as_str).zip(defines.iter()))
            {
                point.set(name, value);
            }
            memo.launches.table[at] = Some(launch_and_prologue(op, limits, &point)?);
        }
        let (launch, prologue, pruned) = memo.launches.table[at].clone().expect("filled above");
        let c = Candidate {
            index,
            config,
            define_names: define_names.clone(),
            defines,
            launch,
            prologue,
            pruned,
        };
        if let Some(reason) = &c.pruned {
            pruned_by.add(reason);
            if !keep_pruned {
                continue;
            }
        }
        out.push(c);
    }
    Ok(Space {
        candidates: out,
        prune_reasons: pruned_by.by_text(),
        points: total,
    })
}

/// Pruned points counted by reason. A reason is a shared text (a constraint's, or one memo
/// entry's), so a point is counted by the text's address, without hashing the text: a sgemm
/// space prunes hundreds of thousands of points per run.
#[derive(Default)]
struct ReasonCounts(HashMap<usize, (std::sync::Arc<str>, usize)>);

impl ReasonCounts {
    fn add(&mut self, reason: &std::sync::Arc<str>) {
        self.add_n(reason, 1);
    }

    fn add_n(&mut self, reason: &std::sync::Arc<str>, n: usize) {
        // The map holds the text, so its address stays its own while it is counted.
        let at = std::sync::Arc::as_ptr(reason).cast::<u8>() as usize;
        self.0.entry(at).or_insert_with(|| (reason.clone(), 0)).1 += n;
    }

    /// The counts by reason text (equal texts from different places added up), most
    /// frequent first.
    fn by_text(self) -> Vec<(String, usize)> {
        let mut counts: HashMap<std::sync::Arc<str>, usize> = HashMap::new();
        for (reason, n) in self.0.into_values() {
            *counts.entry(reason).or_default() += n;
        }
        most_frequent_first(counts.into_iter().map(|(r, n)| (r.to_string(), n)))
    }
}

/// The parameter slots an expression reads (through the defines it names), and what it
/// names itself: parameter slots and define indices (`None`: it does not parse).
type Reads = (Vec<usize>, Option<(Vec<usize>, Vec<usize>)>);

/// One define or constraint with its values so far, one per combination of the parameters it
/// reads (`inputs`, slots of the space's axes; `strides` turn their digits into a table index).
struct Memoized<T> {
    expr: String,
    inputs: Vec<usize>,
    /// What the expression names itself: parameter slots and earlier defines (indices);
    /// `None` when it does not parse (then it sees everything, and its evaluation reports
    /// the error).
    direct: Option<(Vec<usize>, Vec<usize>)>,
    strides: Vec<usize>,
    table: Vec<Option<T>>,
    /// The table index of the odometer's point ([`Memoized::at`] of its digits), kept by
    /// [`Memoized::step`] and [`Memoized::shift`]: the enumeration visits most points of the
    /// space in order, and summing the strides of every input at each one was a large part of
    /// its time.
    pos: usize,
    /// How `pos` moves when the odometer turns slot `s` on and every later slot back to 0.
    turn: Vec<isize>,
    /// How `pos` moves per step of slot `s` alone (0 for the slots it does not read).
    stride_of: Vec<isize>,
}

impl<T> Memoized<T> {
    fn new(expr: &str, (inputs, direct): Reads, axes: &Axes) -> Self {
        let mut strides = Vec::with_capacity(inputs.len());
        let mut size = 1usize;
        for &slot in &inputs {
            strides.push(size);
            size *= axes.values[slot].len();
        }
        let mut stride_of = vec![0isize; axes.values.len()];
        for (&slot, &stride) in inputs.iter().zip(&strides) {
            stride_of[slot] = stride as isize;
        }
        let mut turn = vec![0isize; stride_of.len()];
        let mut back = 0isize;
        for s in (0..turn.len()).rev() {
            turn[s] = stride_of[s] - back;
            back += (axes.values[s].len() as isize - 1) * stride_of[s];
        }
        Memoized {
            expr: expr.to_string(),
            inputs,
            direct,
            strides,
            table: (0..size).map(|_| None).collect(),
            pos: 0,
            turn,
            stride_of,
        }
    }

    /// How many leading slots decide its value: one past the last slot it reads, 0 for none.
    fn decided_by(&self) -> usize {
        self.inputs.iter().max().map_or(0, |&s| s + 1)
    }

    fn at(&self, digits: &[usize]) -> usize {
        self.inputs
            .iter()
            .zip(&self.strides)
            .map(|(&slot, &stride)| digits[slot] * stride)
            .sum()
    }

    /// Follows the odometer's turn of `slot` (later slots back to 0).
    fn step(&mut self, slot: usize) {
        self.pos = self.pos.wrapping_add_signed(self.turn[slot]);
    }

    /// Follows slot `slot` moving `by` values on its own.
    fn shift(&mut self, slot: usize, by: isize) {
        self.pos = self.pos.wrapping_add_signed(self.stride_of[slot] * by);
    }
}

/// An expression's value at a point, or why it is undefined there (a prune reason).
type Point<T> = std::result::Result<T, std::sync::Arc<str>>;

/// What [`launch_and_prologue`] gives a valid point: its launch, its prologue launches, and
/// the reason when these prune it.
type Launches = (
    Option<LaunchDims>,
    Vec<(String, LaunchDims)>,
    Option<std::sync::Arc<str>>,
);

/// The defines and constraints of an op over one space's axes, each memoized by the
/// parameters it reads.
struct Memo {
    /// Each define's value, or why it is undefined at those parameters (the prune reason).
    defines: Vec<(String, Memoized<Point<Value>>)>,
    constraints: Vec<Memoized<Point<bool>>>,
    /// A valid point's launch geometry, prologue launches and prune reason (from
    /// [`launch_and_prologue`]), by the parameters the launch and prologue expressions read:
    /// a sgemm space has tens of thousands of valid points and a few hundred geometries.
    launches: Memoized<Launches>,
    /// The variables of the last miss, overwritten in place at the next (a fresh copy of the
    /// base per miss was most of the enumeration's time).
    scratch: Option<Vars>,
    /// Each constraint's reason, shared by every point it prunes.
    reasons: Vec<std::sync::Arc<str>>,
    /// How many leading slots decide a point pruned by define `k` being undefined: every
    /// define up to `k` reads only those.
    define_decided_by: Vec<usize>,
    /// The same for constraint `i` failing: the slots of constraints up to `i`, and of every
    /// define that may be undefined somewhere (see [`Memo::fill_defines`]).
    constraint_decided_by: Vec<usize>,
    /// The defines, then the constraints (as one index: define `k` is `k`, constraint `i`
    /// is the number of defines plus `i`) that read slot `s` or a later one, for each `s`:
    /// those whose value may differ from the last judged point's when the odometer turned
    /// slot `s` (and reset the later ones) since.
    reading_from: Vec<Vec<usize>>,
    /// The lowest slot the odometer turned since the last judged point.
    turned_from: usize,
    /// The first define or constraint (one index, as above) that failed at the last judged
    /// point; their count where it passed them all.
    last_failed: usize,
}

impl Memo {
    fn new(op: &Op, axes: &Axes) -> Result<Memo> {
        let slot_of = |name: &str| axes.names.iter().position(|n| n == name);
        let all: Vec<usize> = (0..axes.names.len()).collect();
        // The parameters an expression reads, through the defines before it, and what it
        // names itself. An expression that does not parse reads "everything": its first
        // evaluation reports the error.
        let reads = |expr: &str, defines: &[(String, Memoized<Point<Value>>)]| -> Reads {
            let Some(names) = crate::spec::expr::variables(expr) else {
                return (all.clone(), None);
            };
            let (mut slots, mut params, mut named) = (Vec::new(), Vec::new(), Vec::new());
            for name in names {
                if let Some(slot) = slot_of(&name) {
                    slots.push(slot);
                    params.push(slot);
                } else if let Some(k) = defines.iter().position(|(n, _)| *n == name) {
                    slots.extend(&defines[k].1.inputs);
                    named.push(k);
                }
            }
            slots.sort_unstable();
            slots.dedup();
            (slots, Some((params, named)))
        };
        let mut defines: Vec<(String, Memoized<Point<Value>>)> = Vec::new();
        for (name, expr) in &op.spec.defines {
            let expr = expr.as_str().ok_or_else(|| Error::Spec {
                file: op.origin.clone(),
                why: format!("defines.{name}: must be an expression string"),
            })?;
            let inputs = reads(expr, &defines);
            defines.push((name.clone(), Memoized::new(expr, inputs, axes)));
        }
        let constraints: Vec<Memoized<Point<bool>>> = op
            .spec
            .constraints
            .iter()
            .map(|c| Memoized::new(&c.expr, reads(&c.expr, &defines), axes))
            .collect();
        let launch = &op.spec.launch;
        let exprs = launch
            .block
            .iter()
            .chain(&launch.grid)
            .chain(&launch.shared)
            .chain(
                op.spec
                    .prologue
                    .iter()
                    .flat_map(|p| p.block.iter().chain(&p.grid).chain(&p.when)),
            );
        let mut slots: Vec<usize> = Vec::new();
        for e in exprs {
            slots.extend(reads(e, &defines).0);
        }
        slots.sort_unstable();
        slots.dedup();
        // Evaluated at a point with every variable set: the expressions' own names are moot.
        let launches = Memoized::new("[launch]", (slots, None), axes);
        let decided_by: Vec<usize> = defines
            .iter()
            .map(|(_, d)| d.decided_by())
            .chain(constraints.iter().map(Memoized::decided_by))
            .collect();
        let reading_from = (0..axes.names.len())
            .map(|s| {
                (0..decided_by.len())
                    .filter(|&i| decided_by[i] > s)
                    .collect()
            })
            .collect();
        Ok(Memo {
            defines,
            constraints,
            launches,
            scratch: None,
            reasons: op
                .spec
                .constraints
                .iter()
                .map(|c| c.reason().into())
                .collect(),
            define_decided_by: Vec::new(),
            constraint_decided_by: Vec::new(),
            reading_from,
            turned_from: 0,
            last_failed: 0,
        })
    }

    /// Evaluates each define at every combination of the parameters it reads (a define reads
    /// a few, so its table is small) before the enumeration, and sets how many leading slots
    /// decide each prune reason, and so a whole subtree of the odometer. [`Memo::judge`]
    /// evaluates every define before any constraint, so a failing constraint decides its
    /// subtree only where no define can be undefined inside it: knowing which defines never
    /// are keeps those subtrees wide. A define left unknown (a table too large, one that does
    /// not parse, an evaluation error, which its first use at a point then reports) counts as
    /// one that may be undefined.
    fn fill_defines(&mut self, op: &Op, base: &Vars, axes: &Axes) {
        const LARGEST_TABLE: usize = 1 << 16;
        // Whether each define's table is complete (an entry stays empty only where a define
        // it names is undefined: no point evaluates it there), and whether it is undefined
        // at none of its entries.
        let mut complete = vec![false; self.defines.len()];
        let mut total = vec![false; self.defines.len()];
        let mut digits = vec![0usize; axes.names.len()];
        'define: for k in 0..self.defines.len() {
            let d = &self.defines[k].1;
            let Some((_, named)) = d.direct.clone() else {
                continue;
            };
            if d.table.len() > LARGEST_TABLE || named.iter().any(|&j| !complete[j]) {
                continue;
            }
            'entry: for e in 0..d.table.len() {
                let d = &self.defines[k].1;
                for (&slot, &stride) in d.inputs.iter().zip(&d.strides) {
                    digits[slot] = e / stride % axes.values[slot].len();
                }
                for &j in &named {
                    let dj = &mut self.defines[j].1;
                    dj.pos = dj.at(&digits);
                    if !matches!(dj.table[dj.pos], Some(Ok(_))) {
                        continue 'entry;
                    }
                }
                match self.eval_define(op, base, axes, &digits, k) {
                    Ok(value) => self.defines[k].1.table[e] = Some(value),
                    Err(_) => continue 'define,
                }
            }
            complete[k] = true;
            total[k] = !self.defines[k]
                .1
                .table
                .iter()
                .any(|v| matches!(v, Some(Err(_))));
        }
        // The odometer starts at the space's first point.
        for (_, d) in &mut self.defines {
            d.pos = 0;
        }
        // The enumeration starts from the base variables, as if nothing had been evaluated:
        // an expression that reads a define after its own must find it unset there.
        self.scratch = None;
        let mut deepest = 0;
        self.define_decided_by = self
            .defines
            .iter()
            .map(|(_, d)| {
                deepest = deepest.max(d.decided_by());
                deepest
            })
            .collect();
        let mut deepest = (self.defines.iter().zip(&total))
            .filter(|(_, &total)| !total)
            .map(|((_, d), _)| d.decided_by())
            .max()
            .unwrap_or(0);
        self.constraint_decided_by = self
            .constraints
            .iter()
            .map(|c| {
                deepest = deepest.max(c.decided_by());
                deepest
            })
            .collect();
    }

    /// Follows slots `from` onwards jumping to their last values (the last point of the
    /// subtree that fixes the slots before `from`).
    fn jump_to_last(&mut self, axes: &Axes, digits: &mut [usize], from: usize) {
        self.turned_from = self.turned_from.min(from);
        for (slot, digit) in digits.iter_mut().enumerate().skip(from) {
            let last = axes.values[slot].len() - 1;
            let by = (last - *digit) as isize;
            for (_, d) in &mut self.defines {
                d.shift(slot, by);
            }
            for c in &mut self.constraints {
                c.shift(slot, by);
            }
            self.launches.shift(slot, by);
            *digit = last;
        }
    }

    /// Follows the odometer's turn of `slot` in every table's index.
    fn step(&mut self, slot: usize) {
        self.turned_from = self.turned_from.min(slot);
        // Only the tables that read `slot` or a later one move (`turn` is 0 for the rest).
        let Memo {
            defines,
            constraints,
            reading_from,
            ..
        } = self;
        let n = defines.len();
        for &i in &reading_from[slot] {
            match i.checked_sub(n) {
                None => defines[i].1.step(slot),
                Some(c) => constraints[c].step(slot),
            }
        }
        self.launches.step(slot);
    }

    /// Define `k`'s value at the odometer's point (after [`Memo::judge`] filled it, and found
    /// it defined: a point where a define is undefined is pruned before anything reads it).
    fn define(&self, k: usize) -> &Value {
        let d = &self.defines[k].1;
        match &d.table[d.pos] {
            Some(Ok(value)) => value,
            _ => unreachable!("judge evaluates every define first and stops at an undefined one"),
        }
    }

    /// Evaluates every define (in spec order, as the template would see them) and then the
    /// constraints in spec order at the point `digits`; the first that fails prunes it. So
    /// does the first that is undefined there (a division by zero: `--param TILE_DIM=0`),
    /// with the reason, and how many leading slots decide it (every point that agrees with
    /// this one on those is pruned for the same reason).
    ///
    /// Incrementally: those before the last judged point's first failure that read none of
    /// the slots turned since passed there and pass here (same table entries), so only the
    /// others before it are judged, then everything from it on. Most turns are of the last
    /// slots, which few expressions read.
    fn judge(
        &mut self,
        op: &Op,
        base: &Vars,
        axes: &Axes,
        digits: &[usize],
    ) -> Result<Option<(std::sync::Arc<str>, usize)>> {
        let turned = std::mem::replace(&mut self.turned_from, usize::MAX);
        let before = self.last_failed;
        let changed = self.reading_from.get(turned).map_or(0, Vec::len);
        for n in 0..changed {
            let i = self.reading_from[turned][n];
            if i >= before {
                break;
            }
            if let Some(failed) = self.check(op, base, axes, digits, i)? {
                self.last_failed = i;
                return Ok(Some(failed));
            }
        }
        let all = self.defines.len() + self.constraints.len();
        for i in before.min(all)..all {
            if let Some(failed) = self.check(op, base, axes, digits, i)? {
                self.last_failed = i;
                return Ok(Some(failed));
            }
        }
        self.last_failed = all;
        Ok(None)
    }

    /// Define or constraint `i` (one index: the defines first) at the point `digits`, its
    /// table entry filled: the prune reason and the slots that decide it where it fails or
    /// is undefined.
    fn check(
        &mut self,
        op: &Op,
        base: &Vars,
        axes: &Axes,
        digits: &[usize],
        i: usize,
    ) -> Result<Option<(std::sync::Arc<str>, usize)>> {
        if i < self.defines.len() {
            let k = i;
            let at = self.defines[k].1.pos;
            debug_assert_eq!(at, self.defines[k].1.at(digits));
            if self.defines[k].1.table[at].is_none() {
                let value = self.eval_define(op, base, axes, digits, k)?;
                self.defines[k].1.table[at] = Some(value);
            }
            if let Some(Err(reason)) = &self.defines[k].1.table[at] {
                return Ok(Some((reason.clone(), self.define_decided_by[k])));
            }
            return Ok(None);
        }
        let i = i - self.defines.len();
        let spec = &op.spec.constraints[i];
        let at = self.constraints[i].pos;
        debug_assert_eq!(at, self.constraints[i].at(digits));
        let ok = match &self.constraints[i].table[at] {
            Some(ok) => ok.clone(),
            None => {
                let vars = self.vars_before(base, axes, digits, Which::Constraint(i));
                let site = Lazy(|| format!("{} constraints[{i}]", op.at(&spec.expr)));
                let ok = vars.eval_bool_here(&spec.expr, &site);
                self.scratch = Some(vars);
                let ok = ok?.map_err(|why| format!("constraint '{}' {why}", spec.expr).into());
                self.constraints[i].table[at] = Some(ok.clone());
                ok
            }
        };
        let decided_by = self.constraint_decided_by[i];
        Ok(match ok {
            Ok(true) => None,
            Ok(false) => Some((self.reasons[i].clone(), decided_by)),
            Err(reason) => Some((reason, decided_by)),
        })
    }

    /// Define `k` evaluated at `digits` (the defines it names at their table positions): its
    /// value, or why it is undefined there; an error where the expression is broken.
    fn eval_define(
        &mut self,
        op: &Op,
        base: &Vars,
        axes: &Axes,
        digits: &[usize],
        k: usize,
    ) -> Result<Point<Value>> {
        let vars = self.vars_before(base, axes, digits, Which::Define(k));
        let (name, d) = &self.defines[k];
        let value = vars.eval_here(
            &d.expr,
            &Lazy(|| format!("{} defines.{name}", op.at(&d.expr))),
        );
        self.scratch = Some(vars);
        value.map(|v| v.map_err(|why| format!("defines.{name} {why}").into()))
    }

    /// The variables expression `which` sees at `digits`: shape and limits, and the parameters
    /// and defines it names (all of them, and the defines before it, when it does not
    /// parse), written over the last miss's variables (hand them back in `scratch`). Other
    /// names may linger there from that miss, but the expression does not read them; an
    /// expression that reads a define after its own finds it unset at the space's first
    /// point, where every define and constraint is evaluated in spec order before any has a
    /// value, and fails there.
    fn vars_before(&mut self, base: &Vars, axes: &Axes, digits: &[usize], which: Which) -> Vars {
        let mut vars = self.scratch.take().unwrap_or_else(|| base.clone());
        let (direct, defines) = match which {
            Which::Define(k) => (&self.defines[k].1.direct, k),
            Which::Constraint(i) => (&self.constraints[i].direct, self.defines.len()),
        };
        match direct {
            Some((params, named)) => {
                for &slot in params {
                    vars.set(&axes.names[slot], &axes.values[slot][digits[slot]]);
                }
                for &k in named {
                    vars.set(&self.defines[k].0, self.define(k));
                }
            }
            None => {
                for (name, value) in axes.at(digits) {
                    vars.set(name, value);
                }
                for (k, (name, _)) in self.defines.iter().enumerate().take(defines) {
                    vars.set(name, self.define(k));
                }
            }
        }
        vars
    }
}

/// An expression of the memo: a define or a constraint, by index.
#[derive(Clone, Copy)]
enum Which {
    Define(usize),
    Constraint(usize),
}

/// The launch geometry and prologue kernels of a configuration that passed every
/// constraint; either can still prune it (a block too large, two prologues).
fn launch_and_prologue(op: &Op, limits: &DeviceLimits, vars: &Vars) -> Result<Launches> {
    let mut candidate: Launches = (None, Vec::new(), None);
    let launch = &op.spec.launch;
    match eval_launch(
        vars,
        &launch.block,
        &launch.grid,
        launch.shared.as_deref(),
        limits,
        &Lazy(|| format!("{} launch", op.at("[launch]"))),
    )? {
        Ok(dims) => candidate.0 = Some(dims),
        Err(why) => {
            candidate.2 = Some(why.into());
            return Ok(candidate);
        }
    }
    for (i, p) in op.spec.prologue.iter().enumerate() {
        let at = Lazy(|| format!("{} prologue[{i}]", op.at(&p.kernel)));
        if let Some(when) = &p.when {
            match vars.eval_bool_here(when, &Lazy(|| format!("{}.when", at.text())))? {
                Ok(true) => {}
                Ok(false) => continue,
                Err(why) => {
                    candidate.2 = Some(format!("prologue {}.when {why}", p.kernel).into());
                    return Ok(candidate);
                }
            }
        }
        if let Some((first, _)) = candidate.1.first() {
            // The exports (header entries, Rust API) carry one kernel to launch first.
            candidate.2 = Some(std::sync::Arc::from(format!(
                "two prologue kernels apply ({first}, {}); at most one may",
                p.kernel
            )));
            return Ok(candidate);
        }
        match eval_launch(vars, &p.block, &p.grid, None, limits, &at)? {
            Ok(dims) => candidate.1.push((p.kernel.clone(), dims)),
            Err(why) => {
                candidate.2 = Some(format!("prologue {}: {why}", p.kernel).into());
                return Ok(candidate);
            }
        }
    }
    Ok(candidate)
}

/// Counts of pruned configurations per reason, most frequent first.
pub fn prune_summary(candidates: &[Candidate]) -> Vec<(String, usize)> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for reason in candidates.iter().filter_map(|c| c.pruned.as_deref()) {
        *counts.entry(reason).or_default() += 1;
    }
    most_frequent_first(counts.into_iter().map(|(r, n)| (r.to_string(), n)))
}

/// (reason, count) pairs, most frequent first, ties by reason.
fn most_frequent_first(counts: impl Iterator<Item = (String, usize)>) -> Vec<(String, usize)> {
    let mut list: Vec<(String, usize)> = counts.collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition the memoized [`enumerate`] must match: every point evaluated on its
    /// own (every define in spec order, then the constraints until one fails).
    fn one_by_one(op: &Op, shape: &Shape, overrides: &[ParamOverride]) -> Vec<Candidate> {
        let limits = DeviceLimits::SM90_DEFAULT;
        let shared = std::sync::Arc::new(Axes::of(op, overrides).unwrap());
        let axes: Vec<(String, Vec<Value>)> = shared
            .names
            .iter()
            .cloned()
            .zip(shared.values.iter().cloned())
            .collect();
        let total = shared.points();
        (0..total)
            .map(|index| {
                let mut rest = index;
                let mut values = vec![];
                let mut digits = vec![];
                for (name, vs) in axes.iter().rev() {
                    values.push((name.clone(), vs[rest % vs.len()].clone()));
                    digits.push(rest % vs.len());
                    rest /= vs.len();
                }
                values.reverse();
                digits.reverse();
                let mut vars = base_vars(op, shape, &limits);
                for (n, v) in &values {
                    vars.set(n, v);
                }
                for (name, expr) in &op.spec.defines {
                    let v = vars.eval(expr.as_str().unwrap(), "test").unwrap();
                    vars.set(name, &v);
                }
                let pruned = op
                    .spec
                    .constraints
                    .iter()
                    .find(|c| !vars.eval_bool(&c.expr, "test").unwrap())
                    .map(|c| c.reason());
                let candidate = Candidate {
                    index,
                    config: Config::new(shared.clone(), &digits),
                    define_names: op.spec.defines.iter().map(|(n, _)| n.clone()).collect(),
                    defines: op
                        .spec
                        .defines
                        .iter()
                        .map(|(n, _)| vars.get(n).unwrap().clone())
                        .collect(),
                    launch: None,
                    prologue: Vec::new(),
                    pruned: pruned.clone().map(std::sync::Arc::from),
                };
                match pruned {
                    Some(_) => candidate,
                    None => {
                        let (launch, prologue, pruned) =
                            launch_and_prologue(op, &limits, &vars).unwrap();
                        Candidate {
                            launch,
                            prologue,
                            pruned,
                            ..candidate
                        }
                    }
                }
            })
            .collect()
    }

    fn assert_same_space(op: &Op, shape: &str, overrides: &[&str]) {
        let sh = Shape::parse(shape, &op.spec.dims).unwrap();
        let o: Vec<_> = overrides
            .iter()
            .map(|t| parse_override(op, t).unwrap())
            .collect();
        let fast = enumerate(op, &sh, &DeviceLimits::SM90_DEFAULT, &o).unwrap();
        let slow = one_by_one(op, &sh, &o);
        assert_eq!(fast.len(), slow.len());
        // Without the pruned points, whole pruned subtrees are skipped: the same valid points
        // and the same counts of pruned ones.
        let quick = enumerate_space(op, &sh, &DeviceLimits::SM90_DEFAULT, &o, false).unwrap();
        let valid: Vec<usize> = slow
            .iter()
            .filter(|c| c.pruned.is_none())
            .map(|c| c.index)
            .collect();
        let quick_valid: Vec<usize> = quick.candidates.iter().map(|c| c.index).collect();
        assert_eq!(quick_valid, valid, "{} {shape}", op.name());
        assert_eq!(
            quick.prune_reasons,
            prune_summary(&slow),
            "{} {shape}",
            op.name()
        );
        for (f, s) in fast.iter().zip(&slow) {
            let at = format!("{} {shape} {}", op.name(), s.config.label());
            assert_eq!(f.index, s.index, "{at}");
            assert_eq!(f.config.label(), s.config.label(), "{at}");
            assert_eq!(f.pruned, s.pruned, "{at}");
            if s.pruned.is_none() {
                assert_eq!(f.launch, s.launch, "{at}");
                assert_eq!(f.prologue, s.prologue, "{at}");
                assert_eq!(f.define_names, s.define_names, "{at}");
                for name in s.define_names.iter() {
                    assert_eq!(f.var(name), s.var(name), "{at}: {name}");
                }
            }
        }
    }

    #[test]
    fn memoized_enumeration_equals_evaluating_each_point() {
        // Each transpose space at one CACHE value (CACHE enters no constraint): half the time.
        let f32 = transpose();
        assert_same_space(&f32, "256x512", &["CACHE=l2_256"]);
        assert_same_space(&f32, "999x1001", &["CACHE=default"]);
        assert_same_space(
            &transpose().with_dtype(Some("f16")).unwrap(),
            "64x4097",
            &["CACHE=default"],
        );
        assert_same_space(&Op::load("matmul", None).unwrap(), "1000x999x1001", &[]);
        // A slice of sgemm's space that still crosses every load path and bounds mode.
        let sgemm = Op::load("sgemm", None).unwrap();
        for shape in ["1023x1025x1027", "100x68x52"] {
            let slice = ["BM=64,128", "BN=64", "BK=16", "WARP_N=8", "STAGES=2,3"];
            assert_same_space(&sgemm, shape, &slice);
        }
        // The split of the last wave, valid at some points: the last slot turns both ways.
        let slice = [
            "BM=64,128",
            "BN=128",
            "BK=16",
            "WARP_N=8",
            "STAGES=2,3",
            "TAIL=0,1",
        ];
        assert_same_space(&sgemm, "4096x4096x4096", &slice);
    }

    fn transpose() -> Op {
        Op::load("transpose", None).unwrap()
    }

    /// The live configurations of `op` at `shape` and each one's `compile_cost`.
    fn compile_costs(op: &Op, shape: &str) -> Vec<(Candidate, i64)> {
        let sh = Shape::parse(shape, &op.spec.dims).unwrap();
        let limits = DeviceLimits::SM90_DEFAULT;
        let base = base_vars(op, &sh, &limits);
        let space = enumerate_space(op, &sh, &limits, &[], false).unwrap();
        space
            .candidates
            .into_iter()
            .map(|c| {
                let cost = c.compile_cost(op, &base).unwrap();
                (c, cost)
            })
            .collect()
    }

    /// NVRTC takes 2-8 s on the realigning VEC=4 and VEC=8 tiles at odd strides with few
    /// rows of threads over a 64-row tile, and about 0.1 s on VEC=1 tiles of 4 rows or fewer
    /// a thread: the spec's compile cost must rank the first far above the second, so that
    /// a search hears of them last.
    #[test]
    fn the_compile_cost_ranks_the_slowest_compiling_transposes_costliest() {
        for dtype in ["f32", "f16"] {
            let op = transpose().with_dtype(Some(dtype)).unwrap();
            let costs = compile_costs(&op, "6007x7001");
            assert!(costs.iter().all(|(_, cost)| *cost > 0), "{dtype}");
            let slow = |c: &Candidate| {
                int(c, "VEC") >= 4 && var(c, "TILE_H") == 64 && int(c, "BLOCK_ROWS") <= 2
            };
            let quick =
                |c: &Candidate| int(c, "VEC") == 1 && var(c, "TILE_H") / int(c, "BLOCK_ROWS") <= 4;
            let least_slow = costs.iter().filter(|(c, _)| slow(c)).map(|(_, k)| *k);
            let most_quick = costs.iter().filter(|(c, _)| quick(c)).map(|(_, k)| *k);
            let (least_slow, most_quick) = (least_slow.min().unwrap(), most_quick.max().unwrap());
            assert!(
                least_slow >= 16 * most_quick,
                "{dtype}: {least_slow} against {most_quick}"
            );
        }
    }

    fn shape(s: &str) -> Shape {
        Shape::parse(s, &["ROWS".to_string(), "COLS".to_string()]).unwrap()
    }

    fn value(c: &Candidate, name: &str) -> Value {
        c.config
            .values()
            .find(|(n, _)| *n == name)
            .unwrap()
            .1
            .clone()
    }

    fn int(c: &Candidate, name: &str) -> i64 {
        match value(c, name) {
            Value::Int(i) => i,
            other => panic!("{name} is not an integer: {other}"),
        }
    }

    fn var(c: &Candidate, name: &str) -> i64 {
        match c.var(name) {
            Some(Value::Int(i)) => *i,
            other => panic!("{name} is not an integer define: {other:?}"),
        }
    }

    /// A slab configuration (one side of at most 32): a warp per BLOCK_ROWS, the short side
    /// compiled in, one configuration per slab kernel (the tile parameters held at one value).
    fn check_slab(c: &Candidate, rows: i64, cols: i64, elem: i64) {
        let (b, v) = (int(c, "BLOCK_ROWS"), int(c, "VEC"));
        let short = rows.min(cols);
        assert_eq!(var(c, "SLAB_N"), short, "{}", c.config.label());
        assert!(v * short * elem <= 512, "{}", c.config.label());
        assert_eq!(c.launch.unwrap().block, ((32 * b) as u32, 1, 1));
        let per_block = 32 * b * v;
        let long = rows.max(cols);
        assert_eq!(
            c.launch.unwrap().grid,
            (((long + per_block - 1) / per_block) as u32, 1, 1)
        );
        assert_eq!(var(c, "SLAB_SHIFT"), long % v, "{}", c.config.label());
        assert_eq!(int(c, "TILE_DIM"), 32, "{}", c.config.label());
        assert_eq!(int(c, "TILES_PER_BLOCK"), 1, "{}", c.config.label());
    }

    /// A tiled configuration: its block, vector width, shared memory, and the run and bounds
    /// variants it may take at this shape.
    fn check_tiled(c: &Candidate, rows: i64, cols: i64, elem: i64) {
        let (b, v) = (int(c, "BLOCK_ROWS"), int(c, "VEC"));
        assert_eq!(value(c, "STAGE"), Value::Str("none".into()));
        let (tw, th) = (var(c, "TILE_W"), var(c, "TILE_H"));
        let threads = tw / v * b;
        assert!((32..=1024).contains(&threads), "{}", c.config.label());
        assert!(v * elem <= 16, "{}", c.config.label());
        assert_eq!((th / v) % b, 0, "{}", c.config.label());
        assert!(var(c, "SMEM_BYTES") <= 48 * 1024);
        // Vectors at strides that are not multiples of VEC take the realigning path.
        let peel = c.var("PEEL") == Some(&Value::Bool(true));
        assert_eq!(
            peel,
            v > 1 && (rows % v != 0 || cols % v != 0),
            "{}",
            c.config.label()
        );
        // Sector-aligned runs only where a row of out is not whole sectors.
        if value(c, "RUNS") == Value::Str("sector".into()) {
            assert!(v == 1 && (rows * elem) % 32 != 0, "{}", c.config.label());
            // Never at tile multiples: `specialized` would duplicate `always`.
            assert_ne!(value(c, "BOUNDS"), Value::Str("specialized".into()));
        }
        // 16-byte chunks where rows of out are not whole sectors or rows of in
        // not whole chunks, one tile a block.
        if value(c, "RUNS") == Value::Str("chunk".into()) {
            assert!(
                v == 1 && ((rows * elem) % 32 != 0 || (cols * elem) % 16 != 0),
                "{}",
                c.config.label()
            );
            assert_ne!(value(c, "BOUNDS"), Value::Str("specialized".into()));
            // Rows of chunks, and with PAD one chunk of skew per CHUNK rows.
            let loaded = th + 32 / elem - 1;
            let skew = i64::from(int(c, "PAD") != 0) * (loaded / (16 / elem) + 1);
            assert_eq!(
                var(c, "SMEM_BYTES"),
                (loaded * (tw * elem / 16 + 1) + skew) * 16
            );
        }
        if value(c, "BOUNDS") == Value::Str("none".into()) {
            assert!(rows % th == 0 && cols % tw == 0, "BOUNDS=none kept");
        }
        let launch = c.launch.unwrap();
        assert_eq!(launch.block, ((tw / v) as u32, b as u32, 1));
    }

    /// What the live configurations of a shape cover: every pruned one counted by reason,
    /// vectors at every stride, the run variants exactly where rows are not whole sectors or
    /// chunks, and a bounded number to compile.
    fn check_live_counts(
        what: &str,
        all: &[Candidate],
        live: &[&Candidate],
        rows: i64,
        cols: i64,
        elem: i64,
    ) {
        let reasons = prune_summary(all);
        assert_eq!(
            reasons.iter().map(|(_, n)| n).sum::<usize>() + live.len(),
            all.len()
        );
        let vec_live = live.iter().filter(|c| int(c, "VEC") > 1).count();
        assert!(vec_live > 0, "{what}: vectors at every stride");
        let sector_live = live
            .iter()
            .filter(|c| value(c, "RUNS") == Value::Str("sector".into()))
            .count();
        assert_eq!(
            sector_live > 0,
            (rows * elem) % 32 != 0,
            "{what}: RUNS=sector where rows of out are not whole sectors"
        );
        let chunk_live = live
            .iter()
            .filter(|c| value(c, "RUNS") == Value::Str("chunk".into()))
            .count();
        assert_eq!(
            chunk_live > 0,
            (rows * elem) % 32 != 0 || (cols * elem) % 16 != 0,
            "{what}: RUNS=chunk where rows are not whole sectors or chunks"
        );
        // Keep an exhaustive sweep (and the exhaustive compile of `scripts/test.sh --all`)
        // bounded.
        assert!(live.len() <= 10_000, "{what}: {} live", live.len());
    }

    #[test]
    fn default_space_respects_every_constraint() {
        for dtype in ["f32", "f64", "f16"] {
            let op = transpose().with_dtype(Some(dtype)).unwrap();
            let elem = op.dtype.bytes() as i64;
            for s in ["1000x1000", "1024x1024", "8191x8191", "33x4097"] {
                let sh = shape(s);
                let (rows, cols) = (sh.dims[0] as i64, sh.dims[1] as i64);
                let all = enumerate(&op, &sh, &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
                assert_eq!(
                    all.len(),
                    3 * 6 * 4 * 4 * 2 * 3 * 2 * 3 * 2 * 2 * 2 * 3 * 2,
                    "{dtype} {s}: default points"
                );
                let live: Vec<&Candidate> = all.iter().filter(|c| c.pruned.is_none()).collect();
                assert!(!live.is_empty(), "{dtype} {s}");
                let slab = |c: &Candidate| value(c, "LAYOUT") == Value::Str("slab".into());
                assert_eq!(
                    live.iter().any(|c| slab(c)),
                    rows.min(cols) <= 32,
                    "{dtype} {s}: slabs where a side is short"
                );
                for c in &live {
                    if slab(c) {
                        check_slab(c, rows, cols, elem);
                    } else {
                        check_tiled(c, rows, cols, elem);
                    }
                }
                check_live_counts(&format!("{dtype} {s}"), &all, &live, rows, cols, elem);
            }
        }
    }

    /// 16-byte vectors at most: f64 never takes VEC=4.
    #[test]
    fn vectors_are_at_most_16_bytes() {
        let op = transpose().with_dtype(Some("f64")).unwrap();
        let all = enumerate(&op, &shape("1024x1024"), &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
        let vec4: Vec<_> = all.iter().filter(|c| int(c, "VEC") == 4).collect();
        assert!(vec4.iter().all(|c| c.pruned.is_some()));
        assert!(vec4
            .iter()
            .any(|c| c.pruned.as_deref().is_some_and(|r| r.contains("16 bytes"))));
    }

    #[test]
    fn the_classic_kernel_is_one_point_of_the_space() {
        // VEC=1, one tile per block, square: the classic shared-memory transpose.
        let op = transpose();
        let pins: Vec<ParamOverride> = [
            "TILE_DIM=32",
            "BLOCK_ROWS=8",
            "PAD=1",
            "UNROLL=on",
            "BOUNDS=always",
        ]
        .iter()
        .chain(
            op.assumed_params(&["TILE_DIM", "BLOCK_ROWS", "PAD", "UNROLL", "BOUNDS"])
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .iter(),
        )
        .map(|p| parse_override(&op, p).unwrap())
        .collect();
        let all = enumerate(&op, &shape("1000x1000"), &DeviceLimits::SM90_DEFAULT, &pins).unwrap();
        assert_eq!(all.len(), 1);
        let c = &all[0];
        assert_eq!(
            c.config.label(),
            "TILE_DIM=32 BLOCK_ROWS=8 PAD=1 UNROLL=on BOUNDS=always VEC=1 TILES_PER_BLOCK=1 \
             ASPECT=square CACHE=default RUNS=tile OCCUPANCY=0 READ=elem LAYOUT=tile STAGE=none \
             BLOCK_ORDER=rows"
        );
        assert_eq!(c.launch.unwrap().block, (32, 8, 1));
        assert_eq!(c.launch.unwrap().grid, (32, 32, 1));
        assert_eq!(var(c, "SMEM_BYTES"), 32 * 33 * 4);
    }

    #[test]
    fn shapes_of_tiles_and_tiles_per_block_set_the_launch() {
        let op = transpose();
        let pin = |extra: &[&str]| {
            let mut p: Vec<ParamOverride> = [
                "TILE_DIM=32",
                "BLOCK_ROWS=8",
                "BOUNDS=always",
                "CACHE=default",
                "RUNS=tile",
                "OCCUPANCY=0",
                "READ=elem",
                "LAYOUT=tile",
                "STAGE=none",
                "BLOCK_ORDER=rows",
            ]
            .iter()
            .chain(extra)
            .map(|t| parse_override(&op, t).unwrap())
            .collect();
            p.push(parse_override(&op, "UNROLL=on").unwrap());
            let all = enumerate(&op, &shape("1000x3000"), &DeviceLimits::SM90_DEFAULT, &p).unwrap();
            assert_eq!(all.len(), 1);
            all.into_iter().next().unwrap()
        };
        let c = pin(&["VEC=1", "TILES_PER_BLOCK=1", "ASPECT=wide"]);
        assert_eq!((var(&c, "TILE_W"), var(&c, "TILE_H")), (64, 32));
        assert_eq!(c.launch.unwrap().block, (64, 8, 1));
        assert_eq!(c.launch.unwrap().grid, (47, 32, 1));
        assert_eq!(var(&c, "OUT_ROWS"), 16);
        let c = pin(&["VEC=4", "TILES_PER_BLOCK=2", "ASPECT=tall"]);
        assert_eq!((var(&c, "TILE_W"), var(&c, "TILE_H")), (32, 64));
        assert_eq!(c.launch.unwrap().block, (8, 8, 1));
        // 1000 rows: 16 tiles of 64, two per block.
        assert_eq!(c.launch.unwrap().grid, (94, 8, 1));
        assert_eq!(
            var(&c, "SMEM_BYTES"),
            32 * 64 * 4,
            "vectors: swizzled, not padded"
        );
        assert_eq!(
            var(&c, "OUT_ROWS"),
            4,
            "64 threads cover 4 rows of out (16 vectors each)"
        );
        assert!(c.pruned.is_none(), "{:?}", c.pruned);
        // A tall tile with one row of threads cannot cover a row of out (32 > 8 threads).
        let c = pin(&["VEC=4", "TILES_PER_BLOCK=1", "ASPECT=tall"]);
        assert!(c.pruned.is_none());
        let p: Vec<ParamOverride> = [
            "TILE_DIM=32",
            "BLOCK_ROWS=1",
            "BOUNDS=always",
            "UNROLL=on",
            "VEC=1",
            "TILES_PER_BLOCK=1",
            "ASPECT=tall",
        ]
        .iter()
        .map(|t| parse_override(&op, t).unwrap())
        .collect();
        let all = enumerate(&op, &shape("1000x3000"), &DeviceLimits::SM90_DEFAULT, &p).unwrap();
        assert_eq!(
            all[0].pruned.as_deref(),
            Some("too few threads to cover one row of out (TILE_H / VEC vectors)")
        );
    }

    #[test]
    fn shared_memory_limit_prunes() {
        let op = transpose();
        let limits = DeviceLimits {
            max_shared_per_block: 8 * 1024,
            ..DeviceLimits::SM90_DEFAULT
        };
        let all = enumerate(&op, &shape("1024x1024"), &limits, &[]).unwrap();
        let tile64: Vec<_> = all
            .iter()
            .filter(|c| value(c, "TILE_DIM") == Value::Int(64))
            .collect();
        assert!(tile64.iter().all(|c| c.pruned.is_some()));
        let smem = "more shared memory per block than the device allows";
        assert!(tile64.iter().any(|c| c.pruned.as_deref() == Some(smem)));
        assert!(all.iter().any(|c| c.pruned.is_none()));
    }

    /// sgemm tiles past the 48 KB of static shared memory are valid up to the opt-in limit:
    /// their launch carries the bytes (the template then declares the buffers
    /// `extern __shared__`); under it the launch asks for none, and past the opt-in limit the
    /// tile is pruned.
    #[test]
    fn dynamic_shared_memory_past_the_static_limit() {
        let op = Op::load("sgemm", None).unwrap();
        let dims = ["M", "N", "K"].map(String::from);
        let at = Shape::parse("4096x4096x4096", &dims).unwrap();
        let pin = |text: &str| parse_override(&op, text).unwrap();
        // 64x128x32, TM=TN=8, three cp.async stages: (64*32 + 32*128) * 3 floats = 72 KB.
        let tile = |stages: &str| {
            vec![
                pin("BM=64"),
                pin("BN=128"),
                pin("BK=32"),
                pin("TM=8"),
                pin("TN=8"),
                pin("WARP_N=16"),
                pin("VEC=4"),
                pin("PAD=0"),
                pin(stages),
                pin("LOAD=async"),
                pin("BOUNDS=specialized"),
                pin("REPACK=0"),
                pin("WINDOWS=0"),
                pin("ORDER=snakek"),
                pin("B_ELEMS=0"),
                pin("SPLITK=1"),
                pin("TAIL=0"),
            ]
        };
        let one = |limits: &DeviceLimits, stages: &str| {
            let mut all = enumerate(&op, &at, limits, &tile(stages)).unwrap();
            assert_eq!(all.len(), 1);
            all.remove(0)
        };
        let big = one(&DeviceLimits::SM90_DEFAULT, "STAGES=3");
        assert_eq!(big.pruned, None);
        assert_eq!(big.launch.unwrap().shared, 73728);
        assert_eq!(big.var("DYN_SMEM"), Some(&Value::Int(73728)));
        // Two stages fit in 48 KB: static shared memory, nothing at launch.
        let small = one(&DeviceLimits::SM90_DEFAULT, "STAGES=2");
        assert_eq!(small.pruned, None);
        assert_eq!(small.launch.unwrap().shared, 0);
        let no_optin = DeviceLimits {
            max_shared_optin: 64 * 1024,
            ..DeviceLimits::SM90_DEFAULT
        };
        assert_eq!(
            one(&no_optin, "STAGES=3").pruned.as_deref(),
            Some("more shared memory per block than the device allows, even opted in")
        );
    }

    /// A launch's shared-memory expression is checked like its grid: negative or past the
    /// opt-in limit prunes, with the value in the reason.
    #[test]
    fn launch_shared_bytes_are_checked() {
        let vars = Vars::new();
        let one = ["1".to_string(), "1".to_string(), "1".to_string()];
        let limits = DeviceLimits::SM90_DEFAULT;
        let launch = |expr: &str| {
            eval_launch(&vars, &one, &one, Some(expr), &limits, "test")
                .unwrap()
                .map(|d| d.shared)
        };
        assert_eq!(launch("1024 * 100"), Ok(102400));
        assert_eq!(
            launch("300 * 1024"),
            Err("307200 bytes of dynamic shared memory exceed the device limit 232448".into())
        );
        assert_eq!(launch("0 - 4"), Err("shared = -4 bytes is below 0".into()));
        assert_eq!(
            eval_launch(&vars, &one, &one, None, &limits, "test")
                .unwrap()
                .map(|d| d.shared),
            Ok(0)
        );
    }

    #[test]
    fn overrides_narrow_and_extend() {
        let op = transpose();
        let o = parse_override(&op, "TILE_DIM=32,128").unwrap();
        assert_eq!(o.values, vec![Value::Int(32), Value::Int(128)]);
        let all = enumerate(&op, &shape("1024x1024"), &DeviceLimits::SM90_DEFAULT, &[o]).unwrap();
        assert_eq!(all.len(), 2 * 6 * 4 * 4 * 2 * 3 * 2 * 3 * 2 * 2 * 2 * 3 * 2);
        // TILE_DIM=128 needs 128*128*4 bytes or more > 48 KiB in f32: always pruned.
        assert!(all
            .iter()
            .filter(|c| value(c, "TILE_DIM") == Value::Int(128))
            .all(|c| c.pruned.is_some()));
        // In f16 a square 128 tile fits (32 KiB).
        let op = transpose().with_dtype(Some("f16")).unwrap();
        let o = parse_override(&op, "TILE_DIM=32,128").unwrap();
        let all = enumerate(&op, &shape("1024x1024"), &DeviceLimits::SM90_DEFAULT, &[o]).unwrap();
        assert!(all
            .iter()
            .any(|c| value(c, "TILE_DIM") == Value::Int(128) && c.pruned.is_none()));
    }

    /// sgemm sweeps ORDER=snake with COPY4 tiles only (a prune for speed), unless the user
    /// sweeps ORDER: then float4 tiles take it too.
    #[test]
    fn a_prune_for_speed_gives_way_to_a_param_of_what_it_names() {
        let op = Op::load("sgemm", None).unwrap();
        let at = Shape::parse("777x555x999", &op.spec.dims).unwrap();
        let snake = |c: &Candidate| value(c, "ORDER") == Value::Str("snake".into());
        let float4 = |c: &Candidate| value(c, "VEC") == Value::Int(4);
        // A slice of the space (other parameters' --param leave the prune in place).
        let slice = ["BM=64", "BN=64", "BK=8,16", "WARP_N=8"];
        let live = |extra: &[&str]| {
            let o: Vec<ParamOverride> = slice
                .iter()
                .chain(extra)
                .map(|t| parse_override(&op, t).unwrap())
                .collect();
            enumerate_space(&op, &at, &DeviceLimits::SM90_DEFAULT, &o, false)
                .unwrap()
                .candidates
        };
        let default = live(&[]);
        assert!(default.iter().any(|c| snake(c) && !float4(c)));
        assert!(default.iter().any(|c| !snake(c) && float4(c)));
        assert!(!default.iter().any(|c| snake(c) && float4(c)));
        let swept = live(&["ORDER=snakek,snake"]);
        assert!(swept.iter().any(|c| snake(c) && float4(c)));
        assert!(swept.len() > default.len());
    }

    #[test]
    fn bad_overrides_are_rejected() {
        let op = transpose();
        let e = parse_override(&op, "TILES=4").unwrap_err().to_string();
        assert!(
            e.contains("unknown parameter 'TILES'") && e.contains("TILE_DIM, BLOCK_ROWS"),
            "{e}"
        );
        assert!(parse_override(&op, "TILE_DIM").is_err());
        assert!(parse_override(&op, "TILE_DIM=").is_err());
        assert!(parse_override(&op, "TILE_DIM=abc").is_err());
        assert!(parse_override(&op, "BOUNDS=sometimes").is_err());
    }

    /// Tasks carry launches to the worker processes as JSON: a round trip keeps them, and
    /// static-only launches leave `shared` out.
    #[test]
    fn launch_dims_round_trip_through_json() {
        let plain = LaunchDims {
            grid: (3, 2, 1),
            block: (64, 4, 1),
            shared: 0,
        };
        let text = serde_json::to_string(&plain).unwrap();
        assert!(!text.contains("shared"), "{text}");
        assert_eq!(serde_json::from_str::<LaunchDims>(&text).unwrap(), plain);
        let dynamic = LaunchDims {
            shared: 73728,
            ..plain
        };
        let text = serde_json::to_string(&dynamic).unwrap();
        assert_eq!(serde_json::from_str::<LaunchDims>(&text).unwrap(), dynamic);
    }

    #[test]
    fn tall_matrices_keep_grid_y_in_range() {
        let op = transpose();
        let all = enumerate(&op, &shape("10000000x3"), &DeviceLimits::SM90_DEFAULT, &[]).unwrap();
        let live: Vec<_> = all.iter().filter(|c| c.pruned.is_none()).collect();
        assert!(!live.is_empty());
        for c in live
            .iter()
            .filter(|c| value(c, "LAYOUT") == Value::Str("tile".into()))
        {
            // y stays in range and y x z still holds every group of tile rows, one a block.
            let grid = c.launch.unwrap().grid;
            let (th, tpb) = (var(c, "TILE_H"), int(c, "TILES_PER_BLOCK"));
            let groups = ((10_000_000 + th - 1) / th + tpb - 1) / tpb;
            let (y, z) = (grid.1 as i64, grid.2 as i64);
            assert!(y <= 65535, "{}", c.config.label());
            assert!(
                y * z >= groups && y * (z - 1) < groups,
                "{}",
                c.config.label()
            );
        }
        assert!(live.iter().any(|c| c.launch.unwrap().grid.2 > 1));
    }
    /// The one sgemm point at `shape` that `params` (every parameter with more than one
    /// default value pinned; ORDER and TAIL are snakek and 0 unless given) leave.
    fn sgemm_point(shape: &str, params: &[&str]) -> Candidate {
        let op = Op::load("sgemm", None).unwrap();
        let dims = ["M", "N", "K"].map(String::from);
        let mut o: Vec<_> = params
            .iter()
            .map(|t| parse_override(&op, t).unwrap())
            .collect();
        for (name, pin) in [("ORDER", "ORDER=snakek"), ("TAIL", "TAIL=0")] {
            if !o.iter().any(|p| p.name == name) {
                o.push(parse_override(&op, pin).unwrap());
            }
        }
        let shape = Shape::parse(shape, &dims).unwrap();
        let mut all = enumerate(&op, &shape, &DeviceLimits::SM90_DEFAULT, &o).unwrap();
        assert_eq!(all.len(), 1);
        all.remove(0)
    }

    /// The sgemm spec's prologue: REPACK=1 points carry sgemm_repack with its grid, others
    /// carry nothing, and REPACK=1 is pruned where float4 loads need no repack. WINDOWS=1
    /// (no copy) has no prologue; where K % 4 != 0 its grid has block rows in fours (one per
    /// alignment of A's rows), and it is pruned where rows are aligned or N < BN + 4.
    #[test]
    fn prologue_kernels_follow_their_when_expression() {
        let at = |s: &str, repack: &str| {
            let windows = if repack == "REPACK=0" {
                "WINDOWS=1"
            } else {
                "WINDOWS=0"
            };
            sgemm_point(
                s,
                &[
                    "BM=64",
                    "BN=64",
                    "BK=32",
                    "TM=8",
                    "TN=4",
                    "WARP_N=16",
                    "VEC=4",
                    "PAD=0",
                    "STAGES=2",
                    "LOAD=async",
                    "BOUNDS=edge",
                    "B_ELEMS=0",
                    "SPLITK=1",
                    repack,
                    windows,
                ],
            )
        };
        let c = at("1023x1025x1027", "REPACK=1");
        assert_eq!(c.pruned, None);
        let (kernel, d) = &c.prologue[0];
        assert_eq!(kernel, "sgemm_repack");
        // One block row per row of A (1023) and of the padded B (1028); 257 float4s a row.
        assert_eq!((d.grid, d.block), ((3, 1023 + 1028, 1), (128, 1, 1)));
        // K rounded up to 1028 is a multiple of no BK, so K keeps a partial slice; 1022
        // rounds up to 1024, a multiple of BK=32.
        assert_eq!(c.var("EVEN_K"), Some(&Value::Bool(false)));
        let c = at("1000x1000x1022", "REPACK=1");
        assert_eq!(c.var("EVEN_K"), Some(&Value::Bool(true)));
        // K % 4 == 0: A's rows are aligned, only B (64 rows) is copied.
        let c = at("96x66x64", "REPACK=1");
        assert_eq!(c.prologue[0].1.grid, (1, 64, 1));
        let c = at("1023x1025x1027", "REPACK=0");
        assert!(c.pruned.is_none() && c.prologue.is_empty());
        // 1023 rows in bands of 4 x 64: 4 bands of 4 block rows.
        assert_eq!(c.launch.unwrap().grid, (17, 16, 1));
        // K % 4 == 0: one block row per 64 rows, as without WINDOWS.
        assert_eq!(
            at("1000x1001x1000", "REPACK=0").launch.unwrap().grid,
            (16, 16, 1)
        );
        assert!(at("1023x67x1027", "REPACK=0")
            .pruned
            .unwrap()
            .contains("N >= BN + 4"));
        // 32 rows of B of 70M floats: offsets within a slice would overflow 32 bits.
        let c = at("5x70000001x7", "REPACK=0");
        assert!(
            c.pruned.as_deref().unwrap().contains("32-bit offsets"),
            "{c:?}"
        );
        let c = at("1024x1024x1024", "REPACK=1");
        assert!(c.pruned.unwrap().contains("REPACK=1 serves float4 loads"));
        let c = at("1024x1024x1024", "REPACK=0");
        assert!(c.pruned.unwrap().contains("WINDOWS=1 serves float4 loads"));
    }

    /// COPY4 (LOAD=async with VEC=1) moves edge blocks inward instead of checking its copies:
    /// valid at any shape of at least one tile, pruned where M < BM or N < BN (a block would
    /// move before row or column 0) and where a slice's 32-bit offsets would overflow; slices
    /// start -K mod BK columns early (checked in the template), so K needs no multiple.
    #[test]
    fn four_byte_copies_need_one_whole_tile_and_32_bit_offsets() {
        let at = |s: &str, load: &str| {
            sgemm_point(
                s,
                &[
                    "BM=64",
                    "BN=128",
                    "BK=32",
                    "TM=8",
                    "TN=8",
                    "WARP_N=16",
                    "VEC=1",
                    "PAD=4",
                    "STAGES=2",
                    "BOUNDS=edge",
                    "KSPLIT=2",
                    "REPACK=0",
                    "WINDOWS=0",
                    "B_ELEMS=0",
                    "SPLITK=1",
                    load,
                ],
            )
        };
        for shape in ["999x1001x1003", "64x128x1", "64x128x7", "4096x4096x4096"] {
            let c = at(shape, "LOAD=async");
            assert_eq!(c.pruned, None, "{shape}");
            // Transposed A (BK rows of BM + PAD), as LOAD=regs lays it out: two stages.
            assert_eq!(
                c.var("SMEM_FLOATS"),
                Some(&Value::Int(2 * (32 * 68 + 32 * 128)))
            );
        }
        for shape in ["63x128x64", "64x127x64", "1x1x1"] {
            let why = at(shape, "LOAD=async").pruned.unwrap();
            assert!(why.contains("M >= BM and N >= BN"), "{shape}: {why}");
            // LOAD=regs checks its copies instead, so it stays valid there.
            assert_eq!(at(shape, "LOAD=regs").pruned, None, "{shape}");
        }
        let why = at("64x128x40000000", "LOAD=async").pruned.unwrap();
        assert!(why.contains("32-bit offsets"), "{why}");
    }

    /// A run that keeps no pruned candidates counts them by reason exactly as the candidates
    /// of a run that keeps them do, and the live candidates are the same.
    /// examples/vector_add with `defines` before its own and `constraint` (an expression
    /// and its reason) before its own, loaded from a folder that lives as long as the op.
    fn vector_add_with(defines: &str, constraint: Option<(&str, &str)>) -> (tempfile::TempDir, Op) {
        let dir = tempfile::tempdir().unwrap();
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/vector_add");
        let mut spec = std::fs::read_to_string(example.join("vector_add.toml"))
            .unwrap()
            .replacen("PER_BLOCK = ", &format!("{defines}\nPER_BLOCK = "), 1);
        if let Some((expr, reason)) = constraint {
            spec = spec.replacen(
                "[[constraints]]",
                &format!(
                    "[[constraints]]\nexpr = \"{expr}\"\nreason = \"{reason}\"\n\n[[constraints]]"
                ),
                1,
            );
        }
        std::fs::write(dir.path().join("vector_add.toml"), spec).unwrap();
        std::fs::copy(
            example.join("vector_add.cu.tera"),
            dir.path().join("vector_add.cu.tera"),
        )
        .unwrap();
        let op = Op::load_spec(dir.path(), None).unwrap();
        (dir, op)
    }

    /// A define undefined deep in the space (at VECTOR=1, the third parameter) comes before a
    /// constraint that reads only the first: where the constraint fails, the points whose
    /// define is undefined still count for the define.
    #[test]
    fn an_undefined_define_keeps_its_points_under_a_shallow_constraint() {
        let (_dir, op) = vector_add_with(
            "INV = \"12 / (VECTOR - 1)\"",
            Some(("BLOCK != 128", "not 128")),
        );
        let shape = Shape::parse("100000", &op.spec.dims).unwrap();
        let limits = DeviceLimits::SM90_DEFAULT;
        let kept = enumerate_space(&op, &shape, &limits, &[], true).unwrap();
        let counted = enumerate_space(&op, &shape, &limits, &[], false).unwrap();
        let count = |s: &Space, prefix: &str| -> usize {
            (s.prune_reasons.iter())
                .filter(|(r, _)| r.starts_with(prefix))
                .map(|(_, n)| n)
                .sum()
        };
        // BLOCK=128 at VECTOR=2 and 4 (4 x 2 x 2 points), VECTOR=1 everywhere (5 x 4 x 2).
        assert_eq!(count(&kept, "not 128"), 16);
        assert_eq!(count(&kept, "defines.INV"), 40);
        assert_eq!(counted.prune_reasons, kept.prune_reasons);
    }

    /// A define that reads a define after its own finds it unset at the space's first point
    /// and fails there, whatever the defines tabulated before the enumeration left behind.
    #[test]
    fn a_define_that_reads_a_later_define_is_an_error() {
        let (_dir, op) = vector_add_with(
            "EARLY = \"LATE + 1\"\nLATE = \"BLOCK * 2\"\nUSER = \"LATE + 3\"",
            None,
        );
        let shape = Shape::parse("100000", &op.spec.dims).unwrap();
        for keep_pruned in [true, false] {
            let err = enumerate_space(&op, &shape, &DeviceLimits::SM90_DEFAULT, &[], keep_pruned)
                .err()
                .expect("EARLY reads LATE before LATE is defined");
            assert!(err.to_string().contains("LATE"), "{err}");
        }
    }

    #[test]
    fn pruned_counts_without_pruned_rows_match_the_pruned_rows() {
        // sgemm narrowed to a twelfth of its space: the whole of it takes long in a debug build.
        // TILE_DIM=0 leaves defines undefined (a division by zero) in part of the space: they
        // prune first, and a failing constraint then decides no subtree they reach into.
        for (name, shape, narrow) in [
            ("sgemm", "999x777x555", &["BM=64", "SPLITK=1,2"][..]),
            ("transpose", "8191x8191", &[][..]),
            ("transpose", "999x1001", &["TILE_DIM=0,32"][..]),
        ] {
            let op = Op::load(name, None).unwrap();
            let shape = Shape::parse(shape, &op.spec.dims).unwrap();
            let limits = DeviceLimits::SM90_DEFAULT;
            let narrow: Vec<ParamOverride> = narrow
                .iter()
                .map(|t| parse_override(&op, t).unwrap())
                .collect();
            let kept = enumerate_space(&op, &shape, &limits, &narrow, true).unwrap();
            let counted = enumerate_space(&op, &shape, &limits, &narrow, false).unwrap();
            assert!(counted.prune_reasons.len() > 1, "{name}");
            assert_eq!(
                counted.prune_reasons,
                prune_summary(&kept.candidates),
                "{name}"
            );
            assert_eq!(counted.prune_reasons, kept.prune_reasons, "{name}");
            let undefined = counted
                .prune_reasons
                .iter()
                .any(|(r, _)| r.starts_with("defines."));
            assert_eq!(
                undefined,
                narrow.len() == 1,
                "{name} {:?}",
                counted.prune_reasons
            );
            let live = |s: &Space| -> Vec<usize> {
                s.candidates
                    .iter()
                    .filter(|c| c.pruned.is_none())
                    .map(|c| c.index)
                    .collect()
            };
            assert_eq!(live(&counted), live(&kept), "{name}");
        }
    }
}
