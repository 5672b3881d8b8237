//! Python's `str()` of a float, for reason texts that must read exactly as the reference
//! reader writes them (`short_steady_state:19.5`, `invalid_energy_per_token:1e-05`).

/// `repr(x)` as Python 3 prints it: the shortest digits that round-trip, positional for
/// decimal exponents -4 ≤ e < 16 (always with a fractional part), scientific otherwise
/// (`1e-05`, `1.5e+16`), and `nan`, `inf`, `-inf`.
pub fn repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.2345e-5", "1e16".
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let point = exp + 1; // digits before the decimal point
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point >= n {
            format!("{digits}{}.0", "0".repeat((point - n) as usize))
        } else {
            let (a, b) = digits.split_at(point as usize);
            format!("{a}.{b}")
        };
        format!("{sign}{body}")
    } else {
        let e_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{e_sign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::repr;

    #[test]
    fn matches_python() {
        // Each right-hand side is what CPython 3.11 prints for str(float).
        for (x, py) in [
            (17.0, "17.0"),
            (19.5, "19.5"),
            (-0.25, "-0.25"),
            (1e-05, "1e-05"),
            (0.0001, "0.0001"),
            (0.00012345, "0.00012345"),
            (1.5e-07, "1.5e-07"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (9999999999999998.0, "9999999999999998.0"),
            (123456.789, "123456.789"),
            (0.1 + 0.2, "0.30000000000000004"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
            (2.5e-300, "2.5e-300"),
        ] {
            assert_eq!(repr(x), py, "{x:e}");
        }
    }
}
