// SIGTERM/SIGINT without work in a signal handler: blocked in every thread
// (block_shutdown_signals() first thing in main) and received by a sigwait
// thread; a second signal exits at once with _exit(130).
#pragma once

namespace leasehold::agent {

void block_shutdown_signals();

/// Starts the sigwait thread (once).
void start_signal_thread();

/// Blocks until the first SIGTERM/SIGINT; returns its number.
int wait_for_shutdown_signal();

} // namespace leasehold::agent
