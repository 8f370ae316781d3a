// Skipping a test case so that it can never count as passed.
//
//   if (!have_it)
//     LEASEHOLD_SKIP("kubectl is not on PATH");
//
// records the case as skipped (with the reason) and returns from it. The
// shared doctest main (tests/doctest_main.cpp) prints every skipped case
// ("[leasehold] skipped: ...") and exits 77, which meson reports as SKIP,
// when every test case that ran was skipped (or none ran: a filter that
// matches nothing is not a pass); scripts/test counts skipped cases apart
// from passed ones. Do not use doctest::skip() or an early `return`: doctest
// counts those as passed or not at all.
#pragma once

#include <string>

namespace leasehold::test {

/// Marks the running test case as skipped, for `why`.
void mark_skipped(const std::string& why);

} // namespace leasehold::test

#define LEASEHOLD_SKIP(why)                  \
  do {                                       \
    ::leasehold::test::mark_skipped(why);    \
    return;                                  \
  } while (false)
