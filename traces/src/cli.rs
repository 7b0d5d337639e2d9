//! What every jitterbench binary does first: Unix manners on standard output, and no panic
//! message or backtrace for a user.

use std::panic::PanicHookInfo;

/// Installs the process-wide behaviour shared by all binaries: writing to a closed pipe
/// (`… | head`) ends the process quietly, as SIGPIPE does for C tools; any other failure to
/// write standard output (a full disk) is one `error:` line and exit status 1; any other panic
/// is one `error: internal error` line (exit status 101), never a backtrace. Call it first.
pub fn init() {
    // SAFETY: `signal` only sets this process's disposition of SIGPIPE back to the default
    // (terminate), which Rust's runtime had set to "ignore"; it is called at start-up, before
    // any thread that could be writing to a pipe exists, and touches no Rust-managed state.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::panic::set_hook(Box::new(|info| {
        let msg = panic_message(info);
        if let Some(why) = msg.strip_prefix("failed printing to stdout: ") {
            eprintln!("error: cannot write to standard output: {why}");
            std::process::exit(1);
        }
        match info.location() {
            Some(l) => eprintln!("error: internal error (please report): {msg} at {l}"),
            None => eprintln!("error: internal error (please report): {msg}"),
        }
    }));
}

/// The text a panic was raised with.
fn panic_message(info: &PanicHookInfo<'_>) -> String {
    let p = info.payload();
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// An error and its causes on one line, `: `-joined ([`crate::error::chain_line`]).
pub fn error_line(e: &anyhow::Error) -> String {
    crate::error::chain_line(e.as_ref())
}

/// Parses a binary's command line: help and version go to standard output (exit 0), a bad
/// argument is one `error:` line on standard error (exit 2).
pub fn parse<T: clap::Parser>() -> T {
    match T::try_parse() {
        Ok(c) => c,
        Err(e) => std::process::exit(report_parse_error(&e)),
    }
}

/// Prints what a failed parse says, as [`parse`] does; returns the exit status.
pub fn report_parse_error(e: &clap::Error) -> i32 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            print!("{e}");
            0
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprint!("{e}");
            2
        }
        _ => {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("bad arguments");
            eprintln!("error: {}", first.trim_start_matches("error: "));
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_chain_is_one_line_each_cause_once() {
        let e = anyhow::anyhow!("bad\nvalue")
            .context("cannot parse")
            .context("config");
        assert_eq!(error_line(&e), "config: cannot parse: bad value");
        let os = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let os_text = os.to_string();
        let e = anyhow::Error::new(crate::TraceError::io("cannot write x.jtr", os))
            .context("collection stopped");
        assert_eq!(
            error_line(&e),
            format!("collection stopped: cannot write x.jtr: {os_text}")
        );
    }
}
