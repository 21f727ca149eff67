//! What `polyfuse check` lists about a kernel, read back by the benchmarks: its sizes
//! (`params: M = 256, …`) and its arrays (`  NAME: TYPE[DIMS] ROLE` under `arrays:`).

/// An array of the listing.
pub(crate) struct Array {
    pub(crate) name: String,
    /// `f16`, `f32`, `f64`, `i32`.
    pub(crate) elem: String,
    /// `input`, `output`, `inout` or `temporary`.
    pub(crate) role: String,
    /// Elements at the listed sizes (1 for a scalar).
    pub(crate) elements: u64,
}

/// The sizes and their values.
pub(crate) fn params(text: &str) -> Vec<(String, i64)> {
    text.lines()
        .find_map(|l| l.strip_prefix("params: "))
        .map(|l| {
            l.split(", ")
                .filter_map(|p| {
                    let (n, v) = p.split_once(" = ")?;
                    Some((n.to_string(), v.parse().ok()?))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The arrays, their extents evaluated at the listed sizes.
pub(crate) fn arrays(text: &str) -> Result<Vec<Array>, String> {
    let params = params(text);
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if !line.starts_with(' ') {
            inside = line == "arrays:";
            continue;
        }
        if !inside {
            continue;
        }
        let Some((name, ty)) = line.split_once(": ") else {
            continue;
        };
        let (elem, dims) = match ty.split_once('[') {
            Some((e, rest)) => (e, rest.split(']').next().unwrap_or("")),
            None => (ty.split_whitespace().next().unwrap_or(""), ""),
        };
        let mut elements = 1u64;
        for d in dims.split(", ").filter(|d| !d.is_empty()) {
            elements *= eval(d, &params)
                .ok_or_else(|| format!("cannot evaluate the extent `{d}`"))?
                .max(0) as u64;
        }
        out.push(Array {
            name: name.trim().to_string(),
            elem: elem.trim().to_string(),
            role: ty.rsplit(' ').next().unwrap_or("").to_string(),
            elements,
        });
    }
    Ok(out)
}

/// Bytes of an element of type `elem`.
pub(crate) fn elem_bytes(elem: &str) -> Option<u64> {
    match elem {
        "f16" => Some(2),
        "f32" | "i32" => Some(4),
        "f64" => Some(8),
        _ => None,
    }
}

/// An extent `A + B - 1`, `2 * A`, `2H + 1`: sums of products of sizes and integers (a number
/// right before a size multiplies it, as the listing writes them).
fn eval(expr: &str, params: &[(String, i64)]) -> Option<i64> {
    let spaced = expr
        .replace('*', " * ")
        .replace('+', " + ")
        .replace('-', " - ");
    let (mut total, mut sign, mut product) = (0i64, 1i64, 1i64);
    for token in spaced.split_whitespace() {
        match token {
            "+" | "-" => {
                total += sign * product;
                sign = if token == "+" { 1 } else { -1 };
                product = 1;
            }
            "*" => {}
            t => {
                let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                let (number, name) = t.split_at(digits);
                if !number.is_empty() {
                    product *= number.parse::<i64>().ok()?;
                }
                if !name.is_empty() {
                    product *= params.iter().find(|(n, _)| n == name)?.1;
                }
            }
        }
    }
    Some(total + sign * product)
}

#[cfg(test)]
mod tests {
    use super::eval;

    #[test]
    fn extents_as_the_listing_writes_them() {
        let params = vec![("H".to_string(), 16), ("NI".to_string(), 3)];
        assert_eq!(eval("2H + 1", &params), Some(33));
        assert_eq!(eval("2 * NI - 1", &params), Some(5));
        assert_eq!(eval("H", &params), Some(16));
        assert_eq!(eval("7", &params), Some(7));
        assert_eq!(eval("2X", &params), None);
    }
}
