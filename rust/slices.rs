//! Text slices of a vocabulary: its tokens made only of characters that may
//! stand unescaped inside a JSON string, DEL left out too (llama.cpp's
//! json.gbnf refuses it): no `"`, `\`, U+0000-U+001F or U+007F. They are
//! grouped by length in characters.
//!
//! Inside a string-like lexeme nearly every token is such text (122k of
//! Llama-3's 128k), and a new DFA state there (each character of a string
//! with `maxLength` is one) used to cost a walk of the whole trie. When every
//! text of up to `max_chars` characters keeps a scan alive, a slice's tokens
//! are all allowed: their bits come from `bits`, and only the other tokens,
//! in the much smaller `rest` trie, are walked (`cfg::sliced`).
//!
//! Free text up to a structural tag's trigger (`<function=`, `</think>`)
//! survives texts of a few characters only (one more and the text could be
//! the trigger), so its slice is the shortest, and its first fill walked
//! the tokens past four characters (0.4 ms on Llama-3's vocabulary, once
//! per trigger set in a process). But it survives every text without the
//! trigger's first byte, however long: `TextSlices::without` holds, for
//! each of `WITHOUT` (`<`, where the tag formats frameworks forward begin
//! their tags, and `{`, `[`), the UTF-8 tokens without it (free text takes
//! quotes and newlines too), of any length, and a trie of the others: 2,100
//! tokens on Llama-3's vocabulary, where the four-character slice leaves
//! 80,000.
//!
//! A string near its `maxLength` survives every text of the characters it
//! has left and dies on every longer one. Its tokens are then known without
//! any walk of the text tokens: those of at most that many characters are
//! allowed and the longer ones are not (`TextSlices::counted`), so a fill
//! walks the tokens that are not text only (the widest slice's rest: 6,176
//! tokens in 12,014 trie nodes on Llama-3's vocabulary, where the
//! eight-character slice leaves 120,092 nodes and the four-character one
//! 230,754). Before, each character of such a string was a new DFA state
//! whose first fill walked a length slice's rest or copied a near state's
//! entry: 0.15-1 ms per token of a `maxLength: 20` string, among the
//! slowest fills of fresh dev-split schemas.

use std::sync::Arc;

use crate::trie::TokenTrie;

/// Character counts at which slices are cut; the last slice takes all text
/// tokens. Shorter slices serve strings with few characters left.
const CUTS: [usize; 3] = [MIN_CUT, 8, 16];
/// The shortest slice's length: a scan that dies on some text of fewer
/// characters gets no slice.
pub const MIN_CUT: usize = 4;

#[derive(Debug)]
pub struct TextSlice {
    /// Every text token of this many characters or fewer is in the slice.
    pub max_chars: usize,
    /// The slice's tokens as the start of a bitmask row: its words cover
    /// the vocabulary's tokens, not the padding ids a wider row has after.
    pub bits: Arc<[u32]>,
    /// The vocabulary's other text tokens.
    pub rest: TokenTrie,
    /// The vocabulary trie's node for each node of `rest` (same path).
    pub rest_nodes: Vec<u32>,
}

#[derive(Debug)]
pub struct TextSlices {
    /// By increasing `max_chars`.
    pub slices: Vec<TextSlice>,
    /// Per byte of `WITHOUT`: the tokens that are UTF-8 (control characters,
    /// `"` and `\\` too) and do not contain it, of any length (`max_chars`
    /// is the most characters one of them has); in `WITHOUT`'s order.
    pub without: Vec<(u8, TextSlice)>,
    /// `counted[n]`: the text tokens of at most n characters, as the start
    /// of a row (as a slice's `bits`), for n below `MAX_COUNTED` and below
    /// the longest text token's characters.
    counted: Vec<Arc<[u32]>>,
}

/// Character counts below this get `TextSlices::counted` bits (a row each:
/// 64 of 16 KiB on Llama-3's vocabulary). Strings with more characters left
/// take a length slice, whose rest holds few text tokens that long.
pub const MAX_COUNTED: usize = 64;

/// Bytes that get a slice of the tokens without them: where the triggers
/// of tool-call formats begin (`<function=`, `</think>`, `{"name"`,
/// `[TOOL_CALLS]`). A fill takes the first that applies: checking one costs
/// more than the difference between their rests (2,300 to 4,000 trie nodes
/// on Llama-3's vocabulary), and `<` is the most common.
pub const WITHOUT: [u8; 3] = [b'<', b'{', b'['];

/// Characters of `bytes` if it is text (see the module docs), else None.
pub fn text_chars(bytes: &[u8]) -> Option<usize> {
    let s = std::str::from_utf8(bytes).ok()?;
    let mut n = 0;
    for c in s.chars() {
        if c < ' ' || c == '\u{7f}' || c == '"' || c == '\\' {
            return None;
        }
        n += 1;
    }
    Some(n)
}

impl TextSlices {
    /// The slices of the text tokens among `entries` (every `(id, bytes)` of
    /// `trie`, a vocabulary's trie whose ids are below `words` * 32). Built
    /// once per vocabulary, with it (`Vocab::new`): a walk over every token
    /// and seven tries, tens of milliseconds on a 128k vocabulary, that must
    /// never land inside a request's fill.
    pub fn new(trie: &TokenTrie, words: usize, entries: &[(u32, &[u8])]) -> Self {
        #[cfg(test)]
        tests::BUILDS.with(|b| b.set(b.get() + 1));
        let texts: Vec<(u32, &[u8], Option<usize>)> = entries
            .iter()
            .map(|&(id, b)| (id, b, text_chars(b)))
            .collect();
        let longest = texts.iter().filter_map(|t| t.2).max().unwrap_or(0);
        let mut cuts: Vec<usize> = CUTS.iter().copied().filter(|&c| c < longest).collect();
        cuts.push(longest);
        // A slice of the tokens `within` holds, by index into `entries`
        // (and their text characters).
        let slice = |max_chars: usize, within: &dyn Fn(usize, Option<usize>) -> bool| {
            let mut bits = vec![0u32; words].into_boxed_slice();
            let mut rest: Vec<(u32, &[u8])> = Vec::new();
            for (i, &(id, b, chars)) in texts.iter().enumerate() {
                if within(i, chars) {
                    bits[id as usize / 32] |= 1 << (id % 32);
                } else {
                    rest.push((id, b));
                }
            }
            let rest = TokenTrie::new(&rest).expect("a subset of the vocabulary's tokens");
            let rest_nodes = same_nodes(&rest, trie);
            TextSlice {
                max_chars,
                bits: Arc::from(bits),
                rest,
                rest_nodes,
            }
        };
        let slices = cuts
            .into_iter()
            .map(|max_chars| slice(max_chars, &|_, c| c.is_some_and(|c| c <= max_chars)))
            .collect();
        // Characters of each token that is UTF-8 (text or not).
        let utf8_chars: Vec<Option<usize>> = entries
            .iter()
            .map(|(_, b)| std::str::from_utf8(b).ok().map(|s| s.chars().count()))
            .collect();
        let without = WITHOUT
            .iter()
            .map(|&byte| {
                let within = |i: usize| utf8_chars[i].is_some() && !entries[i].1.contains(&byte);
                // Its tokens' most characters: a scan that survives every
                // string this long without `byte` survives each of them.
                let longest = (0..entries.len())
                    .filter(|&i| within(i))
                    .filter_map(|i| utf8_chars[i])
                    .max()
                    .unwrap_or(0);
                (byte, slice(longest, &|i, _| within(i)))
            })
            .collect();
        // Each text token's bit from its character count up.
        let mut counted = vec![vec![0u32; words]; longest.min(MAX_COUNTED)];
        for &(id, _, chars) in &texts {
            if let Some(row) = chars.and_then(|c| counted.get_mut(c)) {
                row[id as usize / 32] |= 1 << (id % 32);
            }
        }
        for n in 1..counted.len() {
            let (below, at) = counted.split_at_mut(n);
            for (w, &b) in at[0].iter_mut().zip(&below[n - 1]) {
                *w |= b;
            }
        }
        let counted = counted.into_iter().map(Arc::from).collect();
        TextSlices {
            slices,
            without,
            counted,
        }
    }

    /// The most characters a slice's token has (0 with no slices): a
    /// scan that survives texts this long takes the widest slice.
    pub fn max_chars(&self) -> usize {
        self.slices.last().map_or(0, |s| s.max_chars)
    }

    /// The widest slice whose tokens all have at most `chars` characters.
    pub fn within(&self, chars: usize) -> Option<&TextSlice> {
        self.slices.iter().rev().find(|s| s.max_chars <= chars)
    }

    /// For a scan that survives every text of `chars` characters and dies
    /// on every longer one (`cfg::textreach::TextReach::dies_after`): the
    /// bits of the text tokens of at most `chars` characters, and the
    /// widest slice, whose rest is the tokens that are not text, the only
    /// ones left to walk. None for `chars` from `MAX_COUNTED` up or from
    /// the longest text token's characters up (a length slice serves).
    pub fn counted(&self, chars: usize) -> Option<(&Arc<[u32]>, &TextSlice)> {
        Some((self.counted.get(chars)?, self.slices.last()?))
    }
}

/// For each node of `sub` (a trie of some of `full`'s tokens), the node of
/// `full` with the same path.
fn same_nodes(sub: &TokenTrie, full: &TokenTrie) -> Vec<u32> {
    let mut out = vec![0u32; sub.num_nodes()];
    for i in 1..sub.num_nodes() {
        let parent = out[sub.parent(i)] as usize;
        out[i] = full
            .child(parent, sub.byte(i))
            .expect("every path of a sub-trie is in the full trie") as u32;
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::vocab::Vocab;
    use std::cell::Cell;

    thread_local! {
        /// Text slices built on this thread (a test's vocabularies and fills
        /// run on its own thread): fills must build none.
        pub(crate) static BUILDS: Cell<usize> = const { Cell::new(0) };
    }

    #[test]
    fn text_is_json_string_content() {
        assert_eq!(text_chars(b"ab c"), Some(4));
        assert_eq!(text_chars("é€".as_bytes()), Some(2));
        assert_eq!(text_chars(b"a\"b"), None);
        assert_eq!(text_chars(b"a\\"), None);
        assert_eq!(text_chars(b"\n"), None);
        assert_eq!(text_chars(b"a\x7f"), None);
        assert_eq!(text_chars(&[0xC3]), None);
    }

    #[test]
    fn slices_split_tokens_by_characters() {
        let toks = ["a", "abcdef", "\"", "xé", "a\nb", "<eos>"];
        let tokens = toks.iter().map(|t| t.as_bytes().to_vec()).collect();
        let vocab = Vocab::new(tokens, &[5], &[], None).unwrap();
        let slices = vocab.text_slices();
        let cuts: Vec<usize> = slices.slices.iter().map(|s| s.max_chars).collect();
        assert_eq!(cuts, vec![4, 6]);
        let first = &slices.slices[0];
        assert_eq!(first.bits[0], 0b1001);
        // The rest trie holds `abcdef`, `"` and `a\nb`, at their full-trie nodes.
        let full = vocab.trie();
        for i in 1..first.rest.num_nodes() {
            let n = first.rest_nodes[i] as usize;
            assert_eq!(full.path(n), first.rest.path(i));
        }
        assert_eq!(slices.within(5).unwrap().max_chars, 4);
        assert_eq!(slices.within(100).unwrap().max_chars, 6);
        assert!(slices.within(3).is_none());
    }

    #[test]
    fn counted_rows_hold_the_text_tokens_of_at_most_each_count() {
        let toks = ["a", "abcdef", "\"", "xé", "a\nb", "é€x", "<eos>", "ab"];
        let tokens = toks.iter().map(|t| t.as_bytes().to_vec()).collect();
        let vocab = Vocab::new(tokens, &[6], &[], None).unwrap();
        let slices = vocab.text_slices();
        let ids = |n: usize| -> Vec<usize> {
            let (bits, widest) = slices.counted(n).unwrap();
            assert_eq!(widest.max_chars, 6, "the widest slice");
            (0..32).filter(|&i| bits[0] >> i & 1 == 1).collect()
        };
        assert_eq!(ids(0), Vec::<usize>::new());
        assert_eq!(ids(1), vec![0]);
        assert_eq!(ids(2), vec![0, 3, 7]);
        assert_eq!(ids(3), vec![0, 3, 5, 7]);
        assert_eq!(ids(5), vec![0, 3, 5, 7]);
        // From the longest text token's characters up, a length slice
        // serves.
        assert!(slices.counted(6).is_none());
        // The widest slice's rest is the tokens that are not text.
        let (_, widest) = slices.counted(0).unwrap();
        let mut rest: Vec<Vec<u8>> = (1..widest.rest.num_nodes())
            .filter(|&i| !widest.rest.node_tokens(i).is_empty())
            .map(|i| widest.rest.path(i).to_vec())
            .collect();
        rest.sort();
        assert_eq!(rest, [b"\"".to_vec(), b"a\nb".to_vec()]);
    }

    /// Text slices are built with the vocabulary: compiling and filling
    /// string-like lexemes (where fills take them) builds none on the way.
    #[test]
    fn fills_build_no_text_slices() {
        use crate::grammar::CompiledGrammar;
        use crate::matcher::MatcherCore;
        use std::sync::Arc;
        let toks = [
            "\"", "a", "ab", "abcd", "abcdefgh", " \"", "\",", "1", "<eos>",
        ];
        let tokens = toks.iter().map(|t| t.as_bytes().to_vec()).collect();
        let before = BUILDS.with(Cell::get);
        // Padded to 3 words: slices cover the tokens' one word only.
        let vocab = Arc::new(Vocab::new(tokens, &[8], &[], Some(70)).unwrap());
        assert_eq!(
            BUILDS.with(Cell::get),
            before + 1,
            "built with the vocabulary"
        );
        for schema in [
            r#"{"type": "string"}"#,
            r#"{"type": "string", "maxLength": 9}"#,
            r#"{"type": "array", "items": {"type": "string", "minLength": 2}}"#,
        ] {
            let ast = crate::schema::compile(schema, &Default::default()).unwrap();
            let g = CompiledGrammar::from_ast(vocab.clone(), &ast, "json_schema", schema).unwrap();
            let mut m = MatcherCore::new(Arc::new(g));
            let mut row = vec![u32::MAX; 3];
            m.fill_row(&mut row).unwrap();
            let text: &[u32] = if schema.contains("array") {
                &[]
            } else {
                &[0, 3, 2]
            };
            for &t in text {
                assert!(m.consume_token(t).unwrap(), "{schema}: token {t}");
                m.fill_row(&mut row).unwrap();
                // Inside the string: `a` (from a slice), never a padding id.
                assert_eq!(row[0] & 0b10, 0b10, "{schema}: {row:?}");
                assert_eq!(row[1..], [0, 0], "{schema}: padding ids allowed");
            }
        }
        assert_eq!(
            BUILDS.with(Cell::get),
            before + 1,
            "fills built text slices"
        );
    }
}
