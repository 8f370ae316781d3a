// SIGTERM/SIGINT handling without work in a signal handler: the signals are
// blocked in every thread (call block_shutdown_signals() first thing in
// main, before any thread starts) and a sigwait thread receives them. The
// first one wakes wait_for_shutdown_signal(); a second one exits at once
// with _exit(130).
#pragma once

namespace leasehold::agent {

void block_shutdown_signals();

/// Starts the sigwait thread (once).
void start_signal_thread();

/// Blocks until the first SIGTERM/SIGINT; returns its number.
int wait_for_shutdown_signal();

} // namespace leasehold::agent
