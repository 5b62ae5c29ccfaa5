//! The KV cache as a pool of fixed-size blocks with a prefix cache over them, as vLLM's block
//! pool keeps it: unreferenced blocks sit in one free queue in the order they were freed; a
//! freed block keeps its hash (so a later request can hit it) until it is taken from the front
//! of the queue for new tokens, which evicts the least recently freed cached block first.

use std::collections::HashMap;

/// Tokens per KV block (vLLM's default `--block-size`).
pub const BLOCK_TOKENS: u64 = 16;

/// Identity of a full prompt block: the trace's hash id and the block's position inside the
/// hash id's span (a Mooncake hash id covers [`KV_BLOCKS_PER_HASH`] KV blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockKey {
    pub hash_id: u64,
    pub part: u32,
}

/// Mooncake traces give one hash id per 512 tokens: 512 / 16 = 32 KV blocks.
pub const KV_BLOCKS_PER_HASH: u64 = 512 / BLOCK_TOKENS;

/// Blocks needed to hold `tokens` tokens.
pub fn blocks_for(tokens: u64) -> u64 {
    tokens.div_ceil(BLOCK_TOKENS)
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Debug, PartialEq)]
struct Block {
    references: u32,
    key: Option<BlockKey>,
    /// Links in the free queue (only while `references == 0`).
    prev: u32,
    next: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct BlockPool {
    blocks: Vec<Block>,
    head: u32,
    tail: u32,
    free: u32,
    cached: HashMap<BlockKey, u32>,
    /// Until a block is first registered nothing is cached, so which free block is taken
    /// does not matter: free blocks are a stack (no queue links to walk, the most recently
    /// freed first, warm in memory). The first registration builds the free queue from it.
    stack: Option<Vec<u32>>,
}

impl BlockPool {
    pub fn new(total: u32) -> BlockPool {
        let total = total.min(NONE - 1);
        let blocks = (0..total)
            .map(|i| Block {
                references: 0,
                key: None,
                prev: if i == 0 { NONE } else { i - 1 },
                next: if i + 1 == total { NONE } else { i + 1 },
            })
            .collect();
        BlockPool {
            blocks,
            head: NONE,
            tail: NONE,
            free: total,
            cached: HashMap::new(),
            stack: Some((0..total).rev().collect()),
        }
    }

    /// Leaves stack mode: the free blocks become the free queue, oldest freed first.
    fn queue(&mut self) {
        let Some(stack) = self.stack.take() else {
            return;
        };
        self.free = 0;
        // The stack's bottom was freed first (or never taken).
        for block in stack {
            self.push_back(block);
        }
    }

    pub fn total(&self) -> u32 {
        self.blocks.len() as u32
    }

    /// Unreferenced blocks (cached or not): what new tokens can take.
    pub fn free(&self) -> u32 {
        self.free
    }

    pub fn used(&self) -> u32 {
        self.total() - self.free
    }

    /// The cached block holding `key`, and whether taking it removes it from the free queue.
    pub fn lookup(&self, key: BlockKey) -> Option<(u32, bool)> {
        let block = *self.cached.get(&key)?;
        Some((block, self.blocks[block as usize].references == 0))
    }

    /// One more request holds `block` (a prefix hit).
    pub fn touch(&mut self, block: u32) {
        self.queue();
        if self.blocks[block as usize].references == 0 {
            self.unlink(block);
        }
        self.blocks[block as usize].references += 1;
    }

    /// Takes the front of the free queue for new tokens, evicting its cached content.
    pub fn allocate(&mut self) -> Option<u32> {
        if let Some(stack) = &mut self.stack {
            let block = stack.pop()?;
            self.free -= 1;
            self.blocks[block as usize].references = 1;
            return Some(block);
        }
        let block = self.head;
        if block == NONE {
            return None;
        }
        self.unlink(block);
        let entry = &mut self.blocks[block as usize];
        entry.references = 1;
        if let Some(key) = entry.key.take()
            && self.cached.get(&key) == Some(&block)
        {
            self.cached.remove(&key);
        }
        Some(block)
    }

    /// A request lets go of `block`; unreferenced, it joins the back of the free queue.
    pub fn release(&mut self, block: u32) {
        let entry = &mut self.blocks[block as usize];
        entry.references = entry.references.saturating_sub(1);
        if entry.references == 0 {
            match &mut self.stack {
                Some(stack) => {
                    stack.push(block);
                    self.free += 1;
                }
                None => self.push_back(block),
            }
        }
    }

    /// `block` now holds the full prompt block `key`; a block already cached under the same key
    /// (computed by another request at the same time) stays the one hits find.
    pub fn register(&mut self, block: u32, key: BlockKey) {
        self.queue();
        if let std::collections::hash_map::Entry::Vacant(slot) = self.cached.entry(key) {
            slot.insert(block);
            self.blocks[block as usize].key = Some(key);
        }
    }

    fn unlink(&mut self, block: u32) {
        let Block { prev, next, .. } = self.blocks[block as usize];
        match prev {
            NONE => self.head = next,
            p => self.blocks[p as usize].next = next,
        }
        match next {
            NONE => self.tail = prev,
            n => self.blocks[n as usize].prev = prev,
        }
        self.free -= 1;
    }

    fn push_back(&mut self, block: u32) {
        let tail = self.tail;
        let entry = &mut self.blocks[block as usize];
        entry.prev = tail;
        entry.next = NONE;
        match tail {
            NONE => self.head = block,
            t => self.blocks[t as usize].next = block,
        }
        self.tail = block;
        self.free += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(hash_id: u64) -> BlockKey {
        BlockKey { hash_id, part: 0 }
    }

    #[test]
    fn the_least_recently_freed_cached_block_is_evicted_first() {
        let mut pool = BlockPool::new(2);
        let a = pool.allocate().unwrap();
        let b = pool.allocate().unwrap();
        assert_ne!(a, b);
        assert_eq!(pool.allocate(), None);
        pool.register(a, key(1));
        pool.register(b, key(2));
        pool.release(a);
        pool.release(b);
        assert_eq!(pool.free(), 2);
        assert_eq!(pool.lookup(key(1)), Some((a, true)));
        assert_eq!(pool.allocate(), Some(a), "freed first, evicted first");
        assert_eq!(pool.lookup(key(1)), None);
        assert_eq!(pool.lookup(key(2)), Some((b, true)));
        pool.touch(b);
        assert_eq!(pool.free(), 0);
        assert_eq!(pool.lookup(key(2)), Some((b, false)));
    }

    #[test]
    fn without_a_cached_block_free_blocks_are_taken_and_given_back_by_count() {
        let mut pool = BlockPool::new(3);
        let taken: Vec<u32> = (0..3).map(|_| pool.allocate().unwrap()).collect();
        assert_eq!((pool.free(), pool.used(), pool.allocate()), (0, 3, None));
        pool.release(taken[1]);
        assert_eq!(pool.free(), 1);
        assert_eq!(pool.allocate(), Some(taken[1]));
        // Freed blocks, then a registration: the queue keeps the order they were freed in.
        pool.release(taken[2]);
        pool.release(taken[0]);
        pool.register(taken[1], key(7));
        pool.release(taken[1]);
        assert_eq!(pool.free(), 3);
        assert_eq!(pool.allocate(), Some(taken[2]), "freed first, taken first");
        assert_eq!(pool.allocate(), Some(taken[0]));
        assert_eq!(pool.lookup(key(7)), Some((taken[1], true)));
    }
}
