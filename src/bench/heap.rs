//! The benchmark build's count of bytes the wasm allocator holds.
//!
//! Linear memory only grows: the figure the runtime reports (and the
//! inspector's wasm memory size) is the high-water mark of everything the
//! isolate ever allocated at once. To tell memory the relay keeps (a leak,
//! a cache that grows) from a peak it reached once, the soak reads the bytes
//! currently allocated, counted here: the benchmark build wraps the system
//! allocator and adds or subtracts each allocation's size. The production
//! build has no such wrapper and pays nothing (this module is compiled only
//! with the `bench` feature).
//!
//! An isolate runs one thread, so relaxed atomics are plain loads and
//! stores in wasm; the count costs two integer operations per allocation.

#![allow(unsafe_code, reason = "a global allocator is an unsafe trait; every call goes straight to System's")]

use serde::Serialize;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes the allocator has handed out and not had back.
static LIVE: AtomicU64 = AtomicU64::new(0);
/// The most `LIVE` has been since the isolate started.
static PEAK: AtomicU64 = AtomicU64::new(0);

/// The system allocator with a running count of live bytes.
struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the counting touches only the two atomics above.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is `System::alloc`'s.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new_size` is the caller's, checked by its contract.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
            grew(new_size);
        }
        moved
    }
}

/// Adds `size` bytes to the live count and raises the peak past it.
fn grew(size: usize) {
    let live = LIVE.fetch_add(size as u64, Ordering::Relaxed) + size as u64;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes of this isolate's wasm memory, as the bench work route reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WasmMemory {
    /// Bytes currently allocated by the wasm allocator (live heap).
    pub wasm_heap: u64,
    /// The most `wasm_heap` has been since the isolate started.
    pub wasm_heap_peak: u64,
    /// Size of the wasm linear memory, bytes (only grows).
    pub wasm_memory: u64,
}

/// WebAssembly's page size, bytes: linear memory grows in whole pages.
pub const WASM_PAGE_BYTES: u64 = 65_536;

/// The counts now.
pub fn snapshot() -> WasmMemory {
    WasmMemory {
        wasm_heap: LIVE.load(Ordering::Relaxed),
        wasm_heap_peak: PEAK.load(Ordering::Relaxed),
        wasm_memory: linear_memory(),
    }
}

/// The linear memory's size, bytes.
#[cfg(target_arch = "wasm32")]
fn linear_memory() -> u64 {
    core::arch::wasm32::memory_size(0) as u64 * WASM_PAGE_BYTES
}

/// No linear memory outside wasm (native tests).
#[cfg(not(target_arch = "wasm32"))]
fn linear_memory() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_bytes_follow_allocations_and_frees() {
        // Other tests allocate on other threads, so compare against a margin.
        let before = snapshot().wasm_heap;
        let block: Vec<u8> = Vec::with_capacity(8 << 20);
        let during = snapshot();
        assert!(during.wasm_heap >= before + (8 << 20) - (1 << 20), "an 8 MiB block counts");
        assert!(during.wasm_heap_peak >= during.wasm_heap);
        drop(block);
        let after = snapshot().wasm_heap;
        assert!(after + (7 << 20) <= during.wasm_heap, "the freed block no longer counts");
    }
}
