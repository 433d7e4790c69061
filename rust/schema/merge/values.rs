//! Sets of allowed values in a merge (`enum`, `const`, `not: {enum}`) and
//! JSON equality as JSON Schema means it (numbers by value).

use serde_json::{Map, Value};

use crate::error::Result;
use crate::schema::keywords::is_constraint;
use crate::schema::refuse;

/// The values a `not` of only `enum`/`const` leaves out.
pub(super) fn excluded_values(v: &Value) -> Option<Vec<Value>> {
    let o = v.as_object()?;
    let mut keys = o.keys().filter(|k| is_constraint(k));
    match (keys.next().map(String::as_str), keys.next()) {
        (Some("enum" | "const"), None) => {
            crate::schema::keywords::pinned_values(o).map(|vs| vs.into_iter().cloned().collect())
        }
        _ => None,
    }
}

/// Removes `const` and `enum` from `m`: the values they allow, if any.
pub(super) fn take_values(m: &mut Map<String, Value>, ptr: &str) -> Result<Option<Vec<Value>>> {
    let c = m.remove("const").map(|v| vec![v]);
    let e = match m.remove("enum") {
        None => None,
        Some(Value::Array(x)) => Some(x),
        Some(_) => return refuse(&format!("{ptr}/enum"), "`enum` must be an array"),
    };
    Ok(match (c, e) {
        (Some(c), Some(e)) => Some(intersect_values(c, &e)),
        (c, e) => c.or(e),
    })
}

pub(super) fn intersect_values(x: Vec<Value>, y: &[Value]) -> Vec<Value> {
    x.into_iter()
        .filter(|v| y.iter().any(|w| json_equal(v, w)))
        .collect()
}

/// JSON equality as JSON Schema defines it: numbers by value (1 == 1.0).
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || (x.as_f64().is_some() && x.as_f64() == y.as_f64())
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}
