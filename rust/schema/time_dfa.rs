//! The RFC 3339 `full-time` automaton, built state by state.
//!
//! A leap second (`:60`) is valid only at 23:59 UTC, so after `HH:MM:60`
//! the automaton must remember the local time until it has read the
//! offset: about 15 states for each of the 1440 minutes of a day. As a
//! regex that is a 1440-way alternation, which regex-automata took about
//! 100 ms to determinize. Laid out directly, with the states that read an
//! offset shared by the text left to read (`+05:30` and `-05:30` end alike),
//! it has 11k states and takes a few milliseconds.
//! `strings::time_regex` stays the specification: a test checks that both
//! accept the same strings.

use rustc_hash::FxHashMap as HashMap;

use crate::regex_dfa::ByteDfa;

const DIGITS: std::ops::RangeInclusive<u8> = b'0'..=b'9';
/// Minutes of a day; 23:59 is the only local time a leap second may have
/// without an offset.
const DAY: u32 = 24 * 60;
const UTC_LAST_MINUTE: u32 = 23 * 60 + 59;

/// The bytes of a time; every other byte leads to the dead state.
const ALPHABET: &[u8; 16] = b"0123456789:.+-Zz";

/// States with their transitions (a row of `ALPHABET.len()` per state); 0
/// is dead and 1 the start.
struct Builder {
    trans: Vec<u32>,
    accepting: Vec<bool>,
    /// The state that reads exactly this text, then accepts.
    reading: HashMap<String, u32>,
}

impl Builder {
    fn state(&mut self, accepting: bool) -> u32 {
        self.trans.extend([0; ALPHABET.len()]);
        self.accepting.push(accepting);
        (self.accepting.len() - 1) as u32
    }

    fn edge(&mut self, from: u32, bytes: impl IntoIterator<Item = u8>, to: u32) {
        for b in bytes {
            self.trans[from as usize * ALPHABET.len() + letter(b)] = to;
        }
    }

    /// The state from which exactly `text` leads to `accept`.
    fn reads(&mut self, text: &str, accept: u32) -> u32 {
        let Some(first) = text.bytes().next() else {
            return accept;
        };
        if let Some(&q) = self.reading.get(text) {
            return q;
        }
        let rest = self.reads(&text[1..], accept);
        let q = self.state(false);
        self.edge(q, [first], rest);
        self.reading.insert(text.to_string(), q);
        q
    }
}

/// The column of `byte` in a row (a byte of `ALPHABET`).
fn letter(byte: u8) -> usize {
    ALPHABET
        .iter()
        .position(|&b| b == byte)
        .expect("time bytes are in the alphabet")
}

/// `HH:MM` of a number of minutes.
fn clock(minutes: u32) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

/// The strings `strings::time_regex` matches.
pub fn full_time() -> ByteDfa {
    let mut b = Builder {
        trans: Vec::new(),
        accepting: Vec::new(),
        reading: HashMap::default(),
    };
    b.state(false); // dead
    let start = b.state(false);
    let accept = b.state(true);
    // An offset `(?:[01][0-9]|2[0-3]):[0-5][0-9]` after `+` or `-`.
    let offset = b.state(false);
    let (low_hour, high_hour) = (b.state(false), b.state(false));
    let (colon, minute, minute_digit) = (b.state(false), b.state(false), b.state(false));
    b.edge(offset, b'0'..=b'1', low_hour);
    b.edge(offset, [b'2'], high_hour);
    b.edge(low_hour, DIGITS, colon);
    b.edge(high_hour, b'0'..=b'3', colon);
    b.edge(colon, [b':'], minute);
    b.edge(minute, b'0'..=b'5', minute_digit);
    b.edge(minute_digit, DIGITS, accept);
    // After seconds (and after each fraction digit): the zone.
    let zone = |b: &mut Builder, at: u32| {
        b.edge(at, [b'Z', b'z'], accept);
        b.edge(at, [b'+', b'-'], offset);
    };
    // Seconds 00-59 at any local time: the local time no longer matters.
    let (second, seconds, fraction, fraction_digits) = (
        b.state(false),
        b.state(false),
        b.state(false),
        b.state(false),
    );
    b.edge(second, DIGITS, seconds);
    zone(&mut b, seconds);
    b.edge(seconds, [b'.'], fraction);
    b.edge(fraction, DIGITS, fraction_digits);
    b.edge(fraction_digits, DIGITS, fraction_digits);
    zone(&mut b, fraction_digits);
    // `HH:MM:` as a trie, keeping the local time.
    let mut hour_tens = [0u32; 3];
    for (tens, state) in hour_tens.iter_mut().enumerate() {
        *state = b.state(false);
        b.edge(start, [b'0' + tens as u8], *state);
    }
    for hour in 0..24u32 {
        let (at_hour, hour_colon) = (b.state(false), b.state(false));
        b.edge(
            hour_tens[hour as usize / 10],
            [b'0' + (hour % 10) as u8],
            at_hour,
        );
        b.edge(at_hour, [b':'], hour_colon);
        for tens in 0..6u32 {
            let at_tens = b.state(false);
            b.edge(hour_colon, [b'0' + tens as u8], at_tens);
            for units in 0..10u32 {
                let local = hour * 60 + tens * 10 + units;
                let (at_minute, seconds_next) = (b.state(false), b.state(false));
                b.edge(at_tens, [b'0' + units as u8], at_minute);
                b.edge(at_minute, [b':'], seconds_next);
                b.edge(seconds_next, b'0'..=b'5', second);
                leap_second(&mut b, seconds_next, local, accept);
            }
        }
    }
    let Builder {
        trans, accepting, ..
    } = b;
    let mut column = [0usize; 256];
    for (i, &byte) in ALPHABET.iter().enumerate() {
        column[byte as usize] = i;
    }
    ByteDfa::from_transitions(ALPHABET, accepting, |q, byte| {
        trans[q as usize * ALPHABET.len() + column[byte as usize]]
    })
    .expect("full-time matches strings")
}

/// `60`, an optional fraction and the zones that put `local` at 23:59 UTC.
fn leap_second(b: &mut Builder, seconds_next: u32, local: u32, accept: u32) {
    let (six, sixty, fraction, fraction_digits) = (
        b.state(false),
        b.state(false),
        b.state(false),
        b.state(false),
    );
    b.edge(seconds_next, [b'6'], six);
    b.edge(six, [b'0'], sixty);
    b.edge(sixty, [b'.'], fraction);
    b.edge(fraction, DIGITS, fraction_digits);
    b.edge(fraction_digits, DIGITS, fraction_digits);
    let ahead = (local + DAY - UTC_LAST_MINUTE) % DAY; // local = UTC + ahead
    let behind = (DAY - ahead) % DAY;
    for (sign, text) in [(b'+', clock(ahead)), (b'-', clock(behind))] {
        let offset = b.reads(&text, accept);
        for from in [sixty, fraction_digits] {
            b.edge(from, [sign], offset);
        }
    }
    if local == UTC_LAST_MINUTE {
        for from in [sixty, fraction_digits] {
            b.edge(from, [b'Z', b'z'], accept);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regex_dfa::Op;

    /// The automaton accepts exactly what `time_regex` matches.
    #[test]
    fn full_time_equals_its_regex() {
        let built = full_time();
        let spec = ByteDfa::new(&crate::schema::strings::format_regex("time").unwrap()).unwrap();
        for (a, b) in [(&built, &spec), (&spec, &built)] {
            let extra = ByteDfa::product(a, b, Op::AndNot);
            assert!(
                matches!(&extra, Err(e) if e.to_string().contains("matches no string")),
                "the automata differ"
            );
        }
        let accepts = |s: &str| {
            let q = built.step_bytes(built.start(), s.as_bytes());
            q != crate::regex_dfa::DEAD && built.is_accepting(q)
        };
        assert!(accepts("12:30:60.5+12:31") && accepts("23:59:60Z") && accepts("08:00:59-01:00"));
        assert!(!accepts("12:30:60Z") && !accepts("24:00:00Z") && !accepts("12:30:60+12:30"));
    }
}
