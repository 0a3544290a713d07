//! A layout's fields: where each sits in the 64 bits ([`FieldSpan`]), what it holds
//! ([`FieldKind`]), and the named parts of a node field ([`NodePart`]).

/// One field's place in the 64 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldSpan {
    /// Lowest bit of the field.
    pub low_bit: u32,
    /// Width in bits.
    pub bits: u32,
}

impl FieldSpan {
    /// Highest bit of the field.
    pub const fn high_bit(&self) -> u32 {
        self.low_bit + self.bits - 1
    }

    /// Largest value the field holds.
    pub const fn max(&self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }

    /// The field's bits within the ID.
    pub const fn mask(&self) -> u64 {
        self.max() << self.low_bit
    }

    /// The field's value in `id`.
    pub const fn get(&self, id: u64) -> u64 {
        (id >> self.low_bit) & self.max()
    }

    /// `value` moved to the field's place (the caller checked the range).
    pub const fn place(&self, value: u64) -> u64 {
        value << self.low_bit
    }
}

/// What a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FieldKind {
    /// Whole time units since the epoch.
    Time,
    /// The sequence number within a time unit.
    Seq,
    /// The machine (node, worker) ID; may be split into named parts.
    Node,
    /// A value every ID of the layout carries (Vesta's version and type bits).
    Fixed(u64),
    /// How the ID was issued (Vesta's genMethod: embed, server, rest).
    Method,
}

impl FieldKind {
    /// The kind's name in layout descriptions and config files.
    pub const fn name(&self) -> &'static str {
        match self {
            FieldKind::Time => "time",
            FieldKind::Seq => "seq",
            FieldKind::Node => "node",
            FieldKind::Fixed(_) => "fixed",
            FieldKind::Method => "method",
        }
    }
}

/// A named part of the node field (Twitter's datacenter and worker).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodePart {
    /// The part's name.
    pub name: String,
    /// Where it sits in the ID.
    pub span: FieldSpan,
}

/// One field of a layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Field {
    /// The field's name as the layout's own system calls it (`machine`, `workerId`, ...).
    pub name: String,
    /// What it holds.
    pub kind: FieldKind,
    /// Where it sits in the ID.
    pub span: FieldSpan,
    /// The node field's named parts, from the top down; empty otherwise.
    pub parts: Vec<NodePart>,
}
