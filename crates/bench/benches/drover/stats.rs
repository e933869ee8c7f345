//! Medians: the machine is shared and noisy, so one run proves nothing.

/// The median of `xs` (the mean of the middle two for an even count).
pub fn median_ms(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
