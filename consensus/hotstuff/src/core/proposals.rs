//! The state of our next proposal: the digests waiting to go into our blocks, our own blocks
//! waiting to be processed, and a proposal held back with its deadline (`proposing.rs` decides
//! when and what to propose).

use crate::messages::{Block, TC};
use crate::payload::buffer::PayloadBuffer;
use checkpoint::PipelineProgress;
use plumbing::clock;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Sleep;

pub(super) struct Proposals {
    /// Digests of our mempool's batches, waiting to go into our blocks.
    pub(super) buffer: PayloadBuffer,
    /// Our own blocks, processed like any received block once the current event is handled.
    pub(super) own_blocks: VecDeque<Block>,
    /// A proposal we hold back while the chain is idle (see `should_wait`).
    pub(super) pending: Option<Option<TC>>,
    /// When a held-back proposal goes out anyway.
    pub(super) deadline: Pin<Box<Sleep>>,
    /// How far the application is behind: past `max_unexecuted_bytes`, our blocks carry no
    /// batches (see `checkpoint::PipelineProgress`).
    pub(super) progress: Arc<PipelineProgress>,
}

impl Proposals {
    pub(super) fn new(progress: Arc<PipelineProgress>) -> Self {
        Proposals {
            buffer: PayloadBuffer::default(),
            own_blocks: VecDeque::new(),
            pending: None,
            deadline: Box::pin(clock::sleep(Duration::ZERO)),
            progress,
        }
    }
}

impl Proposals {
    /// `block` committed (`name` is ours): its batches are done wherever they wait in our
    /// buffer, whoever proposed them.
    pub(super) fn settle(&mut self, block: &Block, name: &crypto::PublicKey) {
        if block.author == *name {
            self.buffer.committed(block.round);
        } else {
            self.buffer.committed_elsewhere(&block.payload);
        }
    }
}
