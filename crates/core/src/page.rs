//! Listing pages bounded in bytes as well as in items.
//!
//! A page's row count alone does not bound its reply: 500 parked rows of
//! about 1 MiB each would be a 500 MiB reply built inside an isolate of
//! 128 MB. Every listing therefore cuts its page at [`MAX_PAGE_BYTES`] of
//! encoded items as well as at its item limit. The first item is always
//! taken, even when it alone is larger than the budget, so a row larger than
//! the budget is answered alone and paging always progresses.

#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

/// Byte budget of one listing page's items, encoded (1 MiB): one of the
/// largest rows a source accepts (`MAX_ROW_BYTES`, about 1 MiB) or
/// thousands of small records, far under an isolate's
/// 128 MB even with a few copies of the reply in flight, and small enough
/// that a console refreshing it every few seconds stays quick.
pub const MAX_PAGE_BYTES: u32 = 1024 * 1024;

/// What a page's reply may add to its items' [`MAX_PAGE_BYTES`] (4 KiB):
/// the envelope's keys, the `next` cursor and the target's name, each
/// bounded far below this. A page of more than one item is at most
/// `MAX_PAGE_BYTES + PAGE_ENVELOPE_BYTES` bytes.
pub const PAGE_ENVELOPE_BYTES: u32 = 4 * 1024;

/// Most watermarks one page of `GET /watermarks` lists, and its default: a
/// target can hear from thousands of sources, and one entry is about
/// 170 bytes, so a page stays under 100 KB.
pub const MAX_WATERMARKS_PER_PAGE: u32 = 500;

/// Builds one page: items are offered in order and taken while the page
/// stays within its item limit and byte budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageBuilder {
    /// Most items the page may hold (the request's `limit`).
    max_items: u32,
    /// The byte budget of the page's items, separators included.
    max_bytes: u64,
    /// Items taken so far.
    items: u32,
    /// Bytes taken so far: the items plus one separator between each two.
    bytes: u64,
    /// Whether an item was offered and refused: more follows this page.
    more: bool,
}

impl PageBuilder {
    /// A page of at most `max_items` items (at least 1) and
    /// [`MAX_PAGE_BYTES`] bytes.
    pub fn new(max_items: u32) -> PageBuilder {
        PageBuilder::with_budget(max_items, u64::from(MAX_PAGE_BYTES))
    }

    /// A page of at most `max_items` items (at least 1) and `max_bytes`
    /// bytes of items.
    pub fn with_budget(max_items: u32, max_bytes: u64) -> PageBuilder {
        PageBuilder { max_items: max_items.max(1), max_bytes, items: 0, bytes: 0, more: false }
    }

    /// Offers the next item, `bytes` long encoded: true when the page takes
    /// it. The first item is always taken; once one is refused, every later
    /// one is too (a page is a prefix of the listing).
    pub fn offer(&mut self, bytes: u64) -> bool {
        let separator = u64::from(self.items > 0);
        let total = self.bytes.saturating_add(separator).saturating_add(bytes);
        let fits = self.items < self.max_items && total <= self.max_bytes;
        if self.more || (self.items > 0 && !fits) {
            self.more = true;
            return false;
        }
        self.items += 1;
        self.bytes = total;
        true
    }

    /// Items taken.
    pub fn items(&self) -> u32 {
        self.items
    }

    /// Bytes taken, separators included.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether an item was refused, so another page follows.
    pub fn more(&self) -> bool {
        self.more
    }
}

/// Cuts `items` (read with one more than the page's `max_items`, so a
/// following item is seen) to one page by count and by `size`, the encoded
/// bytes of an item. Returns the page and whether more follows.
pub fn cut_page<T>(mut items: Vec<T>, max_items: u32, size: impl Fn(&T) -> u64) -> (Vec<T>, bool) {
    let mut page = PageBuilder::new(max_items);
    let taken = items.iter().take_while(|item| page.offer(size(item))).count();
    let more = taken < items.len();
    items.truncate(taken);
    (items, more)
}

/// The encoded size of `item` as JSON, in bytes (0 if it cannot be
/// encoded: the reply's own encoding then fails and says so).
pub fn json_bytes<T: serde::Serialize + ?Sized>(item: &T) -> u64 {
    serde_json::to_vec(item).map_or(0, |v| v.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_takes_items_up_to_its_budget_exactly() {
        // Two items of 10 and a separator: 21 bytes.
        let mut page = PageBuilder::with_budget(10, 21);
        assert!(page.offer(10) && page.offer(10), "exactly at the budget");
        assert_eq!((page.items(), page.bytes(), page.more()), (2, 21, false));
        assert!(!page.offer(0), "one byte over: a separator alone does not fit");
        assert!(page.more());
        let mut page = PageBuilder::with_budget(10, 20);
        assert!(page.offer(10));
        assert!(!page.offer(10), "one byte over the budget is refused");
        assert_eq!((page.items(), page.bytes(), page.more()), (1, 10, true));
    }

    #[test]
    fn an_oversized_first_item_is_answered_alone() {
        let mut page = PageBuilder::with_budget(10, 100);
        assert!(page.offer(1_000), "the first item is always taken");
        assert!(!page.offer(1), "and nothing after it");
        assert_eq!((page.items(), page.more()), (1, true));
        let (items, more) = cut_page(vec![u64::from(MAX_PAGE_BYTES) + 1], 10, |s| *s);
        assert_eq!((items.len(), more), (1, false), "a lone oversized last item: no next");
    }

    #[test]
    fn a_page_stops_at_its_item_limit_and_stays_a_prefix() {
        let mut page = PageBuilder::with_budget(2, 1_000);
        assert!(page.offer(1) && page.offer(1));
        assert!(!page.offer(1), "the third of a limit of 2");
        assert!(!page.offer(0), "nothing after a refusal, however small");
        assert_eq!(PageBuilder::with_budget(0, 10).max_items, 1, "a page holds at least one item");
    }

    #[test]
    fn cut_page_says_whether_more_follows() {
        let half = u64::from(MAX_PAGE_BYTES) / 2;
        let (items, more) = cut_page(vec![1u64, 2, 3], 3, |_| 1);
        assert_eq!((items, more), (vec![1, 2, 3], false), "all of the last page: next is null");
        let (items, more) = cut_page(vec![1u64, 2, 3, 4], 3, |_| 1);
        assert_eq!((items, more), (vec![1, 2, 3], true), "the peeked item means more");
        let (items, more) = cut_page(vec![half, half, 1], 10, |s| *s);
        assert_eq!((items, more), (vec![half], true), "two halves and a separator are one byte over");
        let (items, more) = cut_page(vec![half, half - 1], 10, |s| *s);
        assert_eq!((items.len(), more), (2, false), "two items and a separator exactly at the budget");
        assert_eq!(json_bytes(&serde_json::json!({"a": 1})), 7);
    }
}
