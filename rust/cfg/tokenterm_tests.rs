//! Token terminals against a brute-force oracle: small grammars with a
//! finite language are expanded into every sentence (bytes and token-set
//! symbols), and at every prefix along many walks each token's bit must be
//! what matching the sentences directly says, and what `consume` does.

use std::sync::Arc;

use crate::bitmask::iter_set_bits;
use crate::cfg::ast::{GrammarAst, Node, TokenSet};
use crate::cfg::tokenterm::TokenDomain;
use crate::cfg::{gbnf, lark};
use crate::grammar::CompiledGrammar;
use crate::matcher::MatcherCore;
use crate::vocab::Vocab;

const TOKENS: [&str; 12] = [
    "a", "b", "ab", "ba", "c", "<|x|>", "<|y|>", "<eos>", "abc", "bc", " ", "x",
];
const X: u32 = 5;
const Y: u32 = 6;
const EOS: u32 = 7;

fn vocab() -> Arc<Vocab> {
    let toks = TOKENS.iter().map(|t| t.as_bytes().to_vec()).collect();
    Arc::new(Vocab::new(toks, &[EOS], &[X, Y], Some(TOKENS.len() + 3)).unwrap())
}

/// `n` with references `tok_A` / `tok_A_B` / `not_A` replaced by token
/// terminals (ids A, A..=B, not A).
fn with_tokens(n: &Node) -> Node {
    match n {
        Node::Ref(name, _) if name.starts_with("tok_") || name.starts_with("not_") => {
            let ids: Vec<u32> = name[4..].split('_').map(|x| x.parse().unwrap()).collect();
            let hi = *ids.last().unwrap();
            Node::tokens([(ids[0], hi)], name.starts_with("not_"))
        }
        Node::Seq(v) => Node::Seq(v.iter().map(with_tokens).collect()),
        Node::Alt(v) => Node::Alt(v.iter().map(with_tokens).collect()),
        Node::Repeat { node, min, max } => Node::repeat(with_tokens(node), *min, *max),
        other => other.clone(),
    }
}

fn substituted(mut ast: GrammarAst) -> GrammarAst {
    for r in &mut ast.rules {
        r.body = with_tokens(&r.body);
    }
    ast
}

/// A sentence symbol: a byte, or one whole token from a set.
#[derive(Clone, Debug)]
enum S {
    B(u8),
    T(TokenSet),
}

/// Every sentence of `n` (rules by name; no recursion; bounded repeats).
fn sentences(n: &Node, ast: &GrammarAst) -> Vec<Vec<S>> {
    let cat = |a: Vec<Vec<S>>, b: Vec<Vec<S>>| -> Vec<Vec<S>> {
        let mut out = Vec::new();
        for x in &a {
            for y in &b {
                out.push([x.clone(), y.clone()].concat());
            }
        }
        out
    };
    match n {
        Node::Empty => vec![vec![]],
        Node::Literal(s) => vec![s.bytes().map(S::B).collect()],
        Node::Class { ranges, negated } => {
            assert!(!negated);
            ranges
                .iter()
                .flat_map(|&(lo, hi)| (lo as u8..=hi as u8).map(|b| vec![S::B(b)]))
                .collect()
        }
        Node::Tokens(set) => vec![vec![S::T(set.clone())]],
        Node::Seq(v) => v
            .iter()
            .fold(vec![vec![]], |acc, x| cat(acc, sentences(x, ast))),
        Node::Alt(v) => v.iter().flat_map(|x| sentences(x, ast)).collect(),
        Node::Repeat { node, min, max } => {
            let one = sentences(node, ast);
            let mut out = Vec::new();
            let mut cur: Vec<Vec<S>> = vec![vec![]];
            for k in 0..=max.expect("bounded") {
                if k >= *min {
                    out.extend(cur.iter().cloned());
                }
                cur = cat(cur, one.clone());
            }
            out
        }
        Node::Ref(name, _) => {
            if let Some(r) = ast.rules.iter().find(|r| &r.name == name) {
                sentences(&r.body, ast)
            } else {
                let t = ast.terminals.iter().find(|t| &t.name == name).unwrap();
                sentences(&t.body, ast)
            }
        }
        other => panic!("not in the oracle: {other:?}"),
    }
}

/// The oracle: which sentence positions a token sequence may reach.
struct Oracle {
    sentences: Vec<Vec<S>>,
    vocab: Arc<Vocab>,
}

impl Oracle {
    /// The (sentence, position) pairs reachable after `tokens`.
    fn reach(&self, tokens: &[u32]) -> Vec<(usize, usize)> {
        let domain = TokenDomain {
            num_tokens: self.vocab.num_tokens() as u32,
            eos: self.vocab.eos_token_ids(),
        };
        let mut cur: Vec<(usize, usize)> = (0..self.sentences.len()).map(|i| (i, 0)).collect();
        for &t in tokens {
            let mut next = Vec::new();
            for &(i, p) in &cur {
                let s = &self.sentences[i];
                if let Some(S::T(set)) = s.get(p) {
                    if domain.matches(set, t) {
                        next.push((i, p + 1));
                    }
                }
                if let Some(bytes) = self.vocab.text_bytes(t) {
                    let fits = bytes
                        .iter()
                        .enumerate()
                        .all(|(k, &b)| matches!(s.get(p + k), Some(S::B(x)) if *x == b));
                    if fits {
                        next.push((i, p + bytes.len()));
                    }
                }
            }
            next.sort_unstable();
            next.dedup();
            cur = next;
        }
        cur
    }

    fn complete(&self, reach: &[(usize, usize)]) -> bool {
        reach.iter().any(|&(i, p)| p == self.sentences[i].len())
    }

    /// Whether `t` may follow `prefix` (EOS: as a named token, or where
    /// the text is complete).
    fn allowed(&self, prefix: &[u32], t: u32) -> bool {
        let after = self.reach(&[prefix, &[t]].concat());
        !after.is_empty() || (self.vocab.is_eos(t) && self.complete(&self.reach(prefix)))
    }
}

fn compile(ast: &GrammarAst) -> Arc<CompiledGrammar> {
    Arc::new(CompiledGrammar::from_ast(vocab(), ast, "gbnf", "test").unwrap())
}

/// Random walks over the grammar's masks; at every step each token's bit
/// equals the oracle's answer and `consume`'s, forks and rollbacks agree.
fn check(ast: GrammarAst) {
    let v = vocab();
    let start = ast.rules.iter().find(|r| r.name == ast.start).unwrap();
    let oracle = Oracle {
        sentences: sentences(&start.body, &ast),
        vocab: v.clone(),
    };
    let g = compile(&ast);
    let mut seed = 11u64;
    for _ in 0..30 {
        let mut m = MatcherCore::new(g.clone());
        let mut prefix: Vec<u32> = Vec::new();
        loop {
            let mut row = vec![0u32; g.words()];
            m.fill_row(&mut row).unwrap();
            let allowed: Vec<u32> = iter_set_bits(&row).collect();
            if m.is_terminated() {
                assert_eq!(allowed, vec![EOS]);
                break;
            }
            for t in 0..v.vocab_size() as u32 {
                let want = t < v.num_tokens() as u32 && oracle.allowed(&prefix, t);
                assert_eq!(allowed.contains(&t), want, "{prefix:?} then {t}");
                let mut probe = m.clone();
                assert_eq!(probe.consume_token(t).unwrap(), want, "{prefix:?} then {t}");
            }
            // Forced tokens are allowed one after another.
            let forced = m.forced_tokens().unwrap();
            assert!(
                m.clone().consume_tokens(&forced).unwrap(),
                "{prefix:?} {forced:?}"
            );
            if allowed.is_empty() {
                break;
            }
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let pick = (seed >> 33) as usize;
            if pick % 7 == 0 && !prefix.is_empty() {
                m.rollback(1).unwrap();
                prefix.pop();
                continue;
            }
            let t = allowed[pick % allowed.len()];
            assert!(m.consume_token(t).unwrap());
            prefix.push(t);
            assert_eq!(m.validate_tokens(&[]).unwrap(), 0);
        }
    }
}

fn gbnf_case(src: &str) -> GrammarAst {
    substituted(gbnf::parse(src).unwrap())
}

#[test]
fn token_terminals_follow_the_oracle_in_gbnf() {
    for src in [
        // A named special between text.
        "root ::= \"a\" tok_5 \"b\"{1,3} | \"ab\" tok_6 \"c\"",
        // Any token but one: text tokens and the other special included.
        "root ::= \"a\" not_5 \"c\"?",
        // A greedy lexeme still being read when the special comes.
        "root ::= [ab]{1,3} tok_5 \"c\" | \"c\" tok_6",
        // A text token read as bytes or as the terminal.
        "root ::= \"a\" (not_5 | \"b\") \"c\"",
        // EOS named: read as the symbol where expected.
        "root ::= \"a\" tok_7 \"b\"?",
        // Nullable text around a range of ids.
        "root ::= x tok_4_6 x\nx ::= \"a\"{0,2}",
        // Only specials, one forced after another.
        "root ::= tok_5 tok_6 tok_5",
    ] {
        check(gbnf_case(src));
    }
}

#[test]
fn token_terminals_follow_the_oracle_in_lark() {
    // Longest-match lexemes end at the special token, as at the text's end.
    for src in [
        "start: \"x\" tok_5 | WORD tok_6 \"c\"\nWORD: \"a\" | \"b\" | \"ab\" | \"aba\"",
        "start: WORD tok_5 WORD?\nWORD: \"ab\" | \"a\"",
    ] {
        check(substituted(lark::parse(src).unwrap()));
    }
}

#[test]
fn token_sets_merge_ranges_and_complement_without_eos_or_padding() {
    let set = TokenSet::new([(5, 9), (1, 2), (3, 3), (20, 19)], false);
    assert_eq!(set.ranges, vec![(1, 3), (5, 9)]);
    let domain = TokenDomain {
        num_tokens: 12,
        eos: &[7],
    };
    let not = TokenSet::new([(2, 3)], true);
    let mut row = vec![0u32; 1];
    domain.or_into(&not, &mut row);
    let ids: Vec<u32> = iter_set_bits(&row).collect();
    assert_eq!(ids, vec![0, 1, 4, 5, 6, 8, 9, 10, 11]);
    for t in 0..20 {
        assert_eq!(domain.matches(&not, t), ids.contains(&t), "{t}");
    }
    let mut row = vec![0u32; 3];
    domain.or_into(&TokenSet::new([(0, 95)], false), &mut row);
    assert_eq!(iter_set_bits(&row).count(), 12);
}

#[test]
fn grammars_with_token_terminals_stay_on_their_vocabulary() {
    let g = compile(&gbnf_case("root ::= \"a\" tok_5"));
    assert!(g.for_vocab(vocab()).is_err());
    let mut ast = gbnf_case("root ::= \"a\"");
    ast.rules[0].body = Node::tokens([(1, 1)], false);
    ast.terminals.clear();
    let g = compile(&ast);
    assert_eq!(
        g.forced_tokens(&g.initial_chart(), &g.initial_state())
            .unwrap(),
        vec![1, EOS]
    );
}
