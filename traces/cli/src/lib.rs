//! `jitter-cli`: what every jitterbench binary does first and how it reads its command line:
//! Unix manners on standard output, no panic message or backtrace for a user (`init`), help on
//! standard output and a bad argument as one `error:` line (`parse`, `report_parse_error`), an
//! error and its causes on one line (`error_line`). Its own crate so that the libraries, which a
//! binary's errors pass through, link no clap.

use std::panic::PanicHookInfo;

/// Installs the process-wide behaviour shared by all binaries: writing to a closed pipe
/// (`… | head`) ends the process quietly, as SIGPIPE does for C tools; any other failure to
/// write standard output (a full disk) is one `error:` line and exit status 1; any other panic
/// is one `error: internal error` line (exit status 101), never a backtrace; a write past the
/// file size limit (`ulimit -f`) fails with EFBIG, an error line, instead of ending the process
/// with SIGXFSZ. Call it first.
pub fn init() {
    // SAFETY: `signal` only sets this process's disposition of SIGPIPE back to the default
    // (terminate), which Rust's runtime had set to "ignore"; it is called at start-up, before
    // any thread that could be writing to a pipe exists, and touches no Rust-managed state.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // SAFETY: installs a handler that does nothing (async-signal-safe) for SIGXFSZ, replacing
    // the default action (terminate); a handler, unlike SIG_IGN, is reset by exec, so the
    // programs a tool starts (mpirun, an application) keep the default.
    unsafe {
        let action = nix::sys::signal::SigAction::new(
            nix::sys::signal::SigHandler::Handler(file_size_limit_reached),
            nix::sys::signal::SaFlags::SA_RESTART,
            nix::sys::signal::SigSet::empty(),
        );
        let _ = nix::sys::signal::sigaction(nix::sys::signal::Signal::SIGXFSZ, &action);
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

/// SIGXFSZ's handler: nothing; the write that raised it returns EFBIG.
extern "C" fn file_size_limit_reached(_: libc::c_int) {}

/// The text a panic was raised with.
fn panic_message(info: &PanicHookInfo<'_>) -> String {
    let p = info.payload();
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// An error and its causes on one line, `: `-joined (`jitter_trace::error::chain_line`).
///
/// ```
/// use anyhow::Context;
///
/// let e = std::fs::read("/nonexistent/trace.jtr")
///     .context("cannot read /nonexistent/trace.jtr")
///     .unwrap_err();
/// let line = jitter_cli::error_line(&e);
/// assert!(line.starts_with("cannot read /nonexistent/trace.jtr: "), "{line}");
/// assert!(!line.contains('\n'));
/// ```
pub fn error_line(e: &anyhow::Error) -> String {
    jitter_trace::error::chain_line(e.as_ref())
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
            eprintln!("error: {}", parse_error_line(&e.to_string()));
            2
        }
    }
}

/// A parse error's text on one line: its first line, and where that line ends in `:` (clap's
/// "the following required arguments were not provided:"), the indented lines it introduces.
fn parse_error_line(text: &str) -> String {
    let mut lines = text.lines();
    let first = lines
        .next()
        .unwrap_or("bad arguments")
        .trim_start_matches("error: ");
    if !first.ends_with(':') {
        return first.to_string();
    }
    let items: Vec<&str> = lines
        .take_while(|l| l.starts_with(char::is_whitespace) && !l.trim().is_empty())
        .map(str::trim)
        .collect();
    format!("{first} {}", items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing required argument is named on the one line (issue 30's sweep: the line ended
    /// at "were not provided:").
    #[test]
    fn a_parse_error_names_the_missing_arguments_on_one_line() {
        #[derive(Debug, clap::Parser)]
        struct Cli {
            #[arg(long)]
            duration: String,
            #[arg(long)]
            overhead: String,
        }
        use clap::Parser;
        let e = Cli::try_parse_from(["t"]).unwrap_err();
        assert_eq!(
            parse_error_line(&e.to_string()),
            "the following required arguments were not provided: --duration <DURATION>, \
             --overhead <OVERHEAD>"
        );
        let e = Cli::try_parse_from(["t", "--bogus"]).unwrap_err();
        assert_eq!(
            parse_error_line(&e.to_string()),
            "unexpected argument '--bogus' found"
        );
    }

    #[test]
    fn an_error_chain_is_one_line_each_cause_once() {
        let e = anyhow::anyhow!("bad\nvalue")
            .context("cannot parse")
            .context("config");
        assert_eq!(error_line(&e), "config: cannot parse: bad value");
        let os = std::io::Error::from_raw_os_error(libc::ENOSPC);
        let os_text = os.to_string();
        let e = anyhow::Error::new(jitter_trace::TraceError::io("cannot write x.jtr", os))
            .context("collection stopped");
        assert_eq!(
            error_line(&e),
            format!("collection stopped: cannot write x.jtr: {os_text}")
        );
    }
}
