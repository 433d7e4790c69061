//! Regular expressions for JSON integers in a range, as the decimal text
//! `json.dumps` writes (no leading zeros; `-0` is the integer 0 too). A range
//! of digit strings of one length splits into runs `prefix [x-y] [0-9]{k}`.

/// A regex (Rust syntax) matching exactly the integers in `lo..=hi` (None: unbounded).
pub fn int_range_regex(lo: Option<i128>, hi: Option<i128>) -> Option<String> {
    if let (Some(a), Some(b)) = (lo, hi) {
        if a > b {
            return None;
        }
    }
    let mut alts = Vec::new();
    // Non-negative part: [max(lo, 0), hi].
    let nn_lo = lo.map_or(0, |a| a.max(0));
    if hi.is_none_or(|b| b >= nn_lo) {
        alts.extend(nonneg(nn_lo as u128, hi.map(|b| b as u128)));
    }
    // Negative part: -[max(1, -hi), -lo].
    let neg_lo = hi.map_or(1, |b| (-b).max(1));
    if lo.is_none_or(|a| -a >= neg_lo) {
        let part = nonneg(neg_lo as u128, lo.map(|a| (-a) as u128));
        if !part.is_empty() {
            alts.push(format!("-(?:{})", part.join("|")));
        }
    }
    if lo.is_none_or(|a| a <= 0) && hi.is_none_or(|b| b >= 0) {
        alts.push("-0".to_string());
    }
    (!alts.is_empty()).then(|| format!("(?:{})", alts.join("|")))
}

fn digits(n: u128) -> usize {
    n.to_string().len()
}

/// Alternatives matching the decimal texts of `lo..=hi` (None: unbounded).
pub(super) fn nonneg(lo: u128, hi: Option<u128>) -> Vec<String> {
    let mut out = Vec::new();
    let top = match hi {
        Some(h) => digits(h),
        None => digits(lo),
    };
    for d in digits(lo)..=top {
        let first = if d == 1 { 0 } else { 10u128.pow(d as u32 - 1) };
        let last = 10u128.pow(d as u32) - 1;
        let (a, b) = (lo.max(first), hi.map_or(last, |h| h.min(last)));
        if a <= b {
            out.extend(same_length(&a.to_string(), &b.to_string()));
        }
    }
    if hi.is_none() {
        out.push(format!("[1-9][0-9]{{{},}}", top));
    }
    out
}

/// Alternatives for the digit strings from `lo` to `hi`, both of one length.
fn same_length(lo: &str, hi: &str) -> Vec<String> {
    if lo == hi {
        return vec![lo.to_string()];
    }
    let i = lo
        .bytes()
        .zip(hi.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let (prefix, n) = (&lo[..i], lo.len() - i - 1);
    let (x, y) = (lo.as_bytes()[i] - b'0', hi.as_bytes()[i] - b'0');
    let tail = |k: usize| {
        if k == 0 {
            String::new()
        } else {
            format!("[0-9]{{{k}}}")
        }
    };
    if lo[i + 1..].bytes().all(|c| c == b'0') && hi[i + 1..].bytes().all(|c| c == b'9') {
        return vec![format!("{prefix}[{x}-{y}]{}", tail(n))];
    }
    let mut out = Vec::new();
    let nines = "9".repeat(n);
    let zeros = "0".repeat(n);
    for s in same_length(&lo[i + 1..], &nines) {
        out.push(format!("{prefix}{x}{s}"));
    }
    if x + 1 < y {
        out.push(format!("{prefix}[{}-{}]{}", x + 1, y - 1, tail(n)));
    }
    for s in same_length(&zeros, &hi[i + 1..]) {
        out.push(format!("{prefix}{y}{s}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_regex::Regex;

    fn check(lo: Option<i128>, hi: Option<i128>) {
        let re = int_range_regex(lo, hi).map(|r| Regex::new(&format!("^(?:{r})$")).unwrap());
        for n in -1200i128..=1200 {
            let want = lo.is_none_or(|a| n >= a) && hi.is_none_or(|b| n <= b);
            let got = re.as_ref().is_some_and(|r| r.is_match(&n.to_string()));
            assert_eq!(got, want, "{n} in {lo:?}..={hi:?}");
        }
        let zero_in = lo.is_none_or(|a| a <= 0) && hi.is_none_or(|b| b >= 0);
        let neg_zero = re.as_ref().is_some_and(|r| r.is_match("-0"));
        assert_eq!(neg_zero, zero_in);
        if let Some(r) = &re {
            for bad in ["01", "-01", "00", "+1", "1.5", ""] {
                assert!(!r.is_match(bad), "{bad}");
            }
        }
    }

    #[test]
    fn ranges_match_exactly_their_integers() {
        let bounds = [
            None,
            Some(-1000),
            Some(-101),
            Some(-99),
            Some(-10),
            Some(-1),
            Some(0),
            Some(1),
            Some(7),
            Some(9),
            Some(10),
            Some(99),
            Some(100),
            Some(109),
            Some(250),
            Some(999),
            Some(1000),
        ];
        for lo in bounds {
            for hi in bounds {
                check(lo, hi);
            }
        }
        assert_eq!(int_range_regex(Some(5), Some(4)), None);
    }
}
