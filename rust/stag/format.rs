//! The checked tree a structural tag reads into (`spec`): formats, token
//! references, delimiters, tags and triggered tags, with what `lower` asks
//! of a tag's texts.

/// One format of a structural tag, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// Exactly this text.
    ConstString(String),
    /// A JSON value valid against the schema (its JSON text), with at most
    /// `max_whitespace` whitespace characters in a row where JSON allows
    /// them (xgrammar's `max_whitespace_cnt`).
    JsonSchema {
        schema: String,
        max_whitespace: Option<u32>,
    },
    /// Text matched by an EBNF grammar (xgrammar's dialect of GBNF).
    Grammar(String),
    /// Text fully matched by a regular expression.
    Regex(String),
    /// Any text not containing one of `excludes`, at most `max_chars`
    /// characters long.
    AnyText {
        excludes: Vec<String>,
        max_chars: Option<u32>,
    },
    Sequence(Vec<Format>),
    Or(Vec<Format>),
    Tag(Tag),
    /// Free text in which each trigger starts one of the tags.
    TriggeredTags(Triggered),
    /// Tags separated by `separator`, nothing else.
    TagsWithSeparator {
        tags: Vec<Tag>,
        separator: String,
        at_least_one: bool,
        stop_after_first: bool,
    },
    /// `min..=max` repetitions (`max` None: unbounded); also `optional`,
    /// `plus` and `star`.
    Repeat {
        content: Box<Format>,
        min: u32,
        max: Option<u32>,
    },
    /// One whole token, one of these.
    Token(Vec<TokenRef>),
    /// One whole token, none of these.
    ExcludeToken(Vec<TokenRef>),
    /// Whole tokens, none of `excludes`, at most `max_tokens` of them.
    AnyTokens {
        excludes: Vec<TokenRef>,
        max_tokens: Option<u32>,
    },
    /// Free tokens in which a trigger token starts the tag it begins.
    TokenTriggeredTags {
        triggers: Vec<TokenRef>,
        tags: Vec<Tag>,
        excludes: Vec<TokenRef>,
        at_least_one: bool,
        stop_after_first: bool,
    },
    /// Free tokens in which each rule's token is followed by its format;
    /// `repeat` (xgrammar's `loop`): any number of times, else at most once.
    TokenDispatch {
        rules: Vec<(TokenRef, Format)>,
        repeat: bool,
        excludes: Vec<TokenRef>,
    },
}

/// A token named in a spec: by id, or by its text (resolved against the
/// vocabulary when lowering).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenRef {
    Id(i64),
    Text(String),
}

/// A tag's begin or end: text, or one whole token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delim {
    Text(String),
    Token(TokenRef),
}

/// `begin content end`, with one of several ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tag {
    pub begin: Delim,
    pub content: Box<Format>,
    pub ends: Vec<Delim>,
}

impl Tag {
    /// The begin text ("" for a token begin).
    pub fn begin_text(&self) -> &str {
        match &self.begin {
            Delim::Text(s) => s,
            Delim::Token(_) => "",
        }
    }

    /// The text ends (token ends left out).
    pub fn text_ends(&self) -> Vec<String> {
        self.ends
            .iter()
            .filter_map(|e| match e {
                Delim::Text(s) => Some(s.clone()),
                Delim::Token(_) => None,
            })
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Triggered {
    pub triggers: Vec<String>,
    pub tags: Vec<Tag>,
    pub at_least_one: bool,
    pub stop_after_first: bool,
    /// Strings the free text between tags may not contain.
    pub excludes: Vec<String>,
}
