//! A JSON object read field by field, strictly, for the dialects that refuse what they do not read (Chat
//! Completions, Messages, Responses): each field taken out as it is read, typed, its path named in a refusal, and
//! whatever is left at the end refused as no field of that API. One reader, so that the three dialects name paths
//! and refuse alike.

use std::marker::PhantomData;

use chat_core::InvalidRequest;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// An API whose requests are read with [`Obj`]: its name, as a refusal of an unknown field says it.
pub(crate) trait Api {
    /// As in "is not a field of {NAME} that this backend takes".
    const NAME: &'static str;
}

/// A JSON object being read field by field at `path`: what is left once read is unknown, and refused.
pub(crate) struct Obj<A> {
    pub(crate) path: String,
    pub(crate) map: Map<String, Value>,
    api: PhantomData<A>,
}

impl<A: Api> Obj<A> {
    /// The object `value` at `path`; anything but an object is refused.
    pub(crate) fn new(path: impl Into<String>, value: Value) -> Result<Self, InvalidRequest> {
        let path = path.into();
        match value {
            Value::Object(map) => Ok(Self::of(path, map)),
            other => Err(InvalidRequest::new(
                path,
                format!("expected an object, not {}", kind_of(&other)),
            )),
        }
    }

    /// The object of `map` at `path`.
    pub(crate) fn of(path: impl Into<String>, map: Map<String, Value>) -> Self {
        Self {
            path: path.into(),
            map,
            api: PhantomData,
        }
    }

    /// The path of the field `name`.
    pub(crate) fn at(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.path)
        }
    }

    /// The field's value, taken out; `None` when absent or `null`.
    pub(crate) fn value(&mut self, name: &str) -> Option<Value> {
        self.map.remove(name).filter(|v| !v.is_null())
    }

    /// The field as `T`; `None` when absent or `null`; a value of another type is refused naming the field.
    pub(crate) fn take<T: DeserializeOwned>(
        &mut self,
        name: &str,
    ) -> Result<Option<T>, InvalidRequest> {
        let path = self.at(name);
        self.value(name).map(|v| typed(&path, v)).transpose()
    }

    /// The field as `T`, which must be there.
    pub(crate) fn require<T: DeserializeOwned>(&mut self, name: &str) -> Result<T, InvalidRequest> {
        let path = self.at(name);
        self.take(name)?
            .ok_or_else(|| InvalidRequest::new(path, "is required"))
    }

    /// Refuses a field present with a value (not `null`): what this backend takes only as absent.
    pub(crate) fn refuse(&mut self, name: &str, reason: &str) -> Result<(), InvalidRequest> {
        match self.value(name) {
            Some(_) => Err(InvalidRequest::new(self.at(name), reason)),
            None => Ok(()),
        }
    }

    /// Refuses the first field not read.
    pub(crate) fn finish(self) -> Result<(), InvalidRequest> {
        match self.map.keys().next() {
            None => Ok(()),
            Some(name) => Err(InvalidRequest::new(
                self.at(name),
                format!("is not a field of {} that this backend takes", A::NAME),
            )),
        }
    }
}

/// `value` as `T`, or a refusal at `path` saying what it was.
pub(crate) fn typed<T: DeserializeOwned>(path: &str, value: Value) -> Result<T, InvalidRequest> {
    let what = kind_of(&value);
    serde_json::from_value(value)
        .map_err(|e| InvalidRequest::new(path, format!("{e} (got {what})")))
}

/// What a JSON value is, as a refusal says it.
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
