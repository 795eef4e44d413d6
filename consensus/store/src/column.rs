//! The store's namespaces ([`Column`]): each kind of value in a key space of its own.

/// The namespaces of the store. Keys of different columns never collide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    /// Blocks by block digest, in their wire encoding.
    Blocks,
    /// Mempool batches by batch digest, in their wire layout.
    Batches,
    /// The safety state (last voted round, highest QC, last committed block), which a node
    /// restarted on a durable store must read back before it votes again. It holds one entry:
    /// on the durable store a write replaces it, whatever its key.
    Safety,
    /// Anything else a durable store needs (a schema version, the last executed height, ...).
    Meta,
}

impl Column {
    pub const ALL: [Column; 4] = [
        Column::Blocks,
        Column::Batches,
        Column::Safety,
        Column::Meta,
    ];

    /// Stable names, for a backend that names its column families.
    pub fn name(self) -> &'static str {
        match self {
            Column::Blocks => "blocks",
            Column::Batches => "batches",
            Column::Safety => "safety",
            Column::Meta => "meta",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}
