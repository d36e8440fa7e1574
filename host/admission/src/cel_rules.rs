//! The CRD's `x-kubernetes-validations` rules, evaluated with the `cel` crate plus the
//! Kubernetes CEL libraries the rules use (the strings extension, and `find` from the regex
//! library). A rule that mentions `oldSelf` is a transition rule: it runs only on an update,
//! where the old object has a value at the same place.

use crate::errors::FieldError;
use crate::structural::{child, regex};
use cel::extractors::This;
use cel::objects::{Key, Map};
use cel::{Context, Env, Program};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// JSON as CEL sees it: integers are `int`, as the API server decodes them.
fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => cel::Value::Int(i),
            None => cel::Value::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => cel::Value::Map(Map {
            map: Arc::new(m.iter().map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v))).collect()),
        }),
    }
}

fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Declared only once, on a fresh environment: it cannot conflict.
        let _ = env.add_extension(cel::extensions::strings);
        Arc::new(env)
    })
    .clone()
}

thread_local! {
    static PROGRAMS: RefCell<HashMap<String, Result<Arc<Program>, String>>> = RefCell::new(HashMap::new());
}

fn compiled(rule: &str) -> Result<Arc<Program>, String> {
    PROGRAMS.with(|c| {
        c.borrow_mut()
            .entry(rule.to_string())
            .or_insert_with(|| env().compile(rule).map(Arc::new).map_err(|e| e.to_string()))
            .clone()
    })
}

/// `s.find(regex)`: the first match, or the empty string.
fn find(This(s): This<Arc<String>>, re: Arc<String>) -> String {
    regex(&re).and_then(|r| r.find(&s).map(|m| m.as_str().to_string())).unwrap_or_default()
}

enum Outcome {
    Holds,
    Fails,
    Error(String),
}

fn evaluate(rule: &str, value: &cel::Value, old: Option<&cel::Value>) -> Outcome {
    let program = match compiled(rule) {
        Ok(p) => p,
        Err(e) => return Outcome::Error(format!("compilation failed: {e}")),
    };
    let mut ctx = Context::with_env(env());
    ctx.add_variable_from_value("self", value.clone());
    if let Some(o) = old {
        ctx.add_variable_from_value("oldSelf", o.clone());
    }
    if let Err(e) = ctx.add_function("find", find) {
        return Outcome::Error(format!("the find function could not be declared: {e:?}"));
    }
    match program.execute(&ctx) {
        Ok(cel::Value::Bool(true)) => Outcome::Holds,
        Ok(cel::Value::Bool(false)) => Outcome::Fails,
        Ok(other) => Outcome::Error(format!("rule did not evaluate to a bool: {other:?}")),
        Err(e) => Outcome::Error(e.to_string()),
    }
}

pub fn validate(s: &Value, v: &Value, old: Option<&Value>, errors: &mut Vec<FieldError>) {
    walk(s, v, old, "", errors);
}

fn walk(s: &Value, v: &Value, old: Option<&Value>, path: &str, errors: &mut Vec<FieldError>) {
    // Converted once for all of this node's rules (a NodeClass spec carries a dozen).
    let (mut this, mut before) = (None, None);
    for r in s.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten() {
        let Some(rule) = r.get("rule").and_then(Value::as_str) else { continue };
        let transition = rule.contains("oldSelf");
        if transition && old.is_none() {
            continue;
        }
        let field = match r.get("fieldPath").and_then(Value::as_str) {
            Some(f) => format!("{path}{f}"),
            None => path.to_string(),
        };
        let this = &*this.get_or_insert_with(|| to_cel(v));
        let before = old.filter(|_| transition).map(|o| &*before.get_or_insert_with(|| to_cel(o)));
        match evaluate(rule, this, before) {
            Outcome::Holds => {}
            Outcome::Fails => {
                let message = match r.get("message").and_then(Value::as_str) {
                    Some(m) => m.to_string(),
                    None => format!("failed rule: {rule}"),
                };
                errors.push(FieldError::invalid(&field, v, message));
            }
            Outcome::Error(e) => errors.push(FieldError::invalid(&field, v, e)),
        }
    }
    match v {
        Value::Object(m) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, val) in m {
                    if path.is_empty() && k == "metadata" {
                        continue;
                    }
                    if let Some(ps) = props.get(k) {
                        walk(ps, val, old.and_then(|o| o.get(k)), &child(path, k), errors);
                    }
                }
            } else if let Some(a) = s.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, val) in m {
                    walk(a, val, old.and_then(|o| o.get(k)), &format!("{path}[{k}]"), errors);
                }
            }
        }
        Value::Array(items) => {
            let Some(is) = s.get("items") else { return };
            for (i, item) in items.iter().enumerate() {
                walk(is, item, correlated(s, item, old), &format!("{path}[{i}]"), errors);
            }
        }
        _ => {}
    }
}

/// The old list's item that `item` is an update of: only map lists (by their keys) and sets
/// (by value) correlate items, as in the API server.
fn correlated<'a>(s: &Value, item: &Value, old: Option<&'a Value>) -> Option<&'a Value> {
    let olds = old?.as_array()?;
    match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => olds.iter().find(|o| *o == item),
        Some("map") => {
            let keys: Vec<&str> =
                s.get("x-kubernetes-list-map-keys")?.as_array()?.iter().filter_map(Value::as_str).collect();
            olds.iter().find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k)))
        }
        _ => None,
    }
}
