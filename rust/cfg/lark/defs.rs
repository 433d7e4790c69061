//! What a Lark grammar defines, and how definitions combine: `%override`
//! and `%extend` merges, `%import common.X` terminals, and templates
//! (`name{x}: ...`) expanded into one rule per distinct instantiation.

use std::collections::HashMap;

use super::common::{common_terminals, namespaced};
use super::MAX_TEMPLATE_DEPTH;
use crate::cfg::ast::{Node, Pos, RuleDef, TermDef, MAX_NODE_DEPTH};
use crate::error::{Error, Result};

pub(super) struct Template {
    pub(super) params: Vec<String>,
    pub(super) body: Node,
    pub(super) pos: Pos,
}

#[derive(Default)]
pub(super) struct Defs {
    pub(super) rules: Vec<RuleDef>,
    pub(super) terminals: Vec<TermDef>,
    pub(super) templates: HashMap<String, Template>,
    pub(super) ignore: Vec<Node>,
    pub(super) declared: Vec<String>,
    pub(super) imports: Vec<(String, String, Pos)>,
}

/// `%override` replaces a definition, `%extend` adds alternatives to it.
pub(super) fn merge(defs: &mut Defs, new: Defs, extend: bool, pos: Pos) -> Result<()> {
    for r in new.rules {
        let Some(old) = defs.rules.iter_mut().find(|o| o.name == r.name) else {
            return Err(Error::Compile(format!(
                "%override/%extend at {pos}: no rule '{}'",
                r.name
            )));
        };
        old.body = if extend {
            extended(std::mem::replace(&mut old.body, Node::Empty), r.body)
        } else {
            r.body
        };
    }
    for t in new.terminals {
        let Some(old) = defs.terminals.iter_mut().find(|o| o.name == t.name) else {
            return Err(Error::Compile(format!(
                "%override/%extend at {pos}: no terminal '{}'",
                t.name
            )));
        };
        old.body = if extend {
            extended(std::mem::replace(&mut old.body, Node::Empty), t.body)
        } else {
            t.body
        };
        old.priority = t.priority;
    }
    Ok(())
}

/// `old` with `new` as one more alternative: added to `old`'s alternatives
/// rather than around them, so a long run of `%extend`s neither deepens
/// the tree nor copies it each time.
fn extended(old: Node, new: Node) -> Node {
    match old {
        Node::Alt(mut alts) => {
            alts.push(new);
            Node::Alt(alts)
        }
        old => Node::alt(vec![old, new]),
    }
}

/// Replaces template calls by instantiated rules (memoized per argument list).
struct Expander<'a> {
    templates: &'a HashMap<String, Template>,
    made: HashMap<String, String>,
    new_rules: Vec<RuleDef>,
}

fn key_of(n: &Node) -> String {
    format!("{n:?}")
}

impl Expander<'_> {
    /// `n` with its template calls expanded; `depth` counts the templates
    /// being expanded around it, `level` the nodes (each call recurses once
    /// per level of the tree, and template bodies add up).
    fn expand(
        &mut self,
        n: &Node,
        env: &HashMap<String, Node>,
        depth: usize,
        level: usize,
    ) -> Result<Node> {
        if level > MAX_NODE_DEPTH {
            return Err(Error::LimitExceeded(format!(
                "template expansion nests deeper than {MAX_NODE_DEPTH} levels"
            )));
        }
        let level = level + 1;
        Ok(match n {
            Node::Ref(name, _) if env.contains_key(name) => env[name].clone(),
            Node::Call(name, args, pos) => {
                if depth > MAX_TEMPLATE_DEPTH {
                    return Err(Error::LimitExceeded(format!(
                        "templates nest deeper than {MAX_TEMPLATE_DEPTH} (at {pos})"
                    )));
                }
                let Some(t) = self.templates.get(name) else {
                    return Err(Error::Compile(format!(
                        "undefined template '{name}' used at {pos}"
                    )));
                };
                if t.params.len() != args.len() {
                    return Err(Error::Compile(format!(
                        "template '{name}' (defined at {}) takes {} arguments, got {} at {pos}",
                        t.pos,
                        t.params.len(),
                        args.len()
                    )));
                }
                let args: Vec<Node> = args
                    .iter()
                    .map(|a| self.expand(a, env, depth + 1, level))
                    .collect::<Result<_>>()?;
                // Arguments are copied into the body: each may be as deep
                // as a body, no deeper.
                if args.iter().any(|a| a.deeper_than(MAX_NODE_DEPTH)) {
                    return Err(Error::LimitExceeded(format!(
                        "an argument of template '{name}' at {pos} nests deeper than \
                         {MAX_NODE_DEPTH} levels"
                    )));
                }
                let key = format!(
                    "{name}{{{}}}",
                    args.iter().map(key_of).collect::<Vec<_>>().join(",")
                );
                if let Some(rule) = self.made.get(&key) {
                    return Ok(Node::Ref(rule.clone(), *pos));
                }
                let rule = format!("{name}#{}", self.made.len());
                self.made.insert(key, rule.clone());
                let inner: HashMap<String, Node> = t.params.iter().cloned().zip(args).collect();
                let body = self.expand(&t.body.clone(), &inner, depth + 1, level)?;
                self.new_rules.push(RuleDef {
                    name: rule.clone(),
                    body,
                    pos: *pos,
                });
                Node::Ref(rule, *pos)
            }
            Node::Seq(v) => Node::Seq(
                v.iter()
                    .map(|x| self.expand(x, env, depth, level))
                    .collect::<Result<_>>()?,
            ),
            Node::Alt(v) => Node::Alt(
                v.iter()
                    .map(|x| self.expand(x, env, depth, level))
                    .collect::<Result<_>>()?,
            ),
            Node::Repeat { node, min, max } => Node::Repeat {
                node: Box::new(self.expand(node, env, depth, level)?),
                min: *min,
                max: *max,
            },
            other => other.clone(),
        })
    }
}

/// A grammar's rules (templates expanded), terminals (`%import`s of
/// `common` added) and `%ignore`.
pub(super) fn expand_defs(mut defs: Defs) -> Result<(Vec<RuleDef>, Vec<TermDef>, Vec<Node>)> {
    if !defs.imports.is_empty() {
        let common = common_terminals();
        for t in &common {
            defs.terminals.push(TermDef {
                name: format!("common::{}", t.name),
                body: namespaced(&t.body),
                ..t.clone()
            });
        }
        for (name, alias, pos) in std::mem::take(&mut defs.imports) {
            if !common.iter().any(|t| t.name == name) {
                return Err(Error::Compile(format!(
                    "%import at {pos}: common has no terminal '{name}'"
                )));
            }
            defs.terminals.push(TermDef {
                name: alias,
                body: Node::Ref(format!("common::{name}"), pos),
                priority: 0,
                pos,
            });
        }
    }
    let mut ex = Expander {
        templates: &defs.templates,
        made: HashMap::new(),
        new_rules: Vec::new(),
    };
    let empty = HashMap::new();
    let mut rules = Vec::with_capacity(defs.rules.len());
    for r in &defs.rules {
        rules.push(RuleDef {
            body: ex.expand(&r.body, &empty, 0, 0)?,
            ..r.clone()
        });
    }
    rules.append(&mut ex.new_rules);
    let ignore = defs
        .ignore
        .iter()
        .map(|n| ex.expand(n, &empty, 0, 0))
        .collect::<Result<Vec<_>>>()?;
    Ok((rules, defs.terminals, ignore))
}

/// Prefixes the references in `node` to the names in `defined` (a `%lark`
/// block's own rules and terminals; other references name blocks inside it).
pub(super) fn rename_defined(
    node: &mut Node,
    defined: &std::collections::HashSet<String>,
    prefix: &str,
) -> Result<()> {
    node.rename_refs(|name| {
        if defined.contains(name.as_str()) {
            *name = format!("{prefix}{name}");
        }
    })
}
