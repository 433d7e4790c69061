//! The matcher API against a slow reference: a small generated regex, then a
//! random call sequence (fill, consume, consume_tokens, consume_bytes,
//! validate, rollback, fork, reset) on maskpar's matcher and on a model of it
//! whose masks come from regex-automata's DFA by brute force over the
//! vocabulary. Every mask row, acceptance and count must agree.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use maskpar::grammar::CompiledGrammar;
use maskpar::matcher::MatcherCore;
use maskpar_fuzz::{gen_regex, vocab, words, RegexReference, MAX_INPUT};

/// The reference's matcher state: text consumed, EOS consumed, and history.
#[derive(Clone, Default)]
struct Model {
    text: Vec<u8>,
    terminated: bool,
    history: Vec<(Vec<u8>, bool)>,
}

impl Model {
    /// Consumes a token if the reference allows it.
    fn consume(&mut self, r: &mut RegexReference, id: u32) -> bool {
        let v = vocab();
        // Once EOS is consumed the mask is EOS only (README), and it may be
        // consumed again.
        let ok = if v.is_eos(id) {
            self.terminated || r.accepts(&self.text)
        } else if self.terminated {
            false
        } else {
            match v.token_bytes(id) {
                Some(t) if !t.is_empty() => {
                    let mut s = self.text.clone();
                    s.extend_from_slice(t);
                    r.live(&s)
                }
                _ => false,
            }
        };
        if ok {
            self.history.push((self.text.clone(), self.terminated));
            if v.is_eos(id) {
                self.terminated = true;
            } else {
                self.text.extend_from_slice(v.token_bytes(id).unwrap());
            }
        }
        ok
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() > MAX_INPUT {
        return;
    }
    let (pattern, used) = gen_regex(data, 5);
    let ops = &data[used.min(data.len())..];
    let Some(mut r) = RegexReference::new(&pattern) else {
        return;
    };
    let Ok(g) = CompiledGrammar::from_regex(vocab(), &pattern) else {
        return;
    };
    let v = vocab();
    let n = v.vocab_size() as u32;
    let mut m = MatcherCore::new(Arc::new(g));
    let mut model = Model::default();
    let mut row = vec![0u32; words(&v)];
    let mut i = 0;
    let mut next = || {
        let b = ops.get(i).copied();
        i += 1;
        b
    };
    while let Some(op) = next() {
        let arg = next().unwrap_or(0);
        match op % 8 {
            0 => {
                m.fill_row(&mut row).expect("fill");
                let want = r.mask(&v, &model.text, model.terminated);
                assert_eq!(row, want, "mask of {pattern:?} after {:?}", model.text);
                assert_eq!(m.is_accepting(), model.terminated || r.accepts(&model.text));
                assert_eq!(m.is_terminated(), model.terminated);
            }
            1 | 2 => {
                // Half the time a token the reference allows, else any id.
                let want_row = r.mask(&v, &model.text, model.terminated);
                let allowed: Vec<u32> = (0..n)
                    .filter(|&t| maskpar_fuzz::bit(&want_row, t))
                    .collect();
                let id = if op % 8 == 1 && !allowed.is_empty() {
                    allowed[arg as usize % allowed.len()]
                } else {
                    arg as u32 % n
                };
                let want = model.consume(&mut r, id);
                assert_eq!(
                    m.consume_token(id).expect("consume"),
                    want,
                    "consume {id} in {pattern:?} after {:?}",
                    model.text
                );
            }
            3 => {
                let k = arg as usize % (model.history.len() + 1);
                m.rollback(k).expect("rollback");
                if k > 0 {
                    let keep = model.history.len() - k;
                    (model.text, model.terminated) = model.history[keep].clone();
                    model.history.truncate(keep);
                }
                assert_eq!(m.num_consumed(), model.history.len());
            }
            4 => {
                m = m.fork_onto(m.grammar().clone()).expect("fork");
            }
            5 => {
                if arg % 4 == 0 {
                    m.reset();
                    model = Model::default();
                } else {
                    // validate_tokens and consume_tokens: the longest accepted prefix.
                    let seq: Vec<u32> = (0..arg % 4)
                        .map(|j| (arg as u32).wrapping_mul(31 + j as u32) % n)
                        .collect();
                    let mut probe = model.clone();
                    let accepted = seq
                        .iter()
                        .take_while(|&&t| probe.consume(&mut r, t))
                        .count();
                    assert_eq!(
                        m.validate_tokens(&seq).expect("validate"),
                        accepted,
                        "validate {seq:?}"
                    );
                    let all = accepted == seq.len();
                    assert_eq!(m.consume_tokens(&seq).expect("consume_tokens"), all);
                    if all {
                        model = probe;
                    }
                }
            }
            _ => {
                // consume_bytes: raw text, one rollback step.
                let len = arg as usize % 4;
                let bytes: Vec<u8> = (0..len).map(|_| next().unwrap_or(b'a')).collect();
                let mut s = model.text.clone();
                s.extend_from_slice(&bytes);
                let want = !model.terminated && r.live(&s);
                assert_eq!(
                    m.consume_bytes(&bytes).expect("consume_bytes"),
                    want,
                    "consume_bytes {bytes:?} after {:?} in {pattern:?}",
                    model.text
                );
                if want {
                    model.history.push((model.text.clone(), false));
                    model.text = s;
                }
            }
        }
    }
});
