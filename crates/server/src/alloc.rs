//! The allocator's settings. mimalloc (v3) keeps freed memory for `purge_delay` (1 s by
//! default) before returning it to the OS; under Tern's bursts
//! (a campaign's batches, a backlog of statuses) those delays kept a peak resident set of
//! about 150 MiB where the live heap needed about 100 (bench/campaigns.sh, SQLite,
//! 100,000 recipients). Returning memory at once costs the accept path about 4 % (POST
//! /messages 5,369–5,529 → 5,164–5,262 req/s on SQLite, same session): memory is the
//! requirement with a target (≤ 150 MB), so it wins. `MIMALLOC_PURGE_DELAY` still
//! overrides this.

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_t` (mimalloc.h); libmimalloc-sys
/// does not name it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Applies the settings; call first thing in `main`.
#[allow(unsafe_code)]
pub fn configure() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets a process-wide option of the allocator (an integer store); valid at
        // any time.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[allow(unsafe_code)]
    fn the_option_index_is_the_purge_delay() {
        // mimalloc v3's default purge_delay is 1,000 ms (options.c); use_numa_nodes follows
        // at 0.
        // SAFETY: reads a process-wide option.
        let (before, numa) = unsafe {
            (
                libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY),
                libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY + 1),
            )
        };
        assert_eq!((before, numa), (1000, 0));
    }
}
