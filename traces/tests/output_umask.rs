//! New output files get the user's umask (`jitter_trace::output`): whole-file and streamed
//! outputs alike. A file of its own: the umask is process-wide, so no other test may run beside
//! this one.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use jitter_trace::output::{write_output_bytes, StreamingOutput};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn new_outputs_are_created_with_the_users_umask() {
    let d = tempfile::tempdir().unwrap();
    for (mask, want) in [(0o027, 0o640), (0o002, 0o664), (0o077, 0o600)] {
        // SAFETY: umask has no preconditions; this test is alone in its process.
        let old = unsafe { libc::umask(mask) };
        let whole = d.path().join(format!("whole-{mask:o}.csv"));
        write_output_bytes(&whole, b"x\n").unwrap();
        let streamed = d.path().join(format!("streamed-{mask:o}.jtr"));
        let mut s = StreamingOutput::open(&streamed).unwrap();
        std::io::Write::write_all(&mut s.file().unwrap(), b"header").unwrap();
        s.publish().unwrap();
        s.commit().unwrap();
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        assert_eq!(mode(&whole), want, "umask {mask:o}: {}", whole.display());
        assert_eq!(
            mode(&streamed),
            want,
            "umask {mask:o}: {}",
            streamed.display()
        );
        assert_eq!(std::fs::read(&streamed).unwrap(), b"header");
    }
}
