/*
 * jitter_emulator.h: the C ABI of the JitterEmulator (emulator/src/capi.rs).
 *
 * Written by hand; emulator/tests/capi_c.rs checks that it declares exactly the functions and
 * return codes capi.rs exports and compiles and runs a C program against it.
 *
 * Link: -ljitter_emulator (target/release/libjitter_emulator.so or .a; with the .a also
 * -lpthread -ldl -lm).
 *
 * Every function returns a code (JB_OK or a negative JB_ERR_*) and keeps the message of the
 * last failure of the calling thread for jb_emulator_last_error. Nothing unwinds across the
 * boundary: an internal error is JB_ERR_INTERNAL. Calls are meant for one thread, the one that
 * started the emulator (timer 0, itimer: the process's main thread).
 */
#ifndef JITTER_EMULATOR_H
#define JITTER_EMULATOR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Success. */
#define JB_OK 0
/** Bad argument (null or non-UTF-8 path, bad scale, unknown timer). */
#define JB_ERR_ARGUMENT (-1)
/** The trace could not be read or has nothing to replay. */
#define JB_ERR_TRACE (-2)
/** An emulator already runs. */
#define JB_ERR_ALREADY_RUNNING (-3)
/** No emulator runs (never started or already stopped). */
#define JB_ERR_NOT_RUNNING (-4)
/** Calibration or a system call failed. */
#define JB_ERR_SYSTEM (-5)
/** An internal error was caught at the boundary (a bug: please report the message). */
#define JB_ERR_INTERNAL (-6)
/** The application handles SIGALRM itself: the emulator would steal its signal (use the
 *  separate-process injector jitter-inject). */
#define JB_ERR_SIGNAL_IN_USE (-7)

/** Timer kinds: setitimer(ITIMER_REAL), relative (main thread only). */
#define JB_TIMER_ITIMER 0
/** timer_create(CLOCK_MONOTONIC) at absolute deadlines, aimed at the calling thread. */
#define JB_TIMER_ABSTIME 1

/**
 * Starts replaying stream `stream` of the trace at `trace_path` with scale factor `scale` and
 * timer `timer` (JB_TIMER_*), with O, L and M from the cached calibration of this host
 * (measured, about 20 s, on first use).
 */
int jb_emulator_start(const char *trace_path, unsigned stream, double scale, int timer);

/**
 * As jb_emulator_start with overhead O, lateness L and minimum sleep M given in ns; a negative
 * value takes that one from the calibration.
 */
int jb_emulator_start_with(const char *trace_path, unsigned stream, double scale, int timer,
                           long long overhead_ns, long long lateness_ns,
                           long long min_sleep_ns);

/** Share of the stream replayed so far; negative when no emulator runs. */
double jb_emulator_progress(void);

/** 1 when the replay reached its end, 0 while it runs, JB_ERR_NOT_RUNNING without emulator. */
int jb_emulator_finished(void);

/** Jumps to timeline point `offset_ns` (trace ns from the window start) now. */
int jb_emulator_resync(unsigned long long offset_ns);

/** Stops the emulator and restores the old SIGALRM handler. */
int jb_emulator_stop(void);

/**
 * Copies the last error message of this thread into `buf` (NUL-terminated, truncated to
 * `len` bytes); returns the full message length (0: no error yet).
 */
int jb_emulator_last_error(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* JITTER_EMULATOR_H */
