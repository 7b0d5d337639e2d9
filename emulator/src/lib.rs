//! `jitter-emulator`: the JitterEmulator of jitterbench.
