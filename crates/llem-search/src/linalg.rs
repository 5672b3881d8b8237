//! The little dense linear algebra a Gaussian process needs: a Cholesky factor and triangular
//! solves on row-major n × n matrices built here (n is the number of measurements, a few
//! hundred at most), so no linear-algebra crate.

// Every index below is bounded by the matrix size the function was given and checked on entry;
// nothing here indexes data that came from outside.
#![allow(clippy::indexing_slicing)]

/// The lower-triangular Cholesky factor `L` of the symmetric positive-definite `a` (n × n,
/// row-major) with `L Lᵀ = a`; `None` when `a` is not positive definite (or not n × n).
pub fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    if a.len() != n * n {
        return None;
    }
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut sum = a[i * n + j];
            for k in 0..j {
                sum -= l[i * n + k] * l[j * n + k];
            }
            if i == j {
                if sum.is_nan() || sum <= 0.0 || !sum.is_finite() {
                    return None;
                }
                l[i * n + i] = sum.sqrt();
            } else {
                l[i * n + j] = sum / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// Solves `L x = b` for lower-triangular `L` (n × n, row-major).
pub fn solve_lower(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut x = b.to_vec();
    if l.len() != n * n || b.len() != n {
        return x;
    }
    for i in 0..n {
        let mut s = x[i];
        for k in 0..i {
            s -= l[i * n + k] * x[k];
        }
        x[i] = s / l[i * n + i];
    }
    x
}

/// Solves `Lᵀ x = b` for lower-triangular `L` (n × n, row-major).
pub fn solve_upper_t(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut x = b.to_vec();
    if l.len() != n * n || b.len() != n {
        return x;
    }
    for i in (0..n).rev() {
        let mut s = x[i];
        for k in i + 1..n {
            s -= l[k * n + i] * x[k];
        }
        x[i] = s / l[i * n + i];
    }
    x
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_factor_reproduces_its_matrix_and_solves_a_system() {
        let a = [4.0, 2.0, 0.6, 2.0, 5.0, 1.0, 0.6, 1.0, 3.0];
        let l = cholesky(&a, 3).unwrap();
        for i in 0..3 {
            for j in 0..3 {
                let v: f64 = (0..3).map(|k| l[i * 3 + k] * l[j * 3 + k]).sum();
                assert!((v - a[i * 3 + j]).abs() < 1e-12);
            }
        }
        // a x = b through L y = b, Lᵀ x = y.
        let b = [1.0, -2.0, 0.5];
        let x = solve_upper_t(&l, 3, &solve_lower(&l, 3, &b));
        for i in 0..3 {
            let v: f64 = (0..3).map(|k| a[i * 3 + k] * x[k]).sum();
            assert!((v - b[i]).abs() < 1e-12);
        }
        assert!(cholesky(&[1.0, 2.0, 2.0, 1.0], 2).is_none());
        assert!(cholesky(&[1.0], 2).is_none());
    }
}
