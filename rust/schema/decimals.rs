//! Regular expressions for JSON numbers on one side of a decimal bound
//! (`minimum`, `exclusiveMaximum`, ... on non-integer numbers).
//!
//! Without an exponent, a number compares with the bound digit by digit,
//! which is regular. With an exponent it is regular only when the mantissa
//! is normalized (one nonzero digit before the point, as json.dumps writes
//! floats: `1.5e-07`): then the exponent alone orders magnitudes unless it
//! equals the bound's. So bounded numbers take exponent-free forms, those
//! normalized forms, and zero with any exponent; other exponent forms
//! (`12e3`, `0.5e1`) are not produced.

use super::numbers::nonneg;
use crate::regex_dfa::ByteDfa;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Gt,
    Ge,
    Lt,
    Le,
}

impl Cmp {
    fn greater(self) -> bool {
        matches!(self, Cmp::Gt | Cmp::Ge)
    }

    fn strict(self) -> bool {
        matches!(self, Cmp::Gt | Cmp::Lt)
    }

    /// The comparison of magnitudes when both sides are negated.
    fn flipped(self) -> Cmp {
        match self {
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
        }
    }

    fn holds(self, ord: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Cmp::Gt => ord == Greater,
            Cmp::Ge => ord != Less,
            Cmp::Lt => ord == Less,
            Cmp::Le => ord != Greater,
        }
    }
}

const FRAC: &str = r"(?:\.[0-9]+)?";
/// Every number text produced where values are compared (see above).
pub const FORMS: &str = concat!(
    r"-?(?:(?:0|[1-9][0-9]*)(?:\.[0-9]+)?|[1-9](?:\.[0-9]+)?[eE][+-]?[0-9]+",
    r"|0(?:\.0+)?[eE][+-]?[0-9]+)"
);
const PLAIN_ANY: &str = r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?";
const MANTISSA_ANY: &str = r"[1-9](?:\.[0-9]+)?";
const EXP_ANY: &str = r"[eE][+-]?[0-9]+";

/// A non-negative decimal: integer digits without leading zeros ("0" for
/// none) and fraction digits without trailing zeros.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Decimal {
    int: String,
    frac: String,
}

impl Decimal {
    fn is_zero(&self) -> bool {
        self.int == "0" && self.frac.is_empty()
    }

    /// Its significant digits as a mantissa `d.ddd` and the power of ten.
    fn normalized(&self) -> (Decimal, i64) {
        let digits = format!("{}{}", self.int.trim_start_matches('0'), self.frac);
        let lead = digits.len() - digits.trim_start_matches('0').len();
        let exp = if self.int != "0" {
            self.int.len() as i64 - 1
        } else {
            -(lead as i64) - 1
        };
        let sig = digits.trim_start_matches('0');
        let mantissa = Decimal {
            int: sig[..1].to_string(),
            frac: sig[1..].trim_end_matches('0').to_string(),
        };
        (mantissa, exp)
    }
}

/// The sign and magnitude of a bound's decimal text (`-12.50`, `7`).
fn parse(text: &str) -> (bool, Decimal) {
    let (neg, mag) = match text.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, text),
    };
    let (int, frac) = mag.split_once('.').unwrap_or((mag, ""));
    let int = int.trim_start_matches('0');
    let d = Decimal {
        int: if int.is_empty() { "0" } else { int }.to_string(),
        frac: frac.trim_end_matches('0').to_string(),
    };
    let neg = neg && !d.is_zero();
    (neg, d)
}

fn digit(s: &str, i: usize) -> u8 {
    s.as_bytes()[i] - b'0'
}

/// Alternatives for exponent-free magnitudes `y` (`single`: mantissas, one
/// nonzero integer digit) with `y op d`.
fn plain(d: &Decimal, op: Cmp, single: bool) -> Vec<String> {
    let (int, frac) = (d.int.as_str(), d.frac.as_str());
    let n = int.len();
    let mut alts = Vec::new();
    let lowest = |i: usize| if i == 0 && (n > 1 || single) { 1 } else { 0 };
    if op.greater() {
        if !single {
            alts.push(format!("[1-9][0-9]{{{n},}}{FRAC}"));
        }
        for i in 0..n {
            let c = digit(int, i);
            if c < 9 {
                let from = (c + 1).max(lowest(i));
                alts.push(format!(
                    "{}[{from}-9][0-9]{{{}}}{FRAC}",
                    &int[..i],
                    n - i - 1
                ));
            }
        }
        for j in 0..frac.len() {
            let c = digit(frac, j);
            if c < 9 {
                alts.push(format!("{int}\\.{}[{}-9][0-9]*", &frac[..j], c + 1));
            }
        }
        alts.push(format!("{int}\\.{frac}[0-9]*[1-9][0-9]*"));
    } else {
        if n >= 2 && !single {
            alts.push(format!("(?:0|[1-9][0-9]{{0,{}}}){FRAC}", n - 2));
        }
        for i in 0..n {
            let c = digit(int, i);
            if c > lowest(i) {
                let (lo, hi) = (lowest(i), c - 1);
                alts.push(format!(
                    "{}[{lo}-{hi}][0-9]{{{}}}{FRAC}",
                    &int[..i],
                    n - i - 1
                ));
            }
        }
        if !frac.is_empty() {
            alts.push(int.to_string());
            for j in 0..frac.len() {
                let c = digit(frac, j);
                if c > 0 {
                    alts.push(format!("{int}\\.{}[0-{}][0-9]*", &frac[..j], c - 1));
                }
                if j > 0 {
                    alts.push(format!("{int}\\.{}", &frac[..j]));
                }
            }
        }
    }
    if !op.strict() {
        alts.push(if frac.is_empty() {
            format!("{int}(?:\\.0+)?")
        } else {
            format!("{int}\\.{frac}0*")
        });
    }
    alts
}

/// `[eE]` and an exponent in `lo..=hi` (leading zeros and `+` allowed).
fn exponent(lo: Option<i64>, hi: Option<i64>) -> Option<String> {
    let mut alts = Vec::new();
    let nn_lo = lo.map_or(0, |a| a.max(0));
    if hi.is_none_or(|b| b >= nn_lo) {
        let part = nonneg(nn_lo as u128, hi.map(|b| b as u128));
        alts.push(format!("\\+?0*(?:{})", part.join("|")));
    }
    let neg_lo = hi.map_or(1, |b| (-b).max(1));
    if lo.is_none_or(|a| -a >= neg_lo) {
        let part = nonneg(neg_lo as u128, lo.map(|a| (-a) as u128));
        if !part.is_empty() {
            alts.push(format!("-0*(?:{})", part.join("|")));
        }
    }
    if lo.is_none_or(|a| a <= 0) && hi.is_none_or(|b| b >= 0) {
        alts.push("-0+".to_string());
    }
    (!alts.is_empty()).then(|| format!("[eE](?:{})", alts.join("|")))
}

/// Alternatives for magnitudes `y` (both forms) with `y op c`, `c` being
/// `d`, negated when `negative`.
fn magnitude(d: &Decimal, negative: bool, op: Cmp) -> Vec<String> {
    if negative {
        // y >= 0 > c: every magnitude is greater.
        return if op.greater() {
            vec![PLAIN_ANY.to_string(), format!("{MANTISSA_ANY}{EXP_ANY}")]
        } else {
            Vec::new()
        };
    }
    let mut alts = plain(d, op, false);
    if d.is_zero() {
        if op.greater() {
            alts.push(format!("{MANTISSA_ANY}{EXP_ANY}"));
        }
        return alts;
    }
    let (m, g) = d.normalized();
    let beyond = if op.greater() {
        exponent(Some(g + 1), None)
    } else {
        exponent(None, Some(g - 1))
    };
    alts.extend(beyond.map(|e| format!("{MANTISSA_ANY}{e}")));
    let same = plain(&m, op, true);
    if !same.is_empty() {
        let e = exponent(Some(g), Some(g)).expect("one exponent");
        alts.push(format!("(?:{}){e}", same.join("|")));
    }
    alts
}

/// The texts in `FORMS` of the number whose decimal text is `value`.
pub fn equal_regex(value: &str) -> String {
    let (neg, d) = parse(value);
    if d.is_zero() {
        return format!("-?0(?:\\.0+)?(?:{EXP_ANY})?");
    }
    let digits = |d: &Decimal| {
        if d.frac.is_empty() {
            format!("{}(?:\\.0+)?", d.int)
        } else {
            format!("{}\\.{}0*", d.int, d.frac)
        }
    };
    let (m, g) = d.normalized();
    let e = exponent(Some(g), Some(g)).expect("one exponent");
    let sign = if neg { "-" } else { "" };
    format!("{sign}(?:{}|{}{e})", digits(&d), digits(&m))
}

/// A regex (Rust syntax) for the JSON numbers `x` with `x op bound` (the
/// bound's decimal text), in the forms described above; None if none.
pub fn bound_regex(bound: &str, op: Cmp) -> Option<String> {
    let (neg, d) = parse(bound);
    let mut alts = magnitude(&d, neg, op);
    // -y op b  <=>  y op' -b
    let negated = magnitude(&d, !neg && !d.is_zero(), op.flipped());
    if !negated.is_empty() {
        alts.push(format!("-(?:{})", negated.join("|")));
    }
    let zero_cmp = if d.is_zero() {
        std::cmp::Ordering::Equal
    } else if neg {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Less
    };
    if op.holds(zero_cmp) {
        alts.push(format!("-?0(?:\\.0+)?{EXP_ANY}"));
    }
    (!alts.is_empty()).then(|| format!("(?:{})", alts.join("|")))
}

/// Bound on the states of a `multipleOf` automaton (its divisor's digits
/// times its scale).
const MAX_MULTIPLE_STATES: u64 = 1 << 19;

/// A positive decimal as an integer `m` and a scale `s` (`m / 10^s`), or
/// None if it is not positive or does not fit.
fn ratio(text: &str) -> Option<(u64, u32)> {
    let (neg, d) = parse(text);
    if neg || d.is_zero() {
        return None;
    }
    let digits = format!("{}{}", d.int, d.frac);
    let m: u64 = digits.trim_start_matches('0').parse().ok()?;
    Some((m, d.frac.len() as u32))
}

/// Whether decimal `value` is a multiple of positive decimal `divisor`
/// (None: not positive, or past 128-bit arithmetic).
pub fn is_multiple(value: &str, divisor: &str) -> Option<bool> {
    let (md, sd) = ratio(divisor)?;
    let (_, v) = parse(value);
    let digits = format!("{}{}", v.int, v.frac);
    let mv: u128 = digits.trim_start_matches('0').parse().unwrap_or(0);
    let sv = v.frac.len() as u32;
    let s = sd.max(sv);
    let scale = |m: u128, by: u32| m.checked_mul(10u128.checked_pow(by)?);
    Some(scale(mv, s - sv)? % scale(md as u128, s - sd)? == 0)
}

/// Why `divisor` cannot be a `multipleOf` (not positive, or its automaton
/// too large), if so.
pub fn check_divisor(divisor: &str) -> Result<(), String> {
    let Some((m, s)) = ratio(divisor) else {
        return Err(format!(
            "`multipleOf` must be a positive number (got {divisor})"
        ));
    };
    let states = m.saturating_mul(s as u64 + 3);
    if states > MAX_MULTIPLE_STATES {
        return Err(format!(
            "`multipleOf: {divisor}` needs an automaton of {states} states (at most \
             {MAX_MULTIPLE_STATES})"
        ));
    }
    Ok(())
}

/// The least common multiple of two positive decimals, as decimal text
/// (`0.5` and `0.2` make `1`): what both `multipleOf`s ask together.
pub fn lcm_text(a: &str, b: &str) -> Option<String> {
    let ((ma, sa), (mb, sb)) = (ratio(a)?, ratio(b)?);
    let s = sa.max(sb);
    let scale = |m: u64, by: u32| m.checked_mul(10u64.checked_pow(by)?);
    let (x, y) = (scale(ma, s - sa)?, scale(mb, s - sb)?);
    let gcd = {
        let (mut p, mut q) = (x, y);
        while q != 0 {
            (p, q) = (q, p % q);
        }
        p
    };
    let l = (x / gcd).checked_mul(y)?;
    let digits = format!("{l:0>width$}", width = s as usize + 1);
    let (int, frac) = digits.split_at(digits.len() - s as usize);
    let frac = frac.trim_end_matches('0');
    Some(if frac.is_empty() {
        int.to_string()
    } else {
        format!("{int}.{frac}")
    })
}

/// The JSON number texts without an exponent whose value is a multiple of
/// the positive decimal `divisor`: `v / divisor` is an integer exactly when
/// `v * 10^s` (s: the divisor's scale) is an integer divisible by `m`, so
/// the automaton reads the digits keeping their value modulo `m`, and only
/// zeros past the `s`-th fraction digit. Err: not positive, or too large.
pub fn multiples_dfa(divisor: &str) -> Result<ByteDfa, String> {
    check_divisor(divisor)?;
    let (m, s) = ratio(divisor).expect("checked");
    let (m32, s32) = (m as u32, s);
    // 0 dead, 1 start, 2 after '-', 3 after a leading '0'; then I(r): integer
    // digits read (value r mod m); F(j, r): j fraction digits (j <= s); T(r):
    // more than s fraction digits, all zeros past the s-th.
    const ZERO: u32 = 3;
    let int = |r: u32| 4 + r;
    let frac = |j: u32, r: u32| 4 + m32 + j * m32 + r;
    let tail = |r: u32| 4 + m32 + (s32 + 1) * m32 + r;
    let n = tail(m32) as usize;
    // r * 10^k mod m, the value once the missing fraction digits are zeros.
    let padded = |r: u32, k: u32| (0..k).fold(r as u64, |x, _| x * 10 % m) == 0;
    let mut accepting = vec![false; n];
    accepting[ZERO as usize] = true;
    for r in 0..m32 {
        accepting[int(r) as usize] = padded(r, s32);
        for j in 1..=s32 {
            accepting[frac(j, r) as usize] = padded(r, s32 - j);
        }
        accepting[tail(r) as usize] = r == 0;
    }
    let step = |r: u32, d: u32| ((r as u64 * 10 + d as u64) % m) as u32;
    let next = |q: u32, b: u8| -> u32 {
        let digit = b.is_ascii_digit().then(|| (b - b'0') as u32);
        match (q, digit) {
            (1, None) if b == b'-' => 2,
            (1 | 2, Some(0)) => ZERO,
            (1 | 2, Some(d)) => int(d % m32),
            (1 | 2, None) => 0,
            (ZERO, None) if b == b'.' => frac(0, 0),
            (ZERO, _) => 0,
            _ if q < frac(0, 0) => {
                let r = q - int(0);
                match digit {
                    Some(d) => int(step(r, d)),
                    None if b == b'.' => frac(0, r),
                    None => 0,
                }
            }
            _ if q < tail(0) => {
                let (j, r) = ((q - frac(0, 0)) / m32, (q - frac(0, 0)) % m32);
                match digit {
                    Some(d) if j < s32 => frac(j + 1, step(r, d)),
                    Some(0) => tail(r),
                    _ => 0,
                }
            }
            _ => match digit {
                Some(0) => q,
                _ => 0,
            },
        }
    };
    ByteDfa::from_transitions(b"-.0123456789", accepting, next)
        .ok_or_else(|| format!("`multipleOf: {divisor}`: no number is a multiple"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_regex::Regex;

    /// Exact decimal comparison of two plain texts (an oracle that shares
    /// nothing with the regex construction).
    fn compare(a: f64, b: &str) -> std::cmp::Ordering {
        a.partial_cmp(&b.parse::<f64>().unwrap()).unwrap()
    }

    #[test]
    fn bounds_split_numbers_exactly() {
        let texts = [
            "0", "-0", "0.0", "-0.00", "1", "-1", "0.5", "0.49", "0.51", "0.05", "1.25", "1.2",
            "1.250", "1.26", "12", "12.5", "99", "100", "100.0", "100.01", "-0.5", "-12.5",
            "-12.49", "-13", "1e2", "1E+2", "1.5e-07", "-2.5e3", "1e-05", "9.99e1", "1.0001e2",
            "0e5", "-0.0E-3", "7e0", "1e02", "1.25e-0",
        ];
        for bound in [
            "0", "0.5", "1.25", "12.5", "100", "-12.5", "0.05", "-1", "99.9",
        ] {
            for op in [Cmp::Gt, Cmp::Ge, Cmp::Lt, Cmp::Le] {
                let re = bound_regex(bound, op).map(|r| Regex::new(&format!("^(?:{r})$")).unwrap());
                for t in texts {
                    let x: f64 = t.parse().unwrap();
                    let want = op.holds(compare(x, bound));
                    let got = re.as_ref().is_some_and(|r| r.is_match(t));
                    assert_eq!(got, want, "{t} {op:?} {bound}");
                }
                // Equality agrees with the two inclusive bounds.
                let eq = Regex::new(&format!("^(?:{})$", equal_regex(bound))).unwrap();
                let forms = Regex::new(&format!("^(?:{FORMS})$")).unwrap();
                for t in texts {
                    let x: f64 = t.parse().unwrap();
                    let want = compare(x, bound).is_eq() && forms.is_match(t);
                    assert_eq!(eq.is_match(t), want, "{t} == {bound}");
                }
                // Exponent forms json.dumps never writes are not produced.
                for t in ["12e3", "0.5e1", "-10e-1"] {
                    assert!(!re.as_ref().is_some_and(|r| r.is_match(t)), "{t}");
                }
            }
        }
    }

    #[test]
    fn multiples_are_exact_decimal_multiples() {
        // Every number text of up to 6 bytes (no exponent) against exact
        // rational arithmetic: v / k is an integer iff v*10^6 % (k*10^6) == 0.
        let mut texts = vec![String::new()];
        let mut all = Vec::new();
        for _ in 0..6 {
            let mut next = Vec::new();
            for t in &texts {
                for c in ['-', '.', '0', '1', '2', '5', '7'] {
                    next.push(format!("{t}{c}"));
                }
            }
            all.extend(next.iter().cloned());
            texts = next;
        }
        let re = crate::regex_dfa::ByteDfa::new(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?").unwrap();
        let micro = |t: &str| -> i128 {
            let (neg, d) = parse(t);
            let frac = format!("{:0<6}", d.frac);
            let v: i128 = format!("{}{}", d.int, frac).parse().unwrap();
            if neg {
                -v
            } else {
                v
            }
        };
        for divisor in ["1", "2", "0.5", "0.25", "7", "0.01", "2.5", "12"] {
            let dfa = multiples_dfa(divisor).unwrap();
            let k = micro(divisor);
            for t in &all {
                let is_number = re.is_accepting(re.step_bytes(re.start(), t.as_bytes()));
                let expected = is_number && micro(t) % k == 0;
                let got = dfa.is_accepting(dfa.step_bytes(dfa.start(), t.as_bytes()));
                assert_eq!(got, expected, "{t} multiple of {divisor}");
            }
        }
        assert_eq!(lcm_text("0.5", "0.2").as_deref(), Some("1"));
        assert_eq!(lcm_text("0.25", "0.1").as_deref(), Some("0.5"));
        assert_eq!(lcm_text("4", "6").as_deref(), Some("12"));
        assert!(multiples_dfa("0").is_err() && multiples_dfa("-2").is_err());
    }
}
