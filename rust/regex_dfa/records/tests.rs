//! The record automaton against the union of every order of every record,
//! spelled as a regex and determinized by regex-automata: the two must
//! accept the same strings (a walk over pairs of their states compares
//! acceptance and deadness after every byte).

use std::collections::HashSet;
use std::sync::Arc;

use super::*;

const WS: &str = "[ \\t\\n\\r]*";

#[derive(Clone, Copy, Debug)]
enum V {
    Str(&'static str),
    Int(i64),
    Float(&'static str),
    /// 1e20: an int text with its float forms, and Python's repr.
    Big,
    /// An array of these, with whitespace runs between its tokens.
    List(&'static [V]),
}

fn regex(re: &str) -> Arc<ByteDfa> {
    Arc::new(ByteDfa::new(re).expect("a test regex"))
}

fn glue_with(ws: &str) -> RecordGlue {
    RecordGlue {
        open: regex(&format!("\\{{{ws}")),
        key_sep: regex(&format!("{ws}:{ws}")),
        item_sep: regex(&format!("{ws},{ws}")),
        close: regex(&format!("{ws}\\}}")),
        space: (!ws.is_empty()).then(|| regex(ws)),
    }
}

fn bytes(t: &str) -> Vec<Part> {
    t.bytes().map(Part::Byte).collect()
}

/// The texts of `v`, with whitespace runs inside arrays when `spaced`.
fn spellings(v: V, spaced: bool) -> Vec<Spelling> {
    let int = |t: &str| {
        let mut s = bytes(t);
        s.push(Part::IntEnd);
        s
    };
    let texts: Vec<Vec<Part>> = match v {
        V::Str(s) => vec![bytes(&format!("\"{s}\""))],
        V::Int(0) => vec![int("0"), int("-0")],
        V::Int(n) => vec![int(&n.to_string())],
        V::Float(f) => vec![bytes(f)],
        V::Big => vec![int("100000000000000000000"), bytes("1e+20")],
        V::List(items) => {
            let space: Vec<Part> = if spaced { vec![Part::Space] } else { vec![] };
            let mut out = vec![bytes("[")];
            for (i, item) in items.iter().enumerate() {
                let sep = if i == 0 {
                    space.clone()
                } else {
                    [space.clone(), bytes(","), space.clone()].concat()
                };
                let mut longer = Vec::new();
                for head in &out {
                    for t in spellings(*item, spaced) {
                        longer.push([head.clone(), sep.clone(), t.0].concat());
                    }
                }
                out = longer;
            }
            let close = [space, bytes("]")].concat();
            out.into_iter()
                .map(|t| [t, close.clone()].concat())
                .collect()
        }
    };
    texts.into_iter().map(Spelling).collect()
}

/// `v`'s texts as a record holds them: sorted, without repeats, shared.
fn texts(v: V, spaced: bool) -> Arc<[Spelling]> {
    let mut s = spellings(v, spaced);
    s.sort_unstable();
    s.dedup();
    s.into()
}

fn record(members: &[(&str, V)], spaced: bool) -> Record {
    Record {
        members: members
            .iter()
            .map(|(k, v)| (format!("\"{k}\"").into_bytes(), texts(*v, spaced)))
            .collect(),
    }
}

fn value_regex(v: V, ws: &str) -> String {
    match v {
        V::Str(s) => regex_syntax::escape(&format!("\"{s}\"")),
        V::Int(0) => "-?0(?:\\.0+)?".into(),
        V::Int(n) => format!("{}(?:\\.0+)?", regex_syntax::escape(&n.to_string())),
        V::Float(f) => regex_syntax::escape(f),
        V::Big => "(?:100000000000000000000(?:\\.0+)?|1e\\+20)".into(),
        V::List(&[]) => format!("\\[{ws}\\]"),
        V::List(items) => {
            let items: Vec<String> = items.iter().map(|x| value_regex(*x, ws)).collect();
            format!("\\[{ws}{}{ws}\\]", items.join(&format!("{ws},{ws}")))
        }
    }
}

/// Every order of every record, as one regex.
fn orders_regex(records: &[Vec<(&str, V)>], ws: &str) -> String {
    let mut alts = Vec::new();
    for r in records {
        let mut orders = vec![vec![]];
        for i in 0..r.len() {
            orders = orders
                .into_iter()
                .flat_map(|o: Vec<usize>| {
                    (0..=o.len()).map(move |at| {
                        let mut o = o.clone();
                        o.insert(at, i);
                        o
                    })
                })
                .collect();
        }
        for o in orders {
            let members: Vec<String> = o
                .iter()
                .map(|&i| {
                    let (k, v) = r[i];
                    format!(
                        "\"{}\"{ws}:{ws}{}",
                        regex_syntax::escape(k),
                        value_regex(v, ws)
                    )
                })
                .collect();
            alts.push(format!(
                "\\{{{ws}{}{ws}\\}}",
                members.join(&format!("{ws},{ws}"))
            ));
        }
    }
    format!("(?:{})", alts.join("|"))
}

fn assert_same_language(want: &ByteDfa, got: &ByteDfa) {
    let mut seen = HashSet::new();
    let mut stack = vec![(want.start(), got.start(), Vec::new())];
    while let Some((p, q, text)) = stack.pop() {
        let shown = String::from_utf8_lossy(&text).into_owned();
        assert_eq!(want.is_accepting(p), got.is_accepting(q), "after {shown:?}");
        for b in 0..=255u8 {
            let (p2, q2) = (want.step(p, b), got.step(q, b));
            assert_eq!(p2 == DEAD, q2 == DEAD, "after {shown:?} + {:?}", b as char);
            if p2 != DEAD && seen.insert((p2, q2)) {
                let mut longer = text.clone();
                longer.push(b);
                stack.push((p2, q2, longer));
            }
        }
    }
    assert!(seen.len() < 200_000, "a small test");
}

fn check(records: &[Vec<(&str, V)>], ws: &str) {
    let built: Vec<Record> = records.iter().map(|r| record(r, !ws.is_empty())).collect();
    let got = records_dfa(&built, &glue_with(ws))
        .expect("within budget")
        .expect("the glue is clear");
    let want = ByteDfa::new(&orders_regex(records, ws)).expect("the orders' regex");
    assert_same_language(&want, &got);
    assert!(got.bytes_after_accepting().is_empty());
    assert_eq!(got.forced_byte(got.start()), Some(b'{'));
}

#[test]
fn one_record_in_every_order() {
    check(
        &[vec![
            ("a", V::Int(1)),
            ("b", V::Str("x")),
            ("c", V::Float("2.5")),
        ]],
        WS,
    );
}

#[test]
fn records_sharing_members_fit_shared_contexts() {
    // "t": 1 is shared by three records (a shared context after it), and
    // {"t": 2} is a subset of another record: it may close or go on.
    check(
        &[
            vec![("t", V::Int(1)), ("a", V::Str("x"))],
            vec![("t", V::Int(1)), ("a", V::Str("y")), ("b", V::Int(0))],
            vec![("t", V::Int(1)), ("b", V::Int(0))],
            vec![("t", V::Int(2))],
            vec![("t", V::Int(2)), ("a", V::Str("x"))],
        ],
        WS,
    );
}

#[test]
fn integral_numbers_run_zeros_beside_decimals() {
    check(
        &[
            vec![("n", V::Int(2)), ("m", V::Int(0))],
            vec![("n", V::Float("2.005")), ("m", V::Int(20))],
            vec![("n", V::Float("2.5")), ("m", V::Float("-0.5"))],
        ],
        WS,
    );
}

#[test]
fn keys_that_prefix_each_other_and_compact_glue() {
    let records = [
        vec![("a", V::Int(1)), ("ab", V::Int(2))],
        vec![("ab", V::Int(1)), ("abc", V::Str(""))],
        vec![("a", V::Int(1)), ("abc", V::Str("a\\\"b"))],
        vec![
            ("a", V::List(&[V::Int(3), V::List(&[])])),
            ("ab", V::List(&[V::Int(3)])),
        ],
    ];
    check(&records, WS);
    check(&records, "");
    check(&records, " ?");
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn random_record_sets_equal_their_orders() {
    const KEYS: [&str; 5] = ["a", "b", "ab", "c", "ba"];
    const VALUES: [V; 17] = [
        V::List(&[]),
        V::List(&[V::Int(2), V::Str("x")]),
        V::List(&[V::Int(2), V::Float("2.5")]),
        V::List(&[V::List(&[V::Int(0)]), V::Int(20)]),
        V::Big,
        V::Int(0),
        V::Int(2),
        V::Int(20),
        V::Int(-1),
        V::Float("2.05"),
        V::Float("2.005"),
        V::Float("2.5"),
        V::Float("0.5"),
        V::Float("-0.25"),
        V::Str(""),
        V::Str("x"),
        V::Str("xy"),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..100 {
        let count = 1 + rng.below(7);
        let records: Vec<Vec<(&str, V)>> = (0..count)
            .map(|_| {
                let mut keys = KEYS.to_vec();
                let m = 1 + rng.below(3);
                (0..m)
                    .map(|_| {
                        let k = keys.remove(rng.below(keys.len()));
                        (k, VALUES[rng.below(VALUES.len())])
                    })
                    .collect()
            })
            .collect();
        check(&records, WS);
    }
}

#[test]
fn what_does_not_apply_is_refused() {
    let one = [record(&[("a", V::Int(1))], true)];
    // The item separator may read a quote after accepting.
    let mut glue = glue_with(WS);
    glue.item_sep = regex("\"?,\"?");
    assert!(records_dfa(&one, &glue).unwrap().is_none());
    // No members; a key twice.
    let glue = glue_with(WS);
    assert!(records_dfa(&[record(&[], true)], &glue).unwrap().is_none());
    let twice = record(&[("a", V::Int(1)), ("a", V::Int(2))], true);
    assert!(records_dfa(&[twice], &glue).unwrap().is_none());
    // Too many members for a mask of used ones.
    let many: Vec<(String, V)> = (0..=MAX_RECORD_MEMBERS)
        .map(|i| (format!("k{i}"), V::Int(1)))
        .collect();
    let many: Vec<(&str, V)> = many.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert!(records_dfa(&[record(&many, true)], &glue)
        .unwrap()
        .is_none());
    // Texts out of order (a caller's slip: records take them sorted).
    let unsorted = Record {
        members: vec![(
            b"\"a\"".to_vec(),
            vec![Spelling(bytes("2")), Spelling(bytes("1"))].into(),
        )],
    };
    assert!(records_dfa(&[unsorted], &glue).unwrap().is_none());
    // More text than the bound.
    let long = Record {
        members: vec![(
            b"\"a\"".to_vec(),
            vec![Spelling(vec![Part::Byte(b'1'); MAX_RECORD_TEXT])].into(),
        )],
    };
    assert!(records_dfa(&[long], &glue).unwrap().is_none());
}

#[test]
fn ten_thousand_records_of_six_members_take_few_bytes() {
    let keys = ["id", "name", "kind", "size", "live", "code"];
    let records: Vec<Record> = (0..10_000)
        .map(|i| Record {
            members: keys
                .iter()
                .enumerate()
                .map(|(j, k)| {
                    let v = match j {
                        0 => V::Int(i),
                        2 => V::Str(["a", "b", "c"][(i % 3) as usize]),
                        4 => V::Int(i % 2),
                        _ => V::Int(i * 7 + j as i64),
                    };
                    (format!("\"{k}\"").into_bytes(), texts(v, true))
                })
                .collect(),
        })
        .collect();
    let d = records_dfa(&records, &glue_with(WS)).unwrap().unwrap();
    assert!(d.memory_bytes() < 16 << 20, "{}", d.memory_bytes());
    // Record 1234 in one order, then with its keys reversed.
    for order in [[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]] {
        let i = 1234i64;
        let text: Vec<String> = order
            .iter()
            .map(|&j| {
                let v = match j {
                    0 => i.to_string(),
                    2 => "\"b\"".into(),
                    4 => "0".into(),
                    _ => (i * 7 + j as i64).to_string(),
                };
                format!("\"{}\": {v}", keys[j])
            })
            .collect();
        let text = format!("{{{}}}", text.join(", "));
        let q = d.step_bytes(d.start(), text.as_bytes());
        assert!(q != DEAD && d.is_accepting(q), "{text}");
        let wrong = text.replace("\"b\"", "\"c\"");
        let q = d.step_bytes(d.start(), wrong.as_bytes());
        assert!(q == DEAD || !d.is_accepting(q), "{wrong}");
    }
}
