//! Gives back memory that was read from files and is no longer needed resident: the
//! executable's relocation records, which only the dynamic loader reads (the binary's `main`
//! gives them back first thing); the pages of mcpbox's own executable and of its plugins'
//! compiled code that starting up touched, once it serves (`host` does so when it is ready
//! and once more a second later); and those of a plugin reloaded later, once its lists are
//! read (`watch`, through `engine`). Such pages are
//! unmapped from the process (`madvise(MADV_DONTNEED)`), as a kernel frees its init sections
//! after boot; what runs afterwards faults the pages it needs back in from the page cache.
//!
//! Only pages that are still the file's own are given back: present pages the process wrote
//! (a private copy, such as a debugger's breakpoint) and pages swapped out are kept, page by
//! page, from `/proc/self/pagemap`. A page given back reads back from the file exactly as it
//! was, so this changes what the process holds, never what it reads or runs. The page cache
//! keeps the pages: the process's resident and proportional set sizes fall, and the kernel may
//! reclaim them as it does any file data no process maps; the memory the files take in the
//! page cache does not change.
//!
//! Uses: nothing.

use std::ops::Range;

/// What was given back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    /// Stretches of pages unmapped.
    pub stretches: usize,
    /// Their size in bytes.
    pub bytes: usize,
    /// Of those, the bytes that were resident: what the process stopped holding.
    pub resident: usize,
}

impl Released {
    fn add(&mut self, other: Self) {
        self.stretches += other.stretches;
        self.bytes += other.bytes;
        self.resident += other.resident;
    }
}

/// Give back the pages of mcpbox's executable that are loaded read-only (its machine code and
/// read-only data). `None` when nothing was: not Linux, the executable not found, text
/// relocations, `/proc/self/pagemap` unreadable, or `madvise` refused.
pub fn give_back_executable() -> Option<Released> {
    give_back_read_only(imp::read_only_segments()?).filter(|released| released.stretches > 0)
}

/// Give back the pages of mcpbox's executable that hold its relocation records (`.rela.dyn`
/// and the like: 1.3 MiB in a release build). The dynamic loader reads them once, before
/// `main` runs, and nothing reads them again, so `main` gives them back first thing: they
/// would otherwise count in every megabyte start-up holds at once, until serving begins.
/// `None` as for [`give_back_executable`], but for nothing to give.
pub fn give_back_relocation_records() -> Option<Released> {
    give_back_read_only(imp::relocation_records()?)
}

/// Give back the file's own pages in `ranges`, each inside a segment of this executable.
#[expect(
    unsafe_code,
    reason = "giving back pages needs the promise that nothing writes them"
)]
fn give_back_read_only(ranges: Vec<Range<*const u8>>) -> Option<Released> {
    let mut released = Released::default();
    for range in ranges {
        // SAFETY: `imp` found each range inside a segment of this executable that the loader
        // mapped without write permission, and refused an executable with text relocations:
        // mapped for as long as the process runs, and no one writes it.
        released.add(unsafe { give_back_file_pages(range) }?);
    }
    Some(released)
}

/// Give back the pages in `range` that are still the file's own: whole pages inside it only,
/// skipping, page by page, those the process wrote or that are swapped out. `None` when
/// nothing could be looked at (not Linux, `/proc/self/pagemap` unreadable).
///
/// # Safety
///
/// `range` must stay mapped for the duration of the call and nothing may write to it
/// meanwhile (a read-only mapping): a page written between the look and the unmapping would
/// lose what was written.
#[expect(
    unsafe_code,
    reason = "unmapping pages is sound only under the caller's promise"
)]
pub unsafe fn give_back_file_pages(range: Range<*const u8>) -> Option<Released> {
    // SAFETY: the caller's promise, passed on.
    unsafe { imp::give_back(range.start as usize..range.end as usize) }
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
#[expect(
    unsafe_code,
    reason = "reading the loader's program headers and unmapping file pages"
)]
mod imp {
    use std::ffi::{c_int, c_void};
    use std::io::{Read, Seek, SeekFrom};
    use std::ops::Range;

    use super::Released;

    /// `<elf.h>`'s dynamic section tags and flag, which the libc crate does not carry.
    const DT_NULL: u64 = 0;
    const DT_PLTRELSZ: u64 = 2;
    const DT_RELA: u64 = 7;
    const DT_RELASZ: u64 = 8;
    const DT_REL: u64 = 17;
    const DT_RELSZ: u64 = 18;
    const DT_JMPREL: u64 = 23;
    const DT_RELRSZ: u64 = 35;
    const DT_RELR: u64 = 36;
    const DT_TEXTREL: u64 = 22;
    const DT_FLAGS: u64 = 30;
    const DF_TEXTREL: u64 = 0x4;

    /// `/proc/self/pagemap`: bit 63 present, bit 62 swapped, bit 61 a file page (or shared
    /// anonymous memory: also lossless to unmap).
    const PRESENT: u64 = 1 << 63;
    const SWAPPED: u64 = 1 << 62;
    const FILE_OR_SHARED: u64 = 1 << 61;

    /// What the walk over the loaded objects found about the one holding this code.
    #[derive(Default)]
    struct Found {
        /// Each segment loaded without write permission.
        read_only: Vec<Range<*const u8>>,
        /// The object asks the loader to write into its code.
        text_relocations: bool,
        /// The object holding this function was found.
        found: bool,
        /// Where the object is loaded (what its addresses are relative to).
        base: usize,
        /// Its dynamic section's relocation tables (`DT_RELA`, `DT_REL`, `DT_RELR`,
        /// `DT_JMPREL`) and sizes, by tag, as the section holds them.
        tables: [(u64, u64); 4],
    }

    /// The executable's loaded segments and dynamic section, unless it has text relocations.
    fn walk() -> Option<Found> {
        let mut found = Found::default();
        // SAFETY: `visit` matches the callback type `dl_iterate_phdr` expects and only uses
        // `data` as the `Found` passed here, which outlives the call.
        unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut found).cast::<c_void>()) };
        (found.found && !found.text_relocations).then_some(found)
    }

    pub(super) fn read_only_segments() -> Option<Vec<Range<*const u8>>> {
        walk().map(|found| found.read_only)
    }

    /// The executable's relocation tables, each one wholly inside a read-only segment.
    pub(super) fn relocation_records() -> Option<Vec<Range<*const u8>>> {
        let found = walk()?;
        Some(
            found
                .tables
                .iter()
                .filter(|&&(at, len)| at != 0 && len != 0)
                .filter_map(|&(at, len)| {
                    let (at, len) = (usize::try_from(at).ok()?, usize::try_from(len).ok()?);
                    // The loader may have made the address absolute in place; if not, it is
                    // relative to where the executable is loaded.
                    let start = if at < found.base {
                        found.base.checked_add(at)?
                    } else {
                        at
                    };
                    let end = start.checked_add(len)?;
                    found
                        .read_only
                        .iter()
                        .any(|segment| {
                            segment.start as usize <= start && end <= segment.end as usize
                        })
                        .then_some(start as *const u8..end as *const u8)
                })
                .collect(),
        )
    }

    /// The `dl_iterate_phdr` callback: for the object whose segments hold this very function,
    /// note its read-only segments and whether it has text relocations, then stop.
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: `data` is the `Found` that `read_only_segments` passed, alive and not
        // otherwise borrowed during the walk; `info` is valid for the duration of this
        // callback.
        let (found, info) = unsafe { (&mut *data.cast::<Found>(), &*info) };
        if info.dlpi_phdr.is_null() {
            return 0;
        }
        // SAFETY: the loader gives `dlpi_phnum` program headers at `dlpi_phdr`.
        let headers =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        // Each header with where its segment is and how long (64-bit targets only, see the
        // `cfg`: these always fit a `usize`).
        let Some(headers) = headers
            .iter()
            .map(|h| {
                let start = usize::try_from(info.dlpi_addr)
                    .ok()?
                    .checked_add(usize::try_from(h.p_vaddr).ok()?)?;
                Some((h, start, usize::try_from(h.p_memsz).ok()?))
            })
            .collect::<Option<Vec<_>>>()
        else {
            return 0;
        };
        let here = read_only_segments as *const () as usize;
        let holds_this = headers.iter().any(|&(h, start, len)| {
            h.p_type == libc::PT_LOAD && (start..start.saturating_add(len)).contains(&here)
        });
        if !holds_this {
            return 0;
        }
        for &(header, start, len) in &headers {
            if header.p_type == libc::PT_LOAD && header.p_flags & libc::PF_W == 0 {
                let start = start as *const u8;
                found.read_only.push(start..start.wrapping_add(len));
            } else if header.p_type == libc::PT_DYNAMIC {
                let entries = len / std::mem::size_of::<[u64; 2]>();
                let dynamic = start as *const [u64; 2];
                for i in 0..entries {
                    // SAFETY: the dynamic section is mapped, `entries` entries long, and
                    // 8-byte aligned as the ELF format requires; each entry is a tag and a value.
                    let [tag, value] = unsafe { dynamic.add(i).read() };
                    match tag {
                        DT_NULL => break,
                        DT_TEXTREL => found.text_relocations = true,
                        DT_FLAGS if value & DF_TEXTREL != 0 => found.text_relocations = true,
                        DT_RELA => found.tables[0].0 = value,
                        DT_RELASZ => found.tables[0].1 = value,
                        DT_REL => found.tables[1].0 = value,
                        DT_RELSZ => found.tables[1].1 = value,
                        DT_RELR => found.tables[2].0 = value,
                        DT_RELRSZ => found.tables[2].1 = value,
                        DT_JMPREL => found.tables[3].0 = value,
                        DT_PLTRELSZ => found.tables[3].1 = value,
                        _ => {}
                    }
                }
            }
        }
        found.found = true;
        found.base = usize::try_from(info.dlpi_addr).unwrap_or(0);
        1
    }

    /// See [`super::give_back_file_pages`]; `range` as addresses.
    pub(super) unsafe fn give_back(range: Range<usize>) -> Option<Released> {
        // SAFETY: `sysconf` has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|page| page.is_power_of_two())?;
        // Whole pages inside the range only: a page it shares with another mapping is not
        // the caller's to give.
        let first = range.start.checked_add(page - 1)? & !(page - 1);
        let end = range.end & !(page - 1);
        if end <= first {
            return Some(Released::default());
        }
        let pages = (end - first) / page;
        let mut entries = vec![0u8; pages * 8];
        let mut pagemap = std::fs::File::open("/proc/self/pagemap").ok()?;
        pagemap
            .seek(SeekFrom::Start(u64::try_from(first / page * 8).ok()?))
            .ok()?;
        pagemap.read_exact(&mut entries).ok()?;
        let entry = |i: usize| {
            let mut entry = [0u8; 8];
            entry.copy_from_slice(&entries[i * 8..i * 8 + 8]);
            u64::from_le_bytes(entry)
        };
        let keep = |i: usize| {
            let entry = entry(i);
            entry & SWAPPED != 0 || (entry & PRESENT != 0 && entry & FILE_OR_SHARED == 0)
        };
        let mut released = Released::default();
        let mut i = 0;
        while i < pages {
            if keep(i) {
                i += 1;
                continue;
            }
            let start = i;
            let mut resident = 0;
            while i < pages && !keep(i) {
                resident += usize::from(entry(i) & PRESENT != 0);
                i += 1;
            }
            let (at, len) = (first + start * page, (i - start) * page);
            // SAFETY: these pages are inside the caller's range, which stays mapped and
            // unwritten (the caller's promise), and each is either not in memory or still
            // the file's own (or shared memory's): unmapping them loses nothing, and the
            // process reads the same bytes back from the file.
            if unsafe { libc::madvise(at as *mut c_void, len, libc::MADV_DONTNEED) } == 0 {
                released.stretches += 1;
                released.bytes += len;
                released.resident += resident * page;
            }
        }
        Some(released)
    }
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
mod imp {
    use std::ops::Range;

    pub(super) fn read_only_segments() -> Option<Vec<Range<*const u8>>> {
        None
    }

    pub(super) fn relocation_records() -> Option<Vec<Range<*const u8>>> {
        None
    }

    pub(super) unsafe fn give_back(_range: Range<usize>) -> Option<super::Released> {
        None
    }
}

#[cfg(all(test, target_os = "linux", target_pointer_width = "64"))]
#[expect(unsafe_code, reason = "a private file mapping made and read by hand")]
mod tests {
    use super::*;

    /// Read-only data and code the test touches after giving them back, from the file again.
    static TABLE: [u64; 512] = {
        let mut table = [0u64; 512];
        let mut i = 0;
        while i < table.len() {
            table[i] = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            i += 1;
        }
        table
    };

    /// Held by the tests that read or give back the executable's own pages, which would
    /// otherwise see each other's.
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Resident kibibytes of this process's mappings of its own executable without write
    /// permission, from `/proc/self/smaps`.
    fn resident_read_only_kib() -> Option<u64> {
        let exe = std::fs::read_link("/proc/self/exe").ok()?;
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut ours = false;
        let mut kib = 0;
        for line in smaps.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields
                .first()
                .is_some_and(|f| f.contains('-') && !f.ends_with(':'))
            {
                ours = fields.get(1).is_some_and(|perms| !perms.contains('w'))
                    && fields
                        .get(5)
                        .is_some_and(|path| std::path::Path::new(path) == exe);
            } else if ours && fields.first() == Some(&"Rss:") {
                kib += fields.get(1)?.parse::<u64>().ok()?;
            }
        }
        Some(kib)
    }

    #[test]
    fn the_executables_read_only_pages_are_given_back_and_read_back_the_same() {
        let _alone = ALONE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before: u64 = std::hint::black_box(&TABLE).iter().fold(0, |a, b| a ^ b);
        // Every page of the segments read first, so that megabytes are resident however
        // little of the binary this run touched (a filtered run, a binary just linked).
        let mut sum = 0u8;
        for segment in imp::read_only_segments().expect("the test binary's segments") {
            let mut at = segment.start;
            while at < segment.end {
                // SAFETY: inside a segment the loader mapped readable, for the process's life.
                sum ^= unsafe { at.read_volatile() };
                at = at.wrapping_add(4096);
            }
        }
        std::hint::black_box(sum);
        let resident = resident_read_only_kib().unwrap();
        let released = give_back_executable().expect("the test binary's read-only segments");
        let left = resident_read_only_kib().unwrap();
        // Reading smaps runs code and faults some back; what was given back is megabytes.
        assert!(
            left + 1024 < resident,
            "{resident} KiB resident before, {left} KiB after"
        );
        // Code and read-only data at least; the test binary holds megabytes of each.
        assert!(released.stretches >= 2, "{released:?}");
        assert!(released.resident > 1 << 20, "{released:?}");
        let after: u64 = std::hint::black_box(&TABLE).iter().fold(0, |a, b| a ^ b);
        assert_eq!(before, after);
        // Code, strings and formatting all still run after a second time.
        assert!(give_back_executable().is_some());
        assert_eq!(format!("{:?}", Some(1)), "Some(1)");
    }

    /// The relocation records lie in whole pages of the read-only segments, go back, and
    /// nothing reads them again: a second pass finds none of their pages resident.
    #[test]
    fn the_relocation_records_are_given_back_and_stay_out() {
        let _alone = ALONE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let records = imp::relocation_records().expect("the test binary's dynamic section");
        let bytes: usize = records
            .iter()
            .map(|r| r.end as usize - r.start as usize)
            .sum();
        // A Rust test binary is position-independent: tens of thousands of relative
        // relocations, megabytes of them.
        assert!(bytes > 64 << 10, "{bytes} bytes of relocation records");
        let first = give_back_relocation_records().expect("given back");
        assert!(first.stretches >= 1 && first.bytes > 32 << 10, "{first:?}");
        let again = give_back_relocation_records().expect("given back again");
        assert_eq!(again.resident, 0, "{again:?}");
        assert_eq!(again.bytes, first.bytes);
    }

    /// Pages the process wrote are its own and kept; pages never written go back to the file.
    #[test]
    fn written_pages_are_kept_and_file_pages_are_given_back() {
        use std::io::Write as _;
        use std::os::fd::AsRawFd as _;

        // SAFETY: `sysconf` has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
        let mut file = tempfile::tempfile().unwrap();
        let content: Vec<u8> = (0..8 * page)
            .map(|i| u8::try_from(i % 251).unwrap())
            .collect();
        file.write_all(&content).unwrap();
        // SAFETY: a fresh private mapping of a file this test owns, unmapped below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                8 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        let bytes = map.cast::<u8>();
        // SAFETY: inside the mapping; page 2 is written (a private copy), the rest only read.
        unsafe {
            for i in 0..8 {
                std::hint::black_box(bytes.add(i * page).read());
            }
            bytes.add(2 * page).write(0xEE);
        }
        // SAFETY: the mapping stays until the end of the test, and nothing writes it during
        // the call (this thread is the only one that knows it).
        let released =
            unsafe { give_back_file_pages(bytes.cast_const()..bytes.add(8 * page).cast_const()) }
                .unwrap();
        // Pages 0–1 and 3–7: two stretches around the written page.
        assert_eq!(
            released,
            Released {
                stretches: 2,
                bytes: 7 * page,
                resident: 7 * page,
            }
        );
        // SAFETY: inside the mapping.
        let now = unsafe { std::slice::from_raw_parts(bytes.cast_const(), 8 * page) };
        assert_eq!(now[2 * page], 0xEE, "the written byte is kept");
        assert_eq!(&now[..2 * page], &content[..2 * page]);
        assert_eq!(&now[2 * page + 1..], &content[2 * page + 1..]);
        // SAFETY: the mapping made above, not used after this.
        assert_eq!(unsafe { libc::munmap(map, 8 * page) }, 0);
    }
}
