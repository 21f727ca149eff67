//! Named tuples and spaces: what a point of a set or a pair of a map *is*.
//!
//! A [`Tuple`] is a name (a statement `S`, an array `A`, or none) and an arity. Two tuples are
//! the same space when name and arity agree; dimension names are kept only for printing and
//! never affect equality. Parameters are named symbolic constants shared by every piece of a
//! set or map and are matched by name when two objects are combined.

use std::fmt;
use std::hash::{Hash, Hasher};

/// A named tuple of integer dimensions, as in `S[i, j]` or `[x]`.
#[derive(Clone, Debug, Eq)]
pub struct Tuple {
    name: Option<String>,
    dims: Vec<String>,
}

impl Tuple {
    /// A tuple named `name` (or unnamed) whose dimensions carry the given names for printing.
    pub fn new(name: Option<&str>, dims: &[&str]) -> Tuple {
        Tuple {
            name: name.map(str::to_owned),
            dims: dims.iter().map(|d| (*d).to_owned()).collect(),
        }
    }

    /// A tuple with `n` dimensions without names.
    pub fn anonymous_dims(name: Option<&str>, n: usize) -> Tuple {
        Tuple {
            name: name.map(str::to_owned),
            dims: vec![String::new(); n],
        }
    }

    pub(crate) fn from_parts(name: Option<String>, dims: Vec<String>) -> Tuple {
        Tuple { name, dims }
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub fn arity(&self) -> usize {
        self.dims.len()
    }

    /// The printing name of dimension `i` (empty when unnamed).
    pub fn dim_name(&self, i: usize) -> &str {
        &self.dims[i]
    }

    pub(crate) fn with_dims(&self, dims: Vec<String>) -> Tuple {
        Tuple {
            name: self.name.clone(),
            dims,
        }
    }

    pub(crate) fn dims(&self) -> &[String] {
        &self.dims
    }
}

impl PartialEq for Tuple {
    fn eq(&self, other: &Tuple) -> bool {
        self.name == other.name && self.dims.len() == other.dims.len()
    }
}

impl Hash for Tuple {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.name.hash(h);
        self.dims.len().hash(h);
    }
}

impl PartialOrd for Tuple {
    fn partial_cmp(&self, other: &Tuple) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Tuple {
    fn cmp(&self, other: &Tuple) -> std::cmp::Ordering {
        (&self.name, self.dims.len()).cmp(&(&other.name, other.dims.len()))
    }
}

impl fmt::Display for Tuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.name.as_deref().unwrap_or(""))?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            if d.is_empty() {
                write!(f, "i{i}")?;
            } else {
                write!(f, "{d}")?;
            }
        }
        write!(f, "]")
    }
}
