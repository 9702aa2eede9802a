//! The allocator's settings. mimalloc (v3) keeps freed memory for `purge_delay` (1 s by
//! default) before returning it to the OS; under Tern's bursts
//! (a campaign's batches, a backlog of statuses) those delays kept a peak resident set of
//! about 150 MiB where the live heap needed about 100 (bench/campaigns.sh, SQLite,
//! 100,000 recipients). Returning memory at once costs the accept path about 4 % (POST
//! /messages 5,369–5,529 → 5,164–5,262 req/s on SQLite, same session): memory is the
//! requirement with a target (≤ 150 MB), so it wins. `MIMALLOC_PURGE_DELAY` still
//! overrides this.
//!
//! SQLite's own allocations (page caches, prepared statements) still go to glibc's malloc,
//! which gives each thread that contends for it an arena of its own, up to eight per core:
//! with a thread per SQLite connection, eleven arenas held 37 MiB where SQLite's live heap
//! was about 11 MB. Two arenas (`M_ARENA_MAX`) lower the process's peak RSS at the tier by
//! about 15 MiB; routing SQLite to mimalloc instead (`SQLITE_CONFIG_MALLOC`) did worse
//! (docs/decisions/memory.md). `MALLOC_ARENA_MAX` still overrides this.

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
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: sets a process-wide option of glibc's malloc (an integer store under
        // glibc's own lock); valid at any time, and first thing in `main` every arena the
        // process makes keeps to it.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, GLIBC_ARENAS) };
    }
}

/// glibc malloc arenas (SQLite's allocator). Peak RSS at the tier on SQLite
/// (bench/campaigns.sh, one session): the default 152–176 MiB in seven runs, two arenas
/// (by `MALLOC_ARENA_MAX`) 137–141 MiB in four, one 137–143 MiB in four (status lag p99
/// 433–828 ms with two, 702–1,738 with one).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const GLIBC_ARENAS: std::ffi::c_int = 2;

#[cfg(test)]
mod tests {
    /// glibc creates arenas as threads first allocate, so this runs itself again in a
    /// process of its own, where no thread but the test's has allocated yet.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    #[allow(unsafe_code)]
    fn glibc_malloc_keeps_to_two_arenas() {
        const NAME: &str = "alloc::tests::glibc_malloc_keeps_to_two_arenas";
        if std::env::var_os("TERN_ALLOC_TEST_CHILD").is_none() {
            let exe = std::env::current_exe().expect("the test binary");
            let out = std::process::Command::new(exe)
                .args(["--exact", NAME, "--test-threads=1"])
                .env("TERN_ALLOC_TEST_CHILD", "1")
                .env_remove("MALLOC_ARENA_MAX")
                .output()
                .expect("the test binary runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("1 passed"),
                "{stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        super::configure();
        // Eight threads allocating at once through glibc's malloc, as SQLite's do.
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let barrier = std::sync::Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    for _ in 0..1_000 {
                        // SAFETY: a plain malloc and free of the same block.
                        unsafe { libc::free(libc::malloc(256)) };
                    }
                    barrier.wait();
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        // SAFETY: malloc_info writes its XML report to a stream open_memstream made; the
        // buffer is read after fclose and freed once.
        let report = unsafe {
            let mut buf: *mut libc::c_char = std::ptr::null_mut();
            let mut len: libc::size_t = 0;
            let stream = libc::open_memstream(&mut buf, &mut len);
            assert!(!stream.is_null());
            assert_eq!(libc::malloc_info(0, stream), 0);
            libc::fclose(stream);
            let text = std::ffi::CStr::from_ptr(buf).to_string_lossy().into_owned();
            libc::free(buf.cast());
            text
        };
        let heaps = report.matches("<heap nr=").count();
        assert!((1..=2).contains(&heaps), "{heaps} arenas: {report}");
    }

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
