//! JSON string contents as regexes over the *encoded* text (what sits
//! between the quotes): plain strings take any valid escape; strings whose
//! characters are constrained (`pattern`, `enum`, `const`, `format`) take
//! the encoding `json.dumps(..., ensure_ascii=False)` writes: `"` and `\` and
//! control characters escaped, everything else raw.

use crate::regex_dfa::{ByteDfa, DEAD};
use regex_syntax::hir::{
    Capture, Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Look, Repetition,
};

/// One character of a JSON string, raw or escaped (any valid escape).
pub const ANY_CHAR: &str = r#"(?:[^"\\\x00-\x1F]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))"#;

/// json.dumps's escape for `c`, if it escapes it.
fn escape(c: char) -> Option<String> {
    Some(match c {
        '"' => "\\\"".into(),
        '\\' => "\\\\".into(),
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        '\u{8}' => "\\b".into(),
        '\u{c}' => "\\f".into(),
        c if (c as u32) < 0x20 => format!("\\u{:04x}", c as u32),
        _ => return None,
    })
}

/// The text json.dumps(ensure_ascii=False) writes for `s`, without quotes.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match escape(c) {
            Some(e) => out.push_str(&e),
            None => out.push(c),
        }
    }
    out
}

/// Characters that json.dumps never writes raw.
fn escaped_chars() -> ClassUnicode {
    ClassUnicode::new([
        ClassUnicodeRange::new('\0', '\u{1f}'),
        ClassUnicodeRange::new('"', '"'),
        ClassUnicodeRange::new('\\', '\\'),
    ])
}

/// `class` over encoded text: its raw characters plus the escapes of those
/// json.dumps escapes, written compactly (`\\u00` then a class of hex digits,
/// not one alternative per character: automata over a pattern searched with
/// `any*` carry this in every state).
fn encode_class(class: &ClassUnicode) -> Hir {
    let mut raw = class.clone();
    raw.difference(&escaped_chars());
    let mut special = class.clone();
    special.intersect(&escaped_chars());
    // Escapes json.dumps writes: `\x` for a letter or symbol x, or `\u00HL`.
    let (mut short, mut low0, mut low1) = (Vec::new(), Vec::new(), Vec::new());
    for r in special.iter() {
        for c in r.start()..=r.end() {
            let e: Vec<char> = escape(c).expect("escaped class").chars().collect();
            match e[..] {
                [_, x] => short.push(x),
                [_, _, _, _, '0', l] => low0.push(l),
                [_, _, _, _, _, l] => low1.push(l),
                _ => unreachable!("json.dumps escapes are 2 or 6 characters"),
            }
        }
    }
    let chars = |v: &[char]| {
        Hir::class(Class::Unicode(ClassUnicode::new(
            v.iter().map(|&c| ClassUnicodeRange::new(c, c)),
        )))
    };
    let mut hex = Vec::new();
    for (high, low) in [("0", &low0), ("1", &low1)] {
        if !low.is_empty() {
            hex.push(Hir::concat(vec![Hir::literal(high.as_bytes()), chars(low)]));
        }
    }
    let mut escapes = Vec::new();
    if !short.is_empty() {
        escapes.push(chars(&short));
    }
    if !hex.is_empty() {
        escapes.push(Hir::concat(vec![
            Hir::literal(*b"u00"),
            Hir::alternation(hex),
        ]));
    }
    let mut alts = Vec::new();
    if raw.iter().next().is_some() {
        alts.push(Hir::class(Class::Unicode(raw)));
    }
    if !escapes.is_empty() {
        alts.push(Hir::concat(vec![
            Hir::literal(*b"\\"),
            Hir::alternation(escapes),
        ]));
    }
    if alts.is_empty() {
        // An empty class: nothing matches.
        return Hir::class(Class::Unicode(ClassUnicode::empty()));
    }
    Hir::alternation(alts)
}

/// Any character, as json.dumps writes it.
fn encoded_any() -> Hir {
    let all = ClassUnicode::new([ClassUnicodeRange::new('\0', char::MAX)]);
    encode_class(&all)
}

/// `h` rewritten to match encoded text; anchors are refused here (`ways`
/// takes them out first).
fn translate(h: &Hir) -> Result<Hir, String> {
    Ok(match h.kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0).map_err(|_| "a non-UTF-8 literal".to_string())?;
            Hir::literal(encode(s).into_bytes())
        }
        HirKind::Class(Class::Unicode(c)) => encode_class(c),
        HirKind::Class(Class::Bytes(_)) => return Err("a byte class".into()),
        HirKind::Look(l) => return Err(format!("the assertion {l:?} inside the pattern")),
        HirKind::Repetition(r) => {
            let mut sub = translate(&r.sub)?;
            // regex-syntax prints a repetition of a repetition without a
            // group, so `([0-9]{2})?` would come back as the lazy `[0-9]{2}?`:
            // keep a group around the inner one.
            if matches!(sub.kind(), HirKind::Repetition(_)) {
                sub = Hir::capture(Capture {
                    index: 1,
                    name: None,
                    sub: Box::new(sub),
                });
            }
            Hir::repetition(Repetition {
                sub: Box::new(sub),
                ..r.clone()
            })
        }
        HirKind::Capture(c) => translate(&c.sub)?,
        HirKind::Concat(v) => Hir::concat(v.iter().map(translate).collect::<Result<_, _>>()?),
        HirKind::Alternation(v) => {
            Hir::alternation(v.iter().map(translate).collect::<Result<_, _>>()?)
        }
    })
}

/// The ways a pattern piece matches, by the anchors they need:
/// `ways[2 * s + e]`, where `s`: the piece must start where the text starts
/// (a `^` in it), `e`: it must end where the text ends (a `$`). The bodies
/// are anchor-free and translated; None: no such way.
type Ways = [Option<Hir>; 4];

fn or_way(slot: &mut Option<Hir>, body: Hir) {
    *slot = Some(match slot.take() {
        None => body,
        Some(prev) => Hir::alternation(vec![prev, body]),
    });
}

/// `h`'s ways (see `Ways`); `^` and `$` may sit anywhere but inside a
/// repetition.
fn ways(h: &Hir) -> Result<Ways, String> {
    let mut out: Ways = [None, None, None, None];
    if h.properties().look_set().is_empty() {
        out[0] = Some(translate(h)?);
        return Ok(out);
    }
    match h.kind() {
        HirKind::Look(Look::Start) => out[2] = Some(Hir::empty()),
        HirKind::Look(Look::End) => out[1] = Some(Hir::empty()),
        HirKind::Capture(c) => return ways(&c.sub),
        HirKind::Alternation(v) => {
            for branch in v {
                for (i, body) in ways(branch)?.into_iter().enumerate() {
                    if let Some(b) = body {
                        or_way(&mut out[i], b);
                    }
                }
            }
        }
        HirKind::Concat(v) => {
            out[0] = Some(Hir::empty());
            for item in v {
                let next = ways(item)?;
                let mut joined: Ways = [None, None, None, None];
                for (i, a) in out.iter().enumerate() {
                    for (j, b) in next.iter().enumerate() {
                        let (Some(a), Some(b)) = (a, b) else { continue };
                        let (sa, ea, sb, eb) = (i >= 2, i % 2 == 1, j >= 2, j % 2 == 1);
                        // What must start the text leaves nothing before it:
                        // only the empty match of `a`; likewise after an end.
                        let nullable = |x: &Hir| x.properties().minimum_len() == Some(0);
                        if (sb && !nullable(a)) || (ea && !nullable(b)) {
                            continue;
                        }
                        let a = if sb { Hir::empty() } else { a.clone() };
                        let b = if ea { Hir::empty() } else { b.clone() };
                        let k = 2 * usize::from(sa || sb) + usize::from(ea || eb);
                        or_way(&mut joined[k], Hir::concat(vec![a, b]));
                    }
                }
                out = joined;
            }
        }
        HirKind::Look(l) => return Err(format!("the assertion {l:?} inside the pattern")),
        _ => return Err("an assertion inside a repetition".into()),
    }
    Ok(out)
}

/// The pattern made to search: any text may come before a way that need
/// not start the text and after one that need not end it. Ways with the
/// same anchors share one `any*` on each free side: with one per branch, an
/// automaton would track which branches have matched so far, a state per
/// subset (17 alternatives sharing a prefix took 25 s to refuse).
fn search(h: &Hir) -> Result<Hir, String> {
    let any = Hir::repetition(Repetition {
        min: 0,
        max: None,
        greedy: true,
        sub: Box::new(encoded_any()),
    });
    let alts: Vec<Hir> = ways(h)?
        .into_iter()
        .enumerate()
        .filter_map(|(i, body)| {
            // Way i is free on the left for i < 2, on the right for even i.
            let body = trim_free_edges(body?, i < 2, i % 2 == 0);
            let mut out = Vec::new();
            if i < 2 {
                out.push(any.clone());
            }
            out.push(body);
            if i % 2 == 0 {
                out.push(any.clone());
            }
            Some(Hir::concat(out))
        })
        .collect();
    if alts.is_empty() {
        return Err("the pattern matches no string".into());
    }
    Ok(Hir::alternation(alts))
}

/// `body` with what it may leave out at a free edge (one where any text may
/// come before it, `left`, or after it, `right`) taken off: a text holds a
/// match of `A X` after which anything may follow (`X` matching the empty
/// string) exactly when it holds a match of `A`, and one of `A P{n,m}` exactly
/// when it holds one of `A P{n}`. The same holds on the left. A search
/// language does not change, but its automaton can shrink by orders of
/// magnitude: an unanchored URI pattern of 1,400 characters (RFC 3986's,
/// whose hier-part may be empty) searches for `[A-Za-z][A-Za-z0-9+.-]*:`,
/// and its subset construction took 590 ms before.
fn trim_free_edges(body: Hir, left: bool, right: bool) -> Hir {
    let nullable = |x: &Hir| x.properties().minimum_len() == Some(0);
    if !(left || right) {
        return body;
    }
    if nullable(&body) {
        return Hir::empty();
    }
    match body.kind() {
        HirKind::Capture(c) => trim_free_edges((*c.sub).clone(), left, right),
        HirKind::Concat(items) => {
            let mut items = items.clone();
            if right {
                while items.last().is_some_and(nullable) {
                    items.pop();
                }
            }
            if left {
                let k = items.iter().take_while(|x| nullable(x)).count();
                items.drain(..k);
            }
            // Not empty: the body is not nullable, so some item is not.
            if items.len() == 1 {
                return trim_free_edges(items.remove(0), left, right);
            }
            let last = items.len() - 1;
            if right {
                items[last] = trim_free_edges(items[last].clone(), false, true);
            }
            if left {
                items[0] = trim_free_edges(items[0].clone(), true, false);
            }
            Hir::concat(items)
        }
        HirKind::Alternation(branches) => Hir::alternation(
            branches
                .iter()
                .map(|b| trim_free_edges(b.clone(), left, right))
                .collect(),
        ),
        HirKind::Repetition(r) if r.min == 1 => trim_free_edges((*r.sub).clone(), left, right),
        HirKind::Repetition(r) if r.max != Some(r.min) => Hir::repetition(Repetition {
            max: Some(r.min),
            ..r.clone()
        }),
        _ => body,
    }
}

/// ECMA-262 shorthands that differ from Rust's: `\d` and `\w` are ASCII.
pub(crate) fn ecma_shorthands(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut in_class = false;
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('d') if in_class => out.push_str("0-9"),
                Some('w') if in_class => out.push_str("A-Za-z0-9_"),
                Some('d') => out.push_str("[0-9]"),
                Some('D') => out.push_str("[^0-9]"),
                Some('w') => out.push_str("[A-Za-z0-9_]"),
                Some('W') => out.push_str("[^A-Za-z0-9_]"),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                // A `]` right after `[` or `[^` is a literal in ECMA only when
                // escaped; Rust treats it as a literal too, so copy as is.
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Translations kept by `pattern_regex`, by pattern.
static PATTERN_REGEXES: std::sync::Mutex<Option<PatternCache>> = std::sync::Mutex::new(None);
/// Bound on the translations kept (their text and their patterns').
const PATTERN_CACHE_BYTES: usize = 16 << 20;

#[derive(Default)]
struct PatternCache {
    map: std::collections::HashMap<String, Result<String, String>>,
    bytes: usize,
}

/// A JSON Schema `pattern` (ECMA-262 flavour, search semantics) as a regex
/// over the encoded string contents. Lookarounds, backreferences, word
/// boundaries and anchors inside repetitions are refused. Translations are
/// kept: a schema that refers to one definition from many places asks for
/// its patterns each time, and parsing them was a third of its compile.
pub fn pattern_regex(pattern: &str) -> Result<String, String> {
    let lock = || PATTERN_REGEXES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(kept) = lock().as_ref().and_then(|c| c.map.get(pattern)) {
        return kept.clone();
    }
    let translated = translate_pattern(pattern);
    let size = pattern.len() + translated.as_ref().map_or_else(String::len, String::len);
    let mut guard = lock();
    let cache = guard.get_or_insert_with(PatternCache::default);
    if cache.bytes + size > PATTERN_CACHE_BYTES {
        *cache = PatternCache::default();
    }
    cache.bytes += size;
    cache.map.insert(pattern.to_string(), translated.clone());
    translated
}

fn translate_pattern(pattern: &str) -> Result<String, String> {
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(&ecma_shorthands(pattern))
        .map_err(|e| format!("cannot translate the pattern: {e}"))?;
    Ok(search(&hir)?.to_string())
}

/// Whether `text`, as json.dumps encodes it, is in the language of `dfa`
/// (built from a regex over encoded text, as pattern and format regexes are).
pub fn encoded_match(dfa: &ByteDfa, text: &str) -> bool {
    let q = dfa.step_bytes(dfa.start(), encode(text).as_bytes());
    q != DEAD && dfa.is_accepting(q)
}

/// Any string's contents as json.dumps encodes them (built once: every
/// object with unlisted members asks for it).
pub fn any_content() -> &'static str {
    static ANY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ANY.get_or_init(|| {
        Hir::repetition(Repetition {
            min: 0,
            max: None,
            greedy: true,
            sub: Box::new(encoded_any()),
        })
        .to_string()
    })
}

const DATE: &str = concat!(
    "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])",
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))",
    "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)"
);
const TIME_NO_LEAP: &str = concat!(
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?",
    "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
);

/// RFC 3339 full-time. A leap second (`:60`) is valid only at 23:59 UTC, so
/// each local hour:minute takes only the offsets that map it there.
fn build_time_regex() -> String {
    let mut alts = vec![
        TIME_NO_LEAP.to_string(),
        "23:59:60(?:\\.[0-9]+)?[Zz]".to_string(),
    ];
    const UTC: i32 = 23 * 60 + 59;
    for local in 0..1440 {
        let ahead = (local - UTC).rem_euclid(1440); // local = UTC + ahead
        let fmt = |m: i32| format!("{:02}:{:02}", m / 60, m % 60);
        let behind = (1440 - ahead) % 1440;
        let offsets = [format!("\\+{}", fmt(ahead)), format!("-{}", fmt(behind))];
        alts.push(format!(
            "{}:60(?:\\.[0-9]+)?(?:{})",
            fmt(local),
            offsets.join("|")
        ));
    }
    format!("(?:{})", alts.join("|"))
}
const IPV4_PART: &str = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
/// RFC 5322 `atext`: the characters of a dot-atom local part.
const ATEXT: &str = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
const HOST_LABEL: &str = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";

/// RFC 3986 pieces.
const UNRESERVED: &str = "A-Za-z0-9._~\\-";
const SUB_DELIMS: &str = "!$&'()*+,;=";
const PCT: &str = "%[0-9A-Fa-f]{2}";

/// RFC 4291 section 2.2 text forms (no zone id), the last 32 bits
/// optionally as an IPv4 address.
fn build_ipv6_regex() -> String {
    let h16 = "[0-9A-Fa-f]{1,4}";
    let ls32 = format!("(?:{h16}:{h16}|(?:{IPV4_PART}\\.){{3}}{IPV4_PART})");
    // `n` groups before `::` (at most `max`) and `after` groups after it.
    let before = |max: usize| match max {
        0 => String::new(),
        _ => format!("(?:(?:{h16}:){{0,{}}}{h16})?", max - 1),
    };
    let forms = [
        format!("(?:{h16}:){{6}}{ls32}"),
        format!("::(?:{h16}:){{5}}{ls32}"),
        format!("{}::(?:{h16}:){{4}}{ls32}", before(1)),
        format!("{}::(?:{h16}:){{3}}{ls32}", before(2)),
        format!("{}::(?:{h16}:){{2}}{ls32}", before(3)),
        format!("{}::{h16}:{ls32}", before(4)),
        format!("{}::{ls32}", before(5)),
        format!("{}::{h16}", before(6)),
        format!("{}::", before(7)),
    ];
    format!("(?:{})", forms.join("|"))
}

/// RFC 3986 `URI` (`absolute` false: `URI-reference`, relative references too).
fn build_uri_regex(absolute: bool) -> String {
    let pchar = format!("(?:[{UNRESERVED}{SUB_DELIMS}:@]|{PCT})");
    let segment = format!("{pchar}*");
    let segment_nz = format!("{pchar}+");
    let segment_nz_nc = format!("(?:[{UNRESERVED}{SUB_DELIMS}@]|{PCT})+");
    let ip_future = format!("v[0-9A-Fa-f]+\\.[{UNRESERVED}{SUB_DELIMS}:]+");
    let host = format!(
        "(?:\\[(?:{}|{ip_future})\\]|(?:[{UNRESERVED}{SUB_DELIMS}]|{PCT})*)",
        ipv6_regex()
    );
    let authority = format!("(?:(?:[{UNRESERVED}{SUB_DELIMS}:]|{PCT})*@)?{host}(?::[0-9]*)?");
    let abempty = format!("(?:/{segment})*");
    let absolute_path = format!("/(?:{segment_nz}(?:/{segment})*)?");
    let tail = format!("(?:\\?(?:{pchar}|[/?])*)?(?:#(?:{pchar}|[/?])*)?");
    let hier = format!("(?://{authority}{abempty}|{absolute_path}|{segment_nz}(?:/{segment})*|)");
    let uri = format!("[A-Za-z][A-Za-z0-9+.-]*:{hier}{tail}");
    if absolute {
        return uri;
    }
    let relative =
        format!("(?://{authority}{abempty}|{absolute_path}|{segment_nz_nc}(?:/{segment})*|){tail}");
    format!("(?:{uri}|{relative})")
}

/// ISO 8601 durations as RFC 3339 appendix A writes them.
const DURATION: &str = concat!(
    "P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)",
    "(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?",
    "|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)"
);

/// Formats the specification defines (validators assert them when asked
/// to): one of these that `format_regex` cannot express is refused, not read
/// as an annotation. Other names are annotations.
pub const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// The automaton of a regex that is faster to lay out directly than to
/// determinize, given the regex as lowering renders it (`(?:...)`).
pub fn prebuilt(rendered: &str) -> Option<crate::regex_dfa::ByteDfa> {
    static TIME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let time = TIME.get_or_init(|| format!("(?:{})", time_regex()));
    (rendered == time.as_str()).then(super::time_dfa::full_time)
}

// The large format regexes, built once per process: `time` alone is 1,440
// alternatives (one per UTC offset with a leap second), and writing them out
// again for every schema with a `date-time` was 3% of compile time.

fn time_regex() -> &'static str {
    static R: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    R.get_or_init(build_time_regex)
}

fn ipv6_regex() -> &'static str {
    static R: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    R.get_or_init(build_ipv6_regex)
}

fn uri_regex(absolute: bool) -> &'static str {
    static ABSOLUTE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static REFERENCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    match absolute {
        true => ABSOLUTE.get_or_init(|| build_uri_regex(true)),
        false => REFERENCE.get_or_init(|| build_uri_regex(false)),
    }
}

/// The regex for a `format` maskpar constrains, over encoded text (these
/// formats never contain characters json.dumps escapes); None: an annotation.
/// `format_regex` in consecutive pieces, so that the pieces' automata are
/// built (and cached) once: `date-time` is a `date`, `T` and a `time`.
pub fn format_pieces(format: &str) -> Option<Vec<String>> {
    match format {
        "date-time" => Some(vec![
            DATE.to_string(),
            "[Tt]".to_string(),
            time_regex().to_string(),
        ]),
        other => format_regex(other).map(|r| vec![r]),
    }
}

pub fn format_regex(format: &str) -> Option<String> {
    Some(match format {
        "date" => DATE.to_string(),
        "time" => time_regex().to_string(),
        "date-time" => format!("{DATE}[Tt]{}", time_regex()),
        "uuid" => "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
            .to_string(),
        "ipv4" => format!("(?:{IPV4_PART}\\.){{3}}{IPV4_PART}"),
        "hostname" => format!("{HOST_LABEL}(?:\\.{HOST_LABEL})*"),
        "email" => format!("{ATEXT}+(?:\\.{ATEXT}+)*@{HOST_LABEL}(?:\\.{HOST_LABEL})*"),
        "ipv6" => ipv6_regex().to_string(),
        "uri" => uri_regex(true).to_string(),
        "uri-reference" => uri_regex(false).to_string(),
        "duration" => DURATION.to_string(),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_regex::Regex;

    fn full(re: &str) -> Regex {
        Regex::new(&format!("^(?:{re})$")).unwrap()
    }

    #[test]
    fn encoding_is_json_dumps() {
        assert_eq!(encode("a\"b\\c\nd\u{1}é"), "a\\\"b\\\\c\\nd\\u0001é");
    }

    #[test]
    fn free_edges_lose_what_they_may_leave_out() {
        // RFC 3986's URI pattern, unanchored: its hier-part may be empty, so
        // a text holds a match exactly when it holds `scheme:`.
        let uri = concat!(
            "([A-Za-z][A-Za-z0-9+\\-.]*):(?:(//)(?:((?:[A-Za-z0-9\\-._~!$&'()*+,;=:]|",
            "%[0-9A-Fa-f]{2})*)@)?((?:[0-9A-Fa-f]{1,4}:){6}|(?:[0-9]{1,3}\\.){3}[0-9]{1,3}|",
            "(?:[A-Za-z0-9\\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*)(?::([0-9]*))?|)",
            "(?:\\?((?:[A-Za-z0-9/?]|%[0-9A-Fa-f]{2})*))?"
        );
        let d = ByteDfa::new(&pattern_regex(uri).unwrap()).unwrap();
        assert!(d.num_states() < 40, "{}", d.num_states());
        let re = full(&pattern_regex(uri).unwrap());
        for (text, ok) in [
            ("x:", true),
            ("  ab+c:zz", true),
            ("1:", false),
            ("ab", false),
        ] {
            assert_eq!(re.is_match(text), ok, "{text}");
        }
        // Anchored sides keep everything: `^a(b)?$` is not `^a`.
        let re = full(&pattern_regex("^a(b)?0*$").unwrap());
        assert!(re.is_match("ab00") && !re.is_match("abb"));
        // A repetition at a free edge keeps its minimum count, not fewer.
        let re = full(&pattern_regex("(ab){2,5}$").unwrap());
        assert!(re.is_match("zabab") && !re.is_match("abz") && !re.is_match("ab"));
    }

    #[test]
    fn patterns_search_and_match_encoded_text() {
        let re = full(&pattern_regex("^[a-z]+$").unwrap());
        assert!(re.is_match("abc") && !re.is_match("ab1") && !re.is_match(""));
        let re = full(&pattern_regex("b\\d").unwrap());
        assert!(re.is_match("ab1c") && re.is_match("b2") && !re.is_match("b٣"));
        let re = full(&pattern_regex("^a\"|x$").unwrap());
        assert!(re.is_match("a\\\"zz") && re.is_match("zzx") && !re.is_match("a\"zz"));
        // Branches keep their own anchors when they share `any*`s.
        let re = full(&pattern_regex("^ab|cd$|ef|^gh$|ij").unwrap());
        for (text, ok) in [
            ("abz", true),
            ("zab", false),
            ("zcd", true),
            ("cdz", false),
            ("zefz", true),
            ("gh", true),
            ("ghz", false),
            ("zijz", true),
            ("zz", false),
        ] {
            assert_eq!(re.is_match(text), ok, "{text}");
        }
        // Many branches with a common prefix stay small (one `any*` each side).
        let many: Vec<String> = (0..40).map(|i| format!("INTERVAL_M{i}")).collect();
        let d = ByteDfa::new(&pattern_regex(&many.join("|")).unwrap()).unwrap();
        assert!(d.num_states() < 2000, "{}", d.num_states());
        let re = full(&pattern_regex("^[^a]$").unwrap());
        assert!(
            re.is_match("\\\"") && re.is_match("\\n") && !re.is_match("\"") && !re.is_match("\n")
        );
        for bad in ["(?=a)b", "a\\bc", "(a)\\1"] {
            assert!(pattern_regex(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats() {
        let date = full(&format_regex("date").unwrap());
        for ok in ["2024-02-29", "2000-02-29", "2023-12-31", "1999-04-30"] {
            assert!(date.is_match(ok), "{ok}");
        }
        for bad in [
            "2023-02-29",
            "1900-02-29",
            "2023-04-31",
            "2023-13-01",
            "2023-1-01",
        ] {
            assert!(!date.is_match(bad), "{bad}");
        }
        let dt = full(&format_regex("date-time").unwrap());
        assert!(
            dt.is_match("2024-03-15T14:30:45.123+05:30") && !dt.is_match("2024-03-15 14:30:45Z")
        );
        let ip = full(&format_regex("ipv4").unwrap());
        assert!(
            ip.is_match("192.168.0.255") && !ip.is_match("256.1.1.1") && !ip.is_match("01.1.1.1")
        );
        assert!(format_regex("color").is_none());
    }
}
